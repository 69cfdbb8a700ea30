#include "tuner/tuner_setup.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <sstream>

#include "base/config.h"
#include "base/log.h"
#include "bootstrap/bootstrap.h"
#include "tuner/calibration.h"
#include "tuner/cost_model.h"
#include "tuner/link_probe.h"
#include "tuner/tuning_table.h"

namespace braid {
namespace {

// What rank 0 hands every rank: a status byte, the constants, and the error text when it failed.
constexpr size_t kMessageBytes = 256;
constexpr size_t kSharedBytes = 1 + kModelConstantsWireBytes + kMessageBytes;
// How much longer than the timeout ranks wait for rank 0's calibration (the probe's budget,
// ProbeOptions::budgetSeconds, and its last measurements, once each, with room to spare), and for
// the slowest rank's share of the tuner's grid.
constexpr double kCalibrationGraceSeconds = 30;

/// Puts the probe's figures (if any) into rank 0's host shape, and says where they came from.
void applyNetworkProbe(const TunerContext& ctx, const NetworkProbe& probe, HostShape& host) {
  if (!probe.ran) return;
  const double topoUs = host.networkLatencyUs;
  const double topoGBps = host.networkGBps;
  if (!probe.figures) {
    BRAID_LOG(*ctx.logger, kInfo, kNet,
              "network link %.1f us, %.2f GB/s from the topology (NIC port, else the default "
              "link): %s",
              topoUs, topoGBps, probe.note.c_str());
    return;
  }
  const LinkFigures& f = *probe.figures;
  std::string kept;
  const LinkFigures used = keptLinkFigures(ctx.calibrationDir, ctx.placements, f, kept);
  host.networkLatencyUs = used.latencyUs;
  host.networkGBps = used.gbps;
  BRAID_LOG(*ctx.logger, kInfo, kNet,
            "network link %.1f us, %.3f GB/s measured by the link probe (rank 0 <-> rank %d: half "
            "the median round trip, min %.1f us; %llu bytes streamed in %.2f ms; %s; %.1f ms in "
            "all) instead of the topology's %.1f us, %.2f GB/s%s",
            f.latencyUs, f.gbps, f.peer, f.minRoundTripUs,
            static_cast<unsigned long long>(f.streamBytes), f.streamUs / 1e3, probe.note.c_str(),
            probe.elapsedMs, topoUs, topoGBps, kept.c_str());
}

Result<ModelConstants> rankZeroConstants(const TunerContext& ctx, const NetworkProbe& probe) {
  ModelConstants constants;
  constants.host = hostShapeOf(*ctx.topology);
  applyNetworkProbe(ctx, probe, constants.host);
  const auto start = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(
      CalibrationResult calibration,
      hostCalibration(ctx.calibrationDir, ctx.placements[0].hostHash, constants.host.llcBytes));
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  constants.calibration = calibration.calibration;
  BRAID_LOG(*ctx.logger, kInfo, kTune, "calibration %s%s%s in %.1f ms%s%s",
            calibrationSourceName(calibration.source), calibration.cacheFile.empty() ? "" : " ",
            calibration.cacheFile.c_str(), ms, calibration.note.empty() ? "" : ": ",
            calibration.note.c_str());
  return constants;
}

/// Rank 0's constants on every rank.
Result<ModelConstants> sharedConstants(const TunerContext& ctx) {
  const int nranks = static_cast<int>(ctx.placements.size());
  std::vector<uint8_t> buffer(kSharedBytes * size_t(nranks), 0);
  uint8_t* mine = buffer.data() + kSharedBytes * size_t(ctx.rank);
  // Before rank 0 calibrates: the leaders it probes wait for it, not the other way round.
  const NetworkProbe probe = runNetworkProbe(*ctx.bootstrap, ctx.rank, ctx.placements,
                                             ctx.config->netProbe != 0, ctx.rdmaBetweenHosts);
  if (ctx.rank != 0 && !probe.note.empty()) {
    BRAID_LOG(*ctx.logger, kInfo, kNet, "%s", probe.note.c_str());
  }
  if (ctx.rank == 0) {
    Result<ModelConstants> constants = rankZeroConstants(ctx, probe);
    if (constants.ok()) {
      mine[0] = 1;
      encodeModelConstants(constants.value(), mine + 1);
    } else {
      const std::string& text = constants.status().message();
      std::memcpy(mine + 1 + kModelConstantsWireBytes, text.data(),
                  std::min(text.size(), kMessageBytes - 1));
    }
  }
  // Rank 0 may be measuring the host (once per host and build): the others wait for it.
  RETURN_IF_ERROR(ctx.bootstrap->allGather(buffer.data(), kSharedBytes, kCalibrationGraceSeconds)
                      .withContext("sharing the tuner's calibration"));
  const uint8_t* root = buffer.data();
  if (root[0] != 1) {
    const char* text = reinterpret_cast<const char*>(root + 1 + kModelConstantsWireBytes);
    return internalError("rank 0 could not calibrate the cost model: " +
                         std::string(text, strnlen(text, kMessageBytes)));
  }
  ModelConstants constants = decodeModelConstants(root + 1);
  RETURN_IF_ERROR(
      validateCalibration(constants.calibration).withContext("the calibration rank 0 sent"));
  return constants;
}

}  // namespace

Result<Tuner> setUpTuner(const TunerContext& ctx, HostShape* sharedHost) {
  const Config& config = *ctx.config;
  const int nranks = static_cast<int>(ctx.placements.size());
  ASSIGN_OR_RETURN(ModelConstants constants, sharedConstants(ctx));
  if (sharedHost != nullptr) *sharedHost = constants.host;
  ASSIGN_OR_RETURN(CostModel model, CostModel::create(constants, ctx.placements, ctx.ring,
                                                      config.nslots, config.fifoBytes));
  std::optional<TuningTable> table;
  if (!config.tuningFile.empty()) {
    Result<TuningTable> loaded = TuningTable::load(config.tuningFile);
    if (!loaded.ok()) return loaded.status().withContext("BRAID_TUNING_FILE");
    table = std::move(loaded).value();
  }
  const auto start = std::chrono::steady_clock::now();
  TunerOptions options = TunerOptions::fromConfig(config, nranks, ctx.maxChannels);
  // The grid goes beside the calibration, written by each host's first rank.
  options.gridFileDir = ctx.calibrationDir;
  const uint64_t host = ctx.placements[size_t(ctx.rank)].hostHash;
  options.writesGridFile = std::none_of(ctx.placements.begin(), ctx.placements.begin() + ctx.rank,
                                        [&](const RankPlacement& p) { return p.hostHash == host; });
  const TuningTable* tableOrNull = table ? &*table : nullptr;
  ASSIGN_OR_RETURN(std::optional<Tuner> kept,
                   Tuner::createFromKeptGrid(options, model, tableOrNull, nranks));
  // Every rank says whether it found the grid kept, and its tuner's digest if so: where all did,
  // this one exchange replaces the gathers of the grid's cells and of the digests.
  std::vector<uint64_t> found(2 * size_t(nranks), 0);
  found[2 * size_t(ctx.rank)] = kept ? 1 : 0;
  found[2 * size_t(ctx.rank) + 1] = kept ? kept->digest() : 0;
  RETURN_IF_ERROR(ctx.bootstrap->allGather(found.data(), 2 * sizeof(uint64_t))
                      .withContext("asking the ranks for a kept tuner grid"));
  bool allFound = true;
  for (int r = 0; r < nranks; ++r) allFound &= found[2 * size_t(r)] == 1;
  std::vector<uint64_t> digests(static_cast<size_t>(nranks), 0);
  Tuner tuner;
  if (allFound) {
    for (int r = 0; r < nranks; ++r) digests[size_t(r)] = found[2 * size_t(r) + 1];
    tuner = std::move(*kept);
  } else {
    // The ranks split the model grid's cells; the wait covers the slowest rank's share.
    GridShare share;
    share.rank = ctx.rank;
    share.nranks = nranks;
    share.allGather = [&](uint8_t* data, size_t bytesPerRank) {
      return ctx.bootstrap->allGather(data, bytesPerRank, kCalibrationGraceSeconds);
    };
    if (kept) {
      RETURN_IF_ERROR(kept->shareKeptGrid(model, share));
      tuner = std::move(*kept);
    } else {
      ASSIGN_OR_RETURN(tuner, Tuner::create(options, model, tableOrNull, share));
    }
    digests[static_cast<size_t>(ctx.rank)] = tuner.digest();
    RETURN_IF_ERROR(ctx.bootstrap->allGather(digests.data(), sizeof(uint64_t))
                        .withContext("comparing the ranks' tuner tables"));
  }
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  for (int r = 1; r < nranks; ++r) {
    if (digests[static_cast<size_t>(r)] != digests[0]) {
      return invalidUsage(
          "rank " + std::to_string(r) + " built another tuner table than rank 0" +
          (config.tuningFile.empty()
               ? std::string(" (ranks must run the same library build)")
               : " (is BRAID_TUNING_FILE " + config.tuningFile + " the same file on every host?)"));
    }
  }
  if (ctx.rank == 0) {
    static constexpr const char* kOrigins[] = {"costed", "from this process", "from a file"};
    BRAID_LOG(*ctx.logger, kInfo, kTune, "cost model: %s; table built in %.1f ms (grid %s%s%s%s)",
              model.describe().c_str(), ms, kOrigins[static_cast<int>(tuner.gridOrigin())],
              tuner.gridNote().empty() ? "" : ": ", tuner.gridNote().c_str(),
              allFound && nranks > 1 ? "; every rank had it, no cells gathered" : "");
    // One log call per line: a log line has a bounded length.
    std::istringstream lines(tuner.formatTable());
    for (std::string line; std::getline(lines, line);) {
      BRAID_LOG(*ctx.logger, kInfo, kTune, "%s", line.c_str());
    }
  }
  return tuner;
}

}  // namespace braid
