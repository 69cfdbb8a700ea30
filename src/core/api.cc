// The C API: argument checks, the registry of live communicators, last-error bookkeeping, and the
// hand-off to Communicator and the group queue. Nothing throws past this file.
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "base/config.h"
#include "base/dtype.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/launcher.h"
#include "braid.h"
#include "braid_build_config.h"
#include "core/api_errors.h"
#include "core/comm_handle.h"
#include "core/communicator.h"
#include "core/group.h"
#include "core/validate.h"
#include "device/device_dispatch.h"
#include "transport/shm/shared_buffers.h"

namespace braid {
namespace {

std::mutex gRegistryMutex;
std::unordered_set<braidComm*>& registry() {
  static auto* live = new std::unordered_set<braidComm*>();
  return *live;
}

thread_local std::string tLastError;
/// Communicators with calls queued in this thread's open group: a failed GroupEnd is their
/// last error too.
thread_local std::vector<braidComm*> tGroupComms;

/// The communicator this thread's last call found in the registry. Handles are never freed
/// (bury), so the next call on it needs only the handle's `live` flag, not the registry's lock.
thread_local braidComm* tLastChecked = nullptr;

void registerComm(braidComm* comm) {
  std::lock_guard<std::mutex> lock(gRegistryMutex);
  registry().insert(comm);
}

/// Frees a retired communicator but keeps its handle for good (reachable here): another thread
/// may still hold it in tLastChecked, and must find `live` false there rather than freed memory.
/// A handle is a few hundred bytes; programs create communicators by the handful.
void bury(braidComm* comm) {
  comm->impl.reset();
  static auto* graves = new std::vector<braidComm*>();
  std::lock_guard<std::mutex> lock(gRegistryMutex);
  graves->push_back(comm);
}

Status notLiveError() {
  return invalidUsage("comm is not a live communicator (destroyed or never created)");
}

/// Holds a communicator alive for the length of one API call.
class CommGuard {
 public:
  explicit CommGuard(braidComm* comm) {
    if (comm == nullptr) {
      status_ = invalidArgument("comm is NULL");
      return;
    }
    if (comm == tLastChecked) {
      // Counted first, then checked; retire() clears `live` first, then waits for the count
      // (both sequentially consistent): a call that sees `live` is one retire() waits for.
      comm->activeCalls.fetch_add(1);
      if (comm->live.load()) {
        comm_ = comm;
        return;
      }
      comm->activeCalls.fetch_sub(1);
      status_ = notLiveError();
      return;
    }
    std::lock_guard<std::mutex> lock(gRegistryMutex);
    if (registry().count(comm) == 0) {
      status_ = notLiveError();
      return;
    }
    comm_ = comm;
    comm_->activeCalls.fetch_add(1);
    tLastChecked = comm;
  }
  ~CommGuard() {
    if (comm_ != nullptr) comm_->activeCalls.fetch_sub(1);
  }
  CommGuard(const CommGuard&) = delete;
  CommGuard& operator=(const CommGuard&) = delete;

  /// ok when the communicator is live and initialised.
  Status status() const {
    if (!status_.ok()) return status_;
    if (comm_->impl == nullptr) {
      return invalidUsage(comm_->initError.empty()
                              ? "comm is still being created inside the open group"
                              : "comm failed to initialise: " + comm_->initError);
    }
    return okStatus();
  }
  braidComm* comm() const { return comm_; }

