// The progress engine: drives a batch of plan runs (one call, or everything queued in a group,
// possibly over several communicators) on the calling thread until all are done.
//
// Waiting never burns a core for long: after nothing moved it spins briefly (a peer on another
// core answers within a microsecond), then yields (a peer sharing this core gets to run), then
// sleeps on its communicator's Waker, which peers ring when they post or free a slot. When the
// host's ranks outnumber its CPUs it yields at once if a peer it waits on shares its core (that
// peer needs the core), and otherwise spins for about a process switch while recent waits show
// such spins paying. While idle it checks each communicator's health (abort, failure notices,
// dead peers) and the timeout.
#pragma once

#include <cstddef>
#include <optional>
#include <vector>

#include "base/status.h"
#include "executor/executor.h"
#include "fifo/fifo.h"
#include "transport/transport.h"

namespace braid {

/// What the engine needs from the communicator that owns a run.
class ProgressClient {
 public:
  virtual ~ProgressClient() = default;
  /// An error once the communicator can no longer complete work (abort, an error of its own).
  virtual Status health() = 0;
  /// The failure `peer` announced, if any (kAnyPeer: the one of the peer that got least far). A
  /// collective the peer had not finished fails at once; others only when blocked on it.
  virtual std::optional<PeerFailure> peerFailure(int peer) = 0;
  /// False once `peer` is known to have exited. A peer that exits after finishing its part is no
  /// error, so the engine asks only about peers a blocked run is waiting on.
  virtual bool peerAlive(int peer) = 0;
  /// A description of `peer` for messages ("rank 3 (pid 123 on host)").
  virtual std::string describePeer(int peer) const = 0;
  /// How `peer`, which peerAlive() found gone, went: "rank 3 (pid 123 on host) exited".
  virtual std::string describeLoss(int peer) { return describePeer(peer) + " exited"; }
  /// Asked while runs are blocked, every liveness period, whatever peers they wait on: an error
  /// once a link of the communicator broke for good (a peer's host stopped answering).
  virtual Status checkLinks() { return okStatus(); }
  /// The Waker peers ring for this communicator's rank; may be nullptr (then the engine naps).
  virtual Waker* waker() = 0;
  /// Seconds without progress before a run fails with braidTimeout (0 = never).
  virtual double timeoutSeconds() const = 0;
  /// "rank 3 of 8" or similar, for messages.
  virtual std::string who() const = 0;
};

/// One run for runTasks, and the communicator that owns it.
struct ProgressTask {
  PlanRun* run = nullptr;
  ProgressClient* client = nullptr;
  std::vector<size_t> after;  ///< indices of tasks that must finish before this one starts
  bool started = false;
  bool finished = false;
};

/// Whether the ranks on the host of `waker`'s owner outnumber the CPUs they may use between them
/// (Waker::hostCpus; unknown: this process's), so that a rank shares its core with another that
/// has work.
bool coresShared(const Waker* waker);

/// Runs every task to completion, honouring `after`. On failure returns the first error (with the
/// task's client and position named); tasks then stay as they were (started, not finished), and
/// what unfinished runs lent is withdrawn (PlanRun::withdrawLent): peers no longer read it.
Status runTasks(std::vector<ProgressTask>& tasks);

}  // namespace braid
