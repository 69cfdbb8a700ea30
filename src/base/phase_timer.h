// Where a piece of work's time went, phase by phase: wall time and this process's CPU time (every
// thread), for a log line such as a communicator's init timings.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace braid {

/// Times consecutive phases: the first starts at construction, each end() closes the one under
/// way and starts the next.
class PhaseTimer {
 public:
  /// One closed phase.
  struct Phase {
    std::string name;
    double wallMs = 0;
    double cpuMs = 0;  ///< the process's CPU time, all threads, over the phase
  };

  PhaseTimer();

  /// Closes the phase under way as `name` and starts the next.
  void end(std::string_view name);
  const std::vector<Phase>& phases() const { return phases_; }
  /// "total W ms (cpu C): name W (C), ..." over the closed phases, in milliseconds.
  std::string summary() const;

 private:
  double wallStart_ = 0;
  double cpuStart_ = 0;
  std::vector<Phase> phases_;
};

}  // namespace braid
