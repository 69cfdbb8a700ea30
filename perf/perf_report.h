// braid-perf output: the nccl-tests style table (header, per-rank block, column header, one row per
// size, summary) and the JSON document of --json. Pure formatting: rank 0 prints what these return.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "perf/perf_data.h"
#include "perf/perf_error.h"
#include "perf/perf_options.h"

namespace braid::perf {

/// One rank's line in the "Using devices" block.
struct RankInfo {
  int rank = 0;
  int pid = 0;
  std::string host;
};

/// "# nThread ... minBytes ... maxBytes ... step: ..." and the option lines after it.
std::string formatHeader(const PerfOptions& options);
/// "# Using devices" and one "#  Rank  N Group  0 Pid  P on HOST device -1 [host]" per rank.
std::string formatRanks(const std::vector<RankInfo>& ranks);
/// The three column-header lines: out-of-place then in-place time/algbw/busbw/#wrong.
std::string formatColumnHeader();
/// Column header of --algo all: one busbw column per algorithm (out of place), then #wrong, then
/// (withTuner) the algorithm the tuner chooses and its regret.
std::string formatAlgoColumnHeader(const std::vector<std::string>& algorithms,
                                   bool withTuner = false);

/// A time in microseconds in 7 columns, with fewer decimals as it grows (as nccl-tests prints).
std::string formatTime(double us);
/// The row's leading columns: size, count, type, redop, root.
std::string formatRowPrefix(uint64_t bytes, uint64_t count, std::string_view type,
                            std::string_view op, int root);
/// time, algbw, busbw and #wrong of one placement; wrong == nullopt prints N/A (no checking).
std::string formatPlacement(double timeUs, const Bandwidth& bw, std::optional<uint64_t> wrong);
/// What the tuner chose for a row and what that cost: time(choice) / time(best measured) - 1.
struct TunerCell {
  std::string algorithm;
  double regret = 0;
};

/// The busbw cells of --algo all (widths as formatAlgoColumnHeader), the #wrong cell and, with
/// `tuner`, the tuner's choice and regret.
std::string formatAlgoCells(const std::vector<std::string>& algorithms,
                            const std::vector<double>& busBw, std::optional<uint64_t> wrong,
                            const std::optional<TunerCell>& tuner = std::nullopt);

/// The regret of the tuner's choices over a sweep. Every algorithm's time at every size is the
/// fastest of the cycles (-N) that measured it, so other work on a shared machine, which only ever
/// slows a run down, weighs as little as the cycles allow.
class RegretSummary {
 public:
  /// Names of the columns `add` gets times for, for the per-size lines.
  void setLabels(std::vector<std::string> labels) { labels_ = std::move(labels); }
  /// One row: `times` (us) per algorithm column, and the column the tuner chose.
  void add(const std::string& row, const std::vector<double>& times, size_t chosen);
  size_t rows() const { return rows_.size(); }
  /// Regret of the row whose key is `row` over its best-of-cycles times.
  double regret(const std::string& row) const;
  /// "# <title> over N sizes (...): geometric mean X%, max Y% (size ROW); ..." plus a line per
  /// size whose regret is above `reportAbove`.
  std::string format(const std::string& title = "Tuner regret", double reportAbove = 0.0) const;
  double geometricMean() const;
  double max() const;

