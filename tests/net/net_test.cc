// Multi-host tests on one machine: ranks run as processes inside network namespaces ("hosts")
// joined by a bridge, each host with its own BRAID_HOSTID, so ranks of one host use shared memory
// and ranks of different hosts the socket transport, as across machines. Covered: the conformance
// checks across hosts (uneven hosts, the hierarchical all-reduce, several streams), a rank whose
// process dies mid-collective, braidCommInitFromEnv across hosts, braid-perf under Open MPI's
// mpirun across hosts, a shaped slow link whose measurements are printed (never asserted), and the
// link probe at init: its figures follow the shaping of the link and the tuner's choices follow
// its figures; and the tuner's grid kept by one job and read by the next.
// Skipped when not root or when `ip netns` does not work.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "base/config.h"
#include "braid.h"
#include "tests/net/virtual_hosts.h"
#include "tests/support/collective_check.h"
#include "tests/support/multiprocess.h"

namespace braid::testing {
namespace {

constexpr double kDeadlineSeconds = 120;

/// The hosts every test here uses (made once; namespaces are cheap but setup is not free).
VirtualHosts* hostsOrSkip(std::string* why) {
  static std::unique_ptr<VirtualHosts> hosts;
  static std::string failure;
  static bool tried = false;
  if (!tried) {
    tried = true;
    Result<std::unique_ptr<VirtualHosts>> made = VirtualHosts::create(3);
    if (made.ok()) {
      hosts = std::move(made).value();
    } else {
      failure = made.status().message();
    }
  }
  *why = failure;
  return hosts.get();
}

#define REQUIRE_HOSTS(v)                   \
  std::string skipWhy;                     \
  VirtualHosts* v = hostsOrSkip(&skipWhy); \
  if (v == nullptr) GTEST_SKIP() << "no virtual hosts: " << skipWhy

std::string hostId(int host) { return "BRAID_HOSTID=virtual-host-" + std::to_string(host); }

/// A rendezvous port agreed beforehand, as launchers pick one: below the kernel's ephemeral range
/// (32768 and up by default), so that no connection another process made in the namespace can
/// hold it, and different for each test process and `use`.
int fixedRendezvousPort(int use) { return 20000 + (::getpid() % 6000) * 2 + use; }

/// Runs body on ranks placed on hosts hostOf[rank], each inited with the settings plus its host id.
std::vector<RankOutcome> runOnHosts(
    const VirtualHosts& v, const std::vector<int>& hostOf, const std::vector<std::string>& settings,
    const std::function<std::string(int rank, int nranks, braidComm_t comm)>& body,
    double deadlineSeconds = kDeadlineSeconds) {
  const int n = static_cast<int>(hostOf.size());
  // The rendezvous root listens inside host 0, from a process of its own: this one forks the ranks
  // and must have no other thread then.
  RootProcess root(0, [&]() -> std::string {
    Status entered = v.enter(0);
    return entered.ok() ? "" : entered.message();
  });
  if (!root.ok()) {
    std::vector<RankOutcome> failed(1);
    failed[0].output = root.error();
    return failed;
  }
  return runRanks(
      n, root.id(),
      [&](int rank, const braidUniqueId& commId) -> std::string {
        if (Status s = v.enter(hostOf[rank]); !s.ok()) return s.message();
        Settings config;
        for (const std::string& s : settings) config.add(s);
        config.add(hostId(hostOf[rank]));
        braidComm_t comm = nullptr;
        const braidResult_t rc = braidCommInitRankConfig(&comm, n, commId, rank, config.config());
        if (rc != braidSuccess) {
          return std::string("init: ") + braidGetErrorString(rc) + ": " +
                 braidGetLastError(nullptr);
        }
        std::string error = body(rank, n, comm);
        braidCommDestroy(comm);
        return error;
      },
      deadlineSeconds);
}

std::string runCases(braidComm_t comm, int rank, int n, const std::vector<CollCase>& cases) {
  for (const CollCase& c : cases) {
    std::string error = runAndCheck(comm, rank, n, c);
    if (!error.empty()) return error;
  }
  return "";
}

std::vector<CollCase> onlyAllReduce(std::vector<CollCase> cases) {
  std::erase_if(cases, [](const CollCase& c) { return c.coll != TestColl::kAllReduce; });
  return cases;
}

// Hosts of 2, 1 and 2 ranks: uneven, and ranks of one host not all neighbours in rank order.
const std::vector<int> kUneven = {0, 1, 2, 0, 2};

TEST(NetConformance, EveryCollectiveAcrossUnevenHosts) {
  REQUIRE_HOSTS(v);
  const std::vector<CollCase> cases = conformanceCases(5, {0, 1, 273}, {65537});
  auto outcomes =
      runOnHosts(*v, kUneven, {"BRAID_TIMEOUT=60"},
                 [&](int rank, int n, braidComm_t comm) { return runCases(comm, rank, n, cases); });
  EXPECT_EQ(failures(outcomes), "") << cases.size() << " cases";
}

// Both hierarchical all-reduces: across the three hosts "hier" runs rings, "hier_rhd" halving and
// doubling with one host folded in.
TEST(NetConformance, HierarchicalAllReduceAcrossUnevenHosts) {
  REQUIRE_HOSTS(v);
  const std::vector<CollCase> cases =
      onlyAllReduce(conformanceCases(5, {0, 1, 7, 273}, {65537, (1u << 20) + 3}));
  for (const char* algo : {"BRAID_ALGO=hier", "BRAID_ALGO=hier_rhd"}) {
    auto outcomes = runOnHosts(
        *v, kUneven, {"BRAID_TIMEOUT=60", algo, "BRAID_NCHANNELS=2", "BRAID_CHUNK_BYTES=16K"},
        [&](int rank, int n, braidComm_t comm) { return runCases(comm, rank, n, cases); });
    EXPECT_EQ(failures(outcomes), "") << cases.size() << " cases, " << algo;
  }
}

// 64 ranks on 8 hosts of 8: every collective over the wide types and sum, max and min, at a count
// not divisible by the ranks, in and out of place. Streams open on first use, so each rank links
// only the peers the calls use.
TEST(NetConformance, SixtyFourRanksOnEightHosts) {
  Result<std::unique_ptr<VirtualHosts>> made = VirtualHosts::create(8);
  if (!made.ok()) GTEST_SKIP() << "no virtual hosts: " << made.status().message();
  constexpr int kRanks = 64;
  std::vector<int> hostOf(kRanks);
  for (int r = 0; r < kRanks; ++r) hostOf[r] = r / 8;
  std::vector<CollCase> cases = conformanceCases(kRanks, {273}, {});
  // The checks' inputs are small integers made for a few ranks: 64 of them overflow 8 and 16 bits
  // in a sum, and products and averages of integers: leave those to the 1-8 rank suites.
  std::erase_if(cases, [](const CollCase& c) {
    const bool wide = c.type == braidInt32 || c.type == braidInt64 || c.type == braidFloat32 ||
                      c.type == braidFloat64;
    return !wide || c.op == braidProd || c.op == braidAvg;
  });
  auto outcomes = runOnHosts(
      **made, hostOf, {"BRAID_TIMEOUT=240"},
      [&](int rank, int n, braidComm_t comm) { return runCases(comm, rank, n, cases); },
      /*deadlineSeconds=*/300);
  EXPECT_EQ(failures(outcomes), "") << cases.size() << " cases";
}

TEST(NetConformance, ManyStreamsShallowFifosAcrossTwoHosts) {
  REQUIRE_HOSTS(v);
  const std::vector<CollCase> cases =
      onlyAllReduce(conformanceCases(4, {1, 273}, {(1u << 20) + 3}));
  auto outcomes =
      runOnHosts(*v, {0, 0, 1, 1},
                 {"BRAID_TIMEOUT=60", "BRAID_ALGO=ring", "BRAID_SOCKET_NSTREAMS=4",
                  "BRAID_NSLOTS=2", "BRAID_CHUNK_BYTES=256K"},
                 [&](int rank, int n, braidComm_t comm) { return runCases(comm, rank, n, cases); });
  EXPECT_EQ(failures(outcomes), "") << cases.size() << " cases";
}

TEST(NetFailure, RankThatDiesFailsItsPeersWithRemoteError) {
  REQUIRE_HOSTS(v);
  // BRAID_TIMEOUT is far beyond the deadline: the survivors must fail because the connection
  // closed, not because they timed out.
  auto outcomes = runOnHosts(
      *v, {0, 1, 2}, {"BRAID_TIMEOUT=600"}, [](int rank, int, braidComm_t comm) -> std::string {
        std::vector<float> data(1 << 20, 1.0f);
        braidResult_t rc = braidAllReduce(data.data(), data.data(), data.size(), braidFloat32,
                                          braidSum, comm, nullptr);
        if (rank == 2) {
          if (rc != braidSuccess) return std::string("first allreduce: ") + braidGetLastError(comm);
          _exit(0);  // gone without a word, as a crashed process
        }
        // A survivor still finishing the first call may already hear of the exit (a peer that
        // noticed it tells the others): then that call fails, as it should.
        if (rc == braidSuccess) {
          rc = braidAllReduce(data.data(), data.data(), data.size(), braidFloat32, braidSum, comm,
                              nullptr);
        }
        if (rc != braidRemoteError) {
          return std::string("expected braidRemoteError, got ") + braidGetErrorString(rc) + ": " +
                 braidGetLastError(comm);
        }
        return "";
      });
  EXPECT_EQ(failures(outcomes), "");
}

// ---- A host that vanishes: its link cut at the switch, no reset, no process exit -----------

/// What the ranks of the link-down test share (mapped before the fork).
struct LinkDownBoard {
  std::atomic<int> streaming{0};  ///< ranks that completed their first calls
  std::atomic<double> cutAt{0};   ///< steadySeconds() when the link went down
};

double steadySeconds() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

/// Two hosts of two ranks stream all-reduces; once all are under way rank 0 cuts host 1's link.
/// Every rank, on either side, must fail with braidRemoteError naming a rank of the other host
/// within BRAID_PEER_TIMEOUT + 2 s of the cut; BRAID_TIMEOUT keeps its default (300 s).
void expectLinkDownFailsWithinPeerTimeout(VirtualHosts& v, const std::string& peerTimeout) {
  void* page = mmap(nullptr, sizeof(LinkDownBoard), PROT_READ | PROT_WRITE,
                    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(page, MAP_FAILED);
  auto* board = new (page) LinkDownBoard();
  const std::vector<int> hostOf = {0, 0, 1, 1};
  const double limit =
      (peerTimeout.empty() ? Config::load().value().peerTimeoutSeconds : std::stod(peerTimeout)) +
      2;
  std::vector<std::string> settings;
  if (!peerTimeout.empty()) settings.push_back("BRAID_PEER_TIMEOUT=" + peerTimeout);
  auto outcomes =
      runOnHosts(v, hostOf, settings, [&](int rank, int n, braidComm_t comm) -> std::string {
        std::vector<float> data(1 << 18, 1.0f);
        constexpr int kCallsBeforeCut = 20;
        for (int call = 0;; ++call) {
          if (call == kCallsBeforeCut) board->streaming.fetch_add(1);
          if (rank == 0 && board->cutAt.load() == 0 && board->streaming.load() == n) {
            if (Status cut = v.setLink(1, false); !cut.ok()) return cut.message();
            board->cutAt.store(steadySeconds());
          }
          const braidResult_t rc = braidAllReduce(data.data(), data.data(), data.size(),
                                                  braidFloat32, braidSum, comm, nullptr);
          if (rc == braidSuccess) continue;
          const double seconds = steadySeconds() - board->cutAt.load();
          const std::string why = braidGetLastError(comm);
          const std::string got = std::string(braidGetErrorString(rc)) + " " +
                                  std::to_string(seconds) + " s after the cut: " + why;
          std::fputs(("rank " + std::to_string(rank) + ": " + got + "\n").c_str(), stderr);
          if (board->cutAt.load() == 0) return "failed before the cut: " + got;
          if (rc != braidRemoteError) return "expected braidRemoteError, got " + got;
          if (seconds > limit) return "too slow (limit " + std::to_string(limit) + " s): " + got;
          const bool namesOtherHost = hostOf[rank] == 0
                                          ? why.find("rank 2") != std::string::npos ||
                                                why.find("rank 3") != std::string::npos
                                          : why.find("rank 0") != std::string::npos ||
                                                why.find("rank 1") != std::string::npos;
          if (!namesOtherHost) return "the message names no rank of the other host: " + got;
          return "";
        }
      });
  EXPECT_TRUE(v.setLink(1, true).ok());
  EXPECT_EQ(failures(outcomes), "");
  munmap(page, sizeof(LinkDownBoard));
}

TEST(NetFailure, LinkDownFailsBothSidesWithinTheDefaultPeerTimeout) {
  REQUIRE_HOSTS(v);
  expectLinkDownFailsWithinPeerTimeout(*v, "");
}

TEST(NetFailure, LinkDownFailsBothSidesWithinAShortPeerTimeout) {
  REQUIRE_HOSTS(v);
  expectLinkDownFailsWithinPeerTimeout(*v, "3");
}

TEST(NetLaunch, InitFromEnvAcrossHosts) {
  REQUIRE_HOSTS(v);
  const std::vector<int> hostOf = {0, 1, 1, 2};
  const int n = static_cast<int>(hostOf.size());
  const std::string addr = v->address(0) + ":" + std::to_string(fixedRendezvousPort(0));
  const std::vector<CollCase> cases = onlyAllReduce(conformanceCases(n, {1, 273}, {65537}));
  // The id handed over by the harness is ignored: ranks agree on the rendezvous by themselves.
  auto outcomes = runRanks(
      n,
      [&](int rank, const braidUniqueId&) -> std::string {
        if (Status s = v->enter(hostOf[rank]); !s.ok()) return s.message();
        // A forked single-threaded child: its environment is its own.
        setenv("BRAID_RANK", std::to_string(rank).c_str(), 1);
        setenv("BRAID_WORLD_SIZE", std::to_string(n).c_str(), 1);
        setenv("BRAID_ADDR", addr.c_str(), 1);
        setenv("BRAID_SECRET", "net-test-secret", 1);
        setenv("BRAID_HOSTID", ("virtual-host-" + std::to_string(hostOf[rank])).c_str(), 1);
        setenv("BRAID_TIMEOUT", "60", 1);
        braidComm_t comm = nullptr;
        const braidResult_t rc = braidCommInitFromEnv(&comm);
        if (rc != braidSuccess) {
          return std::string("braidCommInitFromEnv: ") + braidGetErrorString(rc) + ": " +
                 braidGetLastError(nullptr);
        }
        int got = -1;
        std::string error;
        if (braidCommUserRank(comm, &got) != braidSuccess || got != rank) error = "wrong rank";
        if (error.empty()) error = runCases(comm, rank, n, cases);
        braidCommDestroy(comm);
        return error;
      },
      kDeadlineSeconds);
  EXPECT_EQ(failures(outcomes), "");
}

// ---- One host, no namespaces needed ----------------------------------------------------------

TEST(NetLoopback, SocketTransportForcedInsideOneHost) {
  const std::vector<CollCase> cases = conformanceCases(3, {0, 1, 273}, {65537});
  auto outcomes = runRanks(
      3,
      [&](int rank, const braidUniqueId& id) -> std::string {
        Settings config{"BRAID_TRANSPORT=socket", "BRAID_TIMEOUT=60", "BRAID_SOCKET_IFNAME=lo"};
        braidComm_t comm = nullptr;
        if (braidCommInitRankConfig(&comm, 3, id, rank, config.config()) != braidSuccess) {
          return std::string("init: ") + braidGetLastError(nullptr);
        }
        std::string error = runCases(comm, rank, 3, cases);
        braidCommDestroy(comm);
        return error;
      },
      kDeadlineSeconds);
  EXPECT_EQ(failures(outcomes), "");
}

TEST(NetLoopback, TransportTypoIsAnInitErrorNamingTheVariable) {
  auto outcomes = runRanks(
      2,
      [](int rank, const braidUniqueId& id) -> std::string {
        Settings config{"BRAID_TRANSPORT=shm,sockets", "BRAID_TIMEOUT=20"};
        braidComm_t comm = nullptr;
        const braidResult_t rc = braidCommInitRankConfig(&comm, 2, id, rank, config.config());
        if (rc == braidSuccess) {
          braidCommDestroy(comm);
          return "a misspelt BRAID_TRANSPORT was accepted";
        }
        const std::string why = braidGetLastError(nullptr);
        if (rc != braidInvalidArgument || why.find("BRAID_TRANSPORT") == std::string::npos ||
            why.find("sockets") == std::string::npos) {
          return std::string(braidGetErrorString(rc)) + ": " + why;
        }
        return "";
      },
      kDeadlineSeconds);
  EXPECT_EQ(failures(outcomes), "");
}

/// braid-perf, as meson passes it; empty when unknown.
std::string braidPerf() {
  const char* p = std::getenv("BRAID_PERF");
  return p != nullptr ? p : "";
}

/// An mpirun command line running braid-perf `args` with ranksPerHost[h] ranks inside host h.
std::string mpirunLine(const VirtualHosts& v, const std::vector<int>& ranksPerHost,
                       const std::string& args, const std::string& extraEnv) {
  const std::string addr = v.address(0) + ":" + std::to_string(fixedRendezvousPort(1));
  // Per context: mpirun's -x reaches only the first context of an MPMD line.
  const std::string env =
      "BRAID_ADDR=" + addr + " BRAID_SECRET=mpirun-net-test BRAID_TIMEOUT=60 " + extraEnv;
  std::string line = "timeout 150 mpirun --allow-run-as-root --oversubscribe";
  for (size_t h = 0; h < ranksPerHost.size(); ++h) {
    line += std::string(h ? " :" : "") + " -np " + std::to_string(ranksPerHost[h]) +
            " ip netns exec " + v.name(static_cast<int>(h)) + " env " + env +
            " BRAID_HOSTID=virtual-host-" + std::to_string(h) + " " + braidPerf() + " " + args;
  }
  return line;
}

bool haveMpirun() { return runCommand("command -v mpirun") == 0; }

TEST(NetLaunch, BraidPerfUnderMpirunAcrossHosts) {
  REQUIRE_HOSTS(v);
  if (braidPerf().empty() || !haveMpirun()) GTEST_SKIP() << "needs mpirun and BRAID_PERF";
  std::string out;
  const std::string line =
      mpirunLine(*v, {2, 1, 1}, "allreduce -b 8 -e 4M -f 16 -n 3 -w 1 -c 1", "");
  const int rc = runCommand(line, &out);
  EXPECT_EQ(rc, 0) << line << "\n" << out;
  EXPECT_NE(out.find("Out of bounds values : 0 OK"), std::string::npos) << out;
  std::cout << out;
}

TEST(NetSlowLink, AlgorithmsOverAShapedLink) {
  REQUIRE_HOSTS(v);
  if (braidPerf().empty() || !haveMpirun()) GTEST_SKIP() << "needs mpirun and BRAID_PERF";
  // Host 1's link is slow; hosts 0 and 1 hold two ranks each.
  Result<std::string> qdisc = v->shape(1, "400mbit", 2);
  ASSERT_TRUE(qdisc.ok()) << qdisc.status().message();
  std::string out;
  const std::string line =
      mpirunLine(*v, {2, 2}, "allreduce -b 64K -e 4M -f 8 -n 3 -w 1 -c 1 --algo all", "");
  const int rc = runCommand(line, &out);
  v->unshape(1);
  EXPECT_EQ(rc, 0) << line << "\n" << out;
  EXPECT_NE(out.find("Out of bounds values : 0 OK"), std::string::npos) << out;
  // For the record (the tuner's business, not an assertion): busbw per algorithm over the link.
  std::cout << "shaped with " << qdisc.value() << " at 400mbit, 2 ms where netem exists:\n" << out;
}

/// What rank 0 logged at init about the link and the tuner it built.
struct TunerLog {
  double latencyUs = -1;
  double gbps = -1;
  double probeMs = -1;
  std::string probeLine;
  /// (collective, bytes per rank) -> algorithm, from the tuner table (powers of two).
  std::map<std::pair<std::string, uint64_t>, std::string> choices;
  std::string text;
};

TunerLog parseTunerLog(const std::string& text) {
  TunerLog log;
  log.text = text;
  static const std::regex kProbe(
      R"(network link ([0-9.]+) us, ([0-9.]+) GB/s measured by the link probe)"
      R"(.*; ([0-9.]+) ms in all)");
  // A tuner table row: "allreduce     2K-8KB       rd       chunk 32K ...".
  static const std::regex kRow(
      R"(\b([a-z_]+)\s+([0-9]+[KMG]?)-([0-9]+[KMG]?)B\s+([a-z_]+)\s+chunk)");
  std::istringstream lines(text);
  bool inTable = false;
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (std::regex_search(line, m, kProbe)) {
      log.probeLine = line;
      log.latencyUs = std::stod(m[1]);
      log.gbps = std::stod(m[2]);
      log.probeMs = std::stod(m[3]);
    }
    if (line.find("tuner table for") != std::string::npos) inTable = true;
    if (!inTable || !std::regex_search(line, m, kRow)) continue;
    Result<uint64_t> lo = parseByteSize(m[2].str());
    Result<uint64_t> hi = parseByteSize(m[3].str());
    if (!lo.ok() || !hi.ok()) continue;
    for (uint64_t bytes = lo.value(); bytes <= hi.value() && bytes != 0; bytes *= 2) {
      log.choices[{m[1].str(), bytes}] = m[4].str();
    }
  }
  return log;
}

/// Inits two ranks on each of hosts 0 and 1 at INFO for NET and TUNE, logging to files in dir;
/// returns rank 0's log (the one holding the tuner table), or an error text in `why`. The ranks'
/// cache folder is `cache`, without link figures kept from an earlier run: the tuner follows
/// what this run's probe measures.
TunerLog initAndReadTunerLog(const VirtualHosts& v, const std::string& dir,
                             const std::string& cache, std::string* why,
                             const std::vector<std::string>& extra = {}) {
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(cache + "/braid", ec)) {
    if (entry.path().filename().string().rfind("link-", 0) == 0) {
      std::filesystem::remove(entry.path(), ec);
    }
  }
  // The forked ranks inherit it (this process has no other thread to race with).
  const char* before = std::getenv("XDG_CACHE_HOME");
  const std::string saved = before != nullptr ? before : "";
  ::setenv("XDG_CACHE_HOME", cache.c_str(), 1);
  std::vector<std::string> settings = {"BRAID_TIMEOUT=60", "BRAID_DEBUG=INFO",
                                       "BRAID_DEBUG_SUBSYS=NET,TUNE",
                                       "BRAID_DEBUG_FILE=" + dir + "/rank.%p.log"};
  settings.insert(settings.end(), extra.begin(), extra.end());
  auto outcomes =
      runOnHosts(v, {0, 0, 1, 1}, settings, [](int, int, braidComm_t) { return std::string(); });
  if (before != nullptr) {
    ::setenv("XDG_CACHE_HOME", saved.c_str(), 1);
  } else {
    ::unsetenv("XDG_CACHE_HOME");
  }
  *why = failures(outcomes);
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    std::ifstream in(entry.path());
    std::ostringstream text;
    text << in.rdbuf();
    if (text.str().find("tuner table for") != std::string::npos) return parseTunerLog(text.str());
  }
  if (why->empty()) *why = "no rank logged a tuner table in " + dir;
  return {};
}

