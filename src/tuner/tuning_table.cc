#include "tuner/tuning_table.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <tuple>

#include "algorithms/algorithms.h"
#include "base/config.h"
#include "base/file.h"
#include "tuner/algo_override.h"

namespace braid {
namespace {

constexpr const char* kHeader = "braid-tuning-table";
constexpr int kVersion = 1;
// The limits BRAID_CHUNK_BYTES and BRAID_NCHANNELS accept (config.cc).
constexpr uint64_t kMinChunk = 1024;
constexpr uint64_t kMaxChunk = 16u << 20;
constexpr int kMaxChannels = 32;

std::vector<std::string> split(const std::string& line) {
  std::vector<std::string> words;
  std::istringstream in(line);
  std::string w;
  while (in >> w) words.push_back(w);
  return words;
}

// A size with an optional K/M/G suffix, printed back the same way when it is a whole multiple.
std::string sizeText(uint64_t bytes) {
  static constexpr std::pair<uint64_t, char> kUnits[] = {
      {1ull << 30, 'G'}, {1ull << 20, 'M'}, {1ull << 10, 'K'}};
  for (auto [unit, suffix] : kUnits) {
    if (bytes >= unit && bytes % unit == 0) return std::to_string(bytes / unit) + suffix;
  }
  return std::to_string(bytes);
}

bool overlaps(const TuningEntry& a, const TuningEntry& b) {
  const bool aBelowB = !a.toInf && a.maxBytes <= b.minBytes;
  const bool bBelowA = !b.toInf && b.maxBytes <= a.minBytes;
  return !aBelowB && !bBelowA;
}

}  // namespace

bool parseTunableCollective(const std::string& name, Collective* coll) {
  for (int c = 0; c < AlgoOverride::kNumOverridable; ++c) {
    if (collectiveName(static_cast<Collective>(c)) == name) {
      *coll = static_cast<Collective>(c);
      return true;
    }
  }
  return false;
}

Result<TuningTable> TuningTable::parse(const std::string& text, const std::string& origin) {
  TuningTable table;
  table.origin_ = origin;
  std::istringstream in(text);
  std::string raw;
  int lineNo = 0;
  bool header = false;
  while (std::getline(in, raw)) {
    ++lineNo;
    const std::string line = raw.substr(0, raw.find('#'));
    const std::vector<std::string> w = split(line);
    if (w.empty()) continue;
    auto bad = [&](const std::string& why) {
      return invalidArgument(origin + ":" + std::to_string(lineNo) + ": " + why);
    };
    if (!header) {
      if (w.size() != 2 || w[0] != kHeader) {
        return bad("expected the header '" + std::string(kHeader) + " " + std::to_string(kVersion) +
                   "', got '" + line + "'");
      }
      if (w[1] != std::to_string(kVersion)) return bad("unknown format version '" + w[1] + "'");
      header = true;
      continue;
    }
    if (w.size() != 7 && w.size() != 8) {
      return bad(
          "expected 'collective nranks min_bytes max_bytes algorithm chunk_bytes channels "
          "[time_us]', got " +
          std::to_string(w.size()) + " fields");
    }
    TuningEntry e;
    e.line = lineNo;
    if (!parseTunableCollective(w[0], &e.coll)) return bad("unknown collective '" + w[0] + "'");
    char* end = nullptr;
    errno = 0;
    const long nranks = std::strtol(w[1].c_str(), &end, 10);
    if (errno != 0 || *end != '\0' || nranks < 1 || nranks > (1 << 20)) {
      return bad("bad nranks '" + w[1] + "'");
    }
    e.nranks = static_cast<int>(nranks);
    Result<uint64_t> lo = parseByteSize(w[2]);
    if (!lo.ok()) return bad("bad min_bytes: " + lo.status().message());
    e.minBytes = lo.value();
    if (w[3] == "inf") {
      e.toInf = true;
    } else {
      Result<uint64_t> hi = parseByteSize(w[3]);
      if (!hi.ok()) return bad("bad max_bytes: " + hi.status().message());
      e.maxBytes = hi.value();
      if (e.maxBytes <= e.minBytes) return bad("empty size range [" + w[2] + ", " + w[3] + ")");
    }
    std::optional<Algorithm> algo = findAlgorithm(w[4]);
    if (!algo) return bad("unknown algorithm '" + w[4] + "'");
    if (!algorithmServes(*algo, e.coll)) {
      return bad("algorithm " + w[4] + " does not serve " + w[0]);
    }
    e.algo = *algo;
    Result<uint64_t> chunk = parseByteSize(w[5]);
    if (!chunk.ok()) return bad("bad chunk_bytes: " + chunk.status().message());
    if (chunk.value() < kMinChunk || chunk.value() > kMaxChunk) {
      return bad("chunk_bytes " + w[5] + " outside 1K..16M");
    }
    e.chunkBytes = static_cast<uint32_t>(chunk.value());
    errno = 0;
    const long channels = std::strtol(w[6].c_str(), &end, 10);
    if (errno != 0 || *end != '\0' || channels < 1 || channels > kMaxChannels) {
      return bad("channels '" + w[6] + "' outside 1.." + std::to_string(kMaxChannels));
    }
    e.nchannels = static_cast<int>(channels);
    if (w.size() == 8) {
      errno = 0;
      e.timeUs = std::strtod(w[7].c_str(), &end);
      if (errno != 0 || *end != '\0' || !std::isfinite(e.timeUs) || e.timeUs < 0) {
        return bad("bad time_us '" + w[7] + "'");
      }
    }
    Status added = table.add(e);
    if (!added.ok()) return bad(added.message());
  }
  if (!header) return invalidArgument(origin + ": empty, no '" + std::string(kHeader) + "' header");
  return table;
}

Result<TuningTable> TuningTable::load(const std::string& path) {
  std::ifstream in(path);
  if (!in) return errnoError("cannot read tuning file " + path, errno);
  std::ostringstream os;
  os << in.rdbuf();
  return parse(os.str(), path);
}

Status TuningTable::add(TuningEntry entry) {
  for (const TuningEntry& e : entries_) {
    if (e.coll == entry.coll && e.nranks == entry.nranks && overlaps(e, entry)) {
      return invalidArgument("size range overlaps the one of line " + std::to_string(e.line) +
                             " (" + std::string(collectiveName(e.coll)) + ", " +
                             std::to_string(e.nranks) + " ranks)");
    }
  }
  entries_.push_back(entry);
  return okStatus();
}

const TuningEntry* TuningTable::find(Collective coll, int nranks, uint64_t bytes) const {
  for (const TuningEntry& e : entries_) {
    if (e.coll == coll && e.nranks == nranks && e.covers(bytes)) return &e;
  }
  return nullptr;
}

Status TuningTable::replace(Collective coll, int nranks, std::vector<TuningEntry> entries) {
  std::erase_if(entries_,
                [&](const TuningEntry& e) { return e.coll == coll && e.nranks == nranks; });
  for (TuningEntry& e : entries) {
    e.coll = coll;
    e.nranks = nranks;
    e.line = 0;
    RETURN_IF_ERROR(add(e));
  }
  return okStatus();
}

std::string TuningTable::format() const {
  std::vector<TuningEntry> sorted = entries_;
  std::sort(sorted.begin(), sorted.end(), [](const TuningEntry& a, const TuningEntry& b) {
    return std::tuple(a.coll, a.nranks, a.minBytes) < std::tuple(b.coll, b.nranks, b.minBytes);
  });
  std::ostringstream os;
  os << kHeader << " " << kVersion << "\n"
     << "# Measured choices of the Braid tuner (braid-perf --tune); format in "
        "src/tuner/tuning_table.h.\n"
     << "# collective nranks min_bytes max_bytes algorithm chunk_bytes channels time_us\n";
  for (const TuningEntry& e : sorted) {
    char time[32] = "";
    if (e.timeUs >= 0) std::snprintf(time, sizeof(time), " %.2f", e.timeUs);
    os << collectiveName(e.coll) << " " << e.nranks << " " << sizeText(e.minBytes) << " "
       << (e.toInf ? std::string("inf") : sizeText(e.maxBytes)) << " " << algorithmName(e.algo)
       << " " << sizeText(e.chunkBytes) << " " << e.nchannels << time << "\n";
  }
  return os.str();
}

Status TuningTable::save(const std::string& path) const {
  return writeFileAtomically(path, format());
}

}  // namespace braid
