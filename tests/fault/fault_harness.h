// Tools of the fault and soak tests: ways for a rank to die, a page of memory the rank processes
// share with each other and the test, the resources a communicator could leak, one collective
// call by name with its outcome and duration, and checks of error messages.
//
// Rank bodies run in forked children (tests/support/multiprocess.h), where gtest assertions do
// not reach the parent: they collect failures in a Checks object and return its text.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "braid.h"
#include "tests/support/collective_check.h"

namespace braid::testing {

/// How a victim rank dies.
enum class Death {
  kKill,   ///< SIGKILL: no clean-up at all
  kExit,   ///< _exit(3): a process that quits in the middle of the job
  kCrash,  ///< abort(): SIGABRT, a crash
  kStop,   ///< SIGSTOP: alive but silent forever, which no peer can tell from slowness
};
std::string deathName(Death death);

/// Dies now, the way `death` says (kStop stays stopped until someone kills it).
[[noreturn]] void dieNow(Death death);
/// Dies after `seconds`, from a helper thread, whatever the process is doing then.
void dieAfter(Death death, double seconds);

/// A page shared by the test process and every rank it forks (mapped before the fork).
struct SharedBoard {
  std::atomic<int> victimPid{0};
  std::atomic<int> pids[8] = {};  ///< each rank's pid, written as it starts
  std::atomic<int> ready{0};      ///< ranks that reached a point the test waits for
  std::atomic<int> released{0};   ///< set by the test to let them go on
  std::atomic<int> failed{0};     ///< survivors whose failure is known
  std::atomic<double> diedAt{0};  ///< nowSeconds() when the victim went (dieNow), 0 before
  char listener[8][64] = {};      ///< bootstrap listener address per rank ("" until known)
};
/// The board of this test run (mapped on first use, zeroed by resetBoard()).
SharedBoard& board();
void resetBoard();

/// What a process holds that a communicator could leak.
struct ProcessResources {
  std::set<std::pair<int, std::string>> fds;  ///< descriptor number and what it points at
  std::set<std::string> shm;                  ///< /dev/shm/braid-<pid>-* names of this process
  int threads = 0;
  size_t rssKb = 0;
};
ProcessResources snapshotResources();
/// Descriptors, segments and threads present now but not in `before` (waiting up to
/// settleSeconds for threads that are on their way out); "" when there are none.
std::string leaksSince(const ProcessResources& before, double settleSeconds = 2);
/// Every /dev/shm/braid-<pid>-* entry whose pid is in `pids`.
std::vector<std::string> shmEntriesOf(const std::vector<int>& pids);

/// Failures collected inside a rank process.
class Checks {
 public:
  explicit Checks(std::string who) : who_(std::move(who)) {}
  /// Records `what` when `ok` is false; returns ok.
  bool expect(bool ok, const std::string& what);
  bool empty() const { return text_.empty(); }
  const std::string& text() const { return text_; }

 private:
  std::string who_;
  std::string text_;
};

/// The result of one API call and how long it took.
struct Timed {
  braidResult_t rc = braidSuccess;
  std::string message;  ///< braidGetLastError after a failure
  double seconds = 0;
};

/// One call: the collective and the arguments ranks must agree on.
struct CallSpec {
  TestColl coll = TestColl::kAllReduce;
  size_t count = 1000;
  braidDataType_t type = braidFloat32;
  braidRedOp_t op = braidSum;
  int root = 0;
};
/// How the library describes the call in error messages, up to the arguments that differ between
/// ranks ("allreduce(count=1000, float, sum", "broadcast(count=8, int32, root=2", "send(count=4,
/// float").
std::string describeSpec(const CallSpec& spec);
/// Whether `message` describes the call as describeSpec does, or for the send/recv ring, whose
/// ranks both send and receive, as either half ("send(count=4, float" or "recv(count=4, float").
bool describesSpec(const std::string& message, const CallSpec& spec);

/// The collectives under test, with `count` elements per rank (per peer for all-to-all) at most
/// 8 bytes each; kSendRecvRing is a send to the next rank and a receive from the previous one in
/// one group. Buffers are allocated once and reused.
class CallMaker {
 public:
  CallMaker(braidComm_t comm, int rank, int nranks, size_t count);
  /// Makes one call of float sums; root is used by broadcast and reduce.
  Timed call(TestColl coll, int root = 0);
  /// Makes the call `spec` describes (spec.count at most the count given at construction).
  Timed call(const CallSpec& spec);
  /// The name describeCall uses for `coll` ("allreduce", "send", ...).
  static std::string callName(TestColl coll);
  /// The names a rank making `coll` may see its call under: callName's, and "recv" too for the
  /// send/recv ring.
  static std::vector<std::string> callNames(TestColl coll);

 private:
  braidComm_t comm_;
  int rank_;
  int nranks_;
  size_t count_;
  std::vector<double> in_;
  std::vector<double> out_;
};

/// Every (collective, algorithm) pair the library serves, as BRAID_ALGO spells it.
struct CollAlgo {
  TestColl coll;
  std::string algo;
};
std::vector<CollAlgo> everyCollectiveAndAlgorithm();
/// The BRAID_ALGO value that forces `algo` for `coll` ("allreduce:rhd", "sendrecv" -> p2p:...).
std::string algoSetting(const CollAlgo& ca);

/// Whether `message` says that `rank` died or dropped out: "rank 3 (pid ...) exited",
/// "rank 3 closed the connection", "rank 3 broke the connection (Connection reset by peer)",
/// "rank 3 exited", "rank 3 (addr) left ...".
bool namesDeadRank(const std::string& message, int rank);

/// Seconds since a steady-clock start.
double secondsSince(double start);
double nowSeconds();

/// Loads (or measures) this host's calibration in the test process, so the ranks it forks inherit
/// it: a test that times a rank's init then times the init, not the host's first probe (which
/// under a sanitizer runs for half a minute). "" or what went wrong.
std::string primeCalibration();

/// A reproducible seed for case `index`, or BRAID_FAULT_SEED when set (to explore).
uint32_t caseSeed(uint32_t index);

}  // namespace braid::testing
