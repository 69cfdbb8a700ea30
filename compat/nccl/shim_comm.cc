// NCCL communicator management on Braid: version, errors, memory, creation (with NCCL_* and
// ncclConfig_t translated to Braid settings), split and shrink, finalize/destroy/abort, queries,
// buffer and window registration, and refusals of NCCL's device-side API.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "cuda_probe.h"
#include "env_translate.h"
#include "shim_state.h"

namespace braid::ncclshim {
namespace {

thread_local std::string tLastError;
thread_local std::string tErrorCopy;  // what ncclGetLastError hands out

std::mutex gRegistryMutex;
std::unordered_map<ncclComm*, std::shared_ptr<ncclComm>>& registry() {
  static auto* live = new std::unordered_map<ncclComm*, std::shared_ptr<ncclComm>>();
  return *live;
}

std::mutex gHostAllocMutex;
std::unordered_set<void*>& hostAllocations() {
  static auto* live = new std::unordered_set<void*>();
  return *live;
}

/// The settings handed to Braid for one communicator, owning their strings.
class Settings {
 public:
  void add(std::string setting) { strings_.push_back(std::move(setting)); }
  const braidConfig_t* config() {
    pointers_.clear();
    for (const std::string& s : strings_) pointers_.push_back(s.c_str());
    pointers_.push_back(nullptr);
    config_ = BRAID_CONFIG_INITIALIZER;
    config_.settings = pointers_.data();
    return &config_;
  }

