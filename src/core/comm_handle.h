// The object behind a braidComm_t handle. The C API (api.cc) owns it; internal tools that link the
// internal library (braid-perf asking the tuner what it would choose) read it through this header.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include "braid.h"
#include "core/communicator.h"

struct braidComm {
  std::unique_ptr<braid::Communicator> impl;
  std::atomic<int> activeCalls{0};
  /// Cleared when the communicator is destroyed or aborted. The handle itself is never freed
  /// (api.cc keeps it), so a thread may test this flag without the registry's lock.
  std::atomic<bool> live{true};
  std::mutex errorMutex;
  std::string lastError;
  std::string initError;  ///< set when a deferred init failed
};
