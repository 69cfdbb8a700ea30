// The C API driven from one process: queries, groups, threads, split, abort, timeouts, mismatch
// detection and every invalid-argument case of the contract.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "braid.h"
#include "tests/support/collective_check.h"
#include "tests/support/multiprocess.h"

namespace braid::testing {
namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

/// Creates n ranks in this process with the given settings.
std::vector<braidComm_t> initAll(int n, Settings settings = {}) {
  settings.add("BRAID_TIMEOUT=30");
  std::vector<braidComm_t> comms(n, nullptr);
  EXPECT_EQ(braidCommInitAllConfig(comms.data(), n, nullptr, settings.config()), braidSuccess)
      << braidGetLastError(nullptr);
  return comms;
}

void destroyAll(const std::vector<braidComm_t>& comms) {
  for (braidComm_t c : comms) {
    if (c != nullptr) {
      EXPECT_EQ(braidCommDestroy(c), braidSuccess);
    }
  }
}

/// Runs fn(rank) on one thread per rank.
void onThreads(int n, const std::function<void(int)>& fn) {
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) threads.emplace_back(fn, r);
  for (std::thread& t : threads) t.join();
}

TEST(ApiTest, VersionAndErrorStrings) {
  int version = 0;
  ASSERT_EQ(braidGetVersion(&version), braidSuccess);
  EXPECT_EQ(version, BRAID_VERSION_CODE);
  EXPECT_EQ(braidGetVersion(nullptr), braidInvalidArgument);
  EXPECT_NE(std::string(braidGetLastError(nullptr)).find("version"), std::string::npos);
  std::vector<std::string> seen;
  for (int code = 0; code <= braidTimeout; ++code) {
    std::string text = braidGetErrorString(static_cast<braidResult_t>(code));
    EXPECT_FALSE(text.empty());
    for (const std::string& other : seen) EXPECT_NE(text, other);
    seen.push_back(text);
  }
  EXPECT_EQ(braidDataTypeSize(braidBfloat16), 2u);
  EXPECT_EQ(braidDataTypeSize(static_cast<braidDataType_t>(77)), 0u);
}

TEST(ApiTest, QueriesOnInitAll) {
  for (int n : {1, 2, 3, 4}) {
    std::vector<braidComm_t> comms = initAll(n);
    for (int r = 0; r < n; ++r) {
      int count = 0, rank = -1, device = 0;
      ASSERT_EQ(braidCommCount(comms[r], &count), braidSuccess);
      ASSERT_EQ(braidCommUserRank(comms[r], &rank), braidSuccess);
      ASSERT_EQ(braidCommCuDevice(comms[r], &device), braidSuccess);
      EXPECT_EQ(count, n);
      EXPECT_EQ(rank, r);
      EXPECT_EQ(device, -1);
      braidResult_t async = braidInternalError;
      ASSERT_EQ(braidCommGetAsyncError(comms[r], &async), braidSuccess);
      EXPECT_EQ(async, braidSuccess);
    }
    destroyAll(comms);
  }
}

TEST(ApiTest, GroupDrivesAllRanksFromOneThread) {
  const int n = 4;
  std::vector<braidComm_t> comms = initAll(n);
  // Two collectives per rank in one group, plus a ring of sends: all progress together.
  const size_t count = 100000;
  std::vector<std::vector<float>> data(n, std::vector<float>(count));
  std::vector<std::vector<int>> ring(n, std::vector<int>(count)), got(n, std::vector<int>(count));
  for (int r = 0; r < n; ++r) {
    for (size_t i = 0; i < count; ++i) {
      data[r][i] = float(r + 1);
      ring[r][i] = r * 1000 + int(i % 1000);
    }
  }
  ASSERT_EQ(braidGroupStart(), braidSuccess);
  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(braidAllReduce(data[r].data(), data[r].data(), count, braidFloat32, braidSum,
                             comms[r], nullptr),
              braidSuccess);
    ASSERT_EQ(braidSend(ring[r].data(), count, braidInt32, (r + 1) % n, comms[r], nullptr),
              braidSuccess);
    ASSERT_EQ(braidRecv(got[r].data(), count, braidInt32, (r + n - 1) % n, comms[r], nullptr),
              braidSuccess);
  }
  ASSERT_EQ(braidGroupEnd(), braidSuccess) << braidGetLastError(nullptr);
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(data[r][0], 10.0f);
    EXPECT_EQ(data[r][count - 1], 10.0f);
    const int prev = (r + n - 1) % n;
    EXPECT_EQ(got[r][0], prev * 1000);
    EXPECT_EQ(got[r][count - 1], prev * 1000 + int((count - 1) % 1000));
  }
  destroyAll(comms);
}

