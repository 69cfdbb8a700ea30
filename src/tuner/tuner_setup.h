// Building a communicator's tuner at init: the one step of set-up that belongs to the tuner.
//
// When the ranks span hosts, the host leaders first probe the link between them (link_probe.h) and
// rank 0's host shape takes the measured network latency and bandwidth. Rank 0 reads its
// topology's host shape and this host's calibration (from this process, from the
// cache file, or measured now - calibration.h) while the other ranks wait in a bootstrap
// all-gather that then hands them rank 0's values, bit for bit. Every rank builds the cost model
// from those values and every rank's placement, loads BRAID_TUNING_FILE, and builds the tuner;
// a last all-gather of the tuners' digests proves that all ranks will choose alike (a tuning file
// that differs between hosts is an error, not a hang).
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "topology/ordering.h"
#include "topology/topology.h"
#include "tuner/cost_model.h"
#include "tuner/tuner.h"

namespace braid {

class Bootstrap;
class Logger;
struct Config;

/// What setUpTuner needs of the communicator being built.
struct TunerContext {
  const Config* config = nullptr;
  const Logger* logger = nullptr;
  Bootstrap* bootstrap = nullptr;
  const Topology* topology = nullptr;     ///< this rank's topology (rank 0's is used)
  std::vector<RankPlacement> placements;  ///< every rank's host and locality
  std::vector<int> ring;                  ///< the communicator's ring order (empty: identity)
  int rank = 0;                           ///< this rank in the communicator
  int maxChannels = 1;                    ///< channels whose connectors the communicator sets up
  /// Rank 0 reaches other hosts over RDMA: the link probe (over TCP) is skipped.
  bool rdmaBetweenHosts = false;
  /// Where the calibration cache lives; "" disables it. Set it from defaultCalibrationDir().
  std::string calibrationDir;
};

/// Collective over the bootstrap: every rank must call it. Errors name what failed (a tuning
/// file's line, rank 0's calibration, ranks that disagree). `sharedHost`, when given, receives the
/// host shape the model used (rank 0's, with the probed network figures), alike on every rank.
Result<Tuner> setUpTuner(const TunerContext& context, HostShape* sharedHost = nullptr);

}  // namespace braid
