"""PyTorch's backend "braid": `import braid.torch` registers it with torch.distributed.

    import torch, torch.distributed as dist
    import braid.torch                                   # registers the backend

    dist.init_process_group("braid")                     # torchrun's env://, or any init_method
    t = torch.ones(1 << 20)
    dist.all_reduce(t)                                   # Braid's host path on CPU tensors

Every collective of torch.distributed runs on a Braid communicator: all_reduce (and coalesced),
broadcast, reduce, all_gather (list and into one tensor), reduce_scatter (list and from one
tensor), all_to_all (list and single, equal or unequal splits), send/recv (and
batch_isend_irecv), barrier, gather, scatter; ReduceOp SUM, PRODUCT, MIN, MAX, AVG and
PREMUL_SUM. DistributedDataParallel runs on it unchanged. Rank 0 of each group makes the
communicator's unique id and publishes it through the store torch gives the group; new_group
makes a communicator of its own the same way. CPU tensors run on the calling thread and are
done when the call returns; CUDA tensors are enqueued on the current stream (a CUDA build of
Braid; not yet run on a GPU). docs/frameworks.md has the details.
"""

import torch.distributed as dist

from ._process_group import ProcessGroupBraid

__all__ = ["BACKEND", "ProcessGroupBraid", "create_process_group"]

BACKEND = "braid"


def create_process_group(store, rank, world_size, timeout):
    """The creator torch.distributed calls for backend "braid" (one per group and rank)."""
    return ProcessGroupBraid(store, rank, world_size, timeout)


def _register():
    # Importing twice (or under two names) must not register twice: torch refuses that.
    if BACKEND.upper() not in getattr(dist.Backend, "_plugins", {}):
        dist.Backend.register_backend(BACKEND, create_process_group)


_register()
