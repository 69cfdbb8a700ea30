/*
 * The conformance program's device-buffer mode: written against NCCL's API and the CUDA runtime
 * only (it includes nccl.h and cuda_runtime.h, nothing of Braid) and linked to Braid's
 * libnccl.so.2. It forks NRANKS processes, each on GPU rank % (visible GPUs), that run every
 * collective and point-to-point call on cudaMalloc'd buffers - on a stream of their own and on the
 * NULL stream, in and out of place, every datatype and operator for the reductions, and one large
 * all-reduce - and check what they copy back. With --hosts H the ranks split into H "hosts" (each
 * a BRAID_HOSTID of its own, ranks in contiguous blocks), so that calls between them take the path
 * between hosts (staged through pinned host memory; BRAID_TRANSPORT=socket picks TCP).
 * Exit status 0 when every check passed, 77 (skipped) where no GPU is visible.
 *
 * Usage: nccl_conformance_device [--hosts H] [nranks]   (nranks 2 to 4, default 4; H 1 to nranks,
 * default 1)
 */
#include <cuda_runtime.h>
#include <nccl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "conformance_ranks.h"
#include "conformance_values.h"

enum { kSkipped = 77 };

/* A CUDA call that must succeed. */
#define CUDA_OK(call)                                                              \
  do {                                                                             \
    cudaError_t e_ = (call);                                                       \
    if (e_ != cudaSuccess) {                                                       \
      fprintf(stderr, "rank %d, line %d: %s failed: %s\n", gRank, __LINE__, #call, \
              cudaGetErrorString(e_));                                             \
      exit(1);                                                                     \
    }                                                                              \
  } while (0)

static cudaStream_t gStream;

