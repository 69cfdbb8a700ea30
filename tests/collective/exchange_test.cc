// braidGather, braidScatter, braidAllToAllv and braidBarrier: ranks as threads of this process,
// every root, counts 0, 1 and 273, in and out of place, unequal per-peer counts, and bad input.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "braid.h"
#include "tests/support/multiprocess.h"

namespace braid::testing {
namespace {

/// n ranks of one communicator in this process (30 s timeout: a hang fails, not stalls).
std::vector<braidComm_t> initAll(int n) {
  Settings settings{"BRAID_TIMEOUT=30"};
  std::vector<braidComm_t> comms(n, nullptr);
  EXPECT_EQ(braidCommInitAllConfig(comms.data(), n, nullptr, settings.config()), braidSuccess)
      << braidGetLastError(nullptr);
  return comms;
}

void destroyAll(const std::vector<braidComm_t>& comms) {
  for (braidComm_t c : comms) EXPECT_EQ(braidCommDestroy(c), braidSuccess);
}

/// fn(rank) on one thread per rank; returns each rank's result code.
std::vector<braidResult_t> onThreads(int n, const std::function<braidResult_t(int)>& fn) {
  std::vector<braidResult_t> results(n, braidInternalError);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) threads.emplace_back([&, r] { results[r] = fn(r); });
  for (std::thread& t : threads) t.join();
  return results;
}

/// Element i of rank r's block for peer p: distinct for every (r, p, i).
int value(int r, int p, size_t i) { return r * 100000 + p * 1000 + int(i % 1000); }

class RootedTest : public ::testing::TestWithParam<int> {};

TEST_P(RootedTest, GatherAndScatterAtEveryRootInAndOutOfPlace) {
  const int n = GetParam();
  std::vector<braidComm_t> comms = initAll(n);
  for (size_t count : {size_t{0}, size_t{1}, size_t{273}}) {
    for (int root = 0; root < n; ++root) {
      for (bool inPlace : {false, true}) {
        // Gather: rank r's block holds value(r, root, i); root gets them in rank order.
        std::vector<std::vector<int>> send(n), gathered(n, std::vector<int>(n * count, -1));
        for (int r = 0; r < n; ++r) {
          for (size_t i = 0; i < count; ++i) send[r].push_back(value(r, root, i));
        }
        if (inPlace) {
          std::copy(send[root].begin(), send[root].end(), gathered[root].begin() + root * count);
        }
        auto results = onThreads(n, [&](int r) {
          const int* in = inPlace && r == root ? gathered[r].data() + root * count : send[r].data();
          return braidGather(in, r == root ? gathered[r].data() : nullptr, count, braidInt32, root,
                             comms[r], nullptr);
        });
        for (int r = 0; r < n; ++r)
          ASSERT_EQ(results[r], braidSuccess) << braidGetLastError(comms[r]);
        for (int p = 0; p < n; ++p) {
          for (size_t i = 0; i < count; ++i) {
            ASSERT_EQ(gathered[root][p * count + i], value(p, root, i))
                << "gather n=" << n << " root=" << root << " count=" << count;
          }
        }
        // Scatter: root's block p holds value(root, p, i) and lands on rank p.
        std::vector<int> all(n * count);
        for (int p = 0; p < n; ++p) {
          for (size_t i = 0; i < count; ++i) all[p * count + i] = value(root, p, i);
        }
        std::vector<std::vector<int>> got(n, std::vector<int>(count, -1));
        results = onThreads(n, [&](int r) {
          int* out = inPlace && r == root ? all.data() + root * count : got[r].data();
          return braidScatter(r == root ? all.data() : nullptr, out, count, braidInt32, root,
                              comms[r], nullptr);
        });
        for (int r = 0; r < n; ++r)
          ASSERT_EQ(results[r], braidSuccess) << braidGetLastError(comms[r]);
        for (int r = 0; r < n; ++r) {
          const int* out = inPlace && r == root ? all.data() + root * count : got[r].data();
          for (size_t i = 0; i < count; ++i) {
            ASSERT_EQ(out[i], value(root, r, i))
                << "scatter n=" << n << " root=" << root << " count=" << count;
          }
        }
      }
    }
  }
  destroyAll(comms);
}

INSTANTIATE_TEST_SUITE_P(Ranks, RootedTest, ::testing::Values(1, 2, 3, 5),
                         [](const auto& info) { return "n" + std::to_string(info.param); });

class AllToAllvTest : public ::testing::TestWithParam<int> {};

TEST_P(AllToAllvTest, UnequalCountsWithGapsArrive) {
  const int n = GetParam();
  std::vector<braidComm_t> comms = initAll(n);
  // Rank r sends (r + 2p) % 4 * 91 elements to p (zero for some pairs), packed with a gap of 3
  // elements between blocks on both sides.
  auto sendCount = [](int r, int p) { return size_t((r + 2 * p) % 4) * 91; };
  std::vector<std::vector<size_t>> sc(n), sd(n), rc(n), rd(n);
  std::vector<std::vector<double>> send(n), recv(n);
  for (int r = 0; r < n; ++r) {
    size_t so = 0, ro = 0;
    for (int p = 0; p < n; ++p) {
      sc[r].push_back(sendCount(r, p));
      sd[r].push_back(so);
      so += sc[r].back() + 3;
      rc[r].push_back(sendCount(p, r));
      rd[r].push_back(ro);
      ro += rc[r].back() + 3;
    }
    send[r].assign(so, -2.0);
    recv[r].assign(ro, -1.0);
    for (int p = 0; p < n; ++p) {
      for (size_t i = 0; i < sc[r][p]; ++i) send[r][sd[r][p] + i] = value(r, p, i);
    }
  }
  auto results = onThreads(n, [&](int r) {
    return braidAllToAllv(send[r].data(), sc[r].data(), sd[r].data(), recv[r].data(), rc[r].data(),
                          rd[r].data(), braidFloat64, comms[r], nullptr);
  });
  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(results[r], braidSuccess) << braidGetLastError(comms[r]);
    for (int p = 0; p < n; ++p) {
      for (size_t i = 0; i < rc[r][p]; ++i) ASSERT_EQ(recv[r][rd[r][p] + i], value(p, r, i));
      // The gaps are untouched.
      for (size_t i = rc[r][p]; i < rc[r][p] + 3; ++i) ASSERT_EQ(recv[r][rd[r][p] + i], -1.0);
    }
  }
  destroyAll(comms);
}

