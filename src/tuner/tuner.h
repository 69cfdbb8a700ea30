// The tuner: for every call, which algorithm, chunk size and channel count to use.
//
// At init it asks the cost model (cost_model.h) for every collective, every power-of-two message
// size from 1 B to 4 GiB and every algorithm that serves the collective what its candidates
// (chunk of 32K, 128K or 512K up to the FIFO slot size, 1, 2 or 4 channels up to those set up)
// would take - the channel count at the middle chunk first, then the chunk at the best channel
// count - and keeps each algorithm's fastest. That costs thousands of simulated plans
// (docs/performance-notes.md#building-the-grid), so the ranks of a communicator split the grid's
// cells between them and gather the rest (GridShare). The grid is shared by the communicators of
// a process with the same model inputs, and kept in a file for later processes with the same
// inputs and library build (TunerOptions::gridFileDir). A call uses the grid point nearest its
// size (in log scale).
// Precedence, highest first:
//   1. BRAID_ALGO (AlgoOverride semantics): restricts the algorithms a call may use; among them
//      the measured table's choice if it is one, else the model's fastest;
//   2. the measured table (BRAID_TUNING_FILE, tuning_table.h), for the sizes it covers at this
//      communicator's rank count;
//   3. the cost model's fastest algorithm.
// BRAID_CHUNK_BYTES and BRAID_NCHANNELS fix the chunk and channel count of every choice. Every
// rank builds the same tuner from the same shared inputs, so all make the same choice.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "algorithms/plan.h"
#include "base/config.h"
#include "tuner/algo_override.h"
#include "tuner/cost_model.h"
#include "tuner/tuning_table.h"

namespace braid {

/// Where a choice came from: the cost model, the measured table (BRAID_TUNING_FILE), the model
/// among the algorithms BRAID_ALGO allows, or the fixed choice of what the tuner does not model.
enum class ChoiceSource : uint8_t { kModel, kTable, kOverride, kFixed };
/// The name logs and braid-perf print for `source`.
const char* choiceSourceName(ChoiceSource source);

/// How one call will run. Identical on every rank for the same call (ranks must agree).
struct Choice {
  Algorithm algo = Algorithm::kRing;
  uint32_t chunkBytes = 0;  ///< the most bytes one step moves to one peer
  int nchannels = 1;
  ChoiceSource source = ChoiceSource::kModel;
  double predictedUs = -1;  ///< the model's time for this algorithm at the grid point; -1: none
};

/// The communicator's limits and the user's settings the tuner honours.
struct TunerOptions {
  int nranks = 1;
  int maxChannels = 1;      ///< channels whose connectors exist
  uint32_t slotBytes = 0;   ///< FIFO slot size: the largest chunk
  int nslots = 4;           ///< FIFO depth (some algorithms need 2)
  uint32_t chunkBytes = 0;  ///< BRAID_CHUNK_BYTES, 0: tuned
  int nchannels = 0;        ///< BRAID_NCHANNELS, 0: tuned
  std::string algo;         ///< BRAID_ALGO
  std::string tuningFile;   ///< BRAID_TUNING_FILE, for messages
  /// Where the grid is kept for later processes with the same model, limits and library build
  /// (the cache folder); "" keeps it in this process only.
  std::string gridFileDir;
  /// Whether this rank writes the grid there when it had to cost it (one rank per host does).
  bool writesGridFile = false;

  static TunerOptions fromConfig(const Config& config, int nranks, int maxChannels);
};

/// Whether the model may choose `algo` for `coll` at `bytes` among `nranks` on its own (BRAID_ALGO,
/// tuning tables and --algo columns are not bound by this): direct broadcast and reduce only up
/// to 4 MiB, direct all-reduce only while the (nranks - 1) copies a rank sends stay within 64 KiB,
/// and no direct at all from 64 ranks on; all-to-all by rd (Bruck) only for blocks up to 1 KiB,
/// and from 8 ranks on `hosts` > 1 hosts not by pairwise exchange there; reduce-scatter by rd
/// only for blocks up to 1 KiB among ranks on `hosts` > 1 hosts; all-gather of blocks up to 1 KiB
/// on one host below 64 ranks not by rd.
bool modelMayPick(Algorithm algo, Collective coll, uint64_t bytes, int nranks, int hosts = 1);

/// How the ranks of a communicator split the model grid: rank `rank` of `nranks` costs the cells
/// Tuner::cellOwner gives it, and allGather (the bootstrap's: each rank's bytesPerRank bytes at
/// its offset in `data`, nranks times that long) brings it everyone else's. Every rank calls
/// allGather exactly once, even one whose process holds the grid already. nranks 1: this rank
/// costs every cell.
struct GridShare {
  int rank = 0;
  int nranks = 1;
  std::function<Status(uint8_t* data, size_t bytesPerRank)> allGather;
};

/// Where a tuner's grid came from.
enum class GridOrigin : uint8_t {
  kCosted,   ///< simulated now, the ranks sharing the work
  kProcess,  ///< an earlier communicator of this process with the same inputs
  kFile,     ///< the file an earlier process left (TunerOptions::gridFileDir)
};

/// Chooses algorithm, chunk and channels for every call (see above).
class Tuner {
 public:
  /// Model grid: sizes 2^0 .. 2^kMaxSizeLog bytes.
  static constexpr int kMaxSizeLog = 32;
  static constexpr std::array<uint32_t, 3> kChunkCandidates = {32u << 10, 128u << 10, 512u << 10};
  static constexpr std::array<int, 3> kChannelCandidates = {1, 2, 4};

