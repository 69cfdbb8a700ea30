// The tuning table: measured choices that take precedence over the cost model (BRAID_TUNING_FILE),
// written by `braid-perf --tune FILE`.
//
// The file is plain text, one choice per line; '#' starts a comment, blank lines are ignored:
//
//   braid-tuning-table 1
//   # collective  nranks  min_bytes  max_bytes  algorithm  chunk_bytes  channels  [time_us]
//   allreduce     4       0          4096       direct     32768        1         7.9
//   allreduce     4       4096       inf        ring       131072       2         10232
//
// - The first non-comment line is the header `braid-tuning-table 1` (the format version).
// - collective: allreduce, broadcast, reduce, allgather, reducescatter or alltoall.
// - nranks: the communicator size the line applies to; a file may hold several sizes, and a
//   communicator reads only the lines of its own size.
// - [min_bytes, max_bytes): the message size as the API counts it per rank (count x element
//   size); max_bytes may be `inf`. Sizes take a K, M or G suffix (powers of 1024). The ranges of
//   one (collective, nranks) must not overlap; sizes none covers are left to the cost model.
// - algorithm: a name algorithmName() spells that serves the collective; chunk_bytes: 1K..16M;
//   channels: 1..32.
// - time_us: what braid-perf measured for the choice (informative; optional).
// Anything else is an error that names the file and the line.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "algorithms/plan.h"
#include "base/status.h"

namespace braid {

/// One line of a tuning file: the choice for (coll, nranks) from minBytes up to maxBytes.
struct TuningEntry {
  Collective coll = Collective::kAllReduce;
  int nranks = 1;
  uint64_t minBytes = 0;
  uint64_t maxBytes = 0;  ///< exclusive; unused when toInf
  bool toInf = false;
  Algorithm algo = Algorithm::kRing;
  uint32_t chunkBytes = 0;
  int nchannels = 1;
  double timeUs = -1;  ///< negative when the line has none
  int line = 0;        ///< where it was read (0 for entries made in memory)

  bool covers(uint64_t bytes) const { return bytes >= minBytes && (toInf || bytes < maxBytes); }
};

/// The choices of a tuning file, checked: no two lines of one (collective, nranks) overlap.
class TuningTable {
 public:
  TuningTable() = default;
  /// Parses the text of a tuning file; `origin` (the file name) prefixes every error, with the
  /// line number.
  static Result<TuningTable> parse(const std::string& text, const std::string& origin);
  /// parse() of the file at `path`.
  static Result<TuningTable> load(const std::string& path);

  /// The file text, lines sorted by collective, nranks and size.
  std::string format() const;
  /// Writes format() to `path`.
  Status save(const std::string& path) const;

  /// The entry covering a call, or nullptr.
  const TuningEntry* find(Collective coll, int nranks, uint64_t bytes) const;
  /// Replaces every entry of (coll, nranks) by `entries` (which must not overlap).
  Status replace(Collective coll, int nranks, std::vector<TuningEntry> entries);

  const std::vector<TuningEntry>& entries() const { return entries_; }
  const std::string& origin() const { return origin_; }

 private:
  Status add(TuningEntry entry);

  std::vector<TuningEntry> entries_;
  std::string origin_;
};

/// The collectives a tuning table (and BRAID_ALGO) can name, parsed as BRAID_ALGO spells them.
bool parseTunableCollective(const std::string& name, Collective* coll);

}  // namespace braid