INSTANTIATE_TEST_SUITE_P(Ranks, AllToAllvTest, ::testing::Values(1, 2, 3, 4),
                         [](const auto& info) { return "n" + std::to_string(info.param); });

TEST(BarrierTest, NoRankLeavesBeforeTheLastArrives) {
  const int n = 3;
  std::vector<braidComm_t> comms = initAll(n);
  std::atomic<bool> lastArrived{false};
  std::vector<char> sawLast(n, 0);  // one byte a rank: vector<bool> packs ranks into shared words
  auto results = onThreads(n, [&](int r) {
    if (r == n - 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      lastArrived = true;
    }
    const braidResult_t rc = braidBarrier(comms[r]);
    sawLast[r] = lastArrived.load() ? 1 : 0;
    return rc;
  });
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(results[r], braidSuccess);
    EXPECT_TRUE(sawLast[r]) << "rank " << r << " left the barrier early";
  }
  destroyAll(comms);
}

TEST(ExchangeBadInputTest, RefusedWithReasons) {
  std::vector<braidComm_t> comms = initAll(2);
  std::vector<int> a(8), b(8);
  auto expectError = [&](braidResult_t rc, braidResult_t want, const std::string& words) {
    EXPECT_EQ(rc, want);
    EXPECT_NE(std::string(braidGetLastError(nullptr)).find(words), std::string::npos)
        << braidGetLastError(nullptr);
  };
  expectError(braidGather(a.data(), b.data(), 1, braidInt32, 2, comms[0], nullptr),
              braidInvalidArgument, "root 2");
  expectError(braidScatter(a.data(), b.data(), 1, braidInt32, -1, comms[0], nullptr),
              braidInvalidArgument, "root -1");
  expectError(braidGather(a.data(), nullptr, 1, braidInt32, 0, comms[0], nullptr),
              braidInvalidArgument, "recvbuff is NULL");
  expectError(braidScatter(nullptr, b.data(), 1, braidInt32, 0, comms[0], nullptr),
              braidInvalidArgument, "sendbuff is NULL");
  expectError(
      braidGather(a.data(), b.data(), 1, static_cast<braidDataType_t>(42), 0, comms[0], nullptr),
      braidInvalidArgument, "datatype 42");
  expectError(braidGather(a.data(), b.data(), SIZE_MAX / 2, braidInt32, 0, comms[0], nullptr),
              braidInvalidArgument, "overflows");
  expectError(braidGather(a.data(), b.data(), 1, braidInt32, 0, nullptr, nullptr),
              braidInvalidArgument, "comm is NULL");
  const size_t counts[2] = {2, 2}, displs[2] = {0, 2}, huge[2] = {SIZE_MAX, 0};
  expectError(braidAllToAllv(a.data(), nullptr, displs, b.data(), counts, displs, braidInt32,
                             comms[0], nullptr),
              braidInvalidArgument, "sendcounts or sdispls is NULL");
  expectError(braidAllToAllv(a.data(), counts, displs, a.data() + 1, counts, displs, braidInt32,
                             comms[0], nullptr),
              braidInvalidArgument, "overlap");
  expectError(braidAllToAllv(a.data(), counts, huge, b.data(), counts, displs, braidInt32, comms[0],
                             nullptr),
              braidInvalidArgument, "overflows");
  ASSERT_EQ(braidGroupStart(), braidSuccess);
  expectError(braidBarrier(comms[0]), braidInvalidUsage, "inside a group");
  ASSERT_EQ(braidGroupEnd(), braidSuccess);
  // Nothing was queued by the refused calls: the communicators still work.
  auto results = onThreads(2, [&](int r) { return braidBarrier(comms[r]); });
  EXPECT_EQ(results, std::vector<braidResult_t>(2, braidSuccess));
  destroyAll(comms);
}