 private:
  Status status_;
  braidComm* comm_ = nullptr;
};

}  // namespace

braidResult_t finish(const Status& status, braidComm* comm) {
  if (!status.ok()) {
    tLastError = status.message();
    if (comm != nullptr) {
      std::lock_guard<std::mutex> lock(comm->errorMutex);
      comm->lastError = status.message();
    }
  }
  return status.code();
}

namespace {

/// Runs `body` with exceptions (allocation failure) turned into errors.
template <typename F>
Status guarded(F&& body) {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return systemError("out of memory");
  } catch (const std::exception& e) {
    return internalError(std::string("unexpected exception: ") + e.what());
  }
}

Result<Config> loadConfig(const braidConfig_t* config) {
  std::vector<std::string> overrides;
  if (config != nullptr) {
    if (config->size < sizeof(size_t) + sizeof(const char* const*)) {
      return invalidArgument("config->size is smaller than any braidConfig_t");
    }
    for (const char* const* s = config->settings; s != nullptr && *s != nullptr; ++s) {
      overrides.emplace_back(*s);
    }
  }
  return Config::load(overrides);
}

braidResult_t submitCall(braidComm* handle, const CallArgs& args, braidStream_t stream) {
  CommGuard guard(handle);
  Status status = guard.status();
  if (status.ok()) {
    status = guarded([&]() -> Status {
      Communicator* comm = guard.comm()->impl.get();
      ASSIGN_OR_RETURN(const DeviceRoute route, routeCall(args, stream));
      RETURN_IF_ERROR(validateCall(args, comm->rank(), comm->nranks()));
      pollDeviceErrors(comm);
      Status broken = comm->asyncError();
      if (!broken.ok()) {
        return Status(broken.code(),
                      "communicator unusable after an earlier error: " + broken.message());
      }
      if (route.device) return submitDeviceCall(comm, args, route, stream, inGroup());
      return submit(comm, args);
    });
    if (status.ok() && inGroup()) tGroupComms.push_back(handle);
  }
  return finish(status, guard.comm());
}

Status initRank(braidComm* handle, int nranks, const braidUniqueId& id, int rank,
                const Config& config) {
  return guarded([&]() -> Status {
    ASSIGN_OR_RETURN(handle->impl, Communicator::create(id, nranks, rank, config));
    return okStatus();
  });
}

braidResult_t commInitRank(braidComm_t* comm, int nranks, braidUniqueId commId, int rank,
                           const braidConfig_t* userConfig) {
  if (comm == nullptr) return finish(invalidArgument("braidCommInitRank: comm is NULL"));
  *comm = nullptr;
  if (nranks < 1) {
    return finish(
        invalidArgument("braidCommInitRank: nranks " + std::to_string(nranks) + " is less than 1"));
  }
  if (rank < 0 || rank >= nranks) {
    return finish(invalidArgument("braidCommInitRank: rank " + std::to_string(rank) +
                                  " is outside [0, " + std::to_string(nranks) + ")"));
  }
  Result<Config> config = loadConfig(userConfig);
  if (!config.ok()) return finish(config.status());

  auto* handle = new braidComm();
  if (inGroup()) {
    // Joined at GroupEnd, in parallel with the other ranks created in the same group.
    registerComm(handle);
    *comm = handle;
    Config c = std::move(config).value();
    deferInit([handle, nranks, commId, rank, c]() -> Status {
      {
        // Destroy or abort may run on another thread meanwhile: hold the handle like a call.
        std::lock_guard<std::mutex> lock(gRegistryMutex);
        if (registry().count(handle) == 0) {
          return invalidUsage("braidCommInitRank: comm was destroyed before braidGroupEnd");
        }
        handle->activeCalls.fetch_add(1);
      }
      std::unique_ptr<Communicator> impl;
      Status s = guarded([&]() -> Status {
        ASSIGN_OR_RETURN(impl, Communicator::create(commId, nranks, rank, c));
        return okStatus();
      });
      {
        // retire() looks at impl under this lock.
        std::lock_guard<std::mutex> lock(gRegistryMutex);
        handle->impl = std::move(impl);
        if (!s.ok()) handle->initError = s.message();
      }
      handle->activeCalls.fetch_sub(1);
      return s;
    });
    return braidSuccess;
  }
  Status status = initRank(handle, nranks, commId, rank, config.value());
  if (!status.ok()) {
    delete handle;
    return finish(status.withContext("braidCommInitRank"));
  }
  registerComm(handle);
  *comm = handle;
  return braidSuccess;
}

braidResult_t commInitAll(braidComm_t* comms, int ndev, const int* devlist,
                          const braidConfig_t* userConfig) {
  if (comms == nullptr) return finish(invalidArgument("braidCommInitAll: comms is NULL"));
  if (ndev < 1) {
    return finish(
        invalidArgument("braidCommInitAll: ndev " + std::to_string(ndev) + " is less than 1"));
  }
  if (devlist != nullptr) {
    Status devices = checkDeviceList(devlist, ndev);
    if (!devices.ok()) return finish(devices);
  }
  for (int i = 0; i < ndev; ++i) comms[i] = nullptr;
  Result<Config> config = loadConfig(userConfig);
  if (!config.ok()) return finish(config.status());
  Result<braidUniqueId> id = startBootstrapRoot(config->socketIfname, config->timeoutSeconds);
  if (!id.ok()) return finish(id.status());

  std::vector<braidComm*> handles(ndev);
  std::vector<Status> results(ndev);
  std::vector<std::thread> threads;
  for (int i = 0; i < ndev; ++i) {
    handles[i] = new braidComm();
    threads.emplace_back(
        [&, i] { results[i] = initRank(handles[i], ndev, id.value(), i, config.value()); });
  }
  for (std::thread& t : threads) t.join();
  for (int i = 0; i < ndev; ++i) {
    if (!results[i].ok()) {
      for (braidComm* h : handles) delete h;
      return finish(results[i].withContext("braidCommInitAll rank " + std::to_string(i)));
    }
  }
  for (int i = 0; i < ndev; ++i) {
    if (devlist != nullptr) bindCommunicatorDevice(handles[i]->impl.get(), devlist[i]);
    registerComm(handles[i]);
    comms[i] = handles[i];
  }
  return braidSuccess;
}

/// Removes comm from the registry so that no new call can start, then waits for running calls.
Result<braidComm*> retire(braidComm* comm, bool abortFirst) {
  if (comm == nullptr) return invalidArgument("comm is NULL");
  Communicator* impl = nullptr;
  {
    std::lock_guard<std::mutex> lock(gRegistryMutex);
    if (registry().erase(comm) == 0) return notLiveError();
    comm->live.store(false);
    // Read under the lock: a deferred init (group) sets impl under it. One still running cannot
    // be interrupted; abort then waits for it like destroy does.
    impl = comm->impl.get();
  }
  if (abortFirst && impl != nullptr) impl->abort();
  while (comm->activeCalls.load() != 0) std::this_thread::yield();
  return comm;
}

}  // namespace
}  // namespace braid

