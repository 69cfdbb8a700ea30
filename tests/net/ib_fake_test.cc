// The RDMA transport's logic against the in-process verbs test double (fake_verbs.h): device,
// port and GID choice, the registration cache, and whole communicators (ranks as threads, each
// on its own "host") running the conformance checks over RDMA writes, falling back to TCP without
// devices, and failing with braidRemoteError when a peer disappears. One test runs on real
// hardware where a device exists and skips elsewhere.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <functional>
#include <thread>

#include "braid.h"
#include "braid_build_config.h"
#include "tests/net/fake_verbs.h"
#include "tests/support/collective_check.h"
#include "tests/support/multiprocess.h"
#include "transport/ib/ib_device.h"
#include "transport/ib/ib_proxy.h"
#include "transport/ib/mr_cache.h"

namespace braid::testing {
namespace {

FakePort ibPort(uint16_t lid, bool active = true) {
  FakePort p;
  p.lid = lid;
  p.active = active;
  return p;
}

FakePort rocePort() {
  FakePort p;
  p.ethernet = true;
  p.gids = {ibv_gid{}, linkLocalGid(1), ipv4Gid(10, 0, 0, 1), ipv4Gid(10, 0, 0, 1)};
  p.gidTypes = {IBV_GID_TYPE_ROCE_V1, IBV_GID_TYPE_ROCE_V1, IBV_GID_TYPE_ROCE_V1,
                IBV_GID_TYPE_ROCE_V2};
  return p;
}

std::vector<FakeDevice> mixedFabric() {
  return {FakeDevice{"mlx5_0", {ibPort(5, /*active=*/false)}},
          FakeDevice{"mlx5_1", {ibPort(7, false), ibPort(8)}}, FakeDevice{"roce0", {rocePort()}}};
}

Result<std::string> openedDevice(const VerbsApi* api, const std::string& hca, int gid = -1) {
  ASSIGN_OR_RETURN(std::unique_ptr<IbDevice> dev, IbDevice::open(*api, hca, gid));
  return dev->description();
}

TEST(IbDevice, PicksTheFirstActivePortAllowed) {
  const VerbsApi* api = fakeVerbs(mixedFabric());
  EXPECT_EQ(openedDevice(api, "").value(), "mlx5_1:2 (IB, LID 8)");
  EXPECT_EQ(openedDevice(api, "roce").value(), "roce0:1 (RoCE, GID 3)");
  EXPECT_EQ(openedDevice(api, "^mlx5").value(), "roce0:1 (RoCE, GID 3)");
  EXPECT_EQ(openedDevice(api, "roce0:1", 2).value(), "roce0:1 (RoCE, GID 2)");
  Result<std::string> none = openedDevice(api, "mlx5_0,mlx5_1:1");
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("mlx5_0:1 down"), std::string::npos)
      << none.status().message();
  EXPECT_FALSE(openedDevice(api, "=mlx5").ok());
  EXPECT_FALSE(openedDevice(api, "mlx5_1:x").ok());
  EXPECT_EQ(fakeStats().contexts, 0) << "every opened device was closed";
  EXPECT_EQ(fakeStats().pds, 0);
  EXPECT_FALSE(openedDevice(fakeVerbs({}), "").ok());
}

TEST(IbDevice, GidChoicePrefersRoceV2WithAnIpv4Address) {
  std::vector<GidCandidate> table(4);
  for (int i = 0; i < 4; ++i) table[i].index = i;
  table[1].gid = linkLocalGid(1);
  table[2].gid = ipv4Gid(10, 0, 0, 1);
  table[3].gid = linkLocalGid(2);
  EXPECT_EQ(chooseGid(table), 2) << "types unknown: the IPv4-mapped GID";
  table[3].type = IBV_GID_TYPE_ROCE_V2;
  EXPECT_EQ(chooseGid(table), 3) << "RoCE v2 beats an IPv4 GID of unknown type";
  table[2].type = IBV_GID_TYPE_ROCE_V2;
  EXPECT_EQ(chooseGid(table), 2);
  EXPECT_EQ(chooseGid({GidCandidate{}}), -1);
}

TEST(MrCache, ReusesCoveringRegionsAndEvictsUnusedOnes) {
  const VerbsApi* api = fakeVerbs({FakeDevice{"mlx5_0", {ibPort(1)}}});
  std::unique_ptr<IbDevice> dev = IbDevice::open(*api, "", -1).value();
  std::vector<char> big(1 << 20);
  {
    MrCache cache(*api, dev->pd(), /*maxEntries=*/2);
    ibv_mr* whole = cache.acquire(big.data(), big.size()).value();
    ibv_mr* part = cache.acquire(big.data() + 4096, 100).value();
    EXPECT_EQ(whole, part);
    EXPECT_EQ(cache.hits(), 1u);
    EXPECT_EQ(cache.misses(), 1u);
    cache.release(part);
    cache.release(whole);
    std::vector<char> a(8192), b(8192);
    ibv_mr* ma = cache.acquire(a.data(), a.size()).value();
    ibv_mr* mb = cache.acquire(b.data(), b.size()).value();
    EXPECT_NE(ma, mb);
    // Three regions, at most two kept: the unused, least recently used one (big) went.
    EXPECT_EQ(cache.entries(), 2u);
    EXPECT_EQ(fakeStats().mrs, 2);
    Result<ibv_mr*> gpu = cache.acquireDmabuf(3, 0, 4096, 0);
    ASSERT_FALSE(gpu.ok());
    // Without CUDA the build says so; with it, the fake library lacks ibv_reg_dmabuf_mr.
    const char* reason = BRAID_HAVE_CUDA ? "ibv_reg_dmabuf_mr" : "no CUDA support";
    EXPECT_NE(gpu.status().message().find(reason), std::string::npos) << gpu.status().message();
  }
  EXPECT_EQ(fakeStats().mrs, 0) << "the cache deregisters everything";
}

// ---- Whole communicators over the fake fabric --------------------------------------------------

/// Runs body on ranks as threads; rank r sits on host hostOf[r] and gets settings, its host id
/// and ownSettings(r).
std::vector<std::string> runThreads(
    const std::vector<int>& hostOf, const std::vector<std::string>& settings,
    const std::function<std::string(int, int, braidComm_t&)>& body,
    const std::function<std::vector<std::string>(int)>& ownSettings = {}) {
  const int n = static_cast<int>(hostOf.size());
  std::vector<std::string> out(n);
  braidUniqueId id{};
  if (braidGetUniqueId(&id) != braidSuccess) return std::vector<std::string>(n, "no unique id");
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      Settings config;
      for (const std::string& s : settings) config.add(s);
      if (ownSettings) {
        for (const std::string& s : ownSettings(r)) config.add(s);
      }
      config.add("BRAID_HOSTID=fake-host-" + std::to_string(hostOf[r]));
      config.add("BRAID_TIMEOUT=60");
      braidComm_t comm = nullptr;
      const braidResult_t rc = braidCommInitRankConfig(&comm, n, id, r, config.config());
      if (rc != braidSuccess) {
        out[r] =
            std::string("init: ") + braidGetErrorString(rc) + ": " + braidGetLastError(nullptr);
        return;
      }
      out[r] = body(r, n, comm);
      if (comm != nullptr) braidCommDestroy(comm);
    });
  }
  for (std::thread& t : threads) t.join();
  return out;
}

