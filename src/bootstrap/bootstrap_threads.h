// Test support: ranks as threads of one process, each joined to a fresh bootstrap on the loopback
// interface, for unit tests of the pieces that talk over a Bootstrap (transports, the tuner's
// set-up, the link probe). Compiled into the unit tests only.
#pragma once

#include <functional>
#include <vector>

#include "base/status.h"
#include "bootstrap/bootstrap.h"

namespace braid {

/// Runs body(rank, bootstrap) for ranks 0..n-1, each on a thread of its own; every wait of the
/// rendezvous is bounded by timeoutSeconds. Returns each rank's status: the rendezvous's error,
/// or what body returned.
std::vector<Status> onBootstrapThreads(int n, double timeoutSeconds,
                                       const std::function<Status(int, Bootstrap&)>& body);

}  // namespace braid