using namespace braid;

extern "C" {

braidResult_t braidGetVersion(int* version) {
  if (version == nullptr) return finish(invalidArgument("braidGetVersion: version is NULL"));
  *version = BRAID_VERSION_CODE;
  return braidSuccess;
}

braidResult_t braidMemAlloc(void** ptr, size_t size) {
  if (ptr == nullptr) return finish(invalidArgument("braidMemAlloc: ptr is NULL"));
  *ptr = nullptr;
  Result<void*> memory = allocateSharedBuffer(size);
  if (!memory.ok()) return finish(memory.status());
  *ptr = memory.value();
  return braidSuccess;
}

braidResult_t braidMemFree(void* ptr) { return finish(freeSharedBuffer(ptr)); }

const char* braidGetErrorString(braidResult_t result) {
  switch (result) {
    case braidSuccess: return "no error";
    case braidUnhandledCudaError: return "unhandled CUDA error";
    case braidSystemError: return "system error";
    case braidInternalError: return "internal error";
    case braidInvalidArgument: return "invalid argument";
    case braidInvalidUsage: return "invalid usage";
    case braidRemoteError: return "remote process exited or a remote error occurred";
    case braidInProgress: return "operation in progress";
    case braidTimeout: return "timeout";
  }
  return "unknown result code";
}

const char* braidGetLastError(braidComm_t comm) {
  if (comm != nullptr) {
    std::lock_guard<std::mutex> lock(gRegistryMutex);
    if (registry().count(comm) != 0) {
      std::lock_guard<std::mutex> errorLock(comm->errorMutex);
      tLastError = comm->lastError;  // a stable copy for the caller
      return tLastError.c_str();
    }
  }
  return tLastError.c_str();
}

size_t braidDataTypeSize(braidDataType_t datatype) { return dataTypeSize(datatype); }

braidResult_t braidGetUniqueId(braidUniqueId* uniqueId) {
  if (uniqueId == nullptr) return finish(invalidArgument("braidGetUniqueId: uniqueId is NULL"));
  Result<Config> config = Config::load();
  if (!config.ok()) return finish(config.status());
  Result<braidUniqueId> id = startBootstrapRoot(config->socketIfname, config->timeoutSeconds);
  if (!id.ok()) return finish(id.status());
  *uniqueId = id.value();
  return braidSuccess;
}

braidResult_t braidCommInitRank(braidComm_t* comm, int nranks, braidUniqueId commId, int rank) {
  return commInitRank(comm, nranks, commId, rank, nullptr);
}

braidResult_t braidCommInitRankConfig(braidComm_t* comm, int nranks, braidUniqueId commId, int rank,
                                      const braidConfig_t* config) {
  return commInitRank(comm, nranks, commId, rank, config);
}

braidResult_t braidCommInitAll(braidComm_t* comms, int ndev, const int* devlist) {
  return commInitAll(comms, ndev, devlist, nullptr);
}

braidResult_t braidCommInitAllConfig(braidComm_t* comms, int ndev, const int* devlist,
                                     const braidConfig_t* config) {
  return commInitAll(comms, ndev, devlist, config);
}

braidResult_t braidCommInitFromEnv(braidComm_t* comm) {
  if (comm == nullptr) return finish(invalidArgument("braidCommInitFromEnv: comm is NULL"));
  *comm = nullptr;
  Result<Config> config = Config::load();
  if (!config.ok()) return finish(config.status());
  Result<LaunchPlan> plan =
      planLaunch(config.value(), [](const char* name) { return std::getenv(name); });
  if (!plan.ok()) return finish(plan.status().withContext("braidCommInitFromEnv"));
  Result<braidUniqueId> id = launchRendezvous(plan.value(), config->timeoutSeconds);
  if (!id.ok()) return finish(id.status().withContext("braidCommInitFromEnv"));
  return commInitRank(comm, plan->size, id.value(), plan->rank, nullptr);
}

braidResult_t braidCommSplit(braidComm_t comm, int color, int key, braidComm_t* newcomm) {
  if (newcomm == nullptr) return finish(invalidArgument("braidCommSplit: newcomm is NULL"));
  *newcomm = nullptr;
  CommGuard guard(comm);
  Status status = guard.status();
  if (status.ok()) {
    status = guarded([&]() -> Status {
      if (inGroup()) return invalidUsage("braidCommSplit inside a group is not supported");
      Status broken = guard.comm()->impl->asyncError();
      if (!broken.ok()) return Status(broken.code(), "communicator unusable: " + broken.message());
      ASSIGN_OR_RETURN(std::unique_ptr<Communicator> child, guard.comm()->impl->split(color, key));
      if (child) {
        auto* handle = new braidComm();
        handle->impl = std::move(child);
        registerComm(handle);
        *newcomm = handle;
      }
      return okStatus();
    });
  }
  return finish(status, guard.comm());
}

// ---- braidCommShrink: survivors carry on (issue #44) ------------------------------------------

braidResult_t braidCommShrink(braidComm_t comm, const int* excludeRanks, int nexclude,
                              braidComm_t* newcomm) {
  if (newcomm == nullptr) return finish(invalidArgument("braidCommShrink: newcomm is NULL"));
  *newcomm = nullptr;
  CommGuard guard(comm);
  Status status = guard.status();
  if (status.ok()) {
    status = guarded([&]() -> Status {
      if (inGroup()) return invalidUsage("braidCommShrink inside a group is not supported");
      Communicator& parent = *guard.comm()->impl;
      const int n = parent.nranks();
      if (nexclude < 0 || nexclude >= n) {
        return invalidArgument("braidCommShrink: nexclude " + std::to_string(nexclude) +
                               " outside 0.." + std::to_string(n - 1) + " (a communicator of " +
                               std::to_string(n) + " ranks must keep at least one)");
      }
      if (nexclude > 0 && excludeRanks == nullptr) {
        return invalidArgument("braidCommShrink: excludeRanks is NULL with nexclude " +
                               std::to_string(nexclude));
      }
      std::vector<int> excluded(excludeRanks, excludeRanks + nexclude);
      for (int r : excluded) {
        if (r < 0 || r >= n) {
          return invalidArgument("braidCommShrink: excluded rank " + std::to_string(r) +
                                 " outside 0.." + std::to_string(n - 1));
        }
        if (r == parent.rank()) {
          return invalidUsage("braidCommShrink: rank " + std::to_string(r) +
                              " is in excludeRanks (excluded ranks do not call it)");
        }
      }
      ASSIGN_OR_RETURN(std::unique_ptr<Communicator> child, parent.shrink(excluded));
      auto* handle = new braidComm();
      handle->impl = std::move(child);
      registerComm(handle);
      *newcomm = handle;
      return okStatus();
    });
  }
  return finish(status, guard.comm());
}

braidResult_t braidCommDestroy(braidComm_t comm) {
  Result<braidComm*> retired = retire(comm, /*abortFirst=*/false);
  if (!retired.ok()) return finish(retired.status());
  bury(retired.value());
  return braidSuccess;
}

braidResult_t braidCommAbort(braidComm_t comm) {
  Result<braidComm*> retired = retire(comm, /*abortFirst=*/true);
  if (!retired.ok()) return finish(retired.status());
  bury(retired.value());
  return braidSuccess;
}

braidResult_t braidCommGetAsyncError(braidComm_t comm, braidResult_t* asyncError) {
  if (asyncError == nullptr) {
    return finish(invalidArgument("braidCommGetAsyncError: asyncError is NULL"));
  }
  CommGuard guard(comm);
  Status status = guard.status();
  if (!status.ok()) return finish(status, guard.comm());
  // A failure a peer reported while this rank was between calls counts too.
  (void)guard.comm()->impl->jobHealth();
  pollDeviceErrors(guard.comm()->impl.get());
  Status async = guard.comm()->impl->asyncError();
  *asyncError = async.code();
  if (!async.ok()) finish(async, guard.comm());
  return braidSuccess;
}

braidResult_t braidCommCount(const braidComm_t comm, int* count) {
  if (count == nullptr) return finish(invalidArgument("braidCommCount: count is NULL"));
  CommGuard guard(comm);
  Status status = guard.status();
  if (!status.ok()) return finish(status, guard.comm());
  *count = guard.comm()->impl->nranks();
  return braidSuccess;
}

braidResult_t braidCommUserRank(const braidComm_t comm, int* rank) {
  if (rank == nullptr) return finish(invalidArgument("braidCommUserRank: rank is NULL"));
  CommGuard guard(comm);
  Status status = guard.status();
  if (!status.ok()) return finish(status, guard.comm());
  *rank = guard.comm()->impl->rank();
  return braidSuccess;
}

braidResult_t braidCommCuDevice(const braidComm_t comm, int* device) {
  if (device == nullptr) return finish(invalidArgument("braidCommCuDevice: device is NULL"));
  CommGuard guard(comm);
  Status status = guard.status();
  if (!status.ok()) return finish(status, guard.comm());
  *device = communicatorDevice(guard.comm()->impl.get());
  return braidSuccess;
}

braidResult_t braidAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                             braidDataType_t datatype, braidRedOp_t op, braidComm_t comm,
                             braidStream_t stream) {
  return submitCall(comm, {Collective::kAllReduce, sendbuff, recvbuff, count, datatype, op, 0},
                    stream);
}

