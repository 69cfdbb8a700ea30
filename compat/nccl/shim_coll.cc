// NCCL collectives, point-to-point and group calls on Braid, plus what NCCL has and Braid's core
// does not: PreMulSum reductions (scaled on the host, then summed) and Gather / Scatter (composed
// of grouped sends and receives).
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "cuda_probe.h"
#include "scale.h"
#include "shim_state.h"

namespace braid::ncclshim {
namespace {

// Scaled PreMulSum inputs must outlive a queued call: they are released at the outermost
// ncclGroupEnd of the thread that queued them.
thread_local int tGroupDepth = 0;
thread_local std::vector<std::unique_ptr<unsigned char[]>> tGroupScratch;

enum class Kind { kAllReduce, kReduce, kReduceScatter };

const char* kindName(Kind kind) {
  switch (kind) {
    case Kind::kAllReduce: return "ncclAllReduce";
    case Kind::kReduce: return "ncclReduce";
    case Kind::kReduceScatter: return "ncclReduceScatter";
  }
  return "?";
}

/// A live communicator that may still communicate (not finalized).
std::shared_ptr<ncclComm> usableComm(ncclComm_t handle, const char* caller, ncclResult_t* code) {
  std::shared_ptr<ncclComm> c = findComm(handle, caller, code);
  if (!c) return nullptr;
  bool finalized = false;
  {
    std::lock_guard<std::mutex> lock(c->mutex);
    finalized = c->finalized;
  }
  if (finalized) {
    *code = fail(ncclInvalidUsage, std::string(caller) + ": comm was finalized", c.get());
    return nullptr;
  }
  return c;
}

/// The scalar of a live PreMulSum op of comm, or an error.
ncclResult_t preMulScalar(ncclComm* comm, ncclRedOp_t op, ncclDataType_t datatype,
                          const char* caller, std::array<unsigned char, 8>* scalar) {
  PreMulSumOp found;
  {
    std::lock_guard<std::mutex> lock(comm->mutex);
    const size_t index = static_cast<size_t>(op) - ncclNumOps;
    if (index < comm->ops.size()) found = comm->ops[index];
  }
  if (!found.live) {
    return fail(ncclInvalidArgument,
                std::string(caller) + ": op " + std::to_string(static_cast<int>(op)) +
                    " is neither a built-in op nor a live ncclRedOpCreatePreMulSum op of comm",
                comm);
  }
  if (found.datatype != datatype) {
    return fail(ncclInvalidArgument,
                std::string(caller) + ": the PreMulSum op was made for datatype " +
                    std::to_string(found.datatype) + ", the call uses " + std::to_string(datatype),
                comm);
  }
  if (found.residence == ncclScalarHostImmediate) {
    *scalar = found.value;
  } else {
    std::memcpy(scalar->data(), found.scalarPtr, dataTypeSize(datatype));
  }
  return ncclSuccess;
}

ncclResult_t reduceCall(Kind kind, const void* sendbuff, void* recvbuff, size_t count,
                        ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t handle,
                        cudaStream_t stream) {
  const char* caller = kindName(kind);
  ncclResult_t r = ncclSuccess;
  std::shared_ptr<ncclComm> comm = usableComm(handle, caller, &r);
  if (!comm) return r;
  if (static_cast<int>(op) < 0) {
    return fail(ncclInvalidArgument,
                std::string(caller) + ": op " + std::to_string(static_cast<int>(op)) +
                    " is not an ncclRedOp_t",
                comm.get());
  }
  auto run = [&](const void* send, braidRedOp_t braidOp) {
    const auto dtype = static_cast<braidDataType_t>(datatype);
    switch (kind) {
      case Kind::kAllReduce:
        return braidAllReduce(send, recvbuff, count, dtype, braidOp, comm->braid, stream);
      case Kind::kReduce:
        return braidReduce(send, recvbuff, count, dtype, braidOp, root, comm->braid, stream);
      case Kind::kReduceScatter:
        return braidReduceScatter(send, recvbuff, count, dtype, braidOp, comm->braid, stream);
    }
    return braidInternalError;
  };
  if (op < ncclNumOps) return fromBraid(run(sendbuff, static_cast<braidRedOp_t>(op)), comm.get());

  // PreMulSum: scale a host copy of the input, then sum it.
  std::array<unsigned char, 8> scalar{};
  r = preMulScalar(comm.get(), op, datatype, caller, &scalar);
  if (r != ncclSuccess) return r;
  if (stream != nullptr || isDevicePointer(sendbuff) || isDevicePointer(recvbuff)) {
    return fail(ncclInvalidUsage,
                std::string(caller) +
                    ": PreMulSum ops run on host memory with a NULL stream only in this "
                    "library (the input is scaled on the host before the sum)",
                comm.get());
  }
  size_t elements = count;
  if (kind == Kind::kReduceScatter) {
    int nranks = 0;
    r = fromBraid(braidCommCount(comm->braid, &nranks), comm.get());
    if (r != ncclSuccess) return r;
    elements = count * static_cast<size_t>(nranks);
    if (nranks != 0 && elements / static_cast<size_t>(nranks) != count) {
      return fail(ncclInvalidArgument, std::string(caller) + ": count overflows", comm.get());
    }
  }
  const size_t elemSize = dataTypeSize(datatype);
  if (elemSize == 0) {
    return fail(ncclInvalidArgument,
                std::string(caller) + ": datatype " + std::to_string(datatype) +
                    " is not an ncclDataType_t",
                comm.get());
  }
  if (elements > SIZE_MAX / elemSize) {
    return fail(ncclInvalidArgument, std::string(caller) + ": count overflows", comm.get());
  }
  std::unique_ptr<unsigned char[]> scaled;
  if (elements > 0) {
    if (sendbuff == nullptr) {
      return fail(ncclInvalidArgument, std::string(caller) + ": sendbuff is NULL", comm.get());
    }
    scaled.reset(new (std::nothrow) unsigned char[elements * elemSize]);
    if (!scaled) {
      return fail(ncclSystemError, std::string(caller) + ": out of memory for the scaled input",
                  comm.get());
    }
    scaleElements(scaled.get(), sendbuff, elements, datatype, scalar.data());
  }
  r = fromBraid(run(scaled.get(), braidSum), comm.get());
  if (r == ncclSuccess && tGroupDepth > 0 && scaled) tGroupScratch.push_back(std::move(scaled));
  return r;
}

}  // namespace
}  // namespace braid::ncclshim