 private:
  std::vector<std::string> strings_;
  std::vector<const char*> pointers_;
  braidConfig_t config_{};
};

/// Whether the caller's config covers the field ending at `end` bytes.
bool covers(const ncclConfig_t* config, size_t end) { return config->size >= end; }

/// Checks an ncclConfig_t and adds what Braid can honour of it.
ncclResult_t applyConfig(const ncclConfig_t* config, Settings* settings, const char* caller) {
  if (config == nullptr) return ncclSuccess;
  const size_t headerEnd = offsetof(ncclConfig_t, version) + sizeof(config->version);
  if (config->size < headerEnd || config->magic != NCCL_CONFIG_MAGIC) {
    return fail(ncclInvalidArgument, std::string(caller) +
                                         ": config was not set up with NCCL_CONFIG_INITIALIZER "
                                         "(bad size or magic)");
  }
  if (covers(config, offsetof(ncclConfig_t, blocking) + sizeof(int))) {
    const int blocking = config->blocking;
    if (blocking != NCCL_CONFIG_UNDEF_INT && blocking != 0 && blocking != 1) {
      return fail(ncclInvalidArgument, std::string(caller) + ": config->blocking " +
                                           std::to_string(blocking) + " is not 0 or 1");
    }
  }
  if (covers(config, offsetof(ncclConfig_t, netName) + sizeof(const char*)) &&
      config->netName != nullptr) {
    std::string transport;
    std::string error = translateNetName(config->netName, &transport);
    if (!error.empty()) return fail(ncclInvalidArgument, std::string(caller) + ": " + error);
    if (!transport.empty()) settings->add("BRAID_TRANSPORT=" + transport);
  }
  return ncclSuccess;
}

/// Translates the NCCL_* environment; prints the banner and notes once per process at
/// NCCL_DEBUG=VERSION/INFO (on rank 0).
ncclResult_t applyEnvironment(Settings* settings, int rank, const char* caller,
                              EnvTranslation* used = nullptr) {
  EnvTranslation translation;
  std::string error = translateEnvironment(processEnvironment(), &translation);
  if (!error.empty()) return fail(ncclInvalidArgument, std::string(caller) + ": " + error);
  for (const std::string& s : translation.settings) settings->add(s);
  static std::once_flag banner;
  if (translation.printVersion && rank == 0) {
    std::call_once(banner, [&] {
      int braidVersion = 0;
      braidGetVersion(&braidVersion);
      std::fprintf(stderr, "NCCL version %d.%d.%d (Braid %d.%d.%d NCCL-compatible library)\n",
                   NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH, braidVersion / 10000,
                   braidVersion / 100 % 100, braidVersion % 100);
      for (const std::string& note : translation.notes) {
        std::fprintf(stderr, "NCCL INFO %s\n", note.c_str());
      }
    });
  }
  if (used != nullptr) *used = std::move(translation);
  return ncclSuccess;
}

/// Braid names the BRAID_ variable it rejects; add the NCCL_ variable it was translated from.
ncclResult_t blameTranslation(ncclResult_t code, const EnvTranslation& translation) {
  const std::string msg = tLastError;
  for (const auto& [braidName, ncclSource] : translation.sources) {
    if (msg.find(braidName) != std::string::npos) {
      return fail(code, msg + " (translated from " + ncclSource + ")");
    }
  }
  return code;
}

ncclResult_t initRank(ncclComm_t* comm, int nranks, const ncclUniqueId& commId, int rank,
                      const ncclConfig_t* config, const char* caller) {
  if (comm == nullptr) return fail(ncclInvalidArgument, std::string(caller) + ": comm is NULL");
  *comm = nullptr;
  Settings settings;
  EnvTranslation translation;
  ncclResult_t r = applyEnvironment(&settings, rank, caller, &translation);
  if (r == ncclSuccess) r = applyConfig(config, &settings, caller);
  if (r != ncclSuccess) return r;
  braidUniqueId id;
  static_assert(sizeof(id.internal) == sizeof(commId.internal), "unique id sizes differ");
  std::memcpy(id.internal, commId.internal, sizeof(id.internal));
  braidComm_t braidComm = nullptr;
  r = fromBraid(braidCommInitRankConfig(&braidComm, nranks, id, rank, settings.config()));
  if (r != ncclSuccess) return blameTranslation(r, translation);
  *comm = adoptComm(braidComm);
  return ncclSuccess;
}

ncclResult_t endComm(ncclComm_t comm, bool abort, const char* caller) {
  if (comm == nullptr) return fail(ncclInvalidArgument, std::string(caller) + ": comm is NULL");
  std::shared_ptr<ncclComm> c = retireComm(comm);
  if (!c) {
    return fail(ncclInvalidUsage, std::string(caller) +
                                      ": comm is not a live communicator (destroyed or never "
                                      "created)");
  }
  ncclResult_t r = fromBraid(abort ? braidCommAbort(c->braid) : braidCommDestroy(c->braid));
  std::lock_guard<std::mutex> lock(c->mutex);
  for (Registration* reg : c->registrations) delete reg;
  c->registrations.clear();
  return r;
}

}  // namespace

ncclResult_t fail(ncclResult_t code, const std::string& msg, ncclComm* comm) {
  tLastError = msg;
  if (comm != nullptr) {
    std::lock_guard<std::mutex> lock(comm->mutex);
    comm->lastError = msg;
  }
  return code;
}

ncclResult_t fromBraid(braidResult_t result, ncclComm* comm) {
  if (result == braidSuccess) return ncclSuccess;
  std::string msg = braidGetLastError(nullptr);
  if (msg.empty()) msg = braidGetErrorString(result);
  if (result == braidTimeout) return fail(ncclRemoteError, "timeout: " + msg, comm);
  if (result < braidSuccess || result > braidInProgress) {
    return fail(ncclInternalError, "unexpected Braid result: " + msg, comm);
  }
  return fail(static_cast<ncclResult_t>(result), msg, comm);
}

std::shared_ptr<ncclComm> findComm(ncclComm_t handle, const char* caller, ncclResult_t* code) {
  if (handle == nullptr) {
    *code = fail(ncclInvalidArgument, std::string(caller) + ": comm is NULL");
    return nullptr;
  }
  {
    std::lock_guard<std::mutex> lock(gRegistryMutex);
    auto it = registry().find(handle);
    if (it != registry().end()) return it->second;
  }
  *code = fail(ncclInvalidUsage, std::string(caller) +
                                     ": comm is not a live communicator (destroyed or never "
                                     "created)");
  return nullptr;
}

ncclComm_t adoptComm(braidComm_t braidComm) {
  auto comm = std::make_shared<ncclComm>();
  comm->braid = braidComm;
  std::lock_guard<std::mutex> lock(gRegistryMutex);
  registry()[comm.get()] = comm;
  return comm.get();
}

std::shared_ptr<ncclComm> retireComm(ncclComm_t handle) {
  std::lock_guard<std::mutex> lock(gRegistryMutex);
  auto it = registry().find(handle);
  if (it == registry().end()) return nullptr;
  std::shared_ptr<ncclComm> comm = it->second;
  registry().erase(it);
  return comm;
}

size_t dataTypeSize(ncclDataType_t datatype) {
  return braidDataTypeSize(static_cast<braidDataType_t>(datatype));
}

}  // namespace braid::ncclshim

