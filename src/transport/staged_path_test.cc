// The device path's staged FIFOs with host threads standing in for the kernel
// (kernels/host_lane_runner.h: the kernel's protocol code over host memory) and the real socket
// proxy between ranks as threads over loopback: every collective x algorithm exact at n = 2, 3, 4,
// one call after another through the same FIFOs as a device's launches go, the proxy armed per
// call as the device path arms it; large slots split over both streams; a call keeps every slot
// of its FIFO in flight; a proxy armed for slots
// not yet posted keeps polling, and sleeps again once they have gone; a peer that goes away is
// reported and the lanes waiting on it stop at the abort that follows.
#include "transport/staged_path.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "base/config.h"
#include "base/log.h"
#include "bootstrap/bootstrap_threads.h"
#include "kernels/host_lane_runner.h"
#include "kernels/host_memory_ops.h"
#include "tests/support/plan_case.h"
#include "tests/support/staged_ranks.h"

namespace braid {
namespace {

using testing::PlanCase;
using testing::PlanCaseSpec;

constexpr double kTimeout = 60;
constexpr int kMaxChannels = testing::kStagedChannels;
using testing::StagedRank;

Config stagedConfig(uint32_t slotBytes) {
  Config c;
  c.timeoutSeconds = kTimeout;
  c.nslots = 2;
  c.slotBytes = slotBytes;
  c.socketNstreams = 2;
  c.socketIfname = "lo";
  return c;
}

/// TCP only: these tests stay off any RDMA device of the machine.
StagedMedia tcpOnly() {
  StagedMedia m;
  m.rdma = false;
  return m;
}

Status setUp(int r, int n, Bootstrap& bootstrap, const Config& config, const Logger& logger,
             StagedRank& rank) {
  return testing::setUpStagedRank(r, n, bootstrap, config, logger, tcpOnly(), rank);
}

void runStaged(int n, const std::vector<PlanCaseSpec>& specs, uint32_t slotBytes) {
  testing::StagedRun run;
  run.nranks = n;
  run.specs = specs;
  run.config = [&](int) { return stagedConfig(slotBytes); };
  run.media = tcpOnly();
  run.over = [](int, int) { return std::string("TCP"); };
  const std::vector<std::string> errors = testing::runStagedCases(run);
  for (size_t r = 0; r < errors.size(); ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
}

class StagedCollectives : public ::testing::TestWithParam<int> {};

TEST_P(StagedCollectives, EveryPlanIsExactOverTheSocketProxy) {
  const int n = GetParam();
  runStaged(n, testing::everyCollectiveAndAlgorithm(n, 1000, 1024), 1024);
}

INSTANTIATE_TEST_SUITE_P(Ranks, StagedCollectives, ::testing::Values(2, 3, 4),
                         [](const auto& info) { return "n" + std::to_string(info.param); });

TEST(StagedPath, LargeSlotsCrossSplitOverStreams) {
  // 96 KiB chunks: each slot goes out in pieces on both streams.
  std::vector<PlanCaseSpec> specs;
  for (Collective coll : {Collective::kAllReduce, Collective::kAllGather, Collective::kSend}) {
    PlanCaseSpec s;
    s.coll = coll;
    s.algo = coll == Collective::kSend ? Algorithm::kPairwise : Algorithm::kRing;
    s.nranks = 2;
    s.count = 100003;
    s.chunkBytes = 96 * 1024;
    s.nchannels = 2;
    s.callCheckChannel = 2;
    s.seq = static_cast<uint32_t>(specs.size());
    specs.push_back(s);
  }
  runStaged(2, specs, 96 * 1024);
}

TEST(StagedPath, ArmedProxyPollsUntilTheSlotsAreDoneThenSleeps) {
  const Config config = stagedConfig(1024);
  const std::vector<Status> statuses =
      onBootstrapThreads(2, kTimeout, [&](int r, Bootstrap& bootstrap) -> Status {
        Logger logger(LogLevel::kWarn, kAllSubsys, "");
        StagedRank rank;
        RETURN_IF_ERROR(setUp(r, 2, bootstrap, config, logger, rank));
        return testing::checkArmedProxyPolls(r, rank);
      });
  for (size_t r = 0; r < statuses.size(); ++r) {
    EXPECT_TRUE(statuses[r].ok()) << "rank " << r << ": " << statuses[r].message();
  }
}

// Copies overlap the wire: the sending lane writes and posts slot after slot without waiting for
// any to be freed, and the proxy puts each on the wire as soon as it is posted, so a call keeps
// every slot of its (peer, channel) in flight. Here the receiver's lanes start only once the
// pipeline is full: nslots slots crossed and wait at the receiver (its credits are used up), and
// the lane has written nslots more into the FIFO, whose first slots the socket proxy freed once
// they were on the wire - 2 x nslots posted before the receiver freed one. A lane that waited for
// each slot to be freed would stop at nslots + 1. Then the call completes, exact.
TEST(StagedPath, ALargeCallKeepsEverySlotInFlight) {
  constexpr uint64_t kSlots = 4;
  auto made = PlanCase::make([] {
    PlanCaseSpec s;
    s.coll = Collective::kSend;
    s.algo = Algorithm::kPairwise;
    s.nranks = 2;
    s.count = 16 * 256;  // 16 chunks of 1 KiB, four times the FIFO's depth
    s.chunkBytes = 1024;
    return s;
  }());
  ASSERT_TRUE(made.ok()) << made.status().message();
  PlanCase& pc = **made;
  Config config = stagedConfig(1024);
  config.nslots = static_cast<int>(kSlots);
  std::atomic<bool> senderFull{false};
  const std::vector<Status> statuses =
      onBootstrapThreads(2, kTimeout, [&](int r, Bootstrap& bootstrap) -> Status {
        Logger logger(LogLevel::kWarn, kAllSubsys, "");
        StagedRank rank;
        RETURN_IF_ERROR(setUp(r, 2, bootstrap, config, logger, rank));
        const int peer = 1 - r;
        const uint64_t* posted = rank.args.sendFifos[size_t(peer) * kMaxChannels].head;
        const uint64_t* arrived = rank.args.recvFifos[size_t(peer) * kMaxChannels].head;
        auto load = [](const uint64_t* counter) { return gpu::HostMemoryOps::load(counter); };
        rank.path->arm(gpu::countDeviceSlots(pc.plan(r)));
        const gpu::DeviceCall call = pc.call(r);
        if (r == 0) {
          std::thread lanes([&] { gpu::runLanesOnHost(rank.args, &call, 1); });
          // Both counts stay where they are until the receiver frees a slot.
          const bool full = testing::eventually([&] { return load(posted) == 2 * kSlots; }, 20);
          const uint64_t postedSlots = load(posted);
          senderFull = true;
          lanes.join();
          if (!full) {
            return internalError("the lane posted " + std::to_string(postedSlots) +
                                 " slots before the receiver freed one, not " +
                                 std::to_string(2 * kSlots));
          }
        } else {
          // Rank 0 raises senderFull within 20 s, full or not.
          testing::eventually([&] { return senderFull.load(); }, 30);
          const bool full = testing::eventually([&] { return load(arrived) == kSlots; }, 20);
          const uint64_t arrivedSlots = load(arrived);
          gpu::runLanesOnHost(rank.args, &call, 1);
          if (!full) {
            return internalError(std::to_string(arrivedSlots) + " slots crossed before the " +
                                 "receiver ran, not " + std::to_string(kSlots));
          }
        }
        if (rank.control.error != gpu::kDeviceOk) {
          return internalError("lanes stopped with error " + std::to_string(rank.control.error));
        }
        if (const std::string bad = pc.check(r); !bad.empty()) return internalError(bad);
        return okStatus();
      });
  for (size_t r = 0; r < statuses.size(); ++r) {
    EXPECT_TRUE(statuses[r].ok()) << "rank " << r << ": " << statuses[r].message();
  }
}

// A peer that goes away while a call waits on it: the staged path's health names it, and the
// abort the device path then raises stops the waiting lanes (as DeviceComm does for NULL-stream
// calls).
TEST(StagedPath, GonePeerIsReportedAndWaitingLanesStop) {
  auto made = PlanCase::make([] {
    PlanCaseSpec s;
    s.nranks = 2;
    s.count = 1000;
    s.chunkBytes = 1024;
    s.nchannels = 2;
    return s;
  }());
  ASSERT_TRUE(made.ok()) << made.status().message();
  PlanCase& pc = **made;
  const Config config = stagedConfig(1024);
  const std::vector<Status> statuses =
      onBootstrapThreads(2, kTimeout, [&](int r, Bootstrap& bootstrap) -> Status {
        Logger logger(LogLevel::kWarn, kAllSubsys, "");
        StagedRank rank;
        RETURN_IF_ERROR(setUp(r, 2, bootstrap, config, logger, rank));
        if (r == 1) {
          // Gone without a word: its connections close, nothing is flushed.
          rank.path->abort();
          rank.path.reset();
          return okStatus();
        }
        rank.path->arm(gpu::countDeviceSlots(pc.plan(0)));
        const gpu::DeviceCall call = pc.call(0);
        std::thread lanes([&] { gpu::runLanesOnHost(rank.args, &call, 1); });
        Status health;
        testing::eventually([&] { return !(health = rank.path->health()).ok(); }, 20);
        gpu::HostMemoryOps::store(&rank.control.abort, 1u);
        rank.path->abort();
        lanes.join();
        if (health.ok()) return internalError("the gone peer was never reported");
        if (health.message().find("rank 1 is gone") == std::string::npos) {
          return internalError("the report does not name rank 1: " + health.message());
        }
        if (rank.control.error != gpu::kDeviceAborted) {
          return internalError("the lanes ended with error " + std::to_string(rank.control.error) +
                               ", not the abort");
        }
        return okStatus();
      });
  for (size_t r = 0; r < statuses.size(); ++r) {
    EXPECT_TRUE(statuses[r].ok()) << "rank " << r << ": " << statuses[r].message();
  }
}

}  // namespace
}  // namespace braid