void expectAllEmpty(const std::vector<std::string>& errors) {
  for (size_t r = 0; r < errors.size(); ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
}

std::string runCases(braidComm_t comm, int rank, int n, const std::vector<CollCase>& cases) {
  for (const CollCase& c : cases) {
    std::string e = runAndCheck(comm, rank, n, c);
    if (!e.empty()) return e;
  }
  return "";
}

class FakeFabricComm : public ::testing::Test {
 protected:
  void TearDown() override { setVerbsApiForTesting(nullptr); }
};

TEST_F(FakeFabricComm, CollectivesRunOverRdmaWrites) {
  setVerbsApiForTesting(fakeVerbs({FakeDevice{"mlx5_0", {ibPort(3)}}}));
  // Hosts of 2, 1 and 1 ranks: shm inside host 0, RDMA between hosts.
  const std::vector<int> hosts = {0, 0, 1, 2};
  const std::vector<CollCase> cases = conformanceCases(4, {0, 1, 273}, {65537});
  expectAllEmpty(
      runThreads(hosts, {"BRAID_NSLOTS=2", "BRAID_CHUNK_BYTES=64K"},
                 [&](int r, int n, braidComm_t comm) { return runCases(comm, r, n, cases); }));
  const FakeStats s = fakeStats();
  EXPECT_GT(s.writesWithImm, 0u);
  EXPECT_GT(s.bytes, 0u);
  EXPECT_EQ(s.failedWrites, 0u) << s.lastError;
  // Host 0's two ranks link with hosts 1 and 2, and hosts 1 and 2 with each other: 5 pairs.
  EXPECT_EQ(s.qpsEverConnected, 2 * 5);
  EXPECT_EQ(s.qps, 0) << "queue pairs leaked";
  EXPECT_EQ(s.mrs, 0) << "memory regions leaked";
  EXPECT_EQ(s.cqs, 0);
  EXPECT_EQ(s.channels, 0);
  EXPECT_EQ(s.pds, 0);
  EXPECT_EQ(s.contexts, 0);
}

TEST_F(FakeFabricComm, HierarchicalAllReduceOverRoce) {
  setVerbsApiForTesting(fakeVerbs({FakeDevice{"roce0", {rocePort()}}}));
  const std::vector<int> hosts = {0, 1, 0, 1, 1};
  std::vector<CollCase> cases = conformanceCases(5, {1, 273}, {(1u << 20) + 3});
  std::erase_if(cases, [](const CollCase& c) { return c.coll != TestColl::kAllReduce; });
  expectAllEmpty(
      runThreads(hosts, {"BRAID_ALGO=hier", "BRAID_NCHANNELS=2"},
                 [&](int r, int n, braidComm_t comm) { return runCases(comm, r, n, cases); }));
  EXPECT_GT(fakeStats().writesWithImm, 0u);
  EXPECT_EQ(fakeStats().failedWrites, 0u) << fakeStats().lastError;
}

TEST_F(FakeFabricComm, RanksOnDifferentDevicesAddressEachOtherByLid) {
  setVerbsApiForTesting(
      fakeVerbs({FakeDevice{"hca_a", {ibPort(11)}}, FakeDevice{"hca_b", {ibPort(12)}}}));
  const std::vector<CollCase> cases = conformanceCases(2, {273}, {65537});
  const int n = 2;
  std::vector<std::string> out(n);
  braidUniqueId id{};
  ASSERT_EQ(braidGetUniqueId(&id), braidSuccess);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      Settings config{"BRAID_IB_HCA=" + std::string(r == 0 ? "hca_a" : "hca_b"),
                      "BRAID_HOSTID=lid-host-" + std::to_string(r), "BRAID_TIMEOUT=60"};
      braidComm_t comm = nullptr;
      if (braidCommInitRankConfig(&comm, n, id, r, config.config()) != braidSuccess) {
        out[r] = braidGetLastError(nullptr);
        return;
      }
      out[r] = runCases(comm, r, n, cases);
      braidCommDestroy(comm);
    });
  }
  for (std::thread& t : threads) t.join();
  expectAllEmpty(out);
  EXPECT_GT(fakeStats().writes, 0u);
  EXPECT_EQ(fakeStats().failedWrites, 0u) << fakeStats().lastError;
}