/* Device memory of `bytes`, zeroed. */
static void* devAlloc(size_t bytes) {
  void* p = NULL;
  CUDA_OK(cudaMalloc(&p, bytes ? bytes : 1));
  CUDA_OK(cudaMemset(p, 0, bytes ? bytes : 1));
  return p;
}
static void toDevice(void* dst, const void* src, size_t bytes) {
  CUDA_OK(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
}
/* Copies back once the work of gStream has finished (gStream is a blocking stream: it also
 * follows the copies and sets on the legacy default stream). */
static void toHost(void* dst, const void* src, size_t bytes) {
  CUDA_OK(cudaStreamSynchronize(gStream));
  CUDA_OK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
}

/* Every datatype and operator: out of place on gStream, in place on the NULL stream, and reduce
 * to a root. */
static void checkReductions(ncclComm_t comm, int rank, int n) {
  const size_t count = 273; /* not a multiple of nranks */
  for (int ti = 0; ti < kNumTypes; ++ti) {
    const ncclDataType_t t = kTypes[ti];
    const size_t bytes = count * typeSize(t);
    void* host = xmalloc(bytes);
    void* send = devAlloc(bytes);
    void* recv = devAlloc(bytes);
    for (int oi = 0; oi < kNumOps; ++oi) {
      const ncclRedOp_t op = kOps[oi];
      for (size_t i = 0; i < count; ++i) put(host, i, t, input(rank, i));
      toDevice(send, host, bytes);
      NCCL_OK(ncclAllReduce(send, recv, count, t, op, comm, gStream));
      toHost(host, recv, bytes);
      for (size_t i = 0; i < count; ++i) {
        if (!closeEnough(t, get(host, i, t), expected(op, t, n, i))) {
          CHECK(0, "allreduce type %d op %d element %zu: got %g want %g", (int)t, (int)op, i,
                get(host, i, t), expected(op, t, n, i));
          break;
        }
      }
      NCCL_OK(ncclAllReduce(send, send, count, t, op, comm, NULL));
      toHost(host, send, bytes);
      for (size_t i = 0; i < count; ++i) {
        if (!closeEnough(t, get(host, i, t), expected(op, t, n, i))) {
          CHECK(0, "in-place allreduce type %d op %d element %zu", (int)t, (int)op, i);
          break;
        }
      }
      const int root = 1 % n;
      for (size_t i = 0; i < count; ++i) put(host, i, t, input(rank, i));
      toDevice(send, host, bytes);
      CUDA_OK(cudaMemset(recv, 0, bytes));
      NCCL_OK(ncclReduce(send, rank == root ? recv : NULL, count, t, op, root, comm, gStream));
      if (rank == root) {
        toHost(host, recv, bytes);
        for (size_t i = 0; i < count; ++i) {
          if (!closeEnough(t, get(host, i, t), expected(op, t, n, i))) {
            CHECK(0, "reduce type %d op %d element %zu", (int)t, (int)op, i);
            break;
          }
        }
      }
    }
    CUDA_OK(cudaStreamSynchronize(gStream));
    CUDA_OK(cudaFree(send));
    CUDA_OK(cudaFree(recv));
    free(host);
  }
}

static void checkReduceScatter(ncclComm_t comm, int rank, int n) {
  const size_t recvcount = 37;
  float* host = xmalloc(recvcount * n * sizeof(float));
  float* send = devAlloc(recvcount * n * sizeof(float));
  float* recv = devAlloc(recvcount * sizeof(float));
  for (size_t i = 0; i < recvcount * n; ++i) host[i] = (float)input(rank, i);
  toDevice(send, host, recvcount * n * sizeof(float));
  NCCL_OK(ncclReduceScatter(send, recv, recvcount, ncclFloat32, ncclSum, comm, gStream));
  toHost(host, recv, recvcount * sizeof(float));
  for (size_t i = 0; i < recvcount; ++i) {
    const double want = expected(ncclSum, ncclFloat32, n, rank * recvcount + i);
    if (host[i] != want) {
      CHECK(0, "reducescatter element %zu: got %g want %g", i, host[i], want);
      break;
    }
  }
  /* In place: this rank's block of sendbuff is recvbuff. */
  NCCL_OK(ncclReduceScatter(send, send + rank * recvcount, recvcount, ncclFloat32, ncclMax, comm,
                            NULL));
  toHost(host, send + rank * recvcount, recvcount * sizeof(float));
  for (size_t i = 0; i < recvcount; ++i) {
    if (host[i] != expected(ncclMax, ncclFloat32, n, rank * recvcount + i)) {
      CHECK(0, "in-place reducescatter element %zu", i);
      break;
    }
  }
  CUDA_OK(cudaFree(send));
  CUDA_OK(cudaFree(recv));
  free(host);
}

static void checkDataMovement(ncclComm_t comm, int rank, int n) {
  const size_t count = 101;
  const size_t all = count * n * sizeof(int32_t);
  int32_t* h = xmalloc(all);
  int32_t* a = devAlloc(all);
  int32_t* b = devAlloc(all);

  /* Broadcast from the last rank, out of place; then ncclBcast in place on the NULL stream. */
  for (size_t i = 0; i < count; ++i) h[i] = rank == n - 1 ? (int32_t)(7 * i + 1) : -1;
  toDevice(a, h, count * sizeof(int32_t));
  NCCL_OK(ncclBroadcast(a, b, count, ncclInt32, n - 1, comm, gStream));
  toHost(h, b, count * sizeof(int32_t));
  for (size_t i = 0; i < count; ++i) CHECK(h[i] == (int32_t)(7 * i + 1), "broadcast %zu", i);
  for (size_t i = 0; i < count; ++i) h[i] = rank == 0 ? (int32_t)(3 * i) : 0;
  toDevice(a, h, count * sizeof(int32_t));
  NCCL_OK(ncclBcast(a, count, ncclInt32, 0, comm, NULL));
  toHost(h, a, count * sizeof(int32_t));
  for (size_t i = 0; i < count; ++i) CHECK(h[i] == (int32_t)(3 * i), "bcast %zu", i);

  /* AllGather out of place, then in place (this rank's block already in recvbuff). */
  for (size_t i = 0; i < count; ++i) h[i] = rank * 1000 + (int32_t)i;
  toDevice(a, h, count * sizeof(int32_t));
  NCCL_OK(ncclAllGather(a, b, count, ncclInt32, comm, gStream));
  toHost(h, b, all);
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < count; ++i)
      CHECK(h[r * count + i] == r * 1000 + (int32_t)i, "allgather block %d element %zu", r, i);
  memset(h, 0, all);
  for (size_t i = 0; i < count; ++i) h[rank * count + i] = rank * 1000 + (int32_t)i;
  toDevice(b, h, all);
  NCCL_OK(ncclAllGather(b + rank * count, b, count, ncclInt32, comm, NULL));
  toHost(h, b, all);
  for (int r = 0; r < n; ++r)
    CHECK(h[r * count + count - 1] == r * 1000 + (int32_t)(count - 1), "in-place allgather %d", r);

  /* AlltoAll: block p of rank r carries r*100 + p. */
  for (int p = 0; p < n; ++p)
    for (size_t i = 0; i < count; ++i) h[p * count + i] = rank * 100 + p;
  toDevice(a, h, all);
  NCCL_OK(ncclAlltoAll(a, b, count, ncclInt32, comm, gStream));
  toHost(h, b, all);
  for (int p = 0; p < n; ++p)
    for (size_t i = 0; i < count; ++i)
      CHECK(h[p * count + i] == p * 100 + rank, "alltoall block %d", p);

  /* Gather to root 2 % n, then Scatter back from it. */
  const int root = 2 % n;
  for (size_t i = 0; i < count; ++i) h[i] = rank * 10 + (int32_t)(i % 10);
  toDevice(a, h, count * sizeof(int32_t));
  CUDA_OK(cudaMemset(b, 0, all));
  NCCL_OK(ncclGather(a, b, count, ncclInt32, root, comm, gStream));
  if (rank == root) {
    toHost(h, b, all);
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < count; ++i)
        CHECK(h[r * count + i] == r * 10 + (int32_t)(i % 10), "gather block %d", r);
    for (size_t i = 0; i < count * n; ++i) h[i] = (int32_t)(i * 2);
    toDevice(b, h, all);
  }
  CUDA_OK(cudaMemset(a, 0, count * sizeof(int32_t)));
  NCCL_OK(ncclScatter(b, a, count, ncclInt32, root, comm, gStream));
  toHost(h, a, count * sizeof(int32_t));
  for (size_t i = 0; i < count; ++i)
    CHECK(h[i] == (int32_t)((rank * count + i) * 2), "scatter element %zu", i);

  /* Send/Recv around a ring inside a group, both directions at once. */
  for (size_t i = 0; i < count; ++i) h[i] = rank * 7 + (int32_t)i;
  toDevice(a, h, count * sizeof(int32_t));
  const int right = (rank + 1) % n;
  const int left = (rank + n - 1) % n;
  NCCL_OK(ncclGroupStart());
  NCCL_OK(ncclSend(a, count, ncclInt32, right, comm, gStream));
  NCCL_OK(ncclSend(a, count, ncclInt32, left, comm, gStream));
  NCCL_OK(ncclRecv(b, count, ncclInt32, left, comm, gStream));
  NCCL_OK(ncclRecv(b + count, count, ncclInt32, right, comm, gStream));
  NCCL_OK(ncclGroupEnd());
  toHost(h, b, 2 * count * sizeof(int32_t));
  for (size_t i = 0; i < count; ++i) {
    CHECK(h[i] == left * 7 + (int32_t)i, "recv from left %zu", i);
    CHECK(h[count + i] == right * 7 + (int32_t)i, "recv from right %zu", i);
  }

  /* count 0 is valid on device buffers too. */
  NCCL_OK(ncclAllReduce(a, b, 0, ncclInt32, ncclSum, comm, gStream));
  CUDA_OK(cudaStreamSynchronize(gStream));
  CUDA_OK(cudaFree(a));
  CUDA_OK(cudaFree(b));
  free(h);
}

