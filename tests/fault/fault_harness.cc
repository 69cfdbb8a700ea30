#include "tests/fault/fault_harness.h"

#include <dirent.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <thread>

#include "algorithms/algorithms.h"
#include "tests/support/sanitizers.h"
#include "topology/host_id.h"
#include "tuner/calibration.h"

namespace braid::testing {
namespace {

// ThreadSanitizer starts a background thread of its own in a forked child some time after the
// fork; counted, it would read as a thread the library leaked.
constexpr bool kCountThreads = !kThreadSanitizer;

int countThreads() {
  int n = 0;
  if (DIR* dir = opendir("/proc/self/task")) {
    while (const dirent* entry = readdir(dir)) n += entry->d_name[0] != '.';
    closedir(dir);
  }
  return n;
}

size_t residentKb() {
  size_t kb = 0;
  if (FILE* f = std::fopen("/proc/self/status", "r")) {
    char line[256];
    while (std::fgets(line, sizeof(line), f) != nullptr) {
      if (std::strncmp(line, "VmRSS:", 6) == 0) kb = std::strtoull(line + 6, nullptr, 10);
    }
    std::fclose(f);
  }
  return kb;
}

// "braid-<pid>-<random>" -> pid, else 0.
int segmentPid(const char* name) {
  int pid = 0;
  char rest[64];
  if (std::sscanf(name, "braid-%d-%63s", &pid, rest) != 2) return 0;
  return pid;
}

}  // namespace

std::string deathName(Death death) {
  switch (death) {
    case Death::kKill: return "sigkill";
    case Death::kExit: return "exit";
    case Death::kCrash: return "crash";
    case Death::kStop: return "stop";
  }
  return "?";
}

void dieNow(Death death) {
  board().diedAt.store(nowSeconds());
  switch (death) {
    case Death::kKill: raise(SIGKILL); break;
    case Death::kExit: _exit(3);
    case Death::kCrash: {
      // No core file: the test machine's disk is not the place for it.
      rlimit none{0, 0};
      setrlimit(RLIMIT_CORE, &none);
      std::abort();
    }
    case Death::kStop:
      board().victimPid.store(getpid());
      for (;;) raise(SIGSTOP);
  }
  _exit(4);
}

void dieAfter(Death death, double seconds) {
  std::thread([death, seconds] {
    timespec ts{static_cast<time_t>(seconds), static_cast<long>((seconds - long(seconds)) * 1e9)};
    nanosleep(&ts, nullptr);
    dieNow(death);
  }).detach();
}

SharedBoard& board() {
  static SharedBoard* shared = [] {
    void* p = mmap(nullptr, sizeof(SharedBoard), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                   -1, 0);
    if (p == MAP_FAILED) std::abort();
    return new (p) SharedBoard();
  }();
  return *shared;
}

void resetBoard() {
  SharedBoard& b = board();
  b.victimPid = 0;
  b.ready = 0;
  b.released = 0;
  b.failed = 0;
  b.diedAt = 0;
  for (std::atomic<int>& pid : b.pids) pid = 0;
  std::memset(b.listener, 0, sizeof(b.listener));
}

ProcessResources snapshotResources() {
  ProcessResources r;
  if (DIR* dir = opendir("/proc/self/fd")) {
    const int own = dirfd(dir);
    while (const dirent* entry = readdir(dir)) {
      if (entry->d_name[0] == '.') continue;
      const int fd = std::atoi(entry->d_name);
      if (fd == own) continue;
      const std::string path = std::string("/proc/self/fd/") + entry->d_name;
      char target[256] = {};
      const ssize_t n = readlink(path.c_str(), target, sizeof(target) - 1);
      r.fds.emplace(fd, n > 0 ? std::string(target, static_cast<size_t>(n)) : "");
    }
    closedir(dir);
  }
  for (const std::string& name : shmEntriesOf({static_cast<int>(getpid())})) r.shm.insert(name);
  r.threads = countThreads();
  r.rssKb = residentKb();
  return r;
}

std::string leaksSince(const ProcessResources& before, double settleSeconds) {
  const double start = nowSeconds();
  for (;;) {
    const ProcessResources now = snapshotResources();
    std::string leaks;
    for (const auto& fd : now.fds) {
      if (before.fds.count(fd) == 0) {
        leaks += " fd " + std::to_string(fd.first) + " -> " + fd.second + ";";
      }
    }
    for (const std::string& name : now.shm) {
      if (before.shm.count(name) == 0) leaks += " /dev/shm/" + name + ";";
    }
    if (kCountThreads && now.threads > before.threads) {
      leaks += " " + std::to_string(now.threads - before.threads) + " more thread(s);";
    }
    if (leaks.empty() || secondsSince(start) > settleSeconds) return leaks;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

std::vector<std::string> shmEntriesOf(const std::vector<int>& pids) {
  std::vector<std::string> found;
  if (DIR* dir = opendir("/dev/shm")) {
    while (const dirent* entry = readdir(dir)) {
      const int pid = segmentPid(entry->d_name);
      for (int p : pids) {
        if (pid != 0 && pid == p) found.emplace_back(entry->d_name);
      }
    }
    closedir(dir);
  }
  return found;
}

bool Checks::expect(bool ok, const std::string& what) {
  if (!ok) text_ += who_ + ": " + what + "\n";
  return ok;
}

CallMaker::CallMaker(braidComm_t comm, int rank, int nranks, size_t count)
    : comm_(comm),
      rank_(rank),
      nranks_(nranks),
      count_(count),
      in_(count * static_cast<size_t>(nranks), 1.0),
      out_(count * static_cast<size_t>(nranks), 0.0) {}

std::string CallMaker::callName(TestColl coll) {
  return coll == TestColl::kSendRecvRing ? "send" : testCollName(coll);
}

std::vector<std::string> CallMaker::callNames(TestColl coll) {
  if (coll == TestColl::kSendRecvRing) return {"send", "recv"};
  return {callName(coll)};
}

Timed CallMaker::call(TestColl coll, int root) {
  CallSpec spec;
  spec.coll = coll;
  spec.count = count_;
  spec.root = root;
  return call(spec);
}

Timed CallMaker::call(const CallSpec& spec) {
  const double start = nowSeconds();
  Timed t;
  void* in = in_.data();
  void* out = out_.data();
  const size_t n = std::min(spec.count, count_);
  switch (spec.coll) {
    case TestColl::kAllReduce:
      t.rc = braidAllReduce(in, out, n, spec.type, spec.op, comm_, nullptr);
      break;
    case TestColl::kBroadcast:
      t.rc = braidBroadcast(in, out, n, spec.type, spec.root, comm_, nullptr);
      break;
    case TestColl::kReduce:
      t.rc = braidReduce(in, out, n, spec.type, spec.op, spec.root, comm_, nullptr);
      break;
    case TestColl::kAllGather: t.rc = braidAllGather(in, out, n, spec.type, comm_, nullptr); break;
    case TestColl::kReduceScatter:
      t.rc = braidReduceScatter(in, out, n, spec.type, spec.op, comm_, nullptr);
      break;
    case TestColl::kAllToAll: t.rc = braidAllToAll(in, out, n, spec.type, comm_, nullptr); break;
    case TestColl::kSendRecvRing: {
      braidGroupStart();
      braidResult_t rs = braidSend(in, n, spec.type, (rank_ + 1) % nranks_, comm_, nullptr);
      braidResult_t rr =
          braidRecv(out, n, spec.type, (rank_ + nranks_ - 1) % nranks_, comm_, nullptr);
      t.rc = braidGroupEnd();
      if (t.rc == braidSuccess) t.rc = rs != braidSuccess ? rs : rr;
      break;
    }
  }
  t.seconds = secondsSince(start);
  if (t.rc != braidSuccess) t.message = braidGetLastError(comm_);
  return t;
}

namespace {

std::string describeSpecAs(const std::string& name, const CallSpec& spec) {
  static const char* const kTypes[] = {"int8",   "uint8", "int32", "uint32", "int64",
                                       "uint64", "half",  "float", "double", "bfloat16"};
  static const char* const kOps[] = {"sum", "prod", "max", "min", "avg"};
  std::string text = name + "(count=" + std::to_string(spec.count) + ", " + kTypes[spec.type];
  if (isReduction(spec.coll)) text += std::string(", ") + kOps[spec.op];
  if (spec.coll == TestColl::kBroadcast || spec.coll == TestColl::kReduce) {
    text += ", root=" + std::to_string(spec.root);
  }
  return text;
}

}  // namespace

std::string describeSpec(const CallSpec& spec) {
  return describeSpecAs(CallMaker::callName(spec.coll), spec);
}

bool describesSpec(const std::string& message, const CallSpec& spec) {
  for (const std::string& name : CallMaker::callNames(spec.coll)) {
    if (message.find(describeSpecAs(name, spec)) != std::string::npos) return true;
  }
  return false;
}

std::vector<CollAlgo> everyCollectiveAndAlgorithm() {
  const std::pair<TestColl, Collective> colls[] = {
      {TestColl::kAllReduce, Collective::kAllReduce},
      {TestColl::kBroadcast, Collective::kBroadcast},
      {TestColl::kReduce, Collective::kReduce},
      {TestColl::kAllGather, Collective::kAllGather},
      {TestColl::kReduceScatter, Collective::kReduceScatter},
      {TestColl::kAllToAll, Collective::kAllToAll},
      {TestColl::kSendRecvRing, Collective::kSend},
  };
  std::vector<CollAlgo> out;
  for (const auto& [test, coll] : colls) {
    for (Algorithm algo : algorithmsFor(coll)) {
      out.push_back({test, std::string(algorithmName(algo))});
    }
  }
  return out;
}

std::string algoSetting(const CollAlgo& ca) {
  // Send and receive always take the pairwise path; BRAID_ALGO does not name them.
  if (ca.coll == TestColl::kSendRecvRing) return "";
  return "BRAID_ALGO=" + testCollName(ca.coll) + ":" + ca.algo;
}

bool namesDeadRank(const std::string& message, int rank) {
  const std::string r = "rank " + std::to_string(rank);
  for (const std::string& form :
       {r + " (pid ", r + " closed", r + " broke", r + " exited", r + " ("}) {
    for (size_t at = message.find(form); at != std::string::npos; at = message.find(form, at + 1)) {
      // "rank 1 (" must not be the start of "rank 1 (pid" of another form: any is fine, but
      // the address form must say the rank left.
      if (form != r + " (") return true;
      const size_t close = message.find(')', at);
      if (close != std::string::npos && message.compare(close, 7, ") left ") == 0) return true;
    }
  }
  return false;
}

double nowSeconds() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

double secondsSince(double start) { return nowSeconds() - start; }

uint32_t caseSeed(uint32_t index) {
  if (const char* s = std::getenv("BRAID_FAULT_SEED")) {
    return static_cast<uint32_t>(std::strtoul(s, nullptr, 0)) * 2654435761u + index;
  }
  return 0x9e3779b9u * (index + 1);
}

std::string primeCalibration() {
  const char* hostId = std::getenv("BRAID_HOSTID");
  Result<CalibrationResult> calibration = hostCalibration(
      defaultCalibrationDir(), hostHash(hostIdentity(hostId != nullptr ? hostId : "")), 0);
  return calibration.ok() ? "" : calibration.status().message();
}

}  // namespace braid::testing
