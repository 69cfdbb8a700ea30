#include "base/config.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <functional>
#include <limits>
#include <optional>

namespace braid {
namespace {

constexpr uint32_t kDefaultSlotBytes = 512 * 1024;
constexpr int kMaxChannels = 32;
constexpr int kMaxSlots = 64;

using Apply = std::function<Status(Config&, std::string_view)>;

struct ConfigVar {
  ConfigVarInfo info;
  Apply apply;
};

Apply intField(int Config::*field, int lo, int hi) {
  return [=](Config& c, std::string_view text) -> Status {
    ASSIGN_OR_RETURN(int64_t v, parseInteger(text, lo, hi));
    c.*field = static_cast<int>(v);
    return okStatus();
  };
}

Apply stringField(std::string Config::*field) {
  return [=](Config& c, std::string_view text) -> Status {
    c.*field = std::string(text);
    return okStatus();
  };
}

Apply byteField(uint32_t Config::*field, uint64_t lo, uint64_t hi) {
  return [=](Config& c, std::string_view text) -> Status {
    ASSIGN_OR_RETURN(uint64_t v, parseByteSize(text));
    if (v < lo || v > hi) {
      return invalidArgument("'" + std::string(text) + "' is outside [" + std::to_string(lo) +
                             ", " + std::to_string(hi) + "] bytes");
    }
    c.*field = static_cast<uint32_t>(v);
    return okStatus();
  };
}

const std::vector<ConfigVar>& table() {
  static const std::vector<ConfigVar> kTable = {
      {{"BRAID_DEBUG", "WARN", "log level: NONE, WARN, INFO or TRACE"},
       [](Config& c, std::string_view t) -> Status {
         ASSIGN_OR_RETURN(c.debugLevel, parseLogLevel(t));
         return okStatus();
       }},
      {{"BRAID_DEBUG_SUBSYS", "ALL",
        "subsystems to log: INIT,COLL,P2P,SHM,NET,TOPO,TUNE,BOOT,ALLOC,CUDA; ^ negates"},
       [](Config& c, std::string_view t) -> Status {
         ASSIGN_OR_RETURN(c.debugSubsys, parseSubsysMask(t));
         return okStatus();
       }},
      {{"BRAID_DEBUG_FILE", "", "log file instead of stderr (%h: host name, %p: pid)"},
       stringField(&Config::debugFile)},
      {{"BRAID_TIMEOUT", "300", "seconds before a stuck operation fails (0: never)"},
       [](Config& c, std::string_view t) -> Status {
         ASSIGN_OR_RETURN(c.timeoutSeconds, parseSeconds(t));
         return okStatus();
       }},
      {{"BRAID_PEER_TIMEOUT", "30",
        "seconds a peer on another host may stop answering (host down, link cut) before calls "
        "fail naming it: TCP keepalive and user timeout, RDMA retry limits (0: never)"},
       [](Config& c, std::string_view t) -> Status {
         ASSIGN_OR_RETURN(c.peerTimeoutSeconds, parseSeconds(t));
         return okStatus();
       }},
      {{"BRAID_CALL_CHECK", "1",
        "1: each call checks it matches its ring neighbour's, taking the neighbour's check when "
        "it has come (a rank whose part needs nobody may learn of a mismatch a call later), "
        "2: every call waits for its own check, 0: off"},
       intField(&Config::callCheck, 0, 2)},
      {{"BRAID_REPORT_SIGNAL", "",
        "a signal (USR1, USR2 or its number) on which each rank prints to stderr the calls it "
        "is blocked in, the step and peer each waits on and for how long; empty: none"},
       [](Config& c, std::string_view t) -> Status {
         ASSIGN_OR_RETURN(c.reportSignal, parseSignal(t));
         return okStatus();
       }},
      {{"BRAID_NCHANNELS", "auto", "parallel channels (rings/trees) per collective, 1-32"},
       intField(&Config::nchannels, 1, kMaxChannels)},
      {{"BRAID_CHUNK_BYTES", "auto", "bytes per pipeline step and peer (e.g. 128K), 1K-16M"},
       byteField(&Config::chunkBytes, 1024, 16u << 20)},
      {{"BRAID_NSLOTS", "4",
        "messages in flight per FIFO of the p2p, ib and socket transports, 2-64"},
       // One slot deadlocks a ring: every rank's only slot is full before anyone receives.
       intField(&Config::nslots, 2, kMaxSlots)},
      {{"BRAID_FIFO_BYTES", "1M",
        "payload bytes (messages above 4 KiB) a rank keeps in flight over shared memory, shared "
        "among the FIFOs a call sends on, each holding at least three of its chunks; 64K-256M"},
       byteField(&Config::fifoBytes, 64u << 10, 256u << 20)},
      {{"BRAID_DEVICE_PROTO", "auto",
        "protocol of device calls: simple (slots), ll (small messages as 16-byte lines; the same "
        "on every rank), auto (simple until a GPU check confirms ll)"},
       [](Config& c, std::string_view t) -> Status {
         if (t == "auto") {
           c.deviceProto = Config::DeviceProto::kAuto;
         } else if (t == "simple") {
           c.deviceProto = Config::DeviceProto::kSimple;
         } else if (t == "ll") {
           c.deviceProto = Config::DeviceProto::kLowLatency;
         } else {
           return invalidArgument("'" + std::string(t) + "' is not auto, simple or ll");
         }
         return okStatus();
       }},
      {{"BRAID_ALGO", "", "force algorithms, e.g. ring, ^tree, allreduce:rhd;broadcast:tree"},
       stringField(&Config::algo)},
      {{"BRAID_TRANSPORT", "", "allowed transports: shm,p2p,ib,socket; ^ excludes"},
       stringField(&Config::transport)},
      {{"BRAID_TUNING_FILE", "", "tuning table written by braid-perf --tune"},
       stringField(&Config::tuningFile)},
      {{"BRAID_TOPO_FILE", "", "hwloc XML topology to load instead of probing"},
       stringField(&Config::topoFile)},
      {{"BRAID_TOPO_DUMP_FILE", "", "write the discovered topology (hwloc XML) here"},
       stringField(&Config::topoDumpFile)},
      {{"BRAID_HOSTID", "", "host identity (default: hostname + boot id)"},
       stringField(&Config::hostId)},
      {{"BRAID_SOCKET_IFNAME", "", "network interfaces for TCP: prefixes, ^ excludes, = exact"},
       stringField(&Config::socketIfname)},
      {{"BRAID_IB_HCA", "", "RDMA devices to use: prefixes, ^ excludes, = exact"},
       stringField(&Config::ibHca)},
      {{"BRAID_GDR", "auto",
        "GPUDirect RDMA for device buffers over ib: 1 requires it (an error where it cannot "
        "work), 0 stages through host memory, auto uses it where it works"},
       intField(&Config::gdr, 0, 1)},
      {{"BRAID_NET_PROBE", "1",
        "1: measure the link between hosts at init for the tuner (read on rank 0), 0: topology"},
       intField(&Config::netProbe, 0, 1)},
      {{"BRAID_SOCKET_NSTREAMS", "2", "TCP streams per peer for the socket transport, 1-16"},
       intField(&Config::socketNstreams, 1, 16)},
      {{"BRAID_IB_GID_INDEX", "auto", "RoCE GID index (auto: a RoCE v2 IPv4 GID of the port)"},
       intField(&Config::ibGidIndex, 0, 255)},
      {{"BRAID_RANK", "", "braidCommInitFromEnv: this process's rank (with BRAID_WORLD_SIZE)"},
       intField(&Config::launchRank, 0, (1 << 24) - 1)},
      {{"BRAID_WORLD_SIZE", "", "braidCommInitFromEnv: the number of ranks"},
       intField(&Config::launchWorldSize, 1, 1 << 24)},
      {{"BRAID_ADDR", "", "braidCommInitFromEnv: host:port where rank 0 serves the rendezvous"},
       stringField(&Config::launchAddr)},
      {{"BRAID_SECRET", "", "braidCommInitFromEnv: shared secret (default: derived from job id)"},
       stringField(&Config::launchSecret)},
  };
  return kTable;
}

std::optional<std::string> lookup(const std::vector<std::string>& overrides,
                                  std::string_view name) {
  // The last override of a name wins, as a later assignment would.
  for (auto it = overrides.rbegin(); it != overrides.rend(); ++it) {
    if (it->size() > name.size() && it->compare(0, name.size(), name) == 0 &&
        (*it)[name.size()] == '=') {
      return it->substr(name.size() + 1);
    }
  }
  if (const char* env = std::getenv(std::string(name).c_str())) return std::string(env);
  return std::nullopt;
}

}  // namespace

Result<int64_t> parseInteger(std::string_view text, int64_t lo, int64_t hi) {
  std::string s(text);
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (s.empty() || errno != 0 || *end != '\0' || v < lo || v > hi) {
    return invalidArgument("'" + s + "' is not an integer in [" + std::to_string(lo) + ", " +
                           std::to_string(hi) + "]");
  }
  return static_cast<int64_t>(v);
}

Result<double> parseSeconds(std::string_view text) {
  std::string s(text);
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || errno != 0 || *end != '\0' || !std::isfinite(v) || v < 0) {
    return invalidArgument("'" + s + "' is not a non-negative number of seconds");
  }
  return v;
}

