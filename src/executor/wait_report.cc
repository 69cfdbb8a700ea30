#include "executor/wait_report.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

namespace braid {
namespace {

struct Entry {
  long thread = 0;  ///< the kernel's thread id, as top and gdb show it
  std::vector<BlockedRun> runs;
  int64_t blockedSinceNs = 0;
};

std::mutex gMutex;
uint64_t gNextId = 1;
std::map<uint64_t, Entry>& entries() {
  static auto* all = new std::map<uint64_t, Entry>();  // never destroyed: threads outlive statics
  return *all;
}

int64_t nowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// The signal's pipe. The handler writes only when its process installed it (a forked child
// inherits the handler but not the watcher, and must not wake its parent's).
std::mutex gSignalMutex;
int gSignal = 0;
std::atomic<int> gOwnerPid{0};
std::atomic<int> gPipeWrite{-1};

void onSignal(int) {
  const int saved = errno;
  const int fd = gPipeWrite.load(std::memory_order_relaxed);
  if (fd >= 0 && getpid() == gOwnerPid.load(std::memory_order_relaxed)) {
    const char byte = 1;
    (void)!write(fd, &byte, 1);
  }
  errno = saved;
}

void writeAll(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

void watch(int readFd, int signo) {
  char host[256] = "?";
  gethostname(host, sizeof(host) - 1);
  for (;;) {
    char bytes[64];
    const ssize_t n = ::read(readFd, bytes, sizeof(bytes));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    const std::string prefix = "[" + std::string(host) + ":" + std::to_string(getpid()) + "] ";
    std::string text = prefix + "BRAID wait report (signal " + std::to_string(signo) + "):\n";
    std::string report = waitReport();
    for (size_t start = 0; start < report.size();) {
      const size_t end = report.find('\n', start);
      const size_t stop = end == std::string::npos ? report.size() : end;
      text += prefix + "  " + report.substr(start, stop - start) + "\n";
      start = stop + 1;
    }
    writeAll(STDERR_FILENO, text);
  }
}

}  // namespace

void WaitSlot::publish(std::vector<BlockedRun> runs, int64_t blockedSinceNs) {
  std::lock_guard<std::mutex> lock(gMutex);
  if (id_ == 0) id_ = gNextId++;
  Entry& e = entries()[id_];
  e.thread = static_cast<long>(syscall(SYS_gettid));
  e.runs = std::move(runs);
  e.blockedSinceNs = blockedSinceNs;
}

void WaitSlot::clear() {
  if (id_ == 0) return;
  std::lock_guard<std::mutex> lock(gMutex);
  entries().erase(id_);
  id_ = 0;
}

std::string waitReport() {
  const int64_t now = nowNs();
  std::lock_guard<std::mutex> lock(gMutex);
  if (entries().empty()) {
    return "no call of this process has been blocked for more than 0.1 s";
  }
  std::string text;
  for (const auto& [id, e] : entries()) {
    char seconds[32];
    std::snprintf(seconds, sizeof(seconds), "%.1f", double(now - e.blockedSinceNs) * 1e-9);
    for (const BlockedRun& run : e.runs) {
      if (!text.empty()) text += "\n";
      text += run.who + " (thread " + std::to_string(e.thread) + ") in " + run.call +
              ": no progress for " + seconds + " s, " + run.position;
    }
  }
  return text;
}

Status enableWaitReportSignal(int signo) {
  if (signo <= 0 || signo >= NSIG || signo == SIGKILL || signo == SIGSTOP) {
    return invalidArgument("BRAID_REPORT_SIGNAL: signal " + std::to_string(signo) +
                           " cannot be caught");
  }
  std::lock_guard<std::mutex> lock(gSignalMutex);
  const int pid = static_cast<int>(getpid());
  if (gOwnerPid.load() == pid) {
    if (signo == gSignal) return okStatus();
    return invalidUsage("BRAID_REPORT_SIGNAL: this process already reports on signal " +
                        std::to_string(gSignal) + ", not " + std::to_string(signo));
  }
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    return systemError(std::string("BRAID_REPORT_SIGNAL: pipe: ") + std::strerror(errno));
  }
  // A burst of signals fills the pipe rather than blocking the handler.
  fcntl(fds[1], F_SETFL, fcntl(fds[1], F_GETFL) | O_NONBLOCK);
  std::thread(watch, fds[0], signo).detach();
  gSignal = signo;
  gPipeWrite.store(fds[1]);
  gOwnerPid.store(pid);
  struct sigaction action {};
  action.sa_handler = &onSignal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  if (sigaction(signo, &action, nullptr) != 0) {
    return systemError(std::string("BRAID_REPORT_SIGNAL: sigaction: ") + std::strerror(errno));
  }
  return okStatus();
}

}  // namespace braid
