// Config: every environment variable Braid reads, parsed once at communicator init into an
// immutable struct. One table (config.cc) lists each variable with its default and a doc line;
// braid-perf --help-env prints it. A malformed value is an error naming the variable.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/log.h"
#include "base/status.h"

namespace braid {

struct Config {
  // Logging.
  LogLevel debugLevel = LogLevel::kWarn;
  uint32_t debugSubsys = kAllSubsys;
  std::string debugFile;

  // Failure handling.
  double timeoutSeconds = 300;  ///< 0 = never
  /// How long a peer on another host may stop answering before its connections count as broken
  /// (TCP keepalive and user timeout, RDMA retry limits); 0 = never.
  double peerTimeoutSeconds = 30;
  int callCheck =
      1;  ///< 1: calls check themselves against a neighbour's, 2: and wait for it, 0: off
  /// BRAID_REPORT_SIGNAL: the signal that makes each rank print what it is blocked on; 0: none.
  int reportSignal = 0;

  // Data path.
  int nchannels = 0;              ///< 0 = chosen by the tuner
  uint32_t chunkBytes = 0;        ///< 0 = chosen by the tuner
  int nslots = 4;                 ///< FIFO depth per connector of the network transports
  uint32_t fifoBytes = 1u << 20;  ///< payload bytes a rank keeps in flight over shared memory
  uint32_t slotBytes = 0;         ///< derived: FIFO slot size, the largest chunk any call may use
  /// Protocol of the device executor (BRAID_DEVICE_PROTO): kAuto and kSimple take slots for every
  /// message; kLowLatency sends small ones as lines (kernels/ll_protocol.h).
  enum class DeviceProto { kAuto, kSimple, kLowLatency };
  DeviceProto deviceProto = DeviceProto::kAuto;

  // Selection and topology (parsed further by the tuner / topology code).
  std::string algo;
  std::string transport;
  std::string tuningFile;
  std::string topoFile;
  std::string topoDumpFile;
  std::string hostId;
  std::string socketIfname;
  std::string ibHca;
  int netProbe = 1;  ///< 1: rank 0 measures the link between hosts at init (0: topology figures)

  // Network transports and launchers (bootstrap/launcher.cc reads the launch fields).
  int socketNstreams = 2;    ///< TCP streams per peer the socket transport spreads slots over
  int ibGidIndex = -1;       ///< RoCE GID index; -1: the first RoCE v2 IPv4-mapped GID of the port
  int gdr = -1;              ///< BRAID_GDR: 1 required, 0 off, -1 auto (transport/gdr_policy.h)
  int launchRank = -1;       ///< BRAID_RANK; -1: unset
  int launchWorldSize = 0;   ///< BRAID_WORLD_SIZE; 0: unset
  std::string launchAddr;    ///< BRAID_ADDR: host:port where rank 0 serves the rendezvous
  std::string launchSecret;  ///< BRAID_SECRET: the job's shared secret for braidCommInitFromEnv

  /// Reads the environment, with `overrides` ("NAME=value" strings) taking precedence.
  static Result<Config> load(const std::vector<std::string>& overrides = {});
};

/// The data area of a shared-memory FIFO: BRAID_FIFO_BYTES (64-byte aligned), raised to three of
/// the largest messages, so that any call's window fits in it (fifo/fifo.h).
inline uint64_t shmRingBytes(const Config& config) {
  const uint64_t slot = (uint64_t{config.slotBytes} + 63) / 64 * 64;
  return std::max((uint64_t{config.fifoBytes} + 63) / 64 * 64, 3 * slot);
}

/// One documented variable; the table is what --help-env prints.
struct ConfigVarInfo {
  std::string_view name;
  std::string_view defaultText;
  std::string_view doc;
};
const std::vector<ConfigVarInfo>& configVariables();

/// Parses a decimal integer in [lo, hi] ("-1", "42"): every integer BRAID_ variable and
/// braid-perf's numeric options follow this rule.
Result<int64_t> parseInteger(std::string_view text, int64_t lo, int64_t hi);

/// Parses a signal that can be caught: "USR1", "SIGUSR2" or its number; "" is 0 (none).
Result<int> parseSignal(std::string_view text);

/// Parses "64K", "1M", "2G", "123" (powers of 1024) into bytes.
Result<uint64_t> parseByteSize(std::string_view text);

/// Parses a non-negative, finite number of seconds ("300", "0.5"): BRAID_TIMEOUT and braid-perf's
/// -T follow this rule.
Result<double> parseSeconds(std::string_view text);

}  // namespace braid