/* 16 MiB: many chunks per channel and many channels (and, across hosts, the hierarchical
 * all-reduce over staged hops); then two all-reduces grouped into one launch. */
static void checkLargeAndGrouped(ncclComm_t comm, int rank, int n) {
  const size_t count = (size_t)4 << 20;
  float* h = xmalloc(count * sizeof(float));
  float* x = devAlloc(count * sizeof(float));
  float* y = devAlloc(count * sizeof(float));
  for (size_t i = 0; i < count; ++i) h[i] = (float)input(rank, i);
  toDevice(x, h, count * sizeof(float));
  NCCL_OK(ncclAllReduce(x, y, count, ncclFloat32, ncclSum, comm, gStream));
  toHost(h, y, count * sizeof(float));
  for (size_t i = 0; i < count; ++i) {
    if (h[i] != expected(ncclSum, ncclFloat32, n, i)) {
      CHECK(0, "16 MiB allreduce element %zu: got %g want %g", i, h[i],
            expected(ncclSum, ncclFloat32, n, i));
      break;
    }
  }
  int32_t ones[4] = {1, 1, 1, 1}, total[4] = {0};
  int32_t* dOnes = devAlloc(sizeof(ones));
  int32_t* dTotal = devAlloc(sizeof(total));
  toDevice(dOnes, ones, sizeof(ones));
  NCCL_OK(ncclGroupStart());
  NCCL_OK(ncclAllReduce(x, x, count, ncclFloat32, ncclMax, comm, gStream));
  NCCL_OK(ncclAllReduce(dOnes, dTotal, 4, ncclInt32, ncclSum, comm, gStream));
  NCCL_OK(ncclGroupEnd());
  toHost(total, dTotal, sizeof(total));
  CHECK(total[3] == n, "grouped allreduce: %d want %d", total[3], n);
  toHost(h, x, count * sizeof(float));
  CHECK(h[count - 1] == expected(ncclMax, ncclFloat32, n, count - 1), "grouped in-place max");
  CUDA_OK(cudaFree(x));
  CUDA_OK(cudaFree(y));
  CUDA_OK(cudaFree(dOnes));
  CUDA_OK(cudaFree(dTotal));
  free(h);
}

