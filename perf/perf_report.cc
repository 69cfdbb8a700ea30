#include "perf/perf_report.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <memory>

namespace braid::perf {
namespace {

std::string format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

std::string format(const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  va_list copy;
  va_copy(copy, args);
  const int n = std::vsnprintf(nullptr, 0, fmt, copy);
  va_end(copy);
  std::string out(n > 0 ? static_cast<size_t>(n) : 0, '\0');
  if (n > 0) std::vsnprintf(out.data(), out.size() + 1, fmt, args);
  va_end(args);
  return out;
}

/// Column width of one algorithm's busbw in --algo all.
int algoWidth(const std::string& name) { return std::max<int>(7, static_cast<int>(name.size())); }

std::string wrongCell(std::optional<uint64_t> wrong, int width) {
  if (!wrong) return format("%*s", width, "N/A");
  return format("%*llu", width, static_cast<unsigned long long>(*wrong));
}

std::string jsonNumber(double v) {
  if (!std::isfinite(v)) return "null";
  return format("%.9g", v);
}

}  // namespace

std::string formatHeader(const PerfOptions& o) {
  const bool factor = o.stepFactor > 1;
  std::string out = format(
      "# nThread %d nGpus 1 minBytes %llu maxBytes %llu step: %llu(%s) warmup iters: %d iters: %d "
      "agg iters: %d validation: %d graph: %d\n",
      o.threads, static_cast<unsigned long long>(o.minBytes),
      static_cast<unsigned long long>(o.maxBytes),
      static_cast<unsigned long long>(factor ? o.stepFactor : o.stepBytes),
      factor ? "factor" : "bytes", o.warmupIters, o.iters, o.aggIters, o.check,
      o.device && o.deviceTiming == DeviceTiming::kGraph ? 1 : 0);
  if (o.blocking)
    out += "# Blocking Enabled: wait for completion and barrier after each collective\n";
  if (o.parallelInit)
    out += "# Parallel Init Enabled: threads call into braidCommInitRank concurrently\n";
  if (!o.algo.empty()) out += "# Algorithm: " + o.algo + "\n";
  if (o.device) {
    switch (o.deviceTiming) {
      case DeviceTiming::kStream:
        out += "# Device calls: stream (the -n calls enqueued, one synchronisation per loop)\n";
        break;
      case DeviceTiming::kGraph:
        out += "# Device calls: graph (the -n calls captured once, the graph replayed)\n";
        break;
      case DeviceTiming::kEachCall:
        out += "# Device calls: each call (the host waits for every call)\n";
        break;
    }
  }
  out += "#\n";
  return out;
}

std::string formatRanks(const std::vector<RankInfo>& ranks) {
  std::string out = "# Using devices\n";
  for (const RankInfo& r : ranks) {
    out += format("#  Rank %2d Group %2d Pid %6d on %10s device %2d [host]\n", r.rank, 0, r.pid,
                  r.host.c_str(), -1);
  }
  out += "#\n";
  return out;
}

std::string formatColumnHeader() {
  std::string out;
  out +=
      format("# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place\n",
             "", "", "", "", "");
  out += format("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s  %7s  %6s  %6s %6s\n", "size",
                "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time",
                "algbw", "busbw", "#wrong");
  out += format("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %5s  %7s  %6s  %6s  %5s\n", "(B)",
                "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)",
                "(GB/s)", "");
  return out;
}

std::string formatAlgoColumnHeader(const std::vector<std::string>& algorithms, bool withTuner) {
  std::string names =
      format("# %10s  %12s  %8s  %6s  %6s", "size", "count", "type", "redop", "root");
  std::string units = format("# %10s  %12s  %8s  %6s  %6s", "(B)", "(elements)", "", "", "");
  for (const std::string& a : algorithms) {
    names += format("  %*s", algoWidth(a), a.c_str());
    units += format("  %*s", algoWidth(a), "(GB/s)");
  }
  names += format("  %6s", "#wrong");
  units += format("  %6s", "");
  if (withTuner) {
    names += format("  %8s  %7s", "tuner", "regret");
    units += format("  %8s  %7s", "(choice)", "(%)");
  }
  names += "\n";
  units += "\n";
  return format("# %10s  %12s  %8s  %6s  %6s  out-of-place busbw per algorithm\n", "", "", "", "",
                "") +
         names + units;
}

std::string formatTime(double us) {
  if (us >= 10000.0) return format("%7.0f", us);
  if (us >= 100.0) return format("%7.1f", us);
  return format("%7.2f", us);
}

std::string formatRowPrefix(uint64_t bytes, uint64_t count, std::string_view type,
                            std::string_view op, int root) {
  return format("%12llu  %12llu  %8.*s  %6.*s  %6d", static_cast<unsigned long long>(bytes),
                static_cast<unsigned long long>(count), static_cast<int>(type.size()), type.data(),
                static_cast<int>(op.size()), op.data(), root);
}

std::string formatPlacement(double timeUs, const Bandwidth& bw, std::optional<uint64_t> wrong) {
  return "  " + formatTime(timeUs) + format("  %6.2f  %6.2f  ", bw.algBw, bw.busBw) +
         wrongCell(wrong, 5);
}

std::string formatAlgoCells(const std::vector<std::string>& algorithms,
                            const std::vector<double>& busBw, std::optional<uint64_t> wrong,
                            const std::optional<TunerCell>& tuner) {
  std::string out;
  for (size_t i = 0; i < algorithms.size(); ++i) {
    out += format("  %*.2f", algoWidth(algorithms[i]), i < busBw.size() ? busBw[i] : 0.0);
  }
  out += "  " + wrongCell(wrong, 6);
  if (tuner) out += format("  %8s  %7.1f", tuner->algorithm.c_str(), 100.0 * tuner->regret);
  return out;
}

void RegretSummary::add(const std::string& row, const std::vector<double>& times, size_t chosen) {
  for (Row& r : rows_) {
    if (r.key != row) continue;
    for (size_t i = 0; i < times.size() && i < r.best.size(); ++i) {
      r.best[i] = std::min(r.best[i], times[i]);
    }
    r.chosen = chosen;
    return;
  }
  rows_.push_back({row, times, chosen});
}

namespace {

double rowRegret(const std::vector<double>& best, size_t chosen) {
  if (best.empty() || chosen >= best.size()) return 0;
  const double fastest = *std::min_element(best.begin(), best.end());
  return fastest > 0 ? best[chosen] / fastest - 1.0 : 0.0;
}

}  // namespace

double RegretSummary::regret(const std::string& row) const {
  for (const Row& r : rows_) {
    if (r.key == row) return rowRegret(r.best, r.chosen);
  }
  return 0;
}

double RegretSummary::geometricMean() const {
  if (rows_.empty()) return 0;
  double logSum = 0;
  for (const Row& r : rows_) logSum += std::log1p(rowRegret(r.best, r.chosen));
  return std::expm1(logSum / static_cast<double>(rows_.size()));
}

double RegretSummary::max() const {
  double m = 0;
  for (const Row& r : rows_) m = std::max(m, rowRegret(r.best, r.chosen));
  return m;
}

std::string RegretSummary::format(const std::string& title, double reportAbove) const {
  size_t worst = 0;
  size_t bestChoices = 0;
  for (size_t i = 0; i < rows_.size(); ++i) {
    const double r = rowRegret(rows_[i].best, rows_[i].chosen);
    if (r > rowRegret(rows_[worst].best, rows_[worst].chosen)) worst = i;
    if (r == 0) ++bestChoices;
  }
  if (rows_.empty()) return "# " + title + ": no sizes measured\n";
  std::string out = perf::format(
      "# %s over %zu sizes (fastest of the cycles): geometric mean %.1f%%, max %.1f%% "
      "(size %s); the choice was the fastest at %zu\n",
      title.c_str(), rows_.size(), 100.0 * geometricMean(), 100.0 * max(), rows_[worst].key.c_str(),
      bestChoices);
  for (const Row& r : rows_) {
    const double regret = rowRegret(r.best, r.chosen);
    if (regret <= reportAbove) continue;
    out += perf::format("#   size %s: regret %.1f%%", r.key.c_str(), 100.0 * regret);
    const size_t fastest =
        static_cast<size_t>(std::min_element(r.best.begin(), r.best.end()) - r.best.begin());
    if (r.chosen < labels_.size() && fastest < labels_.size()) {
      out += perf::format(" (chose %s %.4g us, fastest %s %.4g us)", labels_[r.chosen].c_str(),
                          r.best[r.chosen], labels_[fastest].c_str(), r.best[fastest]);
    }
    out += "\n";
  }
  return out;
}

std::string formatTuneColumnHeader() {
  return format("# %10s  %12s  %8s  %6s  %6s  %-16s  %7s  %-16s  %7s  %7s\n", "size", "count",
                "type", "redop", "root", "fastest", "time", "tuner", "time", "regret") +
         format("# %10s  %12s  %8s  %6s  %6s  %-16s  %7s  %-16s  %7s  %7s\n", "(B)", "(elements)",
                "", "", "", "(algo/chunk/ch)", "(us)", "(choice)", "(us)", "(%)");
}

std::string formatTuneCells(const std::string& best, double bestUs, const std::string& tuner,
                            double tunerUs) {
  std::string out =
      format("  %-16s  ", best.c_str()) + formatTime(bestUs) + format("  %-16s  ", tuner.c_str());
  if (tunerUs < 0) return out + format("%7s  %7s", "-", "-");
  return out + formatTime(tunerUs) +
         format("  %7.1f", bestUs > 0 ? 100.0 * (tunerUs / bestUs - 1.0) : 0.0);
}

std::string TuneVariant::label() const {
  std::string chunk = std::to_string(chunkBytes);
  if (chunkBytes % 1024 == 0) chunk = std::to_string(chunkBytes / 1024) + "K";
  return algorithm + "/" + chunk + "/" + std::to_string(nchannels);
}

std::vector<TuneVariant> tuneVariants(const std::vector<std::string>& algorithms,
                                      const std::vector<uint32_t>& chunkBytes,
                                      const std::vector<int>& channels, uint32_t slotBytes,
                                      int maxChannels) {
  std::vector<TuneVariant> out;
  for (const std::string& a : algorithms) {
    for (uint32_t chunk : chunkBytes) {
      if (chunk > slotBytes) continue;
      for (int ch : channels) {
        if (ch <= maxChannels) out.push_back({a, chunk, ch});
      }
    }
  }
  return out;
}

void TuneRecorder::record(uint64_t bytes, size_t variant, double timeUs) {
  std::vector<double>& t = times_.try_emplace(bytes, variants_.size(), -1.0).first->second;
  if (variant >= t.size()) return;
  if (t[variant] < 0 || timeUs < t[variant]) t[variant] = timeUs;
}

std::pair<size_t, double> TuneRecorder::best(uint64_t bytes) const {
  auto it = times_.find(bytes);
  size_t best = 0;
  double time = -1;
  if (it == times_.end()) return {best, time};
  for (size_t v = 0; v < it->second.size(); ++v) {
    const double t = it->second[v];
    if (t >= 0 && (time < 0 || t < time)) {
      best = v;
      time = t;
    }
  }
  return {best, time};
}

double TuneRecorder::time(uint64_t bytes, size_t variant) const {
  auto it = times_.find(bytes);
  if (it == times_.end() || variant >= it->second.size()) return -1;
  return it->second[variant];
}

std::vector<TuneRange> TuneRecorder::entries() const {
  std::vector<TuneRange> out;
  uint64_t previous = 0;
  size_t last = 0;  // the variant of out.back()
  for (auto it = times_.begin(); it != times_.end(); ++it) {
    auto [v, t] = best(it->first);
    if (t < 0) continue;
    // The sizes below keep their variant while it is within the tolerance of the fastest: equal
    // plans (chunks larger than the message) must not split the table by noise alone.
    const double kept = out.empty() ? -1 : time(it->first, last);
    if (kept >= 0 && kept <= t * (1 + kTolerance)) v = last, t = kept;
    // This size's range starts halfway (in log scale) from the previous measured size.
    const double mid = std::sqrt(double(previous) * double(it->first));
    const uint64_t lo = out.empty() ? 0 : static_cast<uint64_t>(std::llround(mid));
    previous = it->first;
    if (!out.empty() && v == last) {
      out.back().timeUs = t;
      continue;
    }
    if (!out.empty()) {
      out.back().toInf = false;
      out.back().maxBytes = lo;
    }
    TuneRange range;
    range.minBytes = lo;
    range.toInf = true;
    range.variant = variants_[v];
    range.timeUs = t;
    out.push_back(range);
    last = v;
  }
  return out;
}

std::string formatSummary(uint64_t wrong, double avgBusBw) {
  return format("# Out of bounds values : %llu %s\n", static_cast<unsigned long long>(wrong),
                wrong == 0 ? "OK" : "FAILED") +
         format("# Avg bus bandwidth    : %g\n", avgBusBw) + "#\n";
}

std::string formatAlgoSummary(uint64_t wrong, const std::vector<std::string>& algorithms,
                              const std::vector<double>& avgBusBw) {
  std::string out = format("# Out of bounds values : %llu %s\n",
                           static_cast<unsigned long long>(wrong), wrong == 0 ? "OK" : "FAILED");
  for (size_t i = 0; i < algorithms.size(); ++i) {
    out += format("# Avg bus bandwidth    : %g (%s)\n", i < avgBusBw.size() ? avgBusBw[i] : 0.0,
                  algorithms[i].c_str());
  }
  return out + "#\n";
}

std::string formatEnvHelp(const std::vector<EnvVariableHelp>& variables) {
  size_t nameWidth = 0;
  size_t defaultWidth = 7;
  for (const EnvVariableHelp& v : variables) {
    nameWidth = std::max(nameWidth, v.name.size());
    defaultWidth = std::max(defaultWidth, v.defaultText.size());
  }
  std::string out = "Braid reads these environment variables once per communicator, at init:\n\n";
  out += format("  %-*s  %-*s  %s\n", static_cast<int>(nameWidth), "variable",
                static_cast<int>(defaultWidth), "default", "meaning");
  for (const EnvVariableHelp& v : variables) {
    const std::string_view def =
        v.defaultText.empty() ? std::string_view("(unset)") : v.defaultText;
    out += format("  %-*.*s  %-*.*s  %.*s\n", static_cast<int>(nameWidth),
                  static_cast<int>(v.name.size()), v.name.data(), static_cast<int>(defaultWidth),
                  static_cast<int>(def.size()), def.data(), static_cast<int>(v.doc.size()),
                  v.doc.data());
  }
  return out;
}

std::string jsonString(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += format("\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

JsonReport::JsonReport(const PerfOptions& options, int nranks, int nprocs)
    : options_(options), nranks_(nranks), nprocs_(nprocs) {}

std::string JsonReport::document() const {
  std::string out = "{\n";
  out += "  \"tool\": \"braid-perf\",\n";
  out += "  \"collective\": " + jsonString(perfCollectiveName(options_.collective)) + ",\n";
  out += format("  \"nranks\": %d,\n  \"nprocs\": %d,\n  \"nthreads\": %d,\n", nranks_, nprocs_,
                options_.threads);
  out += format("  \"iters\": %d,\n  \"warmup_iters\": %d,\n  \"agg_iters\": %d,\n", options_.iters,
                options_.warmupIters, options_.aggIters);
  out += format("  \"check\": %d,\n  \"average\": %d,\n", options_.check,
                static_cast<int>(options_.average));
  // Where the ranks ran: the cost model places ranks that share a core by it (braid-model-regret).
  out += format("  \"bind\": \"%s\",\n", bindsCores(options_) ? "core" : "none");
  out += "  \"measurements\": [";
  for (size_t i = 0; i < measurements_.size(); ++i) {
    const Measurement& m = measurements_[i];
    out += i == 0 ? "\n" : ",\n";
    out += "    {\"collective\": " + jsonString(m.collective) +
           ", \"algorithm\": " + jsonString(m.algorithm) + ", \"dtype\": " + jsonString(m.dtype) +
           ", \"op\": " + jsonString(m.op);
    out += format(", \"root\": %d, \"size\": %llu, \"count\": %llu, \"nranks\": %d", m.root,
                  static_cast<unsigned long long>(m.size), static_cast<unsigned long long>(m.count),
                  m.nranks);
    out += ", \"time_us\": " + jsonNumber(m.timeUs) + ", \"algbw\": " + jsonNumber(m.algBw) +
           ", \"busbw\": " + jsonNumber(m.busBw);
    out += ", \"wrong\": " +
           (m.wrong ? std::to_string(static_cast<unsigned long long>(*m.wrong)) : "null");
    out += std::string(", \"in_place\": ") + (m.inPlace ? "true" : "false") + "}";
  }
  out += measurements_.empty() ? "]\n}\n" : "\n  ]\n}\n";
  return out;
}

Outcome JsonReport::writeFile(const std::string& path) const {
  std::unique_ptr<FILE, int (*)(FILE*)> file(std::fopen(path.c_str(), "w"), &std::fclose);
  if (!file) return errnoFailure("cannot open " + path, errno);
  const std::string text = document();
  if (std::fwrite(text.data(), 1, text.size(), file.get()) != text.size()) {
    return errnoFailure("cannot write " + path, errno);
  }
  if (std::fclose(file.release()) != 0) return errnoFailure("cannot write " + path, errno);
  return Outcome();
}

}  // namespace braid::perf