 private:
  struct Row {
    std::string key;
    std::vector<double> best;
    size_t chosen = 0;
  };
  std::vector<Row> rows_;
  std::vector<std::string> labels_;
};

/// One (algorithm, chunk, channels) braid-perf --tune measures.
struct TuneVariant {
  std::string algorithm = "ring";
  uint32_t chunkBytes = 0;
  int nchannels = 1;
  std::string label() const;  ///< "ring/128K/2"
};

/// The variants --tune measures: every algorithm in `algorithms` with every chunk of `chunkBytes`
/// up to `slotBytes` and every channel count of `channels` up to `maxChannels` (the tuner's
/// candidates and the bounds a communicator puts on them).
std::vector<TuneVariant> tuneVariants(const std::vector<std::string>& algorithms,
                                      const std::vector<uint32_t>& chunkBytes,
                                      const std::vector<int>& channels, uint32_t slotBytes,
                                      int maxChannels);

/// One line of the tuning table --tune writes: the variant for the sizes [minBytes, maxBytes).
struct TuneRange {
  uint64_t minBytes = 0;
  uint64_t maxBytes = 0;  ///< unused when toInf
  bool toInf = false;
  TuneVariant variant;
  double timeUs = -1;  ///< what the variant measured (at the last size of the range)
};

/// What --tune measured: per size, every variant's fastest time over the cycles; then the table.
class TuneRecorder {
 public:
  explicit TuneRecorder(std::vector<TuneVariant> variants) : variants_(std::move(variants)) {}
  void record(uint64_t bytes, size_t variant, double timeUs);
  /// The fastest variant at `bytes` (which must have been recorded) and its time.
  std::pair<size_t, double> best(uint64_t bytes) const;
  /// The fastest recorded time of `variant` at `bytes`, or a negative number.
  double time(uint64_t bytes, size_t variant) const;
  /// One entry per run of sizes whose fastest variant is the same; ranges meet at the geometric
  /// mean of neighbouring sizes, the first starts at 0 and the last has no end. A size keeps the
  /// previous size's variant while that is within kTolerance of its fastest.
  std::vector<TuneRange> entries() const;
  static constexpr double kTolerance = 0.03;
  const std::vector<TuneVariant>& variants() const { return variants_; }

 private:
  std::vector<TuneVariant> variants_;
  std::map<uint64_t, std::vector<double>> times_;  ///< size -> per variant, < 0: not measured
};

/// Column header of --tune: the fastest variant and its time, the tuner's choice (as it stands,
/// before the new table) and its regret.
std::string formatTuneColumnHeader();
/// A --tune row's cells; tunerUs < 0 when the tuner's choice was not among the variants.
std::string formatTuneCells(const std::string& best, double bestUs, const std::string& tuner,
                            double tunerUs);

/// "# Out of bounds values : N OK|FAILED" and "# Avg bus bandwidth    : X".
std::string formatSummary(uint64_t wrong, double avgBusBw);
/// The same with one average line per algorithm.
std::string formatAlgoSummary(uint64_t wrong, const std::vector<std::string>& algorithms,
                              const std::vector<double>& avgBusBw);

/// Running mean of busbw values, for the summary.
class BusBwAverage {
 public:
  void add(double busBw) {
    sum_ += busBw;
    ++count_;
  }
  double value() const { return count_ == 0 ? 0.0 : sum_ / static_cast<double>(count_); }

 private:
  double sum_ = 0;
  uint64_t count_ = 0;
};

/// One measured row of one placement and algorithm, as --json records it.
struct Measurement {
  std::string collective;
  std::string algorithm;  ///< "auto" when the tuner chose
  std::string dtype;
  std::string op;  ///< "none" for collectives that do not reduce
  int root = -1;
  uint64_t size = 0;
  uint64_t count = 0;
  int nranks = 0;
  double timeUs = 0;
  double algBw = 0;
  double busBw = 0;
  std::optional<uint64_t> wrong;  ///< nullopt when not checked
  bool inPlace = false;
};

/// The --json document: the run's settings and every measurement.
class JsonReport {
 public:
  JsonReport(const PerfOptions& options, int nranks, int nprocs);
  void add(Measurement measurement) { measurements_.push_back(std::move(measurement)); }
  const std::vector<Measurement>& measurements() const { return measurements_; }
  std::string document() const;
  Outcome writeFile(const std::string& path) const;

 private:
  PerfOptions options_;
  int nranks_;
  int nprocs_;
  std::vector<Measurement> measurements_;
};

/// One BRAID_ environment variable, as --help-env lists it.
struct EnvVariableHelp {
  std::string name;
  std::string defaultText;  ///< empty: unset by default
  std::string doc;
};

/// The --help-env text: every BRAID_ variable with its default and doc line.
std::string formatEnvHelp(const std::vector<EnvVariableHelp>& variables);

/// s as a JSON string literal, quotes included.
std::string jsonString(std::string_view s);

}  // namespace braid::perf