/* What the library refuses on device buffers says so. */
static void checkRefusals(ncclComm_t comm) {
  float scalar = 2.0f;
  ncclRedOp_t op;
  NCCL_OK(ncclRedOpCreatePreMulSum(&op, &scalar, ncclFloat32, ncclScalarHostImmediate, comm));
  float* x = devAlloc(8 * sizeof(float));
  CHECK(ncclAllReduce(x, x, 8, ncclFloat32, op, comm, gStream) == ncclInvalidUsage,
        "PreMulSum on device buffers");
  CHECK(strstr(ncclGetLastError(comm), "PreMulSum") != NULL, "message: %s", ncclGetLastError(comm));
  NCCL_OK(ncclRedOpDestroy(op, comm));
  CHECK(ncclAllReduce(x, x, 8, (ncclDataType_t)ncclNumTypes, ncclSum, comm, gStream) ==
            ncclInvalidArgument,
        "unknown datatype on device buffers");
  CUDA_OK(cudaFree(x));
}

static int rankMain(int rank, int n, int hosts, ncclUniqueId id) {
  gRank = rank;
  if (hosts > 1) {
    char hostId[64];
    snprintf(hostId, sizeof(hostId), "conformance-host-%d", rank * hosts / n);
    setenv("BRAID_HOSTID", hostId, 1);
  }
  int devices = 0;
  CUDA_OK(cudaGetDeviceCount(&devices));
  const int device = rank % devices;
  CUDA_OK(cudaSetDevice(device));
  CUDA_OK(cudaStreamCreate(&gStream));
  ncclComm_t comm = NULL;
  NCCL_OK(ncclCommInitRank(&comm, n, id, rank));

  checkReductions(comm, rank, n);
  checkReduceScatter(comm, rank, n);
  checkDataMovement(comm, rank, n);
  checkLargeAndGrouped(comm, rank, n);
  checkRefusals(comm);

  int commDevice = -1;
  NCCL_OK(ncclCommCuDevice(comm, &commDevice));
  CHECK(commDevice == device, "communicator device %d, want %d", commDevice, device);
  ncclResult_t async = ncclInternalError;
  NCCL_OK(ncclCommGetAsyncError(comm, &async));
  CHECK(async == ncclSuccess, "async error %d on a healthy communicator", (int)async);
  NCCL_OK(ncclCommDestroy(comm));
  CUDA_OK(cudaStreamDestroy(gStream));
  return gFailures == 0 ? 0 : 1;
}

/* Whether a GPU is visible, asked in a child: CUDA must stay uninitialised in the parent, whose
 * rank children use it after fork. */
static int gpuVisible(void) {
  pid_t pid = fork();
  if (pid == 0) {
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
      printf("nccl_conformance_device: skipped: no GPU visible (%s)\n",
             e != cudaSuccess ? cudaGetErrorString(e) : "no devices");
      fflush(stdout);
      _exit(kSkipped);
    }
    _exit(0);
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid) return 0;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

int main(int argc, char** argv) {
  int n = 4, hosts = 1;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--hosts") == 0 && i + 1 < argc) {
      hosts = atoi(argv[++i]);
    } else {
      n = atoi(argv[i]);
    }
  }
  if (n < 2 || n > 4 || hosts < 1 || hosts > n) {
    fprintf(stderr, "usage: %s [--hosts H] [nranks, 2 to 4; H 1 to nranks]\n", argv[0]);
    return 2;
  }
  if (!gpuVisible()) return kSkipped;

  ncclUniqueId id;
  NCCL_OK(ncclGetUniqueId(&id));
  pid_t pids[4];
  for (int r = 0; r < n; ++r) {
    pids[r] = fork();
    if (pids[r] == 0) _exit(rankMain(r, n, hosts, id));
  }
  if (waitForRanks(pids, n, 240) != 0) return 1;
  if (gFailures == 0) {
    printf("nccl_conformance_device: %d ranks on %d host(s), device buffers, all checks passed\n",
           n, hosts);
  }
  return gFailures == 0 ? 0 : 1;
}