TEST(ExchangeBadInputTest, MismatchedPerPeerCountsReachBothRanks) {
  std::vector<braidComm_t> comms = initAll(2);
  std::vector<int> send(16, 1), recv(16, 0);
  // Rank 0 sends 3 elements to rank 1, which expects 2 from it.
  auto results = onThreads(2, [&](int r) {
    const size_t sc[2] = {1, 3}, rc0[2] = {1, 3}, rc1[2] = {2, 1}, sd[2] = {0, 4};
    const size_t sc1[2] = {3, 1};
    return r == 0 ? braidAllToAllv(send.data(), sc, sd, recv.data(), rc0, sd, braidInt32, comms[0],
                                   nullptr)
                  : braidAllToAllv(send.data() + 8, sc1, sd, recv.data() + 8, rc1, sd, braidInt32,
                                   comms[1], nullptr);
  });
  // A rank whose own part completed (rank 0's sends fit in the FIFO) learns the verdict as an
  // asynchronous error; the receiver fails in the call.
  for (int r = 0; r < 2; ++r) {
    braidResult_t seen = results[r];
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (seen == braidSuccess && std::chrono::steady_clock::now() < deadline) {
      ASSERT_EQ(braidCommGetAsyncError(comms[r], &seen), braidSuccess);
      if (seen == braidSuccess || seen == braidInProgress) {
        seen = braidSuccess;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    }
    EXPECT_EQ(seen, braidInvalidUsage) << "rank " << r << ": " << braidGetLastError(comms[r]);
    // Each end's call as that rank made it: rank 1's is a receive from rank 0.
    const std::string error = braidGetLastError(comms[r]);
    EXPECT_NE(error.find("rank 0 called send(count=3, int32, peer=1)"), std::string::npos) << error;
    EXPECT_NE(error.find("rank 1 called recv(count=2, int32, peer=0)"), std::string::npos) << error;
    EXPECT_NE(error.find("rank 1/2 in recv(count=2, int32, peer=0)"), std::string::npos) << error;
    EXPECT_EQ(error.find("send(count=2"), std::string::npos) << error;
  }
  for (braidComm_t c : comms) EXPECT_EQ(braidCommAbort(c), braidSuccess);
}

}  // namespace
}  // namespace braid::testing