  Tuner() = default;
  /// Fails when BRAID_ALGO is malformed or leaves a collective nothing it can run, or when a line
  /// of `table` for this rank count cannot run here (chunk above the slot size, more channels
  /// than set up, an algorithm the FIFO depth cannot run): the error names the file and line.
  /// `table` may be null.
  static Result<Tuner> create(const TunerOptions& options, const CostModel& model,
                              const TuningTable* table, const GridShare& share = {});
  /// What create would return for a share among `sharers` ranks where this process or a file
  /// (TunerOptions::gridFileDir) already keeps the grid, with no simulation and no gather; nullopt
  /// where neither does. Ranks that all find it need not share the grid's cells.
  static Result<std::optional<Tuner>> createFromKeptGrid(const TunerOptions& options,
                                                         const CostModel& model,
                                                         const TuningTable* table, int sharers);
  /// Where some ranks lack the grid, a tuner from createFromKeptGrid sends them its share, as
  /// create does for a rank with the grid kept (the others call create with the same share).
  Status shareKeptGrid(const CostModel& model, const GridShare& share) const;

  /// The choice for a call, BRAID_ALGO honoured.
  Choice choose(Collective coll, uint64_t bytes) const;
  /// The choice BRAID_ALGO aside: what the table and the model pick.
  Choice chooseUnforced(Collective coll, uint64_t bytes) const;
  /// The model's time of `algo`'s best candidate at the grid point of `bytes`, if it has one.
  std::optional<double> predictedUs(Collective coll, Algorithm algo, uint64_t bytes) const;
  /// Whether `algo` may run `coll` here (serves it, allowed by the FIFO depth).
  bool usable(Algorithm algo, Collective coll) const;

  /// Short summary (three sizes per collective), for one log line.
  std::string describe() const;
  /// Every collective's choices over the grid, merged into size ranges, one line each: what
  /// rank 0 prints at BRAID_DEBUG=INFO.
  std::string formatTable() const;
  /// A hash of everything the choices depend on; equal on every rank of a communicator.
  uint64_t digest() const;
  /// Where the grid came from, and a line for the log: the file read or written, or why none was.
  GridOrigin gridOrigin() const { return gridOrigin_; }
  const std::string& gridNote() const { return gridNote_; }

  /// The grid point a message size uses.
  static int gridIndex(uint64_t bytes);
  /// Which of `nranks` ranks costs the cell of the `pair`-th (collective, algorithm) the grid
  /// models at grid point k. A pair's long sizes (those the model prices from simulations of
  /// spans, CostModel::wholeUpTo) stay with one rank, which simulates the spans once for all of
  /// them; the other cells are spread. (From 32 ranks on the long sizes are costed in rounds
  /// instead: costStaged.)
  static int cellOwner(int pair, int k, bool longSize, int nranks);
  /// Drops the grids this process keeps (for tests and benchmarks: the next create costs anew).
  static void forgetGrids();

 private:
  struct Cell {
    double us = -1;  ///< -1: no candidate could be costed
    uint32_t chunkBytes = 0;
    int nchannels = 1;
  };
  using AlgoCells = std::array<Cell, kNumAlgorithms>;
  static constexpr int kGridSizes = kMaxSizeLog + 1;
  static constexpr int kModelled = AlgoOverride::kNumOverridable;

  using Grid = std::array<std::array<AlgoCells, kGridSizes>, kModelled>;
  /// cellOwner of every grid point, by pair.
  using Owners = std::vector<std::array<int, kGridSizes>>;

  /// A grid and, from kStagedFromRanks ranks on, every candidate its long cells were chosen from
  /// (a rank whose grid is cached still sends its share of them).
  struct GridBuild {
    Grid grid;
    std::vector<Cell> channelRound;  ///< by long cell, then channel candidate
    std::vector<Cell> chunkRound;    ///< by long cell, (in one round) channel, then chunk
  };
  /// cellOwners' owner of a long cell that costStaged costs.
  static constexpr int kStaged = -1;