TEST(NetSlowLink, LinkProbeFollowsTheShapingAndTheTunerFollowsTheProbe) {
  REQUIRE_HOSTS(v);
  const std::string dir = "/tmp/braid-net-probe-" + std::to_string(::getpid());
  v->unshape(1);
  std::string why;
  const TunerLog plain = initAndReadTunerLog(*v, dir + "/plain", dir + "/cache", &why);
  ASSERT_EQ(why, "");
  ASSERT_FALSE(plain.probeLine.empty()) << plain.text;

  Result<std::string> qdisc = v->shape(1, "400mbit", 2);
  ASSERT_TRUE(qdisc.ok()) << qdisc.status().message();
  const TunerLog slow = initAndReadTunerLog(*v, dir + "/shaped", dir + "/cache", &why);
  v->unshape(1);
  std::filesystem::remove_all(dir);
  ASSERT_EQ(why, "");
  ASSERT_FALSE(slow.probeLine.empty()) << slow.text;

  // 400 mbit/s is 0.05 GB/s: the probe must see a link slower than 0.1 GB/s, and the plain veth
  // link (memory copies through the kernel) well above it.
  EXPECT_LT(slow.gbps, 0.1) << slow.probeLine;
  EXPECT_GT(plain.gbps, 0.1) << plain.probeLine;
  // netem adds 2 ms each way on host 1's link (tbf, without netem, adds no delay).
  if (qdisc.value() == "netem") {
    EXPECT_GT(slow.latencyUs, 1500.0) << slow.probeLine;
  }

  // The tuner built from those figures chooses otherwise for some sizes.
  ASSERT_FALSE(plain.choices.empty()) << plain.text;
  ASSERT_EQ(plain.choices.size(), slow.choices.size()) << plain.text << slow.text;
  std::string changed;
  for (const auto& [key, algo] : plain.choices) {
    auto it = slow.choices.find(key);
    ASSERT_NE(it, slow.choices.end()) << key.first << " " << key.second;
    if (it->second != algo) {
      changed += "  " + key.first + " " + std::to_string(key.second) + " B: " + algo + " -> " +
                 it->second + "\n";
    }
  }
  EXPECT_FALSE(changed.empty()) << "the same choices over both links:\n" << plain.text;
  std::cout << "unshaped: " << plain.latencyUs << " us, " << plain.gbps << " GB/s, probe "
            << plain.probeMs << " ms\nshaped (" << qdisc.value()
            << " 400mbit, 2 ms): " << slow.latencyUs << " us, " << slow.gbps << " GB/s, probe "
            << slow.probeMs << " ms\nchoices that changed:\n"
            << changed;
}

