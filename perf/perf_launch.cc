#include "perf/perf_launch.h"

#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <thread>
#include <vector>

#include "perf/perf_numbers.h"

namespace braid::perf {
namespace {

struct LauncherVars {
  const char* rank;
  const char* size;
};

constexpr std::array<LauncherVars, 5> kLaunchers = {{
    {"BRAID_RANK", "BRAID_WORLD_SIZE"},
    {"RANK", "WORLD_SIZE"},
    {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
    {"PMI_RANK", "PMI_SIZE"},
    {"SLURM_PROCID", "SLURM_NTASKS"},
}};

Expected<int> parseCount(const char* name, const char* text, int lo) {
  Expected<int64_t> count = parseIntegerValue(text, lo, 1 << 24);
  if (!count.ok()) return failure(std::string(name) + "='" + text + "' is not a valid count");
  return static_cast<int>(count.value());
}

/// The exit status a shell would report for a child's wait status.
int shellStatus(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 255;
}

/// Both ends of a pipe, closed with the object (or earlier, one end at a time).
class Pipe {
 public:
  Pipe() = default;
  Pipe(const Pipe&) = delete;
  Pipe& operator=(const Pipe&) = delete;
  ~Pipe() {
    closeRead();
    closeWrite();
  }
  Outcome open() { return ::pipe(fds_) == 0 ? Outcome() : errnoFailure("pipe", errno); }
  int readEnd() const { return fds_[0]; }
  int writeEnd() const { return fds_[1]; }
  void closeRead() { closeFd(fds_[0]); }
  void closeWrite() { closeFd(fds_[1]); }

 private:
  static void closeFd(int& fd) {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
  int fds_[2] = {-1, -1};
};

/// A child that got no payload (the parent failed and said why) exits with this, quietly.
constexpr int kNoPayloadStatus = 3;

bool readFully(int fd, void* data, size_t size) {
  auto* p = static_cast<char*>(data);
  while (size > 0) {
    const ssize_t got = ::read(fd, p, size);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    p += got;
    size -= static_cast<size_t>(got);
  }
  return true;
}

bool writeFully(int fd, const void* data, size_t size) {
  const auto* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t put = ::write(fd, p, size);
    if (put < 0 && errno == EINTR) continue;
    if (put <= 0) return false;
    p += put;
    size -= static_cast<size_t>(put);
  }
  return true;
}

[[noreturn]] void runChild(int index, pid_t parent, std::vector<Pipe>& pipes,
                           const ChildBody& body) {
  // Orphaned ranks would wait for peers forever: follow the parent.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(1);
  for (size_t j = 0; j < pipes.size(); ++j) {
    pipes[j].closeWrite();
    if (j != static_cast<size_t>(index)) pipes[j].closeRead();
  }
  uint64_t size = 0;
  std::string payload;
  if (!readFully(pipes[index].readEnd(), &size, sizeof(size))) _exit(kNoPayloadStatus);
  payload.resize(size);
  if (!readFully(pipes[index].readEnd(), payload.data(), size)) _exit(kNoPayloadStatus);
  pipes[index].closeRead();
  const int rc = body(index, payload);
  std::fflush(stdout);
  std::fflush(stderr);
  // _exit: the parent's atexit handlers and static objects belong to the parent.
  _exit(rc);
}

/// Waits for every child in pids; see runProcesses for the grace period and the result.
Expected<int> waitForChildren(std::vector<pid_t> pids, std::chrono::milliseconds grace,
                              bool quiet) {
  int remaining = static_cast<int>(pids.size());
  int failed = 0;
  int worst = 0;
  bool killed = false;
  std::chrono::steady_clock::time_point deadline;
  while (remaining > 0) {
    int status = 0;
    // After a failure, poll so that the grace period can run out.
    const pid_t pid = waitpid(-1, &status, failed > 0 ? WNOHANG : 0);
    if (pid < 0) {
      if (errno == EINTR) continue;
      return errnoFailure("waitpid", errno);
    }
    if (pid == 0) {
      if (!killed && std::chrono::steady_clock::now() >= deadline) {
        std::fprintf(stderr, "braid-perf: stopping the %d remaining rank process(es)\n", remaining);
        for (pid_t p : pids) {
          if (p > 0) kill(p, SIGKILL);
        }
        killed = true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      continue;
    }
    const auto it = std::find(pids.begin(), pids.end(), pid);
    if (it == pids.end()) continue;  // not one of ours
    *it = -1;
    --remaining;
    worst = std::max(worst, shellStatus(status));
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) continue;
    if (WIFSIGNALED(status) && !killed && !quiet) {
      std::fprintf(stderr, "braid-perf: rank process %d (pid %d) was killed by signal %d (%s)\n",
                   static_cast<int>(it - pids.begin()), static_cast<int>(pid), WTERMSIG(status),
                   strsignal(WTERMSIG(status)));
    }
    if (failed++ == 0) deadline = std::chrono::steady_clock::now() + grace;
  }
  return worst;
}

}  // namespace

Expected<std::optional<LauncherWorld>> detectLauncher(const EnvLookup& env) {
  for (const LauncherVars& vars : kLaunchers) {
    const char* rankText = env(vars.rank);
    const char* sizeText = env(vars.size);
    if (rankText == nullptr && sizeText == nullptr) continue;
    if (rankText == nullptr || sizeText == nullptr) {
      return failure(std::string(rankText ? vars.rank : vars.size) + " is set but " +
                     (rankText ? vars.size : vars.rank) + " is not");
    }
    PERF_ASSIGN(int rank, parseCount(vars.rank, rankText, 0));
    PERF_ASSIGN(int size, parseCount(vars.size, sizeText, 1));
    if (rank >= size) {
      return failure(std::string(vars.rank) + "=" + rankText + " is not below " + vars.size + "=" +
                     sizeText);
    }
    return std::optional<LauncherWorld>(LauncherWorld{rank, size, vars.rank});
  }
  return std::optional<LauncherWorld>();
}

Expected<std::optional<LauncherWorld>> detectLauncher() {
  return detectLauncher([](const char* name) { return std::getenv(name); });
}

Expected<int> runProcesses(int n, const ParentTask& makePayload, const ChildBody& body,
                           std::chrono::milliseconds grace) {
  if (n < 1) return failure("process count must be at least 1");
  std::vector<Pipe> pipes(static_cast<size_t>(n));
  for (Pipe& p : pipes) PERF_TRY(p.open());
  // Anything buffered now would be written once per child as well.
  std::fflush(nullptr);
  const pid_t parent = getpid();
  std::vector<pid_t> pids;
  for (int i = 0; i < n; ++i) {
    const pid_t pid = fork();
    if (pid == 0) runChild(i, parent, pipes, body);
    if (pid < 0) {
      const int err = errno;
      for (pid_t p : pids) kill(p, SIGKILL);
      for (pid_t p : pids) waitpid(p, nullptr, 0);
      return errnoFailure("fork", err);
    }
    pids.push_back(pid);
  }
  for (Pipe& p : pipes) p.closeRead();

  Expected<std::string> payload = makePayload();
  if (!payload.ok()) {
    for (Pipe& p : pipes) p.closeWrite();  // the children see end-of-file and exit
    (void)waitForChildren(pids, grace, /*quiet=*/true);
    return payload.outcome();
  }
  // A child that died already must not take the parent with it through SIGPIPE.
  struct sigaction ignore = {};
  struct sigaction previous = {};
  ignore.sa_handler = SIG_IGN;
  sigaction(SIGPIPE, &ignore, &previous);
  const uint64_t size = payload.value().size();
  for (Pipe& p : pipes) {
    // A failed write means that child is gone: waiting reports it.
    if (writeFully(p.writeEnd(), &size, sizeof(size))) {
      writeFully(p.writeEnd(), payload.value().data(), size);
    }
    p.closeWrite();
  }
  sigaction(SIGPIPE, &previous, nullptr);
  return waitForChildren(std::move(pids), grace, /*quiet=*/false);
}

Outcome bindToCpu(int index) {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) {
    return errnoFailure("--bind core: reading the CPU affinity", errno);
  }
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
  }
  if (cpus.empty()) return failure("--bind core: no CPU in this process's affinity");
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpus[static_cast<size_t>(index) % cpus.size()], &one);
  if (sched_setaffinity(0, sizeof(one), &one) != 0) {
    return errnoFailure("--bind core: setting the CPU affinity", errno);
  }
  return Outcome();
}

int runThreads(int n, const std::function<int(int)>& body) {
  std::vector<int> results(static_cast<size_t>(n), 0);
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(n));
  for (int t = 0; t < n; ++t) {
    threads.emplace_back([&results, &body, t] { results[static_cast<size_t>(t)] = body(t); });
  }
  for (std::thread& thread : threads) thread.join();
  for (int rc : results) {
    if (rc != 0) return rc;
  }
  return 0;
}

}  // namespace braid::perf
