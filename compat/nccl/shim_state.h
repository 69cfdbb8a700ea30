// The shim's side of an NCCL communicator: the Braid communicator it wraps plus what NCCL has and
// Braid does not (PreMulSum ops, registrations, the finalized state), the registry of live
// communicators, and last-error bookkeeping shared by shim_comm.cc and shim_coll.cc.
#pragma once

#include <array>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_set>
#include <vector>

#include "braid.h"
#include "nccl.h"

namespace braid::ncclshim {

/// One op made by ncclRedOpCreatePreMulSum.
struct PreMulSumOp {
  bool live = false;
  ncclDataType_t datatype = ncclFloat32;
  ncclScalarResidence_t residence = ncclScalarHostImmediate;
  const void* scalarPtr = nullptr;       ///< ncclScalarDevice: read at each collective
  std::array<unsigned char, 8> value{};  ///< ncclScalarHostImmediate: read at creation
};

/// Registration record behind a ncclCommRegister handle.
struct Registration {
  void* buff = nullptr;
  size_t size = 0;
};

}  // namespace braid::ncclshim

/// The object an ncclComm_t points to.
struct ncclComm {
  braidComm_t braid = nullptr;
  std::mutex mutex;  ///< guards the fields below
  bool finalized = false;
  std::string lastError;
  std::vector<braid::ncclshim::PreMulSumOp> ops;  ///< op value ncclNumOps + i is ops[i]
  std::unordered_set<braid::ncclshim::Registration*> registrations;
};

namespace braid::ncclshim {

/// Records msg as the calling thread's (and comm's) last error and returns code.
ncclResult_t fail(ncclResult_t code, const std::string& msg, ncclComm* comm = nullptr);

/// Maps a Braid result onto NCCL's; on failure records Braid's message (braidTimeout becomes
/// ncclRemoteError, its message saying "timeout").
ncclResult_t fromBraid(braidResult_t result, ncclComm* comm = nullptr);

/// The live communicator behind handle, or nullptr with *code set (and the error recorded).
std::shared_ptr<ncclComm> findComm(ncclComm_t handle, const char* caller, ncclResult_t* code);

/// Registers a wrapper around a Braid communicator and returns its handle.
ncclComm_t adoptComm(braidComm_t braidComm);

/// Removes handle from the registry (no new call can find it) and returns it.
std::shared_ptr<ncclComm> retireComm(ncclComm_t handle);

/// The size of one element of datatype, 0 for an unknown one.
size_t dataTypeSize(ncclDataType_t datatype);

}  // namespace braid::ncclshim
