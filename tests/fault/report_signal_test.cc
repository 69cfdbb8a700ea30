// What is stuck where: with BRAID_REPORT_SIGNAL=USR1, a rank blocked in a collective on a peer
// that is late prints, on the signal, the call it is in, the step and peer it waits on and for how
// long (executor/wait_report.h).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "braid.h"
#include "tests/fault/fault_harness.h"
#include "tests/support/multiprocess.h"

namespace braid::testing {
namespace {

constexpr double kDeadlineSeconds = 60;
constexpr double kLateSeconds = 1.5;  // how long the last rank keeps the others waiting
constexpr double kSignalAfter = 0.6;  // when the first rank asks itself for the report

/// What fd 2 received while `body` ran, as a file of its own (memfd) stands in for stderr.
class CapturedStderr {
 public:
  CapturedStderr() : fd_(memfd_create("stderr", 0)), saved_(dup(STDERR_FILENO)) {
    dup2(fd_, STDERR_FILENO);
  }
  ~CapturedStderr() {
    dup2(saved_, STDERR_FILENO);
    close(saved_);
    close(fd_);
  }
  std::string text() const {
    std::string out;
    char buf[4096];
    for (off_t at = 0;;) {
      const ssize_t n = pread(fd_, buf, sizeof(buf), at);
      if (n <= 0) return out;
      out.append(buf, static_cast<size_t>(n));
      at += n;
    }
  }

 private:
  int fd_;
  int saved_;
};

TEST(ReportSignal, BlockedRankPrintsItsCallStepPeerAndWait) {
  constexpr int kRanks = 3;
  std::vector<RankOutcome> outcomes = runRanks(
      kRanks,
      [&](int rank, const braidUniqueId& id) -> std::string {
        Checks checks("rank " + std::to_string(rank));
        Settings settings{"BRAID_REPORT_SIGNAL=USR1", "BRAID_ALGO=allreduce:ring"};
        braidComm_t comm = nullptr;
        if (!checks.expect(
                braidCommInitRankConfig(&comm, kRanks, id, rank, settings.config()) == braidSuccess,
                braidGetLastError(nullptr))) {
          return checks.text();
        }
        std::vector<float> data(1000, 1.0f);
        if (rank == kRanks - 1) usleep(static_cast<useconds_t>(kLateSeconds * 1e6));
        std::string report;
        {
          std::optional<CapturedStderr> captured;
          std::thread asker;
          if (rank == 0) {
            captured.emplace();
            asker = std::thread([&] {
              usleep(static_cast<useconds_t>(kSignalAfter * 1e6));
              kill(getpid(), SIGUSR1);
              // The watcher thread writes the report; wait for its last line.
              for (int i = 0; i < 200 && captured->text().find("no progress") == std::string::npos;
                   ++i) {
                usleep(5000);
              }
              usleep(20000);
              report = captured->text();
            });
          }
          checks.expect(braidAllReduce(data.data(), data.data(), data.size(), braidFloat32,
                                       braidSum, comm, nullptr) == braidSuccess,
                        braidGetLastError(comm));
          if (asker.joinable()) asker.join();
        }
        checks.expect(data[0] == kRanks, "sum " + std::to_string(data[0]));
        if (rank == 0) {
          std::fprintf(stderr, "%s", report.c_str());
          checks.expect(report.find("BRAID wait report (signal " + std::to_string(SIGUSR1) + ")") !=
                            std::string::npos,
                        "no report header in: " + report);
          checks.expect(
              report.find("rank 0/3 (thread ") != std::string::npos &&
                  report.find("in allreduce(count=1000, float, sum)") != std::string::npos,
              "the report does not name the rank and its call: " + report);
          checks.expect(report.find("waiting on rank 2") != std::string::npos,
                        "the report does not name the late peer: " + report);
          const size_t at = report.find("no progress for ");
          const double seconds = at == std::string::npos ? 0 : std::atof(report.c_str() + at + 16);
          checks.expect(seconds >= 0.3 && seconds < kLateSeconds,
                        "the wait it reports is not how long it waited: " + report);
        }
        checks.expect(braidCommDestroy(comm) == braidSuccess, braidGetLastError(nullptr));
        return checks.text();
      },
      kDeadlineSeconds);
  EXPECT_EQ(failures(outcomes), "");
}

}  // namespace
}  // namespace braid::testing