Result<int> parseSignal(std::string_view text) {
  if (text.empty()) return 0;
  std::string name(text);
  if (name.rfind("SIG", 0) == 0) name = name.substr(3);
  if (name == "USR1") return SIGUSR1;
  if (name == "USR2") return SIGUSR2;
  Result<int64_t> number = parseInteger(name, 1, SIGRTMAX);
  if (!number.ok() || *number == SIGKILL || *number == SIGSTOP) {
    return invalidArgument("'" + std::string(text) +
                           "' is not a signal that can be caught (USR1, USR2 or a number)");
  }
  return static_cast<int>(*number);
}

Result<uint64_t> parseByteSize(std::string_view text) {
  if (text.empty()) return invalidArgument("empty size");
  uint64_t multiplier = 1;
  std::string digits(text);
  switch (digits.back()) {
    case 'k':
    case 'K': multiplier = 1ull << 10; break;
    case 'm':
    case 'M': multiplier = 1ull << 20; break;
    case 'g':
    case 'G': multiplier = 1ull << 30; break;
    case 't':
    case 'T': multiplier = 1ull << 40; break;
    default: break;
  }
  if (multiplier != 1) digits.pop_back();
  if (digits.empty() || !std::all_of(digits.begin(), digits.end(), ::isdigit)) {
    return invalidArgument("'" + std::string(text) + "' is not a size (digits, then K, M or G)");
  }
  errno = 0;
  unsigned long long v = std::strtoull(digits.c_str(), nullptr, 10);
  if (errno != 0 || v > std::numeric_limits<uint64_t>::max() / multiplier) {
    return invalidArgument("'" + std::string(text) + "' is too large");
  }
  return static_cast<uint64_t>(v) * multiplier;
}

const std::vector<ConfigVarInfo>& configVariables() {
  static const std::vector<ConfigVarInfo> kInfo = [] {
    std::vector<ConfigVarInfo> out;
    for (const ConfigVar& var : table()) out.push_back(var.info);
    return out;
  }();
  return kInfo;
}

Result<Config> Config::load(const std::vector<std::string>& overrides) {
  for (const std::string& setting : overrides) {
    const size_t eq = setting.find('=');
    const std::string name = setting.substr(0, eq);
    const bool known = std::any_of(table().begin(), table().end(),
                                   [&](const ConfigVar& v) { return v.info.name == name; });
    if (eq == std::string::npos || !known) {
      return invalidArgument("config setting '" + setting + "' is not NAME=value for a known " +
                             "BRAID_ variable");
    }
  }
  Config config;
  for (const ConfigVar& var : table()) {
    std::optional<std::string> value = lookup(overrides, var.info.name);
    if (!value || (*value == "auto" && var.info.defaultText == "auto")) continue;
    Status status = var.apply(config, *value);
    if (!status.ok()) return invalidArgument(std::string(var.info.name) + ": " + status.message());
  }
  config.slotBytes = std::max(kDefaultSlotBytes, config.chunkBytes);
  return config;
}

}  // namespace braid