using namespace braid::ncclshim;

extern "C" {

ncclResult_t ncclGetVersion(int* version) {
  if (version == nullptr) return fail(ncclInvalidArgument, "ncclGetVersion: version is NULL");
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

const char* ncclGetErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError:
      return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError:
      return "internal error - please report this issue to the Braid developers";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
  }
}

const char* ncclGetLastError(ncclComm_t comm) {
  tErrorCopy = tLastError;
  if (comm != nullptr) {
    std::shared_ptr<ncclComm> live;
    {
      std::lock_guard<std::mutex> lock(gRegistryMutex);
      auto it = registry().find(comm);
      if (it != registry().end()) live = it->second;
    }
    if (live) {
      std::lock_guard<std::mutex> lock(live->mutex);
      if (!live->lastError.empty()) tErrorCopy = live->lastError;
    }
  }
  return tErrorCopy.c_str();
}

ncclResult_t ncclMemAlloc(void** ptr, size_t size) {
  if (ptr == nullptr) return fail(ncclInvalidArgument, "ncclMemAlloc: ptr is NULL");
  *ptr = nullptr;
  if (size == 0) return fail(ncclInvalidArgument, "ncclMemAlloc: size is 0");
  if (hasCurrentContext()) {
    *ptr = deviceAlloc(size);
    if (*ptr == nullptr) {
      return fail(ncclUnhandledCudaError, "ncclMemAlloc: the CUDA driver could not allocate " +
                                              std::to_string(size) + " bytes");
    }
    return ncclSuccess;
  }
  // Host memory peers on this host read in place (braidMemAlloc), as NCCL's is for NVLink.
  void* p = nullptr;
  if (ncclResult_t r = fromBraid(braidMemAlloc(&p, size)); r != ncclSuccess) return r;
  std::lock_guard<std::mutex> lock(gHostAllocMutex);
  hostAllocations().insert(p);
  *ptr = p;
  return ncclSuccess;
}

ncclResult_t ncclMemFree(void* ptr) {
  if (ptr == nullptr) return ncclSuccess;
  {
    std::lock_guard<std::mutex> lock(gHostAllocMutex);
    if (hostAllocations().erase(ptr) != 0) return fromBraid(braidMemFree(ptr));
  }
  if (deviceFree(ptr)) return ncclSuccess;
  return fail(ncclInvalidArgument, "ncclMemFree: pointer was not allocated by ncclMemAlloc");
}

ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId) {
  if (uniqueId == nullptr) return fail(ncclInvalidArgument, "ncclGetUniqueId: uniqueId is NULL");
  braidUniqueId id;
  ncclResult_t r = fromBraid(braidGetUniqueId(&id));
  if (r != ncclSuccess) return r;
  std::memcpy(uniqueId->internal, id.internal, sizeof(uniqueId->internal));
  return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
  return initRank(comm, nranks, commId, rank, nullptr, "ncclCommInitRank");
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                    ncclConfig_t* config) {
  return initRank(comm, nranks, commId, rank, config, "ncclCommInitRankConfig");
}

ncclResult_t ncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId,
                                      ncclUniqueId* commIds, ncclConfig_t* config) {
  if (commIds == nullptr || nId < 1) {
    return fail(ncclInvalidArgument, "ncclCommInitRankScalable: needs nId >= 1 ids in commIds");
  }
  return initRank(newcomm, nranks, commIds[0], myrank, config, "ncclCommInitRankScalable");
}

