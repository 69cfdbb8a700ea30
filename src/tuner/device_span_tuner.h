// The choice for device calls whose ranks span GPU islands: groups of ranks whose GPUs reach each
// other's memory (the p2p transport), usually the GPUs of one host. Between islands the device
// path stages every slot through pinned host memory that a network proxy moves
// (transport/staged_path.h), so a hop there costs a copy over the GPU's host link, the network and
// the proxies' pick-up, not a hand-off in GPU memory. The host tuner's grid prices CPU copies
// between processes and does not apply; this tuner simulates the plans (plan_cost.h) on a model
// of the device machine instead:
//   - every rank is a GPU whose steps cost stepUs plus their bytes at its copy or reduce rate;
//   - inside an island a slot is handed over in gpuHopUs;
//   - between islands a slot first occupies the sending GPU's host link (hostCopyGBps), then its
//     island's network link (networkGBps), and arrives networkLatencyUs plus both proxies'
//     pick-up later; the copy of one slot overlaps the wire time of the one before.
// That makes the hierarchical all-reduce win where islands hold several ranks: it crosses the
// network 2(h-1) times per round instead of the ring's 2(n-1), and spreads the staged copies over
// every GPU of the island.
//
// A choice is worked out when a size's grid point is first asked for, and remembered. The
// simulation is deterministic and its inputs are alike on every rank (rank 0's network figures,
// the p2p matrix every rank knows), so all ranks choose alike without exchanging anything.
// BRAID_ALGO, BRAID_CHUNK_BYTES and BRAID_NCHANNELS apply as they do to the host tuner; the tuning
// file does not (it measures host memory). Channels: the model runs a call on as many as the
// device path gives it (Communicator::deviceChannels), so that their lanes overlap one slot's
// wait with another's work as the GPU's blocks do; a rank's steps share its GPU's copy and reduce
// rates.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "algorithms/plan.h"
#include "base/status.h"
#include "tuner/algo_override.h"
#include "tuner/cost_model.h"
#include "tuner/plan_cost.h"
#include "tuner/tuner.h"

namespace braid {

/// What the device path's steps and hops cost. The GPU figures are typical of current data
/// centre GPUs (docs/performance-notes.md#device-calls-across-hosts); the network's come from the
/// host tuner's figures (measured by the link probe where it ran).
struct DeviceLinkCosts {
  double stepUs = 1.0;          ///< one executor step: descriptor checks, fences, flag stores
  double gpuHopUs = 2.0;        ///< a slot handed over in GPU memory, post to visible
  double copyGBps = 400;        ///< the GPU's copies in its memory, all lanes together
  double reduceGBps = 300;      ///< the GPU's reductions, output bytes, all lanes together
  double hostCopyGBps = 20;     ///< one GPU's copies into pinned host memory (its PCIe link)
  double proxyUs = 3;           ///< a proxy noticing a posted slot, or posting one it received
  double networkLatencyUs = 5;  ///< host to host
  double networkGBps = 12.5;    ///< one island's network link, one direction

  /// The defaults with `host`'s network latency and bandwidth.
  static DeviceLinkCosts withNetworkOf(const HostShape& host);
};

class DeviceSpanTuner {
 public:
  /// Whether `islandOf` (rank -> island) puts the ranks in more than one island.
  static bool spansIslands(const std::vector<int>& islandOf);

  /// options: the device path's limits and the user's settings (as for the host tuner, with the
  /// device path's channels; tuningFile is ignored). bytesPerChannel: a call of that many bytes
  /// per channel runs on one more channel, up to options.maxChannels, as the device path spreads
  /// them (0: one channel). islandOf: rank -> island, any values; ring: the communicator's ring
  /// order (empty: identity). Fails on a malformed BRAID_ALGO or islands that do not fit the rank
  /// count.
  static Result<std::unique_ptr<DeviceSpanTuner>> create(const TunerOptions& options,
                                                         uint64_t bytesPerChannel,
                                                         std::vector<int> islandOf,
                                                         std::vector<int> ring,
                                                         const DeviceLinkCosts& costs);

  /// Whether it chooses for `coll`: every collective but send and receive (those keep the host
  /// tuner's fixed choice).
  static bool models(Collective coll);
  /// The choice for a device call of `coll` (one it models) moving `bytes` per rank, BRAID_ALGO
  /// honoured. Thread-safe.
  Choice choose(Collective coll, uint64_t bytes) const;
  /// The model's microseconds for one call of `algo` with this chunk, on the channels a call of
  /// `bytes` gets.
  Result<double> predict(Collective coll, Algorithm algo, uint64_t bytes,
                         uint32_t chunkBytes) const;
  /// The channels a device call of `bytes` runs on.
  int channelsFor(uint64_t bytes) const;
  /// The island of every rank, numbered 0.. in rank order (what hierarchical plans group by).
  const std::vector<int>& islands() const { return islandOf_; }
  /// One line for the log: islands, ranks and the costs in use.
  std::string describe() const;

 private:
  DeviceSpanTuner() = default;
  Result<std::vector<Plan>> plansFor(Collective coll, Algorithm algo, uint64_t bytes,
                                     uint32_t chunkBytes, int nchannels) const;
  Result<double> simulate(Collective coll, Algorithm algo, uint64_t bytes, uint32_t chunkBytes,
                          int nchannels) const;
  /// The model's best chunk and time for every usable algorithm.
  struct Cell {
    double us = -1;  ///< -1: not costed (not usable, or the plans could not be built)
    uint32_t chunkBytes = 0;
  };
  using AlgoCells = std::array<Cell, kNumAlgorithms>;
  /// The cells of grid point k, worked out at its first use.
  const AlgoCells& cellsAt(Collective coll, int k) const;
  bool usable(Algorithm algo, Collective coll) const;
  std::vector<uint32_t> chunkCandidates() const;

  TunerOptions options_;
  uint64_t bytesPerChannel_ = 0;
  AlgoOverride override_;
  std::vector<int> islandOf_;
  int nislands_ = 1;
  std::vector<int> ring_;
  DeviceLinkCosts costs_;
  SimMachine machine_;
  /// Grid points already worked out, by (collective, grid point).
  mutable std::mutex mutex_;
  mutable std::map<std::pair<Collective, int>, AlgoCells> cells_;
  /// Simulated times, by (collective, algorithm, bytes, chunk, channels): the two long spans of
  /// a candidate serve all its long sizes. Taken after mutex_ where both are.
  mutable std::mutex simMutex_;
  mutable std::map<std::tuple<Collective, Algorithm, uint64_t, uint32_t, int>, double> simulated_;
};

}  // namespace braid