TEST_F(FakeFabricComm, WithoutDevicesTcpCarriesTheTraffic) {
  setVerbsApiForTesting(fakeVerbs({}));
  const std::vector<CollCase> cases = conformanceCases(3, {273}, {});
  expectAllEmpty(runThreads(
      {0, 1, 2}, {}, [&](int r, int n, braidComm_t comm) { return runCases(comm, r, n, cases); }));
  EXPECT_EQ(fakeStats().qpsEverConnected, 0);
}

TEST_F(FakeFabricComm, ExcludingIbKeepsItsHandsOffTheDevices) {
  setVerbsApiForTesting(fakeVerbs({FakeDevice{"mlx5_0", {ibPort(3)}}}));
  const std::vector<CollCase> cases = conformanceCases(2, {273}, {});
  expectAllEmpty(runThreads({0, 1}, {"BRAID_TRANSPORT=^ib"}, [&](int r, int n, braidComm_t comm) {
    return runCases(comm, r, n, cases);
  }));
  EXPECT_EQ(fakeStats().qpsEverConnected, 0);
  EXPECT_EQ(fakeStats().writes, 0u);
}

// A rank that keeps off RDMA reaches the others over TCP while they reach each other over RDMA:
// both network transports agree on their pairs in one exchange, and both ends of each pair alike.
TEST_F(FakeFabricComm, RanksWithoutRdmaReachTheOthersOverTcp) {
  setVerbsApiForTesting(fakeVerbs({FakeDevice{"mlx5_0", {ibPort(3)}}}));
  const std::vector<CollCase> cases = conformanceCases(3, {273}, {});
  expectAllEmpty(runThreads(
      {0, 1, 2}, {}, [&](int r, int n, braidComm_t comm) { return runCases(comm, r, n, cases); },
      [](int r) {
        return r == 2 ? std::vector<std::string>{"BRAID_TRANSPORT=^ib"}
                      : std::vector<std::string>{};
      }));
  // The ring of three uses every pair; only ranks 0 and 1 have a queue pair.
  EXPECT_EQ(fakeStats().qpsEverConnected, 2);
  EXPECT_GT(fakeStats().writes, 0u);
}