braidResult_t braidBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                             braidDataType_t datatype, int root, braidComm_t comm,
                             braidStream_t stream) {
  return submitCall(
      comm, {Collective::kBroadcast, sendbuff, recvbuff, count, datatype, braidSum, root}, stream);
}

braidResult_t braidReduce(const void* sendbuff, void* recvbuff, size_t count,
                          braidDataType_t datatype, braidRedOp_t op, int root, braidComm_t comm,
                          braidStream_t stream) {
  return submitCall(comm, {Collective::kReduce, sendbuff, recvbuff, count, datatype, op, root},
                    stream);
}

braidResult_t braidAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                             braidDataType_t datatype, braidComm_t comm, braidStream_t stream) {
  return submitCall(
      comm, {Collective::kAllGather, sendbuff, recvbuff, sendcount, datatype, braidSum, 0}, stream);
}

braidResult_t braidReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                 braidDataType_t datatype, braidRedOp_t op, braidComm_t comm,
                                 braidStream_t stream) {
  return submitCall(
      comm, {Collective::kReduceScatter, sendbuff, recvbuff, recvcount, datatype, op, 0}, stream);
}

braidResult_t braidAllToAll(const void* sendbuff, void* recvbuff, size_t count,
                            braidDataType_t datatype, braidComm_t comm, braidStream_t stream) {
  return submitCall(comm, {Collective::kAllToAll, sendbuff, recvbuff, count, datatype, braidSum, 0},
                    stream);
}

braidResult_t braidSend(const void* sendbuff, size_t count, braidDataType_t datatype, int peer,
                        braidComm_t comm, braidStream_t stream) {
  return submitCall(comm, {Collective::kSend, sendbuff, nullptr, count, datatype, braidSum, peer},
                    stream);
}

braidResult_t braidRecv(void* recvbuff, size_t count, braidDataType_t datatype, int peer,
                        braidComm_t comm, braidStream_t stream) {
  return submitCall(comm, {Collective::kRecv, nullptr, recvbuff, count, datatype, braidSum, peer},
                    stream);
}

braidResult_t braidGroupStart(void) {
  groupStart();
  return braidSuccess;
}

braidResult_t braidGroupEnd(void) {
  const Status status = guarded([] { return groupEnd(); });
  if (!inGroup()) {
    const std::vector<braidComm*> comms = std::move(tGroupComms);
    tGroupComms.clear();
    if (!status.ok()) {
      std::lock_guard<std::mutex> lock(gRegistryMutex);
      for (braidComm* comm : comms) {
        if (registry().count(comm) == 0) continue;
        std::lock_guard<std::mutex> errorLock(comm->errorMutex);
        comm->lastError = status.message();
      }
    }
  }
  return finish(status);
}

}  // extern "C"
