// Whether a process on this host is still running, asked in a way a zombie cannot fool.
//
// kill(pid, 0) succeeds on a zombie: a rank that was SIGKILLed looks alive until its parent reaps
// it, and launchers often reap late. A pidfd (pidfd_open, Linux 5.3) turns readable once the
// process has exited, reaped or not, and pins the process it was opened on, so a reused pid
// cannot pass for it either. Where pidfds are unavailable (older kernels, seccomp filters) the
// watcher reads the state letter of /proc/<pid>/stat instead: 'Z' (zombie) or 'X' (dead) mean
// gone.
//
// Pids only mean something inside one pid namespace: the caller opens watchers only for peers
// whose namespace (PeerInfo::pidNamespace) equals its own.
#pragma once

#include <sys/types.h>

namespace braid {

class ProcessWatch {
 public:
  /// Watches nothing: exited() is always false.
  ProcessWatch() = default;
  /// Starts watching `pid` (of this pid namespace); pid <= 0 watches nothing.
  explicit ProcessWatch(pid_t pid);
  /// Watches `pid` through /proc and kill alone, as where pidfds are unavailable (tests).
  static ProcessWatch withoutPidfd(pid_t pid);
  ~ProcessWatch();
  ProcessWatch(ProcessWatch&& other) noexcept;
  ProcessWatch& operator=(ProcessWatch&& other) noexcept;
  ProcessWatch(const ProcessWatch&) = delete;
  ProcessWatch& operator=(const ProcessWatch&) = delete;

  /// True once the process has exited (zombie or reaped). Costs one poll (pidfd) or one small
  /// /proc read; false when watching nothing or when it cannot tell.
  bool exited() const;
  pid_t pid() const { return pid_; }
  /// Whether a pidfd backs this watch (else /proc and kill are asked).
  bool usesPidfd() const { return pidfd_ >= 0; }

 private:
  pid_t pid_ = 0;
  int pidfd_ = -1;
};

/// The state letter of /proc/<pid>/stat ('R', 'S', 'Z', ...), or 0 when it cannot be read (the
/// process is gone, or /proc is not mounted).
char processState(pid_t pid);

}  // namespace braid
