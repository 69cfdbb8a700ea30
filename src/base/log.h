// Logging: BRAID_DEBUG level, BRAID_DEBUG_SUBSYS mask, BRAID_DEBUG_FILE sink, one line per message
// prefixed "[host:pid:rank] BRAID LEVEL SUBSYS". Each communicator owns a Logger built from its
// Config; code without a communicator uses processLogger(), built once from the environment.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>

#include "base/status.h"

namespace braid {

enum class LogLevel : int { kNone = 0, kWarn = 1, kInfo = 2, kTrace = 3 };

enum class Subsys : uint32_t {
  kInit = 1u << 0,
  kColl = 1u << 1,
  kP2p = 1u << 2,
  kShm = 1u << 3,
  kNet = 1u << 4,
  kTopo = 1u << 5,
  kTune = 1u << 6,
  kBoot = 1u << 7,
  kAlloc = 1u << 8,
  kCuda = 1u << 9,
};
constexpr uint32_t kAllSubsys = 0xffffffffu;

Result<LogLevel> parseLogLevel(std::string_view text);
/// "INIT,COLL" enables those; "^NET" enables all but NET; "ALL" everything.
Result<uint32_t> parseSubsysMask(std::string_view text);
std::string_view subsysName(Subsys subsys);

class Logger {
 public:
  /// file: empty for stderr; "%h" becomes the host name, "%p" the pid.
  Logger(LogLevel level, uint32_t subsysMask, const std::string& file);
  ~Logger();
  Logger(const Logger&) = delete;
  Logger& operator=(const Logger&) = delete;

  bool enabled(LogLevel level, Subsys subsys) const {
    return level <= level_ && (static_cast<uint32_t>(subsys) & mask_) != 0;
  }
  /// Set once the rank is known; shows in the prefix.
  void setRank(int rank) { rank_ = rank; }
  void log(LogLevel level, Subsys subsys, const char* format, ...) const
      __attribute__((format(printf, 4, 5)));

 private:
  LogLevel level_;
  uint32_t mask_;
  int rank_ = -1;
  std::string host_;
  FILE* sink_ = stderr;
  bool ownsSink_ = false;
};

/// The logger for code that runs outside any communicator, configured from the environment on
/// first use.
const Logger& processLogger();

}  // namespace braid

#define BRAID_LOG(logger, level, subsys, ...)                                       \
  do {                                                                              \
    if ((logger).enabled(::braid::LogLevel::level, ::braid::Subsys::subsys))        \
      (logger).log(::braid::LogLevel::level, ::braid::Subsys::subsys, __VA_ARGS__); \
  } while (0)
