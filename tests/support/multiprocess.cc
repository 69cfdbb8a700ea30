#include "tests/support/multiprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sstream>

#include "bootstrap/bootstrap.h"

namespace braid::testing {
namespace {

double nowSeconds() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

void writeAll(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

}  // namespace

RootProcess::RootProcess(double rootTimeoutSeconds, const std::function<std::string()>& prepare) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    error_ = std::string("pipe: ") + std::strerror(errno);
    return;
  }
  pid_ = fork();
  if (pid_ < 0) {
    error_ = std::string("fork: ") + std::strerror(errno);
    close(fds[0]);
    close(fds[1]);
    return;
  }
  if (pid_ == 0) {
    close(fds[0]);
    // The reply: a result code, then the id or the error text.
    braidUniqueId id{};
    int32_t rc = braidSuccess;
    std::string error = prepare ? prepare() : std::string();
    if (!error.empty()) {
      rc = braidSystemError;
    } else if (rootTimeoutSeconds > 0) {
      Result<braidUniqueId> made = startBootstrapRoot("", rootTimeoutSeconds);
      if (made.ok()) {
        id = made.value();
      } else {
        rc = made.status().code();
        error = made.status().message();
      }
    } else {
      rc = braidGetUniqueId(&id);
      if (rc != braidSuccess) error = braidGetLastError(nullptr);
    }
    writeAll(fds[1], std::string(reinterpret_cast<const char*>(&rc), sizeof(rc)));
    writeAll(fds[1], rc == braidSuccess ? std::string(id.internal, sizeof(id.internal)) : error);
    close(fds[1]);
    for (;;) pause();  // serving, until the test is done with the root
  }
  close(fds[1]);
  std::string reply;
  char buf[512];
  for (ssize_t n; (n = read(fds[0], buf, sizeof(buf))) > 0;) reply.append(buf, size_t(n));
  close(fds[0]);
  int32_t rc = braidInternalError;
  if (reply.size() >= sizeof(rc)) std::memcpy(&rc, reply.data(), sizeof(rc));
  if (rc == braidSuccess && reply.size() == sizeof(rc) + sizeof(id_.internal)) {
    std::memcpy(id_.internal, reply.data() + sizeof(rc), sizeof(id_.internal));
  } else {
    error_ = "starting the bootstrap root failed: " +
             (reply.size() > sizeof(rc) ? reply.substr(sizeof(rc)) : std::string("no reply"));
  }
}

RootProcess::~RootProcess() {
  if (pid_ <= 0) return;
  kill(pid_, SIGKILL);
  int status = 0;
  waitpid(pid_, &status, 0);
}

std::vector<RankOutcome> runRanks(int nranks, const RankBody& body, double deadlineSeconds) {
  RootProcess root;
  if (!root.ok()) {
    std::vector<RankOutcome> outcomes(nranks);
    for (int r = 0; r < nranks; ++r) {
      outcomes[r].rank = r;
      outcomes[r].output = root.error();
    }
    return outcomes;
  }
  return runRanks(nranks, root.id(), body, deadlineSeconds);
}

std::vector<RankOutcome> runRanks(int nranks, const braidUniqueId& id, const RankBody& body,
                                  double deadlineSeconds, int unreapedRank) {
  std::vector<RankOutcome> outcomes(nranks);
  std::vector<pid_t> pids(nranks, -1);
  std::vector<int> pipes(nranks, -1);
  for (int r = 0; r < nranks; ++r) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return outcomes;
    pid_t pid = fork();
    if (pid == 0) {
      close(fds[0]);
      std::string report;
      try {
        report = body(r, id);
      } catch (const std::exception& e) {
        report = std::string("exception: ") + e.what();
      }
      writeAll(fds[1], report);
      close(fds[1]);
      _exit(report.empty() ? 0 : 1);
    }
    close(fds[1]);
    pids[r] = pid;
    pipes[r] = fds[0];
    outcomes[r].rank = r;
  }

  const double deadline = nowSeconds() + deadlineSeconds;
  int running = nranks;
  std::vector<bool> done(nranks, false);
  while (running > 0) {
    // Drain the pipes so a chatty child never blocks on a full pipe.
    std::vector<pollfd> pfds;
    for (int r = 0; r < nranks; ++r) {
      if (pipes[r] >= 0) pfds.push_back({pipes[r], POLLIN, 0});
    }
    if (!pfds.empty())
      poll(pfds.data(), pfds.size(), 10);
    else
      usleep(10000);
    for (int r = 0; r < nranks; ++r) {
      if (pipes[r] < 0) continue;
      char buf[4096];
      for (;;) {
        pollfd one{pipes[r], POLLIN, 0};
        if (poll(&one, 1, 0) <= 0) break;
        ssize_t n = read(pipes[r], buf, sizeof(buf));
        if (n <= 0) {
          close(pipes[r]);
          pipes[r] = -1;
          break;
        }
        outcomes[r].output.append(buf, static_cast<size_t>(n));
      }
    }
    for (int r = 0; r < nranks; ++r) {
      if (done[r]) continue;
      if (r == unreapedRank && running > 1) continue;
      int status = 0;
      if (waitpid(pids[r], &status, WNOHANG) == pids[r]) {
        done[r] = true;
        --running;
        if (WIFEXITED(status)) {
          outcomes[r].exited = true;
          outcomes[r].exitCode = WEXITSTATUS(status);
        } else if (WIFSIGNALED(status)) {
          outcomes[r].signal = WTERMSIG(status);
        }
      }
    }
    if (running > 0 && nowSeconds() > deadline) {
      for (int r = 0; r < nranks; ++r) {
        if (done[r]) continue;
        kill(pids[r], SIGKILL);
        int status = 0;
        waitpid(pids[r], &status, 0);
        done[r] = true;
        outcomes[r].timedOut = true;
        outcomes[r].output += "\n(killed at the test deadline)";
      }
      running = 0;
    }
  }
  for (int r = 0; r < nranks; ++r) {
    if (pipes[r] >= 0) close(pipes[r]);
  }
  return outcomes;
}

std::string failures(const std::vector<RankOutcome>& outcomes) {
  std::ostringstream os;
  for (const RankOutcome& o : outcomes) {
    if (o.ok()) continue;
    os << "rank " << o.rank << ": ";
    if (o.timedOut)
      os << "timed out; ";
    else if (!o.exited)
      os << "killed by signal " << o.signal << " (" << strsignal(o.signal) << "); ";
    else
      os << "exit code " << o.exitCode << "; ";
    os << o.output << "\n";
  }
  return os.str();
}

const braidConfig_t* Settings::config() {
  pointers_.clear();
  for (const std::string& s : items_) pointers_.push_back(s.c_str());
  pointers_.push_back(nullptr);
  config_.size = sizeof(braidConfig_t);
  config_.settings = pointers_.data();
  return &config_;
}

}  // namespace braid::testing