  /// The grids of this process, by model and limits.
  struct GridCache;
  static GridCache& gridCache();

  /// Checks the options and BRAID_ALGO against the model; the first step of every create.
  Status prepare(const TunerOptions& options, const CostModel& model);
  /// The key of the grid for `model`, these options and a share among `nranks` ranks.
  std::string gridKey(const CostModel& model, int nranks) const;
  /// The grid this process or the grid file keeps for `key` (gridOrigin_ says which), or null.
  std::shared_ptr<const GridBuild> keptGrid(const std::string& key);
  Status buildGrid(const CostModel& model, const GridShare& share);
  /// A rank's part of the gathers of a grid it keeps, for the ranks that cost it.
  Status sendKeptShare(const CostModel& model, const GridShare& share, const GridBuild& kept) const;
  /// The grid file's key: the process cache's key, the file format and the library build.
  static std::string gridFileKey(const std::string& key);
  /// The build kept in gridFileDir for `key`, if one is there and whole (tuner_grid_file.cc).
  std::shared_ptr<const GridBuild> readGridFile(const std::string& key);
  /// Keeps `build` there for later processes; gridNote_ says where, or why not.
  void writeGridFile(const std::string& key, const GridBuild& build);
  /// A cell as the ranks exchange and the file keeps it: 16 little-endian bytes.
  static constexpr size_t kCellBytes = 16;
  static void putCell(uint8_t* out, const Cell& cell);
  static Cell getCell(const uint8_t* in);
  /// Calls visit(coll, algo, pair) for every usable (collective, algorithm), numbered in order.
  template <typename Visit>
  void forEachPair(Visit&& visit) const;
  /// The chunk sizes and channel counts a cell's candidates are made of.
  std::vector<uint32_t> chunkCandidates() const;
  std::vector<int> channelCandidates() const;
  /// Whether candidate chunk i is worth costing at `bytes` (see costCells).
  static bool chunkApplies(const std::vector<uint32_t>& chunks, size_t i, uint64_t bytes);
  /// The candidate chunk costCells tries every channel count with at `bytes`.
  static size_t middleChunk(const std::vector<uint32_t>& chunks, uint64_t bytes);
  /// staged: a long cell's owner is kStaged.
  Owners cellOwners(const CostModel& model, int nranks, bool staged) const;
  /// Whether the grid costs the cell: from kCostOnlyPickableFromRanks ranks on only what the model
  /// may pick (modelMayPick), below that nearly everything, for the regret tools' columns.
  bool costsCell(Algorithm algo, Collective coll, uint64_t bytes) const;
  /// Costs the cells `owners` gives `rank`.
  void costCells(const CostModel& model, const Owners& owners, int rank, Grid& grid) const;
  /// Costs the kStaged cells in two rounds, each gathered: every channel count at the middle chunk
  /// (one share per pair and channel count), then every other chunk at the best of those (one
  /// share per pair and chunk). The same candidates as costCells tries, in the same order, so the
  /// same cells; but a pair's long sizes no longer wait on one rank. With ranksHaveCores and a rank
  /// for every share, one round: every chunk at every channel count beside the channel counts,
  /// the same cells chosen from them. model == nullptr: this rank's grid is cached, and `build`
  /// holds every candidate already.
  Status costStaged(const CostModel* model, const GridShare& share, const Owners& owners,
                    bool ranksHaveCores, GridBuild& build) const;
  /// Sends the entries this rank owns (ownerOf) to the others and fills in theirs.
  static Status gatherEntries(const GridShare& share, const std::vector<int>& ownerOf,
                              std::vector<Cell>& entries);
  /// Sends this rank's cells to the others and fills in theirs (not the kStaged ones).
  Status gatherCells(const GridShare& share, const Owners& owners, Grid& grid) const;
  Status adoptTable(const TuningTable& table);
  Choice pick(Collective coll, uint64_t bytes, bool honourOverride) const;
  Choice fixed(Collective coll) const;
  uint32_t chunkFor(uint32_t chunkBytes) const;
  int channelsFor(int nchannels) const;

  TunerOptions options_;
  int hosts_ = 1;  ///< hosts the ranks span, from the model (modelMayPick)
  AlgoOverride override_;
  std::shared_ptr<const Grid> grid_;  ///< shared by the tuners of one process with equal inputs
  std::shared_ptr<const GridBuild> kept_;  ///< createFromKeptGrid's build, for shareKeptGrid
  std::vector<TuningEntry> table_;         ///< the measured entries for this rank count
  GridOrigin gridOrigin_ = GridOrigin::kCosted;
  std::string gridNote_;
};

}  // namespace braid