TEST_F(FakeFabricComm, PeerThatDisappearsFailsTheOthersWithRemoteError) {
  setVerbsApiForTesting(fakeVerbs({FakeDevice{"mlx5_0", {ibPort(3)}}}));
  std::atomic<int> ready{0};
  std::atomic<int> finished{0};
  expectAllEmpty(runThreads({0, 1, 2}, {}, [&](int r, int, braidComm_t& comm) -> std::string {
    std::vector<float> data(1 << 16, 1.0f);
    if (braidAllReduce(data.data(), data.data(), data.size(), braidFloat32, braidSum, comm,
                       nullptr) != braidSuccess) {
      return std::string("first allreduce: ") + braidGetLastError(comm);
    }
    finished.fetch_add(1);
    if (r == 2) {
      // Gone without flushing or saying goodbye; its queue pairs are destroyed. (It waits for
      // the others' first call: an abort drops whatever its proxy had not yet written.)
      while (finished.load() < 3) std::this_thread::yield();
      braidCommAbort(comm);
      comm = nullptr;
      ready.fetch_add(1);
      return "";
    }
    while (ready.load() == 0) std::this_thread::yield();
    const braidResult_t rc = braidAllReduce(data.data(), data.data(), data.size(), braidFloat32,
                                            braidSum, comm, nullptr);
    const std::string why = braidGetLastError(comm);
    if (rc != braidRemoteError || why.find("rank 2") == std::string::npos) {
      return std::string("expected braidRemoteError naming rank 2, got ") +
             braidGetErrorString(rc) + ": " + why;
    }
    return "";
  }));
}

// ---- Queue pairs on first use -------------------------------------------------------------------

// Four ranks, each on its own host, so every pair may use RDMA; only ranks 1 and 3 talk. (The call
// check links each rank with its ring successor at init: off here, so that only the plans count.)
TEST_F(FakeFabricComm, SendRecvConnectsOnlyThePairThatTalks) {
  setVerbsApiForTesting(fakeVerbs({FakeDevice{"mlx5_0", {ibPort(3)}}}));
  std::atomic<int> sent{0};
  FakeStats during;
  expectAllEmpty(runThreads(
      {0, 1, 2, 3}, {"BRAID_CALL_CHECK=0"}, [&](int r, int, braidComm_t comm) -> std::string {
        std::vector<float> data(4096, r == 1 ? 2.5f : 0.0f);
        braidResult_t rc = braidSuccess;
        if (r == 1) rc = braidSend(data.data(), data.size(), braidFloat32, 3, comm, nullptr);
        if (r == 3) rc = braidRecv(data.data(), data.size(), braidFloat32, 1, comm, nullptr);
        if (rc != braidSuccess) return std::string("send/recv: ") + braidGetLastError(comm);
        if (r == 3 && (data.front() != 2.5f || data.back() != 2.5f)) return "wrong data received";
        // Everyone is still up when rank 0 counts the fabric's queue pairs.
        sent.fetch_add(1);
        while (sent.load() < 4) std::this_thread::yield();
        if (r == 0) during = fakeStats();
        sent.fetch_add(1);
        while (sent.load() < 8) std::this_thread::yield();
        return "";
      }));
  EXPECT_EQ(during.qps, 2) << "one queue pair at each end of the pair 1-3, none for the others";
  EXPECT_EQ(during.qpsEverConnected, 2);
  EXPECT_EQ(during.cqs, 2) << "completion queues come with the queue pairs";
  EXPECT_EQ(during.contexts, 4) << "every rank opened its device (it may need it)";
  EXPECT_GT(during.writesWithImm, 0u);
  const FakeStats after = fakeStats();
  EXPECT_EQ(after.qps, 0) << "queue pairs leaked";
  EXPECT_EQ(after.mrs, 0) << "memory regions leaked";
  EXPECT_EQ(after.cqs, 0);
  EXPECT_EQ(after.failedWrites, 0u) << after.lastError;
}