ncclResult_t ncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist) {
  if (comm == nullptr) return fail(ncclInvalidArgument, "ncclCommInitAll: comm is NULL");
  if (ndev < 1) {
    return fail(ncclInvalidArgument,
                "ncclCommInitAll: ndev " + std::to_string(ndev) + " is less than 1");
  }
  Settings settings;
  EnvTranslation translation;
  ncclResult_t r = applyEnvironment(&settings, 0, "ncclCommInitAll", &translation);
  if (r != ncclSuccess) return r;
  std::vector<braidComm_t> braidComms(ndev, nullptr);
  r = fromBraid(braidCommInitAllConfig(braidComms.data(), ndev, devlist, settings.config()));
  if (r != ncclSuccess) return blameTranslation(r, translation);
  for (int i = 0; i < ndev; ++i) comm[i] = adoptComm(braidComms[i]);
  return ncclSuccess;
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
                           ncclConfig_t* config) {
  if (newcomm == nullptr) return fail(ncclInvalidArgument, "ncclCommSplit: newcomm is NULL");
  *newcomm = nullptr;
  ncclResult_t r = ncclSuccess;
  std::shared_ptr<ncclComm> parent = findComm(comm, "ncclCommSplit", &r);
  if (!parent) return r;
  Settings unused;  // a split communicator inherits its parent's Braid settings
  r = applyConfig(config, &unused, "ncclCommSplit");
  if (r != ncclSuccess) return r;
  braidComm_t child = nullptr;
  r = fromBraid(braidCommSplit(parent->braid, color < 0 ? -1 : color, key, &child), parent.get());
  if (r != ncclSuccess) return r;
  if (child != nullptr) *newcomm = adoptComm(child);
  return ncclSuccess;
}

ncclResult_t ncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount,
                            ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags) {
  if (newcomm == nullptr) return fail(ncclInvalidArgument, "ncclCommShrink: newcomm is NULL");
  *newcomm = nullptr;
  ncclResult_t r = ncclSuccess;
  std::shared_ptr<ncclComm> parent = findComm(comm, "ncclCommShrink", &r);
  if (!parent) return r;
  // Both flags map to braidCommShrink, which never uses the parent's data path: it serves a
  // healthy parent (DEFAULT) and one that failed around lost ranks (ABORT) alike.
  if (shrinkFlags != NCCL_SHRINK_DEFAULT && shrinkFlags != NCCL_SHRINK_ABORT) {
    return fail(ncclInvalidArgument,
                "ncclCommShrink: shrinkFlags " + std::to_string(shrinkFlags) +
                    " is neither NCCL_SHRINK_DEFAULT nor NCCL_SHRINK_ABORT",
                parent.get());
  }
  Settings unused;  // a shrunk communicator inherits its parent's Braid settings
  r = applyConfig(config, &unused, "ncclCommShrink");
  if (r != ncclSuccess) return r;
  braidComm_t child = nullptr;
  r = fromBraid(braidCommShrink(parent->braid, excludeRanksList, excludeRanksCount, &child),
                parent.get());
  if (r != ncclSuccess) return r;
  *newcomm = adoptComm(child);
  return ncclSuccess;
}

ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  ncclResult_t r = ncclSuccess;
  std::shared_ptr<ncclComm> c = findComm(comm, "ncclCommFinalize", &r);
  if (!c) return r;
  // Host calls complete before they return; stream work is waited for by braidCommDestroy.
  std::lock_guard<std::mutex> lock(c->mutex);
  if (c->finalized) {
    tLastError = "ncclCommFinalize: comm is already finalized";
    c->lastError = tLastError;
    return ncclInvalidUsage;
  }
  c->finalized = true;
  return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) { return endComm(comm, false, "ncclCommDestroy"); }

