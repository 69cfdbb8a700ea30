#include "tuner/calibration.h"

#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <sstream>
#include <vector>

#include "base/file.h"
#include "base/hash.h"
#include "tuner/calibration_probe.h"

namespace braid {
namespace {

constexpr int kFormatVersion = 5;

struct Field {
  const char* key;
  double Calibration::*member;
  double lo;  // plausible range: a value outside is a broken measurement or a corrupt file
  double hi;
  bool optional = false;  // may be absent (files written before it existed); 0 = not measured
};

const std::vector<Field>& fields() {
  static const std::vector<Field> kFields = {
      {"step_us", &Calibration::stepUs, 1e-4, 1e3},
      {"hop_us", &Calibration::hopUs, 1e-3, 1e5},
      {"crowded_hop_us", &Calibration::crowdedHopUs, 1e-3, 1e6},
      {"crowded_post_us", &Calibration::crowdedPostUs, 0.0, 1e6},
      {"copy_cache_gbps", &Calibration::copyCacheGBps, 1e-2, 1e4},
      {"copy_dram_gbps", &Calibration::copyDramGBps, 1e-2, 1e4},
      {"reduce_cache_gbps", &Calibration::reduceCacheGBps, 1e-2, 1e4},
      {"reduce_dram_gbps", &Calibration::reduceDramGBps, 1e-2, 1e4},
      {"copy_llc_gbps", &Calibration::copyLlcGBps, 1e-2, 1e4, true},
      {"transfer_gbps", &Calibration::transferGBps, 1e-2, 1e5},
      {"cache_mib", &Calibration::cacheMiB, 1e-3, 1e7},
      {"crowded_switch_factor", &Calibration::crowdedSwitchFactor, 1.0, 1e3},
  };
  return kFields;
}

std::string hex64(uint64_t v) {
  char text[17];
  std::snprintf(text, sizeof(text), "%016llx", static_cast<unsigned long long>(v));
  return text;
}

std::string exact(double v) {
  char text[40];
  std::snprintf(text, sizeof(text), "%.17g", v);
  return text;
}

std::mutex gMutex;
std::map<std::string, Calibration>& processCache() {
  static auto* cache = new std::map<std::string, Calibration>();
  return *cache;
}

}  // namespace

const char* calibrationSourceName(CalibrationSource source) {
  switch (source) {
    case CalibrationSource::kMeasured: return "measured";
    case CalibrationSource::kCacheFile: return "cache file";
    case CalibrationSource::kProcessCache: return "process cache";
  }
  return "?";
}

Status validateCalibration(const Calibration& c) {
  for (const Field& f : fields()) {
    const double v = c.*f.member;
    if (f.optional && v == 0) continue;
    if (!std::isfinite(v) || v < f.lo || v > f.hi) {
      return invalidArgument(std::string(f.key) + " = " + exact(v) + " is outside [" + exact(f.lo) +
                             ", " + exact(f.hi) + "]");
    }
  }
  if (c.cpus < 1) return invalidArgument("cpus = " + std::to_string(c.cpus) + " is below 1");
  return okStatus();
}

std::string formatCalibration(const Calibration& c, const std::string& fingerprint) {
  std::ostringstream os;
  os << "# Braid calibration of this host's data path (fields: src/tuner/calibration.h).\n"
     << "# Delete this file to measure again.\n"
     << "format " << kFormatVersion << "\n"
     << "fingerprint " << fingerprint << "\n";
  for (const Field& f : fields()) os << f.key << " " << exact(c.*f.member) << "\n";
  os << "cpus " << c.cpus << "\n";
  return os.str();
}

Result<Calibration> parseCalibration(const std::string& text, const std::string& fingerprint,
                                     const std::string& origin) {
  Calibration c;
  std::vector<bool> seen(fields().size(), false);
  bool sawFormat = false;
  bool sawFingerprint = false;
  bool sawCpus = false;
  std::istringstream in(text);
  std::string line;
  int lineNo = 0;
  auto bad = [&](const std::string& why) {
    return invalidArgument(origin + ":" + std::to_string(lineNo) + ": " + why);
  };
  while (std::getline(in, line)) {
    ++lineNo;
    if (line.empty() || line[0] == '#') continue;
    const size_t space = line.find(' ');
    if (space == std::string::npos) return bad("expected 'key value', got '" + line + "'");
    const std::string key = line.substr(0, space);
    const std::string value = line.substr(space + 1);
    if (key == "format") {
      if (value != std::to_string(kFormatVersion)) return bad("unknown format '" + value + "'");
      sawFormat = true;
      continue;
    }
    if (key == "fingerprint") {
      if (value != fingerprint) return bad("recorded for another binary or host (" + value + ")");
      sawFingerprint = true;
      continue;
    }
    char* end = nullptr;
    errno = 0;
    if (key == "cpus") {
      const long v = std::strtol(value.c_str(), &end, 10);
      if (errno != 0 || end == value.c_str() || *end != '\0')
        return bad("bad cpus '" + value + "'");
      c.cpus = static_cast<int>(v);
      sawCpus = true;
      continue;
    }
    size_t i = 0;
    while (i < fields().size() && key != fields()[i].key) ++i;
    if (i == fields().size()) return bad("unknown key '" + key + "'");
    const double v = std::strtod(value.c_str(), &end);
    if (errno != 0 || end == value.c_str() || *end != '\0') {
      return bad("bad number '" + value + "' for " + key);
    }
    c.*fields()[i].member = v;
    seen[i] = true;
  }
  if (!sawFormat) return invalidArgument(origin + ": no 'format' line");
  if (!sawFingerprint) return invalidArgument(origin + ": no 'fingerprint' line");
  for (size_t i = 0; i < fields().size(); ++i) {
    if (!seen[i] && !fields()[i].optional) {
      return invalidArgument(origin + ": no '" + fields()[i].key + "' line");
    }
  }
  if (!sawCpus) return invalidArgument(origin + ": no 'cpus' line");
  Status valid = validateCalibration(c);
  if (!valid.ok()) return invalidArgument(origin + ": " + valid.message());
  return c;
}

std::string defaultCalibrationDir() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg == '/') {
    return std::string(xdg) + "/braid";
  }
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    return std::string(home) + "/.cache/braid";
  }
  return "";
}

