#include "base/log.h"

#include <unistd.h>

#include <array>
#include <cstdarg>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <mutex>

#include "base/config.h"

namespace braid {
namespace {

struct SubsysInfo {
  Subsys subsys;
  std::string_view name;
};

constexpr std::array<SubsysInfo, 10> kSubsystems = {{
    {Subsys::kInit, "INIT"},
    {Subsys::kColl, "COLL"},
    {Subsys::kP2p, "P2P"},
    {Subsys::kShm, "SHM"},
    {Subsys::kNet, "NET"},
    {Subsys::kTopo, "TOPO"},
    {Subsys::kTune, "TUNE"},
    {Subsys::kBoot, "BOOT"},
    {Subsys::kAlloc, "ALLOC"},
    {Subsys::kCuda, "CUDA"},
}};

std::string hostName() {
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) return "unknown";
  return host;
}

std::string expandPath(const std::string& pattern) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '%' && i + 1 < pattern.size()) {
      if (pattern[i + 1] == 'h') {
        out += hostName();
        ++i;
        continue;
      }
      if (pattern[i + 1] == 'p') {
        out += std::to_string(getpid());
        ++i;
        continue;
      }
    }
    out += pattern[i];
  }
  return out;
}

std::string upper(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(toupper(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

Result<LogLevel> parseLogLevel(std::string_view text) {
  const std::string t = upper(text);
  if (t == "NONE" || t == "OFF") return LogLevel::kNone;
  if (t == "WARN" || t == "WARNING") return LogLevel::kWarn;
  if (t == "INFO") return LogLevel::kInfo;
  if (t == "TRACE" || t == "DEBUG") return LogLevel::kTrace;
  return invalidArgument("'" + std::string(text) + "' is not one of NONE, WARN, INFO, TRACE");
}

Result<uint32_t> parseSubsysMask(std::string_view text) {
  std::string t = upper(text);
  bool negate = false;
  if (!t.empty() && t[0] == '^') {
    negate = true;
    t.erase(0, 1);
  }
  uint32_t mask = 0;
  size_t start = 0;
  while (start <= t.size()) {
    size_t comma = t.find(',', start);
    if (comma == std::string::npos) comma = t.size();
    const std::string token = t.substr(start, comma - start);
    start = comma + 1;
    if (token.empty()) continue;
    if (token == "ALL") {
      mask = kAllSubsys;
      continue;
    }
    bool found = false;
    for (const SubsysInfo& info : kSubsystems) {
      if (token == info.name) {
        mask |= static_cast<uint32_t>(info.subsys);
        found = true;
      }
    }
    if (!found) return invalidArgument("unknown subsystem '" + token + "'");
  }
  return negate ? ~mask : mask;
}

std::string_view subsysName(Subsys subsys) {
  for (const SubsysInfo& info : kSubsystems) {
    if (info.subsys == subsys) return info.name;
  }
  return "?";
}

Logger::Logger(LogLevel level, uint32_t subsysMask, const std::string& file)
    : level_(level), mask_(subsysMask), host_(hostName()) {
  if (!file.empty()) {
    const std::string path = expandPath(file);
    if (FILE* f = std::fopen(path.c_str(), "a")) {
      sink_ = f;
      ownsSink_ = true;
    }
  }
}

Logger::~Logger() {
  if (ownsSink_) std::fclose(sink_);
}

void Logger::log(LogLevel level, Subsys subsys, const char* format, ...) const {
  static constexpr std::array<const char*, 4> kLevels = {"NONE", "WARN", "INFO", "TRACE"};
  char message[2048];
  va_list args;
  va_start(args, format);
  std::vsnprintf(message, sizeof(message), format, args);
  va_end(args);
  char rank[16] = "-";
  if (rank_ >= 0) std::snprintf(rank, sizeof(rank), "%d", rank_);
  // One fprintf per line keeps lines from different threads whole.
  std::fprintf(sink_, "[%s:%d:%s] BRAID %s %s %s\n", host_.c_str(), static_cast<int>(getpid()),
               rank, kLevels[static_cast<int>(level)], std::string(subsysName(subsys)).c_str(),
               message);
  std::fflush(sink_);
}

const Logger& processLogger() {
  static const Logger* logger = [] {
    Result<Config> config = Config::load();
    if (!config.ok()) return new Logger(LogLevel::kWarn, kAllSubsys, "");
    return new Logger(config->debugLevel, config->debugSubsys, config->debugFile);
  }();
  return *logger;
}

}  // namespace braid