// A ring all-reduce over five hosts uses each rank's two ring neighbours: five pairs of ten, and
// the call check's links at init are ring pairs too.
TEST_F(FakeFabricComm, RingAllReduceConnectsOnlyRingNeighbours) {
  setVerbsApiForTesting(fakeVerbs({FakeDevice{"mlx5_0", {ibPort(3)}}}));
  const int n = 5;
  std::vector<CollCase> cases = conformanceCases(n, {273}, {65537});
  std::erase_if(cases, [](const CollCase& c) { return c.coll != TestColl::kAllReduce; });
  ASSERT_FALSE(cases.empty());
  expectAllEmpty(
      runThreads({0, 1, 2, 3, 4}, {"BRAID_ALGO=ring", "BRAID_NCHANNELS=2"},
                 [&](int r, int nr, braidComm_t comm) { return runCases(comm, r, nr, cases); }));
  const FakeStats s = fakeStats();
  EXPECT_GT(s.writesWithImm, 0u);
  EXPECT_EQ(s.failedWrites, 0u) << s.lastError;
  EXPECT_EQ(s.qpsEverConnected, 2 * n) << "n ring pairs, not n(n-1)/2";
  EXPECT_EQ(s.qps, 0) << "queue pairs leaked";
  EXPECT_EQ(s.mrs, 0) << "memory regions leaked";
}

// Rank 2 leaves before anyone used it: rank 0's receive from it and rank 1's send to it fail,
// naming it, instead of waiting for a queue pair that never comes.
TEST_F(FakeFabricComm, PeerGoneBeforeFirstUseFailsTheRankThatNeedsIt) {
  setVerbsApiForTesting(fakeVerbs({FakeDevice{"mlx5_0", {ibPort(3)}}}));
  std::atomic<int> gone{0};
  expectAllEmpty(runThreads(
      {0, 1, 2}, {"BRAID_CALL_CHECK=0"}, [&](int r, int, braidComm_t& comm) -> std::string {
        if (r == 2) {
          braidCommAbort(comm);
          comm = nullptr;
          gone.store(1);
          return "";
        }
        while (gone.load() == 0) std::this_thread::yield();
        std::vector<float> data(1024, 1.0f);
        const braidResult_t rc =
            r == 0 ? braidRecv(data.data(), data.size(), braidFloat32, 2, comm, nullptr)
                   : braidSend(data.data(), data.size(), braidFloat32, 2, comm, nullptr);
        const std::string why = braidGetLastError(comm);
        if (rc != braidRemoteError || why.find("rank 2") == std::string::npos) {
          return std::string("expected braidRemoteError naming rank 2, got ") +
                 braidGetErrorString(rc) + ": " + why;
        }
        return "";
      }));
  EXPECT_EQ(fakeStats().qpsEverConnected, 0);
  EXPECT_EQ(fakeStats().qps, 0) << "queue pairs leaked";
}

TEST(QpRetryLimits, FitThePeerTimeout) {
  // What a write to a silent peer waits before its completion fails: the first try and
  // retryCount retries of 4.096 us x 2^timeout each.
  auto failsAfter = [](const QpRetryLimits& l) {
    return (l.retryCount + 1) * 4.096e-6 * std::ldexp(1.0, l.timeout);
  };
  EXPECT_EQ(qpRetryLimits(0).timeout, 0) << "0: wait forever";
  for (double seconds : {5.0, 20.0, 30.0, 120.0}) {
    const QpRetryLimits l = qpRetryLimits(seconds);
    EXPECT_EQ(l.retryCount, 7);
    EXPECT_LE(failsAfter(l), seconds) << seconds;
    EXPECT_GT(failsAfter(l), seconds / 2) << seconds << ": the longest wait that fits";
  }
  // Below a second the wait stays at 67 ms a try: shorter ones trip over congestion.
  EXPECT_EQ(qpRetryLimits(0.1).timeout, 14);
}

