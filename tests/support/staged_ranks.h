// Test support: the device path's staged FIFOs (transport/staged_path.h) between ranks as threads,
// with host threads standing in for the kernel (kernels/host_lane_runner.h): each rank's FIFO
// tables, control block and latch as the device reads them, and a runner that arms the proxies
// and runs plans over them one call after another, as a device's launches go. Used over the real
// socket proxy (unit tests) and over the RDMA proxy on the verbs test double (tests/net).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/config.h"
#include "base/log.h"
#include "base/status.h"
#include "bootstrap/bootstrap.h"
#include "kernels/cuda/device_abi.h"
#include "tests/support/plan_case.h"
#include "transport/staged_path.h"

namespace braid::testing {

/// Channels of the staged tables: two for the algorithms, one for the call check.
constexpr int kStagedChannels = 3;

/// Host threads read the FIFOs where they lie.
class HostAddresses : public HostMemoryMapper {
 public:
  Result<char*> map(char* host, size_t) override { return host; }
};

/// One rank: its staged FIFOs and the tables, control block and latch its "kernel" reads.
struct StagedRank {
  std::unique_ptr<StagedPath> path;
  std::vector<gpu::DeviceFifo> table;  ///< sends, then receives: [peer * kStagedChannels + ch]
  gpu::DeviceControl control;
  uint32_t latch = 0;
  gpu::ExecutorArgs args;
};

/// Makes rank r's staged path to every other rank (over `media`) and its device tables; fails
/// when some peer is not reached.
Status setUpStagedRank(int r, int n, Bootstrap& bootstrap, const Config& config,
                       const Logger& logger, StagedMedia media, StagedRank& rank);

/// What runStagedCases runs.
struct StagedRun {
  int nranks = 2;
  std::vector<PlanCaseSpec> specs;  ///< run one after another
  std::function<Config(int rank)> config;
  StagedMedia media;
  /// What must carry rank r's FIFOs to peer p (StagedPath::describe: "TCP", "RDMA").
  std::function<std::string(int r, int p)> over;
};

/// Runs the cases on ranks as threads (over a fresh bootstrap), each call armed then run on
/// host lanes over the staged FIFOs, and checks every output. Returns each rank's "" or first
/// error.
std::vector<std::string> runStagedCases(const StagedRun& run);

/// Two ranks set up: rank 0 arms its proxy for one slot to rank 1 and checks that the proxy
/// polls (never sleeps) until it has posted the slot, rank 1 arms for freeing it; then both
/// proxies must sleep again. Returns rank r's verdict.
Status checkArmedProxyPolls(int r, StagedRank& rank);

/// Waits until pred() holds, for at most `seconds`.
bool eventually(const std::function<bool()>& pred, double seconds);

}  // namespace braid::testing
