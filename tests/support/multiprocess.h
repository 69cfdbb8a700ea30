// Runs a test body as several rank processes (fork per rank) under a deadline.
//
// Each child runs body(rank, id) and reports failures as text through a pipe; the parent collects
// every child's outcome, kills the survivors when the deadline passes and never hangs.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "braid.h"

namespace braid::testing {

struct RankOutcome {
  int rank = 0;
  bool exited = false;  ///< exited normally (else killed by a signal or by the deadline)
  int exitCode = 0;
  int signal = 0;
  bool timedOut = false;
  std::string output;  ///< what the body reported (failures), or why it died
  bool ok() const { return exited && exitCode == 0 && !timedOut; }
};

/// The body returns "" on success or a description of what went wrong.
using RankBody = std::function<std::string(int rank, const braidUniqueId& id)>;

/// A bootstrap root (braidGetUniqueId) served by a process of its own, killed and reaped on
/// destruction. The test process then has no root thread when it forks rank processes: forking a
/// process while another of its threads holds a lock (the allocator's, say; sanitizer allocators
/// are not fork-safe) can leave the child blocked forever.
class RootProcess {
 public:
  /// rootTimeoutSeconds > 0: the root gives up after that long; else BRAID_TIMEOUT as read by
  /// braidGetUniqueId. prepare, when given, runs in the root's process first (entering a network
  /// namespace, say) and returns "" or why it failed.
  explicit RootProcess(double rootTimeoutSeconds = 0,
                       const std::function<std::string()>& prepare = {});
  ~RootProcess();
  RootProcess(const RootProcess&) = delete;
  RootProcess& operator=(const RootProcess&) = delete;

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  const braidUniqueId& id() const { return id_; }

 private:
  int pid_ = -1;
  braidUniqueId id_{};
  std::string error_;
};

/// Forks nranks processes sharing one unique id (served by a RootProcess); waits at most
/// deadlineSeconds for all of them.
std::vector<RankOutcome> runRanks(int nranks, const RankBody& body, double deadlineSeconds);
/// The same with an id the caller made (a root with its own timeout, say). unreapedRank >= 0:
/// that rank is reaped only once every other rank has ended, so that if it dies first it stays a
/// zombie meanwhile (as under launchers that reap late).
std::vector<RankOutcome> runRanks(int nranks, const braidUniqueId& id, const RankBody& body,
                                  double deadlineSeconds, int unreapedRank = -1);

/// A multi-line summary of the outcomes that failed ("" when all passed).
std::string failures(const std::vector<RankOutcome>& outcomes);

/// "NAME=value" settings for braidCommInitRankConfig, kept alive with their pointer array.
class Settings {
 public:
  Settings() = default;
  Settings(std::initializer_list<std::string> items) : items_(items) {}
  void add(const std::string& item) { items_.push_back(item); }
  /// A config valid while this object lives and is not modified.
  const braidConfig_t* config();

 private:
  std::vector<std::string> items_;
  std::vector<const char*> pointers_;
  braidConfig_t config_ = BRAID_CONFIG_INITIALIZER;
};

}  // namespace braid::testing
