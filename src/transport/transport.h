// The transport interface. A transport links this rank with some of its peers and hands the
// executors FIFOs (fifo.h) to them; the executors never see which transport is underneath.
//
// Each transport lives in its own directory with the same file set: <name>_transport.h/.cc (the
// Transport below and its factory), plus whatever private pieces it needs, and a test beside them.
// socket and ib are network transports (network_transport.h): a proxy thread moves their FIFOs'
// slots over the network, and what the two share lives in this directory.
// A factory is collective over the communicator's bootstrap: it exchanges what its peers need
// (addresses, queue pair numbers) and returns once connectors can be made; shm's inbox name rides
// in the communicator's own exchange of PeerInfo instead (ShmTransport::makeInbox). The
// communicator keeps every transport it made in one list and asks each, through this interface
// alone, about failures, peers' notices and liveness.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "fifo/fifo.h"

namespace braid {

class Bootstrap;
class Logger;
struct Config;

/// Asks a transport's peerFailure() about any peer at all.
constexpr int kAnyPeer = -1;

/// A failure a peer announced (its notice), as a transport delivered it.
struct PeerFailure {
  Status status;
  /// How many of the communicator's collectives the peer had finished when it failed. It had
  /// posted all it owed to those, so a rank still in one of them fails only if it stays blocked
  /// on the peer: an abort right after a collective (as NCCL programs do) disturbs nobody.
  uint32_t collectivesDone = 0;
};

/// What every rank tells the others about itself at init.
struct PeerInfo {
  uint64_t hostHash = 0;      ///< same value = same host (hostname + boot id, or BRAID_HOSTID)
  uint64_t pidNamespace = 0;  ///< inode of /proc/self/ns/pid: pids comparable only when equal
  int32_t pid = 0;
  int32_t rank = 0;
  char hostName[64] = {};
  uint8_t locality[44] = {};  ///< encodeLocality(): package, NUMA node, core, nearest GPU/NIC
  char shmInbox[64] = {};     ///< the name of its shared-memory inbox (ShmTransport::makeInbox)
  int32_t shmProbeFd = -1;    ///< a descriptor of its that peers try to open (shared buffers)
};

/// Information a transport factory needs; owned by the communicator being built.
struct TransportContext {
  Bootstrap* bootstrap = nullptr;
  const Config* config = nullptr;
  const Logger* logger = nullptr;
  int rank = 0;
  int nranks = 1;
  int maxChannels = 1;  ///< connectors exist for channels [0, maxChannels)
  const std::vector<PeerInfo>* peers = nullptr;
  /// The Waker the rank sleeps on (Communicator::waker()): a transport with a proxy thread rings
  /// it when it posts or frees a slot on the rank's behalf.
  Waker* rankWaker = nullptr;
  /// The communicator's abort flag (braidCommAbort): set, a transport closes without flushing.
  const std::atomic<bool>* abort = nullptr;
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual std::string_view name() const = 0;
  /// Whether this transport links this rank with `peer`.
  virtual bool canConnect(int peer) const = 0;
  /// The FIFO carrying this rank's data to `peer` on `channel` (made on first use).
  virtual Result<SendConnector> sendConnector(int peer, int channel) = 0;
  /// The FIFO carrying `peer`'s data to this rank on `channel` (made on first use).
  virtual Result<RecvConnector> recvConnector(int peer, int channel) = 0;

  // Failures. The communicator asks every transport it made and passes its own failure to each,
  // so a transport that learns nothing of its peers keeps these defaults.

  /// A fault of the transport itself (a malformed frame, a completion error): it fails the
  /// communicator.
  virtual std::optional<Status> failure() const { return std::nullopt; }
  /// The failure notice `peer` sent through this transport, if any; with kAnyPeer, the one of the
  /// peer that got least far.
  virtual std::optional<PeerFailure> peerFailure(int /*peer*/) const { return std::nullopt; }
  /// False once this transport knows that `peer` is gone (its process exited, its connection
  /// closed). Asking may make the transport probe the peer.
  virtual bool peerAlive(int /*peer*/) const { return true; }
  /// Tells the peers this transport reaches that `failedRank` (this rank) failed; the first
  /// notice wins.
  virtual void notifyFailure(int /*failedRank*/, const PeerFailure& /*failure*/) {}
};

}  // namespace braid
