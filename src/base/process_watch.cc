#include "base/process_watch.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace braid {
namespace {

int openPidfd(pid_t pid) {
#ifdef SYS_pidfd_open
  const long fd = syscall(SYS_pidfd_open, pid, 0);
  if (fd >= 0) {
    // pidfds are close-on-exec already; a fork of the caller keeps its own copy, which is fine.
    return static_cast<int>(fd);
  }
#endif
  return -1;
}

}  // namespace

char processState(pid_t pid) {
  char path[32];
  std::snprintf(path, sizeof(path), "/proc/%d/stat", static_cast<int>(pid));
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[512];
  const ssize_t n = ::read(fd, buf, sizeof(buf) - 1);
  ::close(fd);
  if (n <= 0) return 0;
  buf[n] = '\0';
  // "pid (comm) S ...": comm may hold spaces and parentheses, so the state follows the last ')'.
  const char* close = std::strrchr(buf, ')');
  if (close == nullptr || close[1] != ' ' || close[2] == '\0') return 0;
  return close[2];
}

ProcessWatch::ProcessWatch(pid_t pid) : pid_(pid > 0 ? pid : 0) {
  if (pid_ > 0) pidfd_ = openPidfd(pid_);
}

ProcessWatch ProcessWatch::withoutPidfd(pid_t pid) {
  ProcessWatch watch;
  watch.pid_ = pid > 0 ? pid : 0;
  return watch;
}

ProcessWatch::~ProcessWatch() {
  if (pidfd_ >= 0) ::close(pidfd_);
}

ProcessWatch::ProcessWatch(ProcessWatch&& other) noexcept : pid_(other.pid_), pidfd_(other.pidfd_) {
  other.pid_ = 0;
  other.pidfd_ = -1;
}

ProcessWatch& ProcessWatch::operator=(ProcessWatch&& other) noexcept {
  if (this != &other) {
    if (pidfd_ >= 0) ::close(pidfd_);
    pid_ = other.pid_;
    pidfd_ = other.pidfd_;
    other.pid_ = 0;
    other.pidfd_ = -1;
  }
  return *this;
}

bool ProcessWatch::exited() const {
  if (pid_ <= 0) return false;
  if (pidfd_ >= 0) {
    pollfd p{pidfd_, POLLIN, 0};
    const int r = ::poll(&p, 1, 0);
    return r > 0 && (p.revents & (POLLIN | POLLHUP | POLLERR)) != 0;
  }
  // Without a pidfd a reused pid could pass for the peer; a pid is reused only after the old one
  // was reaped and the pid space wrapped, far longer than a job waits on a dead rank.
  if (::kill(pid_, 0) != 0 && errno == ESRCH) return true;
  const char state = processState(pid_);
  return state == 'Z' || state == 'X';
}

}  // namespace braid