namespace {

// The file holding this code (the library, or a program it is linked into).
std::string binaryPath() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&buildFingerprint), &info) != 0 && info.dli_fname != nullptr) {
    return info.dli_fname;
  }
  return "unknown";
}

}  // namespace

std::string buildFingerprint() {
  std::string binary = binaryPath();
  struct stat st {};
  if (stat(binary.c_str(), &st) == 0) {
    binary += ":" + std::to_string(st.st_size) + ":" + std::to_string(st.st_mtim.tv_sec) + "." +
              std::to_string(st.st_mtim.tv_nsec);
  }
  return binary;
}

std::string calibrationFingerprint(uint64_t hostHash) {
  return "host=" + hex64(hostHash) + " binary=" + buildFingerprint();
}

// A cached hand-off this many times today's was measured in a disturbed moment.
constexpr double kStaleHopRatio = 2.0;

Result<CalibrationResult> hostCalibration(const std::string& cacheDir, uint64_t hostHash,
                                          uint64_t llcBytes) {
  const std::string fingerprint = calibrationFingerprint(hostHash);
  const std::string key = cacheDir + "\n" + fingerprint;
  std::lock_guard<std::mutex> lock(gMutex);
  CalibrationResult result;
  // One file per host and binary path: programs linking the library statically (or two builds)
  // keep their own; a rebuild of one replaces its file.
  if (!cacheDir.empty()) {
    result.cacheFile = cacheDir + "/calibration-" + hex64(hostHash) + "-" +
                       hex64(fnv1a(binaryPath())).substr(8) + ".txt";
  }
  if (auto it = processCache().find(key); it != processCache().end()) {
    result.calibration = it->second;
    result.source = CalibrationSource::kProcessCache;
    return result;
  }
  if (!result.cacheFile.empty() && access(result.cacheFile.c_str(), F_OK) == 0) {
    Result<Calibration> loaded = [&]() -> Result<Calibration> {
      ASSIGN_OR_RETURN(std::string text, readFile(result.cacheFile));
      return parseCalibration(text, fingerprint, result.cacheFile);
    }();
    ProbeOptions quick;
    quick.repeats = 1;
    if (loaded.ok()) {
      // A file measured while the host was disturbed (a hypervisor holding a core back, a build
      // running) would steer every later tuner; a hand-off that is now much faster than it says
      // is the sign, and takes a millisecond or two to measure.
      Result<double> hop = measureHandOffUs(quick, loaded.value().stepUs);
      if (hop.ok() && hop.value() * kStaleHopRatio < loaded.value().hopUs) {
        char why[160];
        std::snprintf(why, sizeof(why),
                      "measuring again: its hand-off of %.3f us is over %.0fx today's %.3f us",
                      loaded.value().hopUs, kStaleHopRatio, hop.value());
        result.note = why;
      } else {
        result.calibration = loaded.value();
        result.source = CalibrationSource::kCacheFile;
        processCache()[key] = result.calibration;
        return result;
      }
    } else {
      result.note = "measuring again: " + loaded.status().message();
    }
  }
  ProbeOptions options;
  if (llcBytes > 0) options.llcBytes = llcBytes;
  const auto start = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(result.calibration, measureCalibration(options));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (seconds > options.budgetSeconds) {
    char why[160];
    std::snprintf(why, sizeof(why),
                  "the probe ran past its %.0f s budget (%.1f s: a slow or busy host), so its "
                  "last measurements ran once each",
                  options.budgetSeconds, seconds);
    result.note += (result.note.empty() ? "" : "; ") + std::string(why);
  }
  result.source = CalibrationSource::kMeasured;
  processCache()[key] = result.calibration;
  if (!result.cacheFile.empty()) {
    Status written = makeDirs(cacheDir);
    if (written.ok()) {
      written =
          writeFileAtomically(result.cacheFile, formatCalibration(result.calibration, fingerprint));
    }
    if (!written.ok()) {
      result.note +=
          (result.note.empty() ? "" : "; ") + std::string("not cached: ") + written.message();
    }
  }
  return result;
}

void clearProcessCalibrations() {
  std::lock_guard<std::mutex> lock(gMutex);
  processCache().clear();
}

}  // namespace braid