TEST_F(FakeFabricComm, QueuePairsTakeTheirRetryLimitsFromThePeerTimeout) {
  setVerbsApiForTesting(fakeVerbs({FakeDevice{"mlx5_0", {ibPort(3)}}}));
  const std::vector<CollCase> cases = conformanceCases(2, {273}, {});
  expectAllEmpty(runThreads({0, 1}, {"BRAID_PEER_TIMEOUT=5"}, [&](int r, int n, braidComm_t comm) {
    return runCases(comm, r, n, cases);
  }));
  EXPECT_EQ(fakeStats().qpsEverConnected, 2);
  EXPECT_EQ(fakeStats().lastQpTimeout, qpRetryLimits(5).timeout);
  EXPECT_EQ(fakeStats().lastQpRetryCount, 7);
}

TEST_F(FakeFabricComm, PortThatFailsFailsEveryCallThatNeedsIt) {
  // Rank 2 alone on device hca_c: unplugging it cuts rank 2 off without a word from anyone, so
  // only failed writes (and probes) can tell.
  setVerbsApiForTesting(
      fakeVerbs({FakeDevice{"hca_a", {ibPort(1)}}, FakeDevice{"hca_c", {ibPort(2)}}}));
  std::atomic<int> done{0};
  const int n = 3;
  std::vector<std::string> out(n);
  braidUniqueId id{};
  ASSERT_EQ(braidGetUniqueId(&id), braidSuccess);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      Settings config{std::string("BRAID_IB_HCA=") + (r == 2 ? "hca_c" : "hca_a"),
                      "BRAID_HOSTID=port-host-" + std::to_string(r), "BRAID_TIMEOUT=600"};
      braidComm_t comm = nullptr;
      if (braidCommInitRankConfig(&comm, n, id, r, config.config()) != braidSuccess) {
        out[r] = braidGetLastError(nullptr);
        return;
      }
      std::vector<float> data(1 << 16, 1.0f);
      if (braidAllReduce(data.data(), data.data(), data.size(), braidFloat32, braidSum, comm,
                         nullptr) != braidSuccess) {
        out[r] = std::string("first allreduce: ") + braidGetLastError(comm);
      }
      done.fetch_add(1);
      while (done.load() < n) std::this_thread::yield();
      if (r == 0) fakeUnplug("hca_c");
      done.fetch_add(1);
      while (done.load() < 2 * n) std::this_thread::yield();
      const braidResult_t rc = braidAllReduce(data.data(), data.data(), data.size(), braidFloat32,
                                              braidSum, comm, nullptr);
      if (out[r].empty() && rc != braidRemoteError) {
        out[r] = std::string("expected braidRemoteError, got ") + braidGetErrorString(rc) + ": " +
                 braidGetLastError(comm);
      }
      braidCommDestroy(comm);
    });
  }
  for (std::thread& t : threads) t.join();
  expectAllEmpty(out);
  EXPECT_GT(fakeStats().failedWrites, 0u) << "the cut was noticed through failed writes";
  EXPECT_EQ(fakeStats().qps, 0) << "queue pairs leaked";
}

TEST(IbHardware, RealDevicesWhenPresent) {
  Result<const VerbsApi*> api = loadVerbs();
  if (!api.ok()) GTEST_SKIP() << api.status().message();
  Result<std::unique_ptr<IbDevice>> dev = IbDevice::open(*api.value(), "", -1);
  if (!dev.ok()) GTEST_SKIP() << "no usable RDMA port: " << dev.status().message();
  // A real port: two ranks in this process talk over it (loopback through the HCA).
  const std::vector<CollCase> cases = conformanceCases(2, {1, 273}, {65537});
  dev.value().reset();
  expectAllEmpty(
      runThreads({0, 1}, {"BRAID_TRANSPORT=ib,shm"},
                 [&](int r, int n, braidComm_t comm) { return runCases(comm, r, n, cases); }));
}

}  // namespace
}  // namespace braid::testing