using namespace braid::ncclshim;

extern "C" {

ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                      ncclScalarResidence_t residence, ncclComm_t comm) {
  if (op == nullptr || scalar == nullptr) {
    return fail(ncclInvalidArgument, "ncclRedOpCreatePreMulSum: op or scalar is NULL");
  }
  ncclResult_t r = ncclSuccess;
  std::shared_ptr<ncclComm> c = findComm(comm, "ncclRedOpCreatePreMulSum", &r);
  if (!c) return r;
  const size_t size = dataTypeSize(datatype);
  if (size == 0) {
    return fail(ncclInvalidArgument,
                "ncclRedOpCreatePreMulSum: datatype " + std::to_string(datatype) +
                    " is not an ncclDataType_t",
                c.get());
  }
  if (residence != ncclScalarDevice && residence != ncclScalarHostImmediate) {
    return fail(ncclInvalidArgument, "ncclRedOpCreatePreMulSum: unknown scalar residence", c.get());
  }
  if (isDevicePointer(scalar)) {
    return fail(ncclInvalidUsage,
                "ncclRedOpCreatePreMulSum: the scalar is in device memory; this library scales "
                "on the host and needs a host-readable scalar",
                c.get());
  }
  PreMulSumOp made;
  made.live = true;
  made.datatype = datatype;
  made.residence = residence;
  made.scalarPtr = scalar;
  std::memcpy(made.value.data(), scalar, size);
  std::lock_guard<std::mutex> lock(c->mutex);
  size_t index = 0;
  while (index < c->ops.size() && c->ops[index].live) ++index;
  if (index == c->ops.size()) c->ops.emplace_back();
  if (index > static_cast<size_t>(ncclMaxRedOp) - ncclNumOps) {
    c->lastError = "ncclRedOpCreatePreMulSum: too many ops";
    return ncclInvalidUsage;
  }
  c->ops[index] = made;
  *op = static_cast<ncclRedOp_t>(ncclNumOps + static_cast<int>(index));
  return ncclSuccess;
}

ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm) {
  ncclResult_t r = ncclSuccess;
  std::shared_ptr<ncclComm> c = findComm(comm, "ncclRedOpDestroy", &r);
  if (!c) return r;
  {
    std::lock_guard<std::mutex> lock(c->mutex);
    const size_t index = static_cast<size_t>(op) - ncclNumOps;
    if (static_cast<int>(op) >= ncclNumOps && index < c->ops.size() && c->ops[index].live) {
      c->ops[index].live = false;
      return ncclSuccess;
    }
  }
  return fail(ncclInvalidArgument,
              "ncclRedOpDestroy: op " + std::to_string(static_cast<int>(op)) +
                  " is not a live ncclRedOpCreatePreMulSum op of comm",
              c.get());
}

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream) {
  return reduceCall(Kind::kAllReduce, sendbuff, recvbuff, count, datatype, op, 0, comm, stream);
}

ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                        ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) {
  return reduceCall(Kind::kReduce, sendbuff, recvbuff, count, datatype, op, root, comm, stream);
}

ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream) {
  return reduceCall(Kind::kReduceScatter, sendbuff, recvbuff, recvcount, datatype, op, 0, comm,
                    stream);
}

ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm,
                           cudaStream_t stream) {
  ncclResult_t r = ncclSuccess;
  std::shared_ptr<ncclComm> c = usableComm(comm, "ncclBroadcast", &r);
  if (!c) return r;
  return fromBraid(braidBroadcast(sendbuff, recvbuff, count, static_cast<braidDataType_t>(datatype),
                                  root, c->braid, stream),
                   c.get());
}

ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                       cudaStream_t stream) {
  return ncclBroadcast(buff, buff, count, datatype, root, comm, stream);
}

ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  ncclResult_t r = ncclSuccess;
  std::shared_ptr<ncclComm> c = usableComm(comm, "ncclAllGather", &r);
  if (!c) return r;
  return fromBraid(braidAllGather(sendbuff, recvbuff, sendcount,
                                  static_cast<braidDataType_t>(datatype), c->braid, stream),
                   c.get());
}

