// braid-perf output: the nccl-tests style table (header, per-rank block, column header, one row per
// size, summary) and the JSON document of --json. Pure formatting: rank 0 prints what these return.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/config.h"
#include "core/status.h"
#include "perf/perf_data.h"
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
/// Column header of --algo all: one busbw column per algorithm (out of place), then #wrong.
std::string formatAlgoColumnHeader(const std::vector<std::string>& algorithms);

/// A time in microseconds in 7 columns, with fewer decimals as it grows (as nccl-tests prints).
std::string formatTime(double us);
/// The row's leading columns: size, count, type, redop, root.
std::string formatRowPrefix(uint64_t bytes, uint64_t count, std::string_view type,
                            std::string_view op, int root);
/// time, algbw, busbw and #wrong of one placement; wrong == nullopt prints N/A (no checking).
std::string formatPlacement(double timeUs, const Bandwidth& bw, std::optional<uint64_t> wrong);
/// The busbw cells of --algo all (widths as formatAlgoColumnHeader) and the #wrong cell.
std::string formatAlgoCells(const std::vector<std::string>& algorithms,
                            const std::vector<double>& busBw, std::optional<uint64_t> wrong);

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
  Status writeFile(const std::string& path) const;

 private:
  PerfOptions options_;
  int nranks_;
  int nprocs_;
  std::vector<Measurement> measurements_;
};

/// The --help-env text: every BRAID_ variable with its default and doc line.
std::string formatEnvHelp(const std::vector<ConfigVarInfo>& variables);

/// s as a JSON string literal, quotes included.
std::string jsonString(std::string_view s);

}  // namespace braid::perf
