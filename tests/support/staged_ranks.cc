#include "tests/support/staged_ranks.h"

#include <chrono>
#include <thread>

#include "bootstrap/bootstrap_threads.h"
#include "kernels/host_lane_runner.h"
#include "kernels/host_memory_ops.h"

namespace braid::testing {

Status setUpStagedRank(int r, int n, Bootstrap& bootstrap, const Config& config,
                       const Logger& logger, StagedMedia media, StagedRank& rank) {
  TransportContext ctx;
  ctx.bootstrap = &bootstrap;
  ctx.config = &config;
  ctx.logger = &logger;
  ctx.rank = r;
  ctx.nranks = n;
  ctx.maxChannels = kStagedChannels;
  std::vector<bool> wanted(n, true);
  wanted[r] = false;
  ASSIGN_OR_RETURN(rank.path,
                   StagedPath::create(ctx, wanted, media, std::make_unique<HostAddresses>()));
  const size_t perSide = size_t(n) * kStagedChannels;
  rank.table.assign(2 * perSide, gpu::DeviceFifo{});
  for (int p = 0; p < n; ++p) {
    if (p == r) continue;
    if (!rank.path->reaches(p)) {
      return internalError("no staged FIFOs to rank " + std::to_string(p) + ": " +
                           rank.path->describe(p));
    }
    for (int ch = 0; ch < kStagedChannels; ++ch) {
      ASSIGN_OR_RETURN(rank.table[size_t(p) * kStagedChannels + ch], rank.path->sendFifo(p, ch));
      ASSIGN_OR_RETURN(rank.table[perSide + size_t(p) * kStagedChannels + ch],
                       rank.path->recvFifo(p, ch));
    }
  }
  rank.args.sendFifos = rank.table.data();
  rank.args.recvFifos = rank.table.data() + perSide;
  rank.args.maxChannels = kStagedChannels;
  rank.args.rank = r;
  rank.args.control = &rank.control;
  rank.args.errorLatch = &rank.latch;
  rank.args.timeoutNs = static_cast<uint64_t>(config.timeoutSeconds * 1e9);
  rank.args.ncalls = 1;
  return okStatus();
}

std::vector<std::string> runStagedCases(const StagedRun& run) {
  const int n = run.nranks;
  std::vector<std::unique_ptr<PlanCase>> cases;
  for (const PlanCaseSpec& spec : run.specs) {
    auto made = PlanCase::make(spec);
    if (!made.ok()) {
      return std::vector<std::string>(n, describeSpec(spec) + ": " + made.status().message());
    }
    cases.push_back(std::move(made).value());
  }
  const double timeout = run.config(0).timeoutSeconds;
  const std::vector<Status> statuses =
      onBootstrapThreads(n, timeout, [&](int r, Bootstrap& bootstrap) -> Status {
        Logger logger(LogLevel::kWarn, kAllSubsys, "");
        const Config config = run.config(r);
        StagedRank rank;
        RETURN_IF_ERROR(setUpStagedRank(r, n, bootstrap, config, logger, run.media, rank));
        for (int p = 0; p < n; ++p) {
          if (p != r && rank.path->describe(p) != run.over(r, p)) {
            return internalError("rank " + std::to_string(p) + " is reached over " +
                                 rank.path->describe(p) + ", not " + run.over(r, p));
          }
        }
        for (size_t k = 0; k < cases.size(); ++k) {
          PlanCase& pc = *cases[k];
          if (!pc.runs(r)) continue;
          rank.path->arm(gpu::countDeviceSlots(pc.plan(r)));
          const gpu::DeviceCall call = pc.call(r);
          gpu::runLanesOnHost(rank.args, &call, 1);
          const std::string what = describeSpec(run.specs[k]);
          if (rank.control.error != gpu::kDeviceOk) {
            return internalError(what + ": lanes stopped with error " +
                                 std::to_string(rank.control.error) + " waiting on rank " +
                                 std::to_string(rank.control.peer));
          }
          if (const std::string bad = pc.check(r); !bad.empty()) {
            return internalError(what + ": " + bad);
          }
        }
        if (std::optional<Status> failure = rank.path->failure()) return *failure;
        return okStatus();
      });
  std::vector<std::string> out;
  for (const Status& s : statuses) out.push_back(s.ok() ? "" : s.message());
  return out;
}

bool eventually(const std::function<bool()>& pred, double seconds) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (!pred()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

Status checkArmedProxyPolls(int r, StagedRank& rank) {
  const int peer = 1 - r;
  Waker* proxyWaker = rank.path->proxyOf(peer)->waker();
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
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
    while (std::chrono::steady_clock::now() < end) {
      if (asleep()) return internalError("the proxy slept with armed work outstanding");
    }
    gpu::DeviceFifo* f = rank.args.sendFifos + size_t(peer) * kStagedChannels;
    gpu::post<gpu::HostMemoryOps>(f, 0, call);
  } else {
    rank.path->arm({{peer, 0, 0, 1}});
    gpu::DeviceFifo* f = rank.args.recvFifos + size_t(peer) * kStagedChannels;
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
}

}  // namespace braid::testing