ncclResult_t ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                          ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  ncclResult_t r = ncclSuccess;
  std::shared_ptr<ncclComm> c = usableComm(comm, "ncclAlltoAll", &r);
  if (!c) return r;
  return fromBraid(braidAllToAll(sendbuff, recvbuff, count, static_cast<braidDataType_t>(datatype),
                                 c->braid, stream),
                   c.get());
}

ncclResult_t ncclGather(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                        int root, ncclComm_t comm, cudaStream_t stream) {
  ncclResult_t r = ncclSuccess;
  std::shared_ptr<ncclComm> c = usableComm(comm, "ncclGather", &r);
  if (!c) return r;
  return fromBraid(braidGather(sendbuff, recvbuff, count, static_cast<braidDataType_t>(datatype),
                               root, c->braid, stream),
                   c.get());
}

ncclResult_t ncclScatter(const void* sendbuff, void* recvbuff, size_t count,
                         ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) {
  ncclResult_t r = ncclSuccess;
  std::shared_ptr<ncclComm> c = usableComm(comm, "ncclScatter", &r);
  if (!c) return r;
  return fromBraid(braidScatter(sendbuff, recvbuff, count, static_cast<braidDataType_t>(datatype),
                                root, c->braid, stream),
                   c.get());
}

ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  ncclResult_t r = ncclSuccess;
  std::shared_ptr<ncclComm> c = usableComm(comm, "ncclSend", &r);
  if (!c) return r;
  return fromBraid(
      braidSend(sendbuff, count, static_cast<braidDataType_t>(datatype), peer, c->braid, stream),
      c.get());
}

ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  ncclResult_t r = ncclSuccess;
  std::shared_ptr<ncclComm> c = usableComm(comm, "ncclRecv", &r);
  if (!c) return r;
  return fromBraid(
      braidRecv(recvbuff, count, static_cast<braidDataType_t>(datatype), peer, c->braid, stream),
      c.get());
}

ncclResult_t ncclGroupStart(void) {
  ncclResult_t r = fromBraid(braidGroupStart());
  if (r == ncclSuccess) ++tGroupDepth;
  return r;
}

ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t* /*simInfo*/) {
  if (tGroupDepth == 0) {
    return fail(ncclInvalidUsage, "ncclGroupSimulateEnd without ncclGroupStart");
  }
  return fail(ncclInvalidUsage,
              "ncclGroupSimulateEnd: this library does not simulate groups; the group is still "
              "open, end it with ncclGroupEnd");
}

ncclResult_t ncclGroupEnd(void) {
  if (tGroupDepth == 0) return fail(ncclInvalidUsage, "ncclGroupEnd without ncclGroupStart");
  ncclResult_t r = fromBraid(braidGroupEnd());
  if (--tGroupDepth == 0) tGroupScratch.clear();
  return r;
}

}  // extern "C"
