#include "tuner/tuner.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <map>
#include <mutex>
#include <sstream>

#include "algorithms/algorithms.h"
#include "base/little_endian.h"
#include "tuner/plan_cost.h"

namespace braid {
namespace {

// Send and receive are not modelled: one channel, chunks as large as a slot allows up to this
// size, which keeps a slot in L2 while the receiver reads it.
constexpr uint32_t kPointToPointChunk = 128 * 1024;

// Above this, the model does not pick direct for broadcast or reduce on its own (BRAID_ALGO
// still may): there the root's n-1 copies of every byte compete for the memory bandwidth the
// cores share, which the model, rating each core's copies at its own memory rate, misses
// (docs/performance-notes.md#direct-broadcast-and-reduce).
constexpr uint64_t kDirectRootedMaxBytes = 4 << 20;

// Nor direct all-reduce once the n-1 copies each rank sends exceed this: the model prices them
// at cache speed and misses what n-1 full-size folds per rank cost
// (docs/performance-notes.md#direct-all-reduce).
constexpr uint64_t kDirectAllReduceMaxSent = 64 * 1024;

// The model gives a call a second (fourth) channel only when each gets at least this much. It
// rates splitting a few KiB over channels a gain and misses what every extra slot costs the cores
// that post and take it (docs/performance-notes.md#bytes-per-channel).
constexpr uint64_t kMinChannelBytes = 32 * 1024;

// Nor direct anything from this many ranks on: every rank then links to all n-1 peers (streams,
// FIFOs), which connections made on first use otherwise spare it, and costing it plans O(n^2)
// steps (reduce-scatter at 128 ranks: 86 MB of one rank's memory and 7 s of its init).
constexpr int kDirectMaxRanks = 64;

// All-to-all blocks up to this size go to Bruck's algorithm (rd) across hosts from this many ranks
// on, and rd serves no larger blocks: pairwise exchange's n-1 messages per rank each cost the
// network proxy CPU that the model does not charge, which log2 n rounds spare; larger blocks pay
// for Bruck's extra copies (docs/performance-notes.md#small-all-to-all-across-hosts).
// rd's reduce-scatter is the model's pick only for blocks up to the same size and only where ranks
// span hosts, for the same reason; on one host, and for larger blocks, it ran 1.2-2.3x slower than
// what the model rated it above. On one host below kDirectMaxRanks, rd's all-gather of blocks up
// to that size is not the model's pick either: its rounds, one message each, cost there more than
// the model sees, and direct serves those sizes
// (docs/performance-notes.md#small-reduce-scatter-and-all-gather-among-many-ranks).
constexpr uint64_t kBruckMaxBlockBytes = 1024;
constexpr int kBruckFromRanks = 8;

// From this many ranks on, the grid leaves out the cells the model may not pick on its own
// (modelMayPick): costing direct all-reduce at every size plans n ranks' n-1 sends per chunk,
// O(n^2) steps, which at 64 ranks took 34 MB of one rank's memory at init and most of its share's
// time. BRAID_ALGO=direct there runs with a default chunk and one channel.
constexpr int kCostOnlyPickableFromRanks = 32;

// From this many ranks on a pair's long sizes, which share their span simulations and so went to
// one rank, are costed in two rounds of smaller shares (Tuner::costStaged): that rank's share was
// the slowest, what init waits for when every rank has a core (docs/scale.md).
constexpr int kStagedFromRanks = 32;

// The model gives calls above this size no chunk below it. It rates smaller chunks a finer
// pipeline at little cost per step, but each step costs more than it sees
// (docs/performance-notes.md#chunks-of-large-calls).
constexpr uint64_t kMinLargeCallChunkBytes = 128 * 1024;

std::string sizeText(uint64_t bytes) {
  static constexpr std::pair<uint64_t, const char*> kUnits[] = {
      {1ull << 30, "G"}, {1ull << 20, "M"}, {1ull << 10, "K"}};
  for (auto [unit, suffix] : kUnits) {
    if (bytes >= unit && bytes % unit == 0) return std::to_string(bytes / unit) + suffix;
  }
  return std::to_string(bytes);
}

void mix(uint64_t& h, uint64_t v) {
  for (int i = 0; i < 8; ++i) {
    h = (h ^ ((v >> (8 * i)) & 0xff)) * 1099511628211ull;
  }
}

}  // namespace

const char* choiceSourceName(ChoiceSource source) {
  switch (source) {
    case ChoiceSource::kModel: return "model";
    case ChoiceSource::kTable: return "table";
    case ChoiceSource::kOverride: return "BRAID_ALGO";
    case ChoiceSource::kFixed: return "fixed";
  }
  return "?";
}

TunerOptions TunerOptions::fromConfig(const Config& config, int nranks, int maxChannels) {
  TunerOptions o;
  o.nranks = nranks;
  o.maxChannels = maxChannels;
  o.slotBytes = config.slotBytes;
  o.nslots = config.nslots;
  o.chunkBytes = config.chunkBytes;
  o.nchannels = config.nchannels;
  o.algo = config.algo;
  o.tuningFile = config.tuningFile;
  return o;
}

Status Tuner::prepare(const TunerOptions& options, const CostModel& model) {
  if (options.nranks != model.nranks()) {
    return internalError("tuner for " + std::to_string(options.nranks) +
                         " ranks given a model of " + std::to_string(model.nranks()));
  }
  options_ = options;
  hosts_ = model.hosts();
  options_.maxChannels = std::max(1, options.maxChannels);
  ASSIGN_OR_RETURN(override_, AlgoOverride::parse(options.algo));
  // A forced algorithm the FIFO depth cannot run is an error now, not a hang later.
  for (int c = 0; c < kModelled; ++c) {
    const auto coll = static_cast<Collective>(c);
    for (uint64_t bytes : {uint64_t{0}, uint64_t{1} << 62}) {
      std::optional<std::vector<Algorithm>> allowed = override_.allowed(coll, bytes);
      if (!allowed) continue;
      const bool any = std::any_of(allowed->begin(), allowed->end(),
                                   [&](Algorithm a) { return usable(a, coll); });
      if (!any) {
        return invalidArgument(
            "BRAID_ALGO forces " + std::string(algorithmName(allowed->front())) + " for " +
            std::string(collectiveName(coll)) + ", which needs " +
            "BRAID_NSLOTS >= " + std::to_string(minSlotsFor(allowed->front(), coll)));
      }
    }
  }
  return okStatus();
}

Result<Tuner> Tuner::create(const TunerOptions& options, const CostModel& model,
                            const TuningTable* table, const GridShare& share) {
  Tuner t;
  RETURN_IF_ERROR(t.prepare(options, model));
  RETURN_IF_ERROR(t.buildGrid(model, share));
  if (table != nullptr) RETURN_IF_ERROR(t.adoptTable(*table));
  return t;
}

Result<std::optional<Tuner>> Tuner::createFromKeptGrid(const TunerOptions& options,
                                                       const CostModel& model,
                                                       const TuningTable* table, int sharers) {
  Tuner t;
  RETURN_IF_ERROR(t.prepare(options, model));
  std::shared_ptr<const GridBuild> kept = t.keptGrid(t.gridKey(model, std::max(1, sharers)));
  if (!kept) return std::optional<Tuner>();
  t.grid_ = std::shared_ptr<const Grid>(kept, &kept->grid);
  t.kept_ = std::move(kept);
  if (table != nullptr) RETURN_IF_ERROR(t.adoptTable(*table));
  return std::optional<Tuner>(std::move(t));
}

bool Tuner::usable(Algorithm algo, Collective coll) const {
  return algorithmServes(algo, coll) && minSlotsFor(algo, coll) <= options_.nslots;
}

uint32_t Tuner::chunkFor(uint32_t chunkBytes) const {
  if (options_.chunkBytes != 0) chunkBytes = options_.chunkBytes;
  return std::min(chunkBytes, options_.slotBytes);
}

int Tuner::channelsFor(int nchannels) const {
  if (options_.nchannels != 0) nchannels = options_.nchannels;
  return std::clamp(nchannels, 1, options_.maxChannels);
}

int Tuner::gridIndex(uint64_t bytes) {
  if (bytes <= 1) return 0;
  // Nearest power of two in log scale: 2^k covers [2^(k-1/2), 2^(k+1/2)).
  const int k = std::bit_width(bytes) - 1;  // 2^k <= bytes < 2^(k+1)
  const double fraction = std::log2(double(bytes)) - k;
  return std::min(kMaxSizeLog, k + (fraction >= 0.5 ? 1 : 0));
}

int Tuner::cellOwner(int pair, int k, bool longSize, int nranks) {
  if (nranks <= 1) return 0;
  if (longSize) return pair % nranks;
  return (pair * kGridSizes + k) % nranks;
}

size_t Tuner::middleChunk(const std::vector<uint32_t>& chunks, uint64_t bytes) {
  size_t middle = chunks.size() / 2;
  while (middle > 0 && bytes <= chunks[middle - 1]) --middle;
  return middle;
}

Tuner::Owners Tuner::cellOwners(const CostModel& model, int nranks, bool staged) const {
  const std::vector<uint32_t> chunks = chunkCandidates();
  const std::vector<int> channels = channelCandidates();
  Owners owners;
  forEachPair([&](Collective coll, Algorithm algo, int pair) {
    std::array<int, kGridSizes>& row = owners.emplace_back();
    for (int k = 0; k < kGridSizes; ++k) {
      const uint64_t bytes = uint64_t{1} << k;
      bool longSize = false;
      for (size_t i = 0; i < chunks.size(); ++i) {
        if (!chunkApplies(chunks, i, bytes)) continue;
        for (int ch : channels) longSize |= bytes > model.wholeUpTo(coll, algo, chunks[i], ch);
      }
      row[size_t(k)] = staged && longSize ? kStaged : cellOwner(pair, k, longSize, nranks);
    }
  });
  return owners;
}

// Bounds the grids a process keeps: a process rarely has more than a few communicator shapes.
constexpr size_t kProcessGrids = 16;

// Communicators of one process with the same model and limits share one grid: building it
// simulates thousands of plans. BRAID_ALGO and the tuning file do not enter it.
struct Tuner::GridCache {
  std::mutex mutex;
  std::map<std::string, std::shared_ptr<const GridBuild>> grids;
};

Tuner::GridCache& Tuner::gridCache() {
  static auto* cache = new GridCache();
  return *cache;
}

void Tuner::forgetGrids() {
  GridCache& cache = gridCache();
  std::lock_guard<std::mutex> lock(cache.mutex);
  cache.grids.clear();
}

std::string Tuner::gridKey(const CostModel& model, int nranks) const {
  std::string key = model.key();
  // A staged build keeps the candidates a later rank with this grid cached must send.
  for (uint64_t v : {uint64_t(options_.maxChannels), uint64_t(options_.slotBytes),
                     uint64_t(options_.nslots), uint64_t(options_.chunkBytes),
                     uint64_t(options_.nchannels), uint64_t(nranks >= kStagedFromRanks)}) {
    key.append(reinterpret_cast<const char*>(&v), sizeof(v));
  }
  return key;
}

std::shared_ptr<const Tuner::GridBuild> Tuner::keptGrid(const std::string& key) {
  GridCache& cache = gridCache();
  std::shared_ptr<const GridBuild> kept;
  {
    std::lock_guard<std::mutex> lock(cache.mutex);
    if (auto it = cache.grids.find(key); it != cache.grids.end()) kept = it->second;
  }
  gridOrigin_ = kept ? GridOrigin::kProcess : GridOrigin::kCosted;
  if (!kept && !options_.gridFileDir.empty()) {
    kept = readGridFile(key);
    if (kept) {
      gridOrigin_ = GridOrigin::kFile;
      std::lock_guard<std::mutex> lock(cache.mutex);
      if (cache.grids.size() >= kProcessGrids) cache.grids.clear();
      cache.grids.emplace(key, kept);
    }
  }
  return kept;
}

Status Tuner::sendKeptShare(const CostModel& model, const GridShare& share,
                            const GridBuild& kept) const {
  const int nranks = std::max(1, share.nranks);
  if (nranks == 1) return okStatus();
  const bool staged = nranks >= kStagedFromRanks;
  const Owners owners = cellOwners(model, nranks, staged);
  // The other ranks still wait for this one's share; what comes back is this grid again.
  auto scratch = std::make_unique<GridBuild>(kept);
  if (staged) {
    RETURN_IF_ERROR(costStaged(nullptr, share, owners, model.crowding() <= 1, *scratch)
                        .withContext("sharing the tuner's grid"));
  }
  return gatherCells(share, owners, scratch->grid).withContext("sharing the tuner's grid");
}

Status Tuner::shareKeptGrid(const CostModel& model, const GridShare& share) const {
  if (!kept_) return internalError("shareKeptGrid on a tuner not made from a kept grid");
  return sendKeptShare(model, share, *kept_);
}

Status Tuner::buildGrid(const CostModel& model, const GridShare& share) {
  GridCache& cache = gridCache();
  const int nranks = std::max(1, share.nranks);
  const bool staged = nranks >= kStagedFromRanks;
  std::string key = gridKey(model, nranks);
  std::shared_ptr<const GridBuild> cached = keptGrid(key);
  if (cached) {
    grid_ = std::shared_ptr<const Grid>(cached, &cached->grid);
    return sendKeptShare(model, share, *cached);
  }
  const Owners owners = cellOwners(model, nranks, staged);
  const bool ranksHaveCores = model.crowding() <= 1;
  auto build = std::make_shared<GridBuild>();
  costCells(model, owners, share.rank, build->grid);
  if (staged) {
    RETURN_IF_ERROR(costStaged(&model, share, owners, ranksHaveCores, *build)
                        .withContext("sharing the tuner's grid"));
  }
  releaseSimulationTables();
  if (nranks > 1) {
    RETURN_IF_ERROR(
        gatherCells(share, owners, build->grid).withContext("sharing the tuner's grid"));
  }
  if (options_.writesGridFile && !options_.gridFileDir.empty()) writeGridFile(key, *build);
  std::lock_guard<std::mutex> lock(cache.mutex);
  if (cache.grids.size() >= kProcessGrids) cache.grids.clear();
  const std::shared_ptr<const GridBuild>& kept =
      cache.grids.emplace(std::move(key), std::move(build)).first->second;
  grid_ = std::shared_ptr<const Grid>(kept, &kept->grid);
  return okStatus();
}

template <typename Visit>
void Tuner::forEachPair(Visit&& visit) const {
  int pair = 0;
  for (int c = 0; c < kModelled; ++c) {
    const auto coll = static_cast<Collective>(c);
    for (Algorithm algo : algorithmsFor(coll)) {
      if (usable(algo, coll)) visit(coll, algo, pair++);
    }
  }
}

std::vector<uint32_t> Tuner::chunkCandidates() const {
  if (options_.chunkBytes != 0) return {chunkFor(options_.chunkBytes)};
  std::vector<uint32_t> chunks;
  for (uint32_t c : kChunkCandidates) {
    if (c <= options_.slotBytes) chunks.push_back(c);
  }
  if (chunks.empty()) chunks.push_back(options_.slotBytes);
  return chunks;
}

std::vector<int> Tuner::channelCandidates() const {
  if (options_.nchannels != 0) return {channelsFor(options_.nchannels)};
  std::vector<int> channels;
  for (int c : kChannelCandidates) {
    if (c <= options_.maxChannels) channels.push_back(c);
  }
  return channels;
}

bool Tuner::chunkApplies(const std::vector<uint32_t>& chunks, size_t i, uint64_t bytes) {
  // A message no larger than a smaller candidate's chunk plans the same with this one.
  if (i > 0 && bytes <= chunks[i - 1]) return false;
  return !(bytes > kMinLargeCallChunkBytes && chunks[i] < kMinLargeCallChunkBytes &&
           chunks.back() >= kMinLargeCallChunkBytes);
}

bool Tuner::costsCell(Algorithm algo, Collective coll, uint64_t bytes) const {
  if (modelMayPick(algo, coll, bytes, options_.nranks, hosts_)) return true;
  // Bruck's all-to-all of large blocks packs O(n log n) of them a rank: slow to simulate, and
  // never picked at any rank count; nor is rd's reduce-scatter of large blocks.
  if ((coll == Collective::kAllToAll || coll == Collective::kReduceScatter) &&
      algo == Algorithm::kRd && bytes > kBruckMaxBlockBytes) {
    return false;
  }
  return options_.nranks < kCostOnlyPickableFromRanks;
}

void Tuner::costCells(const CostModel& model, const Owners& owners, int rank, Grid& grid) const {
  const std::vector<uint32_t> chunks = chunkCandidates();
  const std::vector<int> channels = channelCandidates();
  forEachPair([&](Collective coll, Algorithm algo, int pair) {
    for (int k = 0; k < kGridSizes; ++k) {
      if (owners[size_t(pair)][size_t(k)] != rank) continue;
      const uint64_t bytes = uint64_t{1} << k;
      if (!costsCell(algo, coll, bytes)) continue;
      Cell& cell = grid[static_cast<int>(coll)][k][static_cast<int>(algo)];
      auto consider = [&](size_t i, int ch) {
        if (!chunkApplies(chunks, i, bytes)) return;
        Result<double> us = model.predict(coll, algo, bytes, chunks[i], ch);
        if (!us.ok()) return;  // a shape this algorithm cannot plan: not a candidate
        if (cell.us < 0 || us.value() < cell.us) cell = Cell{us.value(), chunks[i], ch};
      };
      // Coordinate descent: the channel count at the middle chunk, then the chunk at that
      // channel count (5 candidates costed instead of 9; the two rarely interact much).
      const size_t middle = middleChunk(chunks, bytes);
      for (int ch : channels) {
        if (ch == channels.front() || bytes >= uint64_t(ch) * kMinChannelBytes) {
          consider(middle, ch);
        }
      }
      const int bestChannels = cell.us < 0 ? channels.front() : cell.nchannels;
      for (size_t i = 0; i < chunks.size(); ++i) {
        if (i != middle) consider(i, bestChannels);
      }
    }
  });
}

Status Tuner::costStaged(const CostModel* model, const GridShare& share, const Owners& owners,
                         bool ranksHaveCores, GridBuild& build) const {
  const std::vector<uint32_t> chunks = chunkCandidates();
  const std::vector<int> channels = channelCandidates();
  struct LongCell {
    Collective coll;
    Algorithm algo;
    int k;
    size_t middle;
    size_t unit;  ///< the cell's pair, numbered among the pairs with long cells
  };
  std::vector<LongCell> cells;
  size_t units = 0;
  forEachPair([&](Collective coll, Algorithm algo, int pair) {
    bool counted = false;
    for (int k = 0; k < kGridSizes; ++k) {
      const uint64_t bytes = uint64_t{1} << k;
      if (owners[size_t(pair)][size_t(k)] != kStaged || !costsCell(algo, coll, bytes)) continue;
      if (!counted) ++units;
      counted = true;
      cells.push_back({coll, algo, k, middleChunk(chunks, bytes), units - 1});
    }
  });
  const size_t nranks = size_t(std::max(1, share.nranks));
  // Round `first` gives share (unit, candidate) to the rank after the ones the shares before it
  // went to, so the two rounds start on different ranks.
  auto ownersOf = [&](size_t candidates, size_t first) {
    std::vector<int> ownerOf;
    ownerOf.reserve(cells.size() * candidates);
    for (const LongCell& c : cells) {
      for (size_t i = 0; i < candidates; ++i) {
        ownerOf.push_back(int((first + c.unit * candidates + i) % nranks));
      }
    }
    return ownerOf;
  };
  auto price = [&](const LongCell& c, size_t chunk, int nchannels) {
    const uint64_t bytes = uint64_t{1} << c.k;
    if (!chunkApplies(chunks, chunk, bytes)) return Cell{};
    Result<double> us = model->predict(c.coll, c.algo, bytes, chunks[chunk], nchannels);
    return us.ok() ? Cell{us.value(), chunks[chunk], nchannels} : Cell{};
  };
  // costCells' order and test: a candidate replaces the best so far only when faster.
  auto better = [](Cell& best, const Cell& c) {
    if (c.us >= 0 && (best.us < 0 || c.us < best.us)) best = c;
  };

  // Where every rank has a core and there are enough ranks, the chunks are costed at every
  // channel count in the same round as the channel counts, each candidate on a rank of its own:
  // init then waits for one candidate rather than two in turn (a few of which take seconds at
  // 1000 ranks), and the choice below is the same. Crowded ranks would only add CPU.
  const size_t speculative = units * channels.size() * (1 + chunks.size());
  const bool oneRound = ranksHaveCores && nranks >= speculative;
  const std::vector<int> byChannel = ownersOf(channels.size(), 0);
  const std::vector<int> byChunk =
      ownersOf(chunks.size() * (oneRound ? channels.size() : 1), units * channels.size());
  if (model == nullptr && (build.channelRound.size() != byChannel.size() ||
                           build.chunkRound.size() != byChunk.size())) {
    return internalError("the kept grid has " + std::to_string(build.channelRound.size()) + " + " +
                         std::to_string(build.chunkRound.size()) +
                         " long-size candidates where this communicator costs " +
                         std::to_string(byChannel.size()) + " + " + std::to_string(byChunk.size()));
  }
  auto channelWorthCosting = [&](const LongCell& c, int ch) {
    return ch == channels.front() || (uint64_t{1} << c.k) >= uint64_t(ch) * kMinChannelBytes;
  };
  // chunkRound's entry of chunk `chunk` at channel candidate `ch` (oneRound), or at the best.
  auto chunkEntry = [&](size_t cell, size_t ch, size_t chunk) {
    return (oneRound ? cell * channels.size() + ch : cell) * chunks.size() + chunk;
  };
  if (model != nullptr) {
    build.channelRound.assign(byChannel.size(), Cell{});
    for (size_t e = 0; e < byChannel.size(); ++e) {
      const LongCell& c = cells[e / channels.size()];
      const int ch = channels[e % channels.size()];
      if (byChannel[e] == share.rank && channelWorthCosting(c, ch)) {
        build.channelRound[e] = price(c, c.middle, ch);
      }
    }
  }
  if (oneRound) {
    if (model != nullptr) {
      build.chunkRound.assign(byChunk.size(), Cell{});
      for (size_t cell = 0; cell < cells.size(); ++cell) {
        for (size_t ch = 0; ch < channels.size(); ++ch) {
          if (!channelWorthCosting(cells[cell], channels[ch])) continue;
          for (size_t chunk = 0; chunk < chunks.size(); ++chunk) {
            const size_t e = chunkEntry(cell, ch, chunk);
            if (byChunk[e] != share.rank || chunk == cells[cell].middle) continue;
            build.chunkRound[e] = price(cells[cell], chunk, channels[ch]);
          }
        }
      }
    }
    if (share.nranks > 1) {
      std::vector<int> ownerOf = byChannel;
      ownerOf.insert(ownerOf.end(), byChunk.begin(), byChunk.end());
      std::vector<Cell> entries = build.channelRound;
      entries.insert(entries.end(), build.chunkRound.begin(), build.chunkRound.end());
      RETURN_IF_ERROR(gatherEntries(share, ownerOf, entries));
      std::copy(entries.begin(), entries.begin() + long(byChannel.size()),
                build.channelRound.begin());
      std::copy(entries.begin() + long(byChannel.size()), entries.end(), build.chunkRound.begin());
    }
  } else if (share.nranks > 1) {
    RETURN_IF_ERROR(gatherEntries(share, byChannel, build.channelRound));
  }

  std::vector<Cell> best(cells.size());
  for (size_t e = 0; e < build.channelRound.size(); ++e) {
    better(best[e / channels.size()], build.channelRound[e]);
  }
  // The channel candidate each cell's other chunks are costed at.
  auto bestChannel = [&](size_t cell) {
    const int ch = best[cell].us < 0 ? channels.front() : best[cell].nchannels;
    return size_t(std::find(channels.begin(), channels.end(), ch) - channels.begin());
  };
  if (!oneRound) {
    if (model != nullptr) {
      build.chunkRound.assign(byChunk.size(), Cell{});
      for (size_t e = 0; e < byChunk.size(); ++e) {
        const size_t cell = e / chunks.size(), chunk = e % chunks.size();
        if (byChunk[e] != share.rank || chunk == cells[cell].middle) continue;
        build.chunkRound[e] = price(cells[cell], chunk, channels[bestChannel(cell)]);
      }
    }
    if (share.nranks > 1) RETURN_IF_ERROR(gatherEntries(share, byChunk, build.chunkRound));
  }

  for (size_t cell = 0; cell < cells.size(); ++cell) {
    const size_t ch = bestChannel(cell);
    for (size_t chunk = 0; chunk < chunks.size(); ++chunk) {
      better(best[cell], build.chunkRound[chunkEntry(cell, ch, chunk)]);
    }
  }
  for (size_t i = 0; i < cells.size(); ++i) {
    build.grid[static_cast<int>(cells[i].coll)][cells[i].k][static_cast<int>(cells[i].algo)] =
        best[i];
  }
  return okStatus();
}

Status Tuner::gatherEntries(const GridShare& share, const std::vector<int>& ownerOf,
                            std::vector<Cell>& entries) {
  // Each rank sends the entries it owns in order, padded to the most entries any rank owns: what
  // a rank receives stays the size of one grid however many ranks split it.
  const size_t nranks = size_t(share.nranks);
  std::vector<size_t> owned(nranks, 0);
  for (int owner : ownerOf) ++owned[size_t(owner)];
  const size_t segmentBytes =
      kCellBytes * std::max<size_t>(1, *std::max_element(owned.begin(), owned.end()));
  std::vector<uint8_t> all(segmentBytes * nranks);
  std::fill(owned.begin(), owned.end(), 0);
  // The place of an entry in its owner's segment; owned[] counts as entries are placed.
  auto slot = [&](int owner) {
    return all.data() + segmentBytes * size_t(owner) + kCellBytes * owned[size_t(owner)]++;
  };
  for (size_t e = 0; e < ownerOf.size(); ++e) {
    uint8_t* at = slot(ownerOf[e]);
    if (ownerOf[e] == share.rank) putCell(at, entries[e]);
  }
  RETURN_IF_ERROR(share.allGather(all.data(), segmentBytes));
  std::fill(owned.begin(), owned.end(), 0);
  for (size_t e = 0; e < ownerOf.size(); ++e) {
    const uint8_t* in = slot(ownerOf[e]);
    if (ownerOf[e] != share.rank) entries[e] = getCell(in);
  }
  return okStatus();
}

void Tuner::putCell(uint8_t* out, const Cell& cell) {
  putLe64(out, std::bit_cast<uint64_t>(cell.us));
  putLe32(out + 8, cell.chunkBytes);
  putLe32(out + 12, static_cast<uint32_t>(cell.nchannels));
}

Tuner::Cell Tuner::getCell(const uint8_t* in) {
  return Cell{std::bit_cast<double>(getLe64(in)), getLe32(in + 8),
              static_cast<int>(getLe32(in + 12))};
}

Status Tuner::gatherCells(const GridShare& share, const Owners& owners, Grid& grid) const {
  std::vector<int> ownerOf;
  std::vector<Cell> entries;
  forEachPair([&](Collective coll, Algorithm algo, int pair) {
    for (int k = 0; k < kGridSizes; ++k) {
      if (owners[size_t(pair)][size_t(k)] == kStaged) continue;
      ownerOf.push_back(owners[size_t(pair)][size_t(k)]);
      entries.push_back(grid[static_cast<int>(coll)][k][static_cast<int>(algo)]);
    }
  });
  RETURN_IF_ERROR(gatherEntries(share, ownerOf, entries));
  size_t e = 0;
  forEachPair([&](Collective coll, Algorithm algo, int pair) {
    for (int k = 0; k < kGridSizes; ++k) {
      if (owners[size_t(pair)][size_t(k)] == kStaged) continue;
      grid[static_cast<int>(coll)][k][static_cast<int>(algo)] = entries[e++];
    }
  });
  return okStatus();
}

Status Tuner::adoptTable(const TuningTable& table) {
  const std::string file = table.origin().empty() ? options_.tuningFile : table.origin();
  for (const TuningEntry& e : table.entries()) {
    if (e.nranks != options_.nranks) continue;
    auto bad = [&](const std::string& why) {
      return invalidArgument("BRAID_TUNING_FILE " + file + ":" + std::to_string(e.line) + ": " +
                             why);
    };
    if (!usable(e.algo, e.coll)) {
      return bad(std::string(algorithmName(e.algo)) + " for " +
                 std::string(collectiveName(e.coll)) +
                 " needs BRAID_NSLOTS >= " + std::to_string(minSlotsFor(e.algo, e.coll)) +
                 " (it is " + std::to_string(options_.nslots) + ")");
    }
    if (options_.chunkBytes == 0 && e.chunkBytes > options_.slotBytes) {
      return bad("chunk of " + std::to_string(e.chunkBytes) + " bytes exceeds the FIFO slot of " +
                 std::to_string(options_.slotBytes) + " (raise BRAID_CHUNK_BYTES or retune)");
    }
    if (options_.nchannels == 0 && e.nchannels > options_.maxChannels) {
      return bad(std::to_string(e.nchannels) + " channels exceed the " +
                 std::to_string(options_.maxChannels) + " this communicator set up");
    }
    table_.push_back(e);
  }
  return okStatus();
}

bool modelMayPick(Algorithm algo, Collective coll, uint64_t bytes, int nranks, int hosts) {
  if (coll == Collective::kReduceScatter && algo == Algorithm::kRd) {
    return bytes <= kBruckMaxBlockBytes && hosts > 1;
  }
  if (coll == Collective::kAllGather && algo == Algorithm::kRd && hosts == 1 &&
      bytes <= kBruckMaxBlockBytes && nranks < kDirectMaxRanks) {
    return false;
  }
  if (coll == Collective::kAllToAll) {
    const bool small = bytes <= kBruckMaxBlockBytes;
    if (algo == Algorithm::kRd) return small;
    return !(small && hosts > 1 && nranks >= kBruckFromRanks);
  }
  if (algo != Algorithm::kDirect) return true;
  if (nranks >= kDirectMaxRanks) return false;
  if (coll == Collective::kBroadcast || coll == Collective::kReduce) {
    return bytes <= kDirectRootedMaxBytes;
  }
  if (coll == Collective::kAllReduce) {
    return uint64_t(nranks - 1) * bytes <= kDirectAllReduceMaxSent;
  }
  return true;
}

Choice Tuner::fixed(Collective coll) const {
  Choice c;
  c.algo = Algorithm::kPairwise;
  c.chunkBytes = chunkFor(kPointToPointChunk);
  c.nchannels = coll == Collective::kSend || coll == Collective::kRecv ? 1 : channelsFor(1);
  c.source = ChoiceSource::kFixed;
  return c;
}

Choice Tuner::pick(Collective coll, uint64_t bytes, bool honourOverride) const {
  if (static_cast<int>(coll) >= kModelled) return fixed(coll);
  std::optional<std::vector<Algorithm>> allowed;
  if (honourOverride) allowed = override_.allowed(coll, bytes);
  auto isAllowed = [&](Algorithm a) {
    return usable(a, coll) &&
           (!allowed || std::find(allowed->begin(), allowed->end(), a) != allowed->end());
  };
  static const AlgoCells kNoCells{};
  const AlgoCells& cells = grid_ ? (*grid_)[static_cast<int>(coll)][gridIndex(bytes)] : kNoCells;
  for (const TuningEntry& e : table_) {
    if (e.coll != coll || !e.covers(bytes) || !isAllowed(e.algo)) continue;
    const Cell& cell = cells[static_cast<int>(e.algo)];
    return Choice{e.algo, chunkFor(e.chunkBytes), channelsFor(e.nchannels), ChoiceSource::kTable,
                  cell.us};
  }
  int best = -1;
  for (int a = 0; a < kNumAlgorithms; ++a) {
    const Cell& cell = cells[a];
    if (cell.us < 0 || !isAllowed(static_cast<Algorithm>(a))) continue;
    if (!allowed &&
        !modelMayPick(static_cast<Algorithm>(a), coll, bytes, options_.nranks, hosts_)) {
      continue;
    }
    if (best < 0 || cell.us < cells[best].us) best = a;
  }
  const ChoiceSource source = allowed ? ChoiceSource::kOverride : ChoiceSource::kModel;
  if (best >= 0) {
    const Cell& cell = cells[best];
    return Choice{static_cast<Algorithm>(best), chunkFor(cell.chunkBytes),
                  channelsFor(cell.nchannels), source, cell.us};
  }
  // Nothing costed among the allowed (the model could not plan them): the first that may run.
  for (Algorithm a : algorithmsFor(coll)) {
    if (isAllowed(a)) {
      return Choice{a, chunkFor(kChunkCandidates[1]), channelsFor(1), source, -1};
    }
  }
  return fixed(coll);
}

Choice Tuner::choose(Collective coll, uint64_t bytes) const { return pick(coll, bytes, true); }

Choice Tuner::chooseUnforced(Collective coll, uint64_t bytes) const {
  return pick(coll, bytes, false);
}

std::optional<double> Tuner::predictedUs(Collective coll, Algorithm algo, uint64_t bytes) const {
  if (static_cast<int>(coll) >= kModelled || !grid_) return std::nullopt;
  const Cell& cell = (*grid_)[static_cast<int>(coll)][gridIndex(bytes)][static_cast<int>(algo)];
  if (cell.us < 0) return std::nullopt;
  return cell.us;
}

std::string Tuner::describe() const {
  std::ostringstream os;
  for (int c = 0; c < kModelled; ++c) {
    const auto coll = static_cast<Collective>(c);
    os << (c ? "; " : "") << collectiveName(coll) << ":";
    const char* sep = " ";
    for (uint64_t bytes : {uint64_t{8}, uint64_t{64} << 10, uint64_t{16} << 20}) {
      const Choice ch = choose(coll, bytes);
      os << sep << sizeText(bytes) << "B=" << algorithmName(ch.algo) << "/" << ch.nchannels << "ch";
      sep = ", ";
    }
  }
  if (override_.active()) os << " (BRAID_ALGO: " << override_.describe() << ")";
  if (!table_.empty()) os << " (" << table_.size() << " lines of " << options_.tuningFile << ")";
  return os.str();
}

std::string Tuner::formatTable() const {
  std::ostringstream os;
  os << "tuner table for " << options_.nranks << " ranks (sizes per rank; evaluated at powers of "
     << "two; source: model, table = BRAID_TUNING_FILE, BRAID_ALGO):\n";
  for (int c = 0; c < kModelled; ++c) {
    const auto coll = static_cast<Collective>(c);
    int first = 0;
    for (int k = 0; k < kGridSizes; ++k) {
      const Choice here = choose(coll, uint64_t{1} << k);
      const bool last = k + 1 == kGridSizes;
      if (!last) {
        const Choice next = choose(coll, uint64_t{1} << (k + 1));
        if (next.algo == here.algo && next.chunkBytes == here.chunkBytes &&
            next.nchannels == here.nchannels && next.source == here.source) {
          continue;
        }
      }
      char line[200];
      const std::string range =
          sizeText(uint64_t{1} << first) + "-" + sizeText(uint64_t{1} << k) + "B";
      std::snprintf(line, sizeof(line), "  %-13s %-12s %-8s chunk %-5s x%d  %-10s",
                    std::string(collectiveName(coll)).c_str(), range.c_str(),
                    std::string(algorithmName(here.algo)).c_str(),
                    sizeText(here.chunkBytes).c_str(), here.nchannels,
                    choiceSourceName(here.source));
      os << line;
      if (here.predictedUs >= 0) {
        std::snprintf(line, sizeof(line), " model %.3g..%.3g us",
                      choose(coll, uint64_t{1} << first).predictedUs, here.predictedUs);
        os << line;
      }
      os << "\n";
      first = k + 1;
    }
  }
  return os.str();
}

uint64_t Tuner::digest() const {
  uint64_t h = 1469598103934665603ull;
  mix(h, static_cast<uint64_t>(options_.nranks));
  for (const auto& sizes : grid_ ? *grid_ : Grid{}) {
    for (const AlgoCells& cells : sizes) {
      for (const Cell& cell : cells) {
        mix(h, std::bit_cast<uint64_t>(cell.us));
        mix(h, cell.chunkBytes);
        mix(h, static_cast<uint64_t>(cell.nchannels));
      }
    }
  }
  for (const TuningEntry& e : table_) {
    mix(h, static_cast<uint64_t>(e.coll));
    mix(h, e.minBytes);
    mix(h, e.toInf ? ~uint64_t{0} : e.maxBytes);
    mix(h, static_cast<uint64_t>(e.algo));
    mix(h, e.chunkBytes);
    mix(h, static_cast<uint64_t>(e.nchannels));
  }
  return h;
}

}  // namespace braid
