// The device path's staged FIFOs with host threads standing in for the kernel
// (kernels/host_lane_runner.h: the kernel's protocol code over host memory) and the real socket
// proxy between ranks as threads over loopback: every collective x algorithm exact at n = 2, 3, 4,
// one call after another through the same FIFOs as a device's launches go, the proxy armed per
// call as the device path arms it; large slots split over both streams; a proxy armed for slots
// not yet posted keeps polling, and sleeps again once they have gone; a peer that goes away is
// reported and the lanes waiting on it stop at the abort that follows.
#include "transport/staged_path.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "base/config.h"
#include "base/log.h"
#include "bootstrap/bootstrap_threads.h"
#include "kernels/host_lane_runner.h"
#include "kernels/host_memory_ops.h"
#include "tests/support/plan_case.h"

namespace braid {
namespace {

using Clock = std::chrono::steady_clock;
using testing::PlanCase;
using testing::PlanCaseSpec;

constexpr double kTimeout = 60;
constexpr int kMaxChannels = 3;  // two for the algorithms, one for the call check

/// Host threads read the FIFOs where they lie.
class HostAddresses : public HostMemoryMapper {
 public:
  Result<char*> map(char* host, size_t) override { return host; }
};

Config stagedConfig(uint32_t slotBytes) {
  Config c;
  c.timeoutSeconds = kTimeout;
  c.nslots = 2;
  c.slotBytes = slotBytes;
  c.socketNstreams = 2;
  c.socketIfname = "lo";
  return c;
}

/// One rank: its staged FIFOs and the tables, control block and latch its "kernel" reads.
struct StagedRank {
  std::unique_ptr<StagedPath> path;
  std::vector<gpu::DeviceFifo> table;  ///< sends, then receives: [peer * kMaxChannels + channel]
  gpu::DeviceControl control;
  uint32_t latch = 0;
  gpu::ExecutorArgs args;
};

/// Makes rank r's staged path to every other rank and its device tables.
Status setUp(int r, int n, Bootstrap& bootstrap, const Config& config, const Logger& logger,
             StagedRank& rank) {
  TransportContext ctx;
  ctx.bootstrap = &bootstrap;
  ctx.config = &config;
  ctx.logger = &logger;
  ctx.rank = r;
  ctx.nranks = n;
  ctx.maxChannels = kMaxChannels;
  std::vector<bool> wanted(n, true);
  wanted[r] = false;
  ASSIGN_OR_RETURN(rank.path, StagedPath::create(ctx, wanted, std::make_unique<HostAddresses>()));
  const size_t perSide = size_t(n) * kMaxChannels;
  rank.table.assign(2 * perSide, gpu::DeviceFifo{});
  for (int p = 0; p < n; ++p) {
    if (p == r) continue;
    if (!rank.path->reaches(p))
      return internalError("no staged FIFOs to rank " + std::to_string(p));
    for (int ch = 0; ch < kMaxChannels; ++ch) {
      ASSIGN_OR_RETURN(rank.table[size_t(p) * kMaxChannels + ch], rank.path->sendFifo(p, ch));
      ASSIGN_OR_RETURN(rank.table[perSide + size_t(p) * kMaxChannels + ch],
                       rank.path->recvFifo(p, ch));
    }
  }
  rank.args.sendFifos = rank.table.data();
  rank.args.recvFifos = rank.table.data() + perSide;
  rank.args.maxChannels = kMaxChannels;
  rank.args.rank = r;
  rank.args.control = &rank.control;
  rank.args.errorLatch = &rank.latch;
  rank.args.timeoutNs = static_cast<uint64_t>(kTimeout * 1e9);
  rank.args.ncalls = 1;
  return okStatus();
}

/// Runs the cases one after another on n ranks (threads), each call armed then run on host
/// lanes over the staged FIFOs, and checks every output.
void runStaged(int n, const std::vector<PlanCaseSpec>& specs, uint32_t slotBytes) {
  std::vector<std::unique_ptr<PlanCase>> cases;
  for (const PlanCaseSpec& spec : specs) {
    auto made = PlanCase::make(spec);
    ASSERT_TRUE(made.ok()) << testing::describeSpec(spec) << ": " << made.status().message();
    cases.push_back(std::move(made).value());
  }
  const Config config = stagedConfig(slotBytes);
  const std::vector<Status> statuses =
      onBootstrapThreads(n, kTimeout, [&](int r, Bootstrap& bootstrap) -> Status {
        Logger logger(LogLevel::kWarn, kAllSubsys, "");
        StagedRank rank;
        RETURN_IF_ERROR(setUp(r, n, bootstrap, config, logger, rank));
        for (size_t k = 0; k < cases.size(); ++k) {
          PlanCase& pc = *cases[k];
          if (!pc.runs(r)) continue;
          rank.path->arm(gpu::countDeviceSlots(pc.plan(r)));
          const gpu::DeviceCall call = pc.call(r);
          gpu::runLanesOnHost(rank.args, &call, 1);
          const std::string what = testing::describeSpec(specs[k]);
          if (rank.control.error != gpu::kDeviceOk) {
            return internalError(what + ": lanes stopped with error " +
                                 std::to_string(rank.control.error) + " waiting on rank " +
                                 std::to_string(rank.control.peer));
          }
          if (const std::string bad = pc.check(r); !bad.empty())
            return internalError(what + ": " + bad);
        }
        if (std::optional<Status> failure = rank.path->transport().failure()) return *failure;
        return okStatus();
      });
  for (size_t r = 0; r < statuses.size(); ++r) {
    EXPECT_TRUE(statuses[r].ok()) << "rank " << r << ": " << statuses[r].message();
  }
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

/// Waits until pred() holds, for at most `seconds`.
template <class Pred>
bool eventually(Pred&& pred, double seconds) {
  const auto end = Clock::now() + std::chrono::duration<double>(seconds);
  while (!pred()) {
    if (Clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

TEST(StagedPath, ArmedProxyPollsUntilTheSlotsAreDoneThenSleeps) {
  const Config config = stagedConfig(1024);
  const std::vector<Status> statuses =
      onBootstrapThreads(2, kTimeout, [&](int r, Bootstrap& bootstrap) -> Status {
        Logger logger(LogLevel::kWarn, kAllSubsys, "");
        StagedRank rank;
        RETURN_IF_ERROR(setUp(r, 2, bootstrap, config, logger, rank));
        const int peer = 1 - r;
        Waker* proxyWaker = rank.path->proxy()->waker();
        auto asleep = [&] { return proxyWaker->sleeping.load() != 0; };
        if (!eventually(asleep, 10)) return internalError("an idle proxy never slept");
        CallDescriptor call;
        call.seq = 42;
        gpu::DeviceCall deviceCall;
        deviceCall.call = call;
        if (r == 0) {
          // Armed for a slot the "kernel" has not posted: the proxy polls, never sleeping.
          rank.path->arm({{peer, 0, 1, 0}});
          if (!eventually([&] { return !asleep(); }, 10)) {
            return internalError("the armed proxy stayed asleep");
          }
          const auto end = Clock::now() + std::chrono::milliseconds(300);
          while (Clock::now() < end) {
            if (asleep()) return internalError("the proxy slept with armed work outstanding");
          }
          gpu::DeviceFifo* f = rank.args.sendFifos + size_t(peer) * kMaxChannels;
          gpu::post<gpu::HostMemoryOps>(f, 0, call);
        } else {
          rank.path->arm({{peer, 0, 0, 1}});
          gpu::DeviceFifo* f = rank.args.recvFifos + size_t(peer) * kMaxChannels;
          gpu::Waiter<gpu::HostMemoryOps> waiter(rank.args);
          uint32_t code = 0;
          while (code == 0 && !gpu::slotArrived<gpu::HostMemoryOps>(f)) code = waiter.poll();
          gpu::FailureSite site;
          SlotHeader header;
          if (code == 0) code = gpu::checkSlot<gpu::HostMemoryOps>(f, deviceCall, 0, site, header);
          if (code != 0) return internalError("the slot did not arrive: " + std::to_string(code));
          gpu::release<gpu::HostMemoryOps>(f);
        }
        if (!eventually(asleep, 10)) return internalError("the proxy kept polling after the work");
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
        eventually([&] { return !(health = rank.path->health()).ok(); }, 20);
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