// The grid the ranks of two hosts costed is kept by each host's first rank; the next job on those
// hosts, with the same model inputs (the probe off, so the network's figures repeat), reads it.
TEST(NetSlowLink, TheNextJobReadsTheTunersGrid) {
  REQUIRE_HOSTS(v);
  v->unshape(1);
  const std::string dir = "/tmp/braid-net-grid-" + std::to_string(::getpid());
  const std::string cache = dir + "/cache";
  std::string why;
  const TunerLog first =
      initAndReadTunerLog(*v, dir + "/first", cache, &why, {"BRAID_NET_PROBE=0"});
  ASSERT_EQ(why, "");
  ASSERT_FALSE(first.choices.empty()) << first.text;
  EXPECT_NE(first.text.find("(grid costed: kept in " + cache + "/braid/grid-"), std::string::npos)
      << first.text;
  // A calibration measured again (its file taken in a disturbed moment) makes other constants and
  // so another grid, kept in turn; the job after reads that one.
  std::map<std::pair<std::string, uint64_t>, std::string> kept = first.choices;
  bool read = false;
  for (int attempt = 0; attempt < 3 && !read; ++attempt) {
    const TunerLog next =
        initAndReadTunerLog(*v, dir + "/next", cache, &why, {"BRAID_NET_PROBE=0"});
    ASSERT_EQ(why, "");
    if (next.text.find("calibration cache file") == std::string::npos) {
      kept = next.choices;
      continue;
    }
    EXPECT_NE(next.text.find("(grid from a file: read from " + cache + "/braid/grid-"),
              std::string::npos)
        << next.text;
    EXPECT_EQ(next.choices, kept);
    read = true;
  }
  std::filesystem::remove_all(dir);
  EXPECT_TRUE(read) << "the calibration was measured again three times in a row";
}

}  // namespace
}  // namespace braid::testing