ncclResult_t ncclCommAbort(ncclComm_t comm) { return endComm(comm, true, "ncclCommAbort"); }

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
  if (asyncError == nullptr) {
    return fail(ncclInvalidArgument, "ncclCommGetAsyncError: asyncError is NULL");
  }
  ncclResult_t r = ncclSuccess;
  std::shared_ptr<ncclComm> c = findComm(comm, "ncclCommGetAsyncError", &r);
  if (!c) return r;
  braidResult_t async = braidSuccess;
  r = fromBraid(braidCommGetAsyncError(c->braid, &async), c.get());
  if (r != ncclSuccess) return r;
  if (async == braidSuccess) {
    *asyncError = ncclSuccess;
  } else {
    std::string msg = braidGetLastError(c->braid);
    std::lock_guard<std::mutex> lock(c->mutex);
    c->lastError = async == braidTimeout ? "timeout: " + msg : msg;
    *asyncError = async == braidTimeout     ? ncclRemoteError
                  : async > braidInProgress ? ncclInternalError
                                            : static_cast<ncclResult_t>(async);
  }
  return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  if (count == nullptr) return fail(ncclInvalidArgument, "ncclCommCount: count is NULL");
  ncclResult_t r = ncclSuccess;
  std::shared_ptr<ncclComm> c = findComm(comm, "ncclCommCount", &r);
  if (!c) return r;
  return fromBraid(braidCommCount(c->braid, count), c.get());
}

ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device) {
  if (device == nullptr) return fail(ncclInvalidArgument, "ncclCommCuDevice: device is NULL");
  ncclResult_t r = ncclSuccess;
  std::shared_ptr<ncclComm> c = findComm(comm, "ncclCommCuDevice", &r);
  if (!c) return r;
  return fromBraid(braidCommCuDevice(c->braid, device), c.get());
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  if (rank == nullptr) return fail(ncclInvalidArgument, "ncclCommUserRank: rank is NULL");
  ncclResult_t r = ncclSuccess;
  std::shared_ptr<ncclComm> c = findComm(comm, "ncclCommUserRank", &r);
  if (!c) return r;
  return fromBraid(braidCommUserRank(c->braid, rank), c.get());
}

ncclResult_t ncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle) {
  if (handle == nullptr) return fail(ncclInvalidArgument, "ncclCommRegister: handle is NULL");
  *handle = nullptr;
  ncclResult_t r = ncclSuccess;
  std::shared_ptr<ncclComm> c = findComm(comm, "ncclCommRegister", &r);
  if (!c) return r;
  if (buff == nullptr || size == 0) {
    return fail(ncclInvalidArgument, "ncclCommRegister: buff is NULL or size is 0", c.get());
  }
  auto* reg = new Registration{buff, size};
  std::lock_guard<std::mutex> lock(c->mutex);
  c->registrations.insert(reg);
  *handle = reg;
  return ncclSuccess;
}

ncclResult_t ncclCommDeregister(const ncclComm_t comm, void* handle) {
  ncclResult_t r = ncclSuccess;
  std::shared_ptr<ncclComm> c = findComm(comm, "ncclCommDeregister", &r);
  if (!c) return r;
  auto* reg = static_cast<Registration*>(handle);
  {
    std::lock_guard<std::mutex> lock(c->mutex);
    if (c->registrations.erase(reg) != 0) {
      delete reg;
      return ncclSuccess;
    }
  }
  return fail(ncclInvalidArgument,
              "ncclCommDeregister: handle was not returned by ncclCommRegister on this comm",
              c.get());
}

ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win,
                                    int /*winFlags*/) {
  if (win == nullptr) return fail(ncclInvalidArgument, "ncclCommWindowRegister: win is NULL");
  void* handle = nullptr;
  ncclResult_t r = ncclCommRegister(comm, buff, size, &handle);
  *win = static_cast<ncclWindow_t>(handle);
  return r;
}

ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win) {
  return ncclCommDeregister(comm, win);
}

ncclResult_t ncclDevCommCreate(ncclComm_t /*comm*/, const ncclDevCommRequirements* /*reqs*/,
                               ncclDevComm* /*outDevComm*/) {
  return fail(ncclInvalidUsage,
              "ncclDevCommCreate: NCCL's device-side API is not provided by this library");
}

ncclResult_t ncclDevCommDestroy(ncclComm_t /*comm*/, const ncclDevComm* /*devComm*/) {
  return fail(ncclInvalidUsage,
              "ncclDevCommDestroy: NCCL's device-side API is not provided by this library");
}

}  // extern "C"