TEST(ApiTest, OneThreadPerRankRunsTheConformanceMatrix) {
  const int n = 3;
  std::vector<braidComm_t> comms = initAll(n);
  const std::vector<CollCase> cases = conformanceCases(n, {0, 1, 5, 100}, {});
  std::vector<std::string> errors(n);
  onThreads(n, [&](int r) {
    for (const CollCase& c : cases) {
      errors[r] = runAndCheck(comms[r], r, n, c);
      if (!errors[r].empty()) break;
    }
  });
  for (int r = 0; r < n; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
  destroyAll(comms);
}

TEST(ApiTest, SplitFormsGroupsByColorAndKey) {
  const int n = 5;
  std::vector<braidComm_t> comms = initAll(n);
  std::vector<braidComm_t> children(n, nullptr);
  std::vector<braidResult_t> rcs(n);
  // Colors: even ranks 0, odd ranks 1, rank 4 opts out; keys reverse the order.
  onThreads(n, [&](int r) {
    const int color = r == 4 ? -1 : r % 2;
    rcs[r] = braidCommSplit(comms[r], color, -r, &children[r]);
  });
  for (int r = 0; r < n; ++r) ASSERT_EQ(rcs[r], braidSuccess) << braidGetLastError(comms[r]);
  EXPECT_EQ(children[4], nullptr);
  auto rankOf = [&](int r) {
    int v = -1;
    EXPECT_EQ(braidCommUserRank(children[r], &v), braidSuccess);
    return v;
  };
  auto countOf = [&](int r) {
    int v = -1;
    EXPECT_EQ(braidCommCount(children[r], &v), braidSuccess);
    return v;
  };
  EXPECT_EQ(countOf(0), 2);
  EXPECT_EQ(countOf(1), 2);
  EXPECT_EQ(rankOf(2), 0);  // key -2 sorts before key 0
  EXPECT_EQ(rankOf(0), 1);
  EXPECT_EQ(rankOf(3), 0);
  EXPECT_EQ(rankOf(1), 1);
  // The children work: all-reduce inside each color.
  std::vector<int> values(n);
  onThreads(4, [&](int r) {
    int v = r + 1;
    EXPECT_EQ(braidAllReduce(&v, &values[r], 1, braidInt32, braidSum, children[r], nullptr),
              braidSuccess);
  });
  EXPECT_EQ(values[0], 1 + 3);
  EXPECT_EQ(values[2], 1 + 3);
  EXPECT_EQ(values[1], 2 + 4);
  EXPECT_EQ(values[3], 2 + 4);
  for (int r = 0; r < 4; ++r) EXPECT_EQ(braidCommDestroy(children[r]), braidSuccess);
  destroyAll(comms);
}

TEST(ApiTest, AbortFromAnotherThreadUnblocksACall) {
  std::vector<braidComm_t> comms = initAll(2);
  float x = 1, y = 0;
  braidResult_t rc = braidSuccess;
  const auto start = Clock::now();
  // Rank 1 never joins: rank 0 waits until it is aborted.
  std::thread waiter(
      [&] { rc = braidAllReduce(&x, &y, 1, braidFloat32, braidSum, comms[0], nullptr); });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(braidCommAbort(comms[0]), braidSuccess);
  waiter.join();
  EXPECT_NE(rc, braidSuccess);
  EXPECT_LT(secondsSince(start), 5.0);
  EXPECT_EQ(braidCommDestroy(comms[1]), braidSuccess);
  // The aborted handle is gone.
  int count = 0;
  EXPECT_EQ(braidCommCount(comms[0], &count), braidInvalidUsage);
}

TEST(ApiTest, StuckCollectiveTimesOut) {
  Settings settings{"BRAID_TIMEOUT=1"};
  std::vector<braidComm_t> comms(2, nullptr);
  ASSERT_EQ(braidCommInitAllConfig(comms.data(), 2, nullptr, settings.config()), braidSuccess);
  float x = 1, y = 0;
  const auto start = Clock::now();
  EXPECT_EQ(braidAllReduce(&x, &y, 1, braidFloat32, braidSum, comms[0], nullptr), braidTimeout);
  const double elapsed = secondsSince(start);
  EXPECT_GE(elapsed, 0.9);
  EXPECT_LT(elapsed, 5.0);
  const std::string message = braidGetLastError(comms[0]);
  EXPECT_NE(message.find("allreduce"), std::string::npos) << message;
  EXPECT_NE(message.find("BRAID_TIMEOUT"), std::string::npos) << message;
  braidResult_t async = braidSuccess;
  ASSERT_EQ(braidCommGetAsyncError(comms[0], &async), braidSuccess);
  EXPECT_EQ(async, braidTimeout);
  // Unusable afterwards, with the reason.
  EXPECT_EQ(braidAllReduce(&x, &y, 1, braidFloat32, braidSum, comms[0], nullptr), braidTimeout);
  destroyAll(comms);
}

TEST(ApiTest, ARankThatGivesUpTakesBackWhatItLent) {
  // Ranks as threads lend one another any memory by address. Rank 0 lends its input to rank 1,
  // then times out (rank 1 has not called yet) and unmaps it: rank 1's call must fail rather
  // than read it (it did, and crashed).
  Settings settings{"BRAID_TIMEOUT=1", "BRAID_ALGO=ring", "BRAID_NCHANNELS=1"};
  std::vector<braidComm_t> comms(2, nullptr);
  ASSERT_EQ(braidCommInitAllConfig(comms.data(), 2, nullptr, settings.config()), braidSuccess);
  const size_t count = size_t{1} << 20;  // 4 MiB: lent, not copied
  const size_t bytes = count * sizeof(float);
  void* in = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(in, MAP_FAILED);
  std::vector<float> out(count);
  EXPECT_EQ(braidAllReduce(in, out.data(), count, braidFloat32, braidSum, comms[0], nullptr),
            braidTimeout);
  munmap(in, bytes);
  std::vector<float> theirs(count, 1.0f), theirsOut(count);
  EXPECT_EQ(braidAllReduce(theirs.data(), theirsOut.data(), count, braidFloat32, braidSum,
                           comms[1], nullptr),
            braidRemoteError);
  const std::string message = braidGetLastError(comms[1]);
  EXPECT_NE(message.find("rank 0"), std::string::npos) << message;
  destroyAll(comms);
}

TEST(ApiTest, MismatchedCollectivesFailOnEveryRankWithBothCallsNamed) {
  std::vector<braidComm_t> comms = initAll(2);
  std::vector<float> buf(1000, 1.0f);
  std::vector<float> out(1000);
  std::vector<braidResult_t> rc(2);
  std::vector<std::string> message(2);
  onThreads(2, [&](int r) {
    if (r == 0) {
      rc[r] =
          braidAllReduce(buf.data(), out.data(), 1000, braidFloat32, braidSum, comms[r], nullptr);
    } else {
      std::vector<float> mine(1000, 2.0f);
      rc[r] = braidBroadcast(mine.data(), mine.data(), 1000, braidFloat32, 0, comms[r], nullptr);
    }
    message[r] = braidGetLastError(comms[r]);
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(rc[r], braidInvalidUsage) << message[r];
    EXPECT_NE(message[r].find("allreduce(count=1000"), std::string::npos) << message[r];
    EXPECT_NE(message[r].find("broadcast(count=1000"), std::string::npos) << message[r];
  }
  destroyAll(comms);
}

TEST(ApiTest, SendToSelfNeedsAGroup) {
  std::vector<braidComm_t> comms = initAll(1);
  int x = 7, y = 0;
  EXPECT_EQ(braidSend(&x, 1, braidInt32, 0, comms[0], nullptr), braidInvalidUsage);
  EXPECT_NE(std::string(braidGetLastError(comms[0])).find("itself"), std::string::npos);
  ASSERT_EQ(braidGroupStart(), braidSuccess);
  EXPECT_EQ(braidSend(&x, 1, braidInt32, 0, comms[0], nullptr), braidSuccess);
  EXPECT_EQ(braidRecv(&y, 1, braidInt32, 0, comms[0], nullptr), braidSuccess);
  ASSERT_EQ(braidGroupEnd(), braidSuccess);
  EXPECT_EQ(y, 7);
  destroyAll(comms);
}

TEST(ApiTest, InitFromEnvWithoutALauncherSaysWhatToSet) {
  // The test runner starts no launcher; a stray variable would change the meaning of this test.
  for (const char* v : {"BRAID_RANK", "RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID", "PMI_RANK"}) {
    if (std::getenv(v) != nullptr) GTEST_SKIP() << v << " is set";
  }
  braidComm_t comm = reinterpret_cast<braidComm_t>(0x1);
  EXPECT_EQ(braidCommInitFromEnv(&comm), braidInvalidUsage);
  EXPECT_EQ(comm, nullptr);
  EXPECT_NE(std::string(braidGetLastError(nullptr)).find("BRAID_RANK"), std::string::npos);
}

TEST(ApiTest, MalformedSettingNamesTheVariable) {
  Settings settings{"BRAID_NCHANNELS=many"};
  braidComm_t comm = nullptr;
  EXPECT_EQ(braidCommInitAllConfig(&comm, 1, nullptr, settings.config()), braidInvalidArgument);
  EXPECT_NE(std::string(braidGetLastError(nullptr)).find("BRAID_NCHANNELS"), std::string::npos);
  Settings bogus{"BRAID_ALGO=bogus"};
  EXPECT_EQ(braidCommInitAllConfig(&comm, 1, nullptr, bogus.config()), braidInvalidArgument);
  EXPECT_NE(std::string(braidGetLastError(nullptr)).find("'bogus'"), std::string::npos);
  Settings unfit{"BRAID_ALGO=allreduce:pairwise"};
  EXPECT_EQ(braidCommInitAllConfig(&comm, 1, nullptr, unfit.config()), braidInvalidArgument);
  EXPECT_NE(std::string(braidGetLastError(nullptr)).find("cannot serve allreduce"),
            std::string::npos);
  Settings unknown{"BRAID_NO_SUCH_THING=1"};
  EXPECT_EQ(braidCommInitAllConfig(&comm, 1, nullptr, unknown.config()), braidInvalidArgument);
  EXPECT_NE(std::string(braidGetLastError(nullptr)).find("BRAID_NO_SUCH_THING"), std::string::npos);
}

}  // namespace
}  // namespace braid::testing
