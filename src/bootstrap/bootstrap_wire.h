// The bootstrap's framing, shared by the root and by every rank. After the handshake (auth.h)
// every message is one frame: a 16-byte header ("BRFR", type u16, flags u16, tag u32,
// length u32, little-endian) and `length` payload bytes. Readers check the magic, the type and
// the length against what they expect and a hard cap before they read a payload byte.
//
// PolledConn and Admission serve the poll loops of the root and of each rank's listener: they
// never block, so one silent or hostile connection cannot hold up the others.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "bootstrap/auth.h"
#include "bootstrap/socket.h"

namespace braid {

enum class FrameType : uint16_t {
  kJoin = 1,      ///< rank -> root: rank, nranks, listener address
  kTable = 2,     ///< root -> rank: every rank's listener address
  kError = 3,     ///< why the peer gives up: status code and text
  kIdentify = 4,  ///< connecting rank -> listener: purpose, rank, nranks
  kAccept = 5,    ///< listener -> connecting rank: identified and admitted
  kRing = 6,      ///< ring step of allGather/barrier: flags = operation, tag = sequence
  kMessage = 7,   ///< send/recv payload: tag = user tag
};
constexpr uint32_t frameBit(FrameType type) { return 1u << static_cast<uint16_t>(type); }

constexpr size_t kFrameHeaderBytes = 16;
/// No frame may be longer, whatever the peer claims.
constexpr uint32_t kMaxFrameBytes = 256u << 20;
constexpr uint32_t kMaxErrorBytes = 4096;
/// The most ranks a rendezvous accepts (the address table is nranks * 32 bytes).
constexpr int kMaxRanks = 1 << 20;
/// The message of PolledConn::readFrame when the peer closed between frames.
constexpr const char* kConnectionClosed = "connection closed";
/// ... and when it closed part way through one (a process that died while writing).
constexpr const char* kConnectionClosedMidFrame = "connection closed in the middle of a frame";
/// Default for how long an unauthenticated connection may take to prove itself.
constexpr double kDefaultHandshakeSeconds = 5;

struct FrameHeader {
  FrameType type = FrameType::kError;
  uint16_t flags = 0;
  uint32_t tag = 0;
  uint32_t length = 0;
};

void encodeFrameHeader(const FrameHeader& header, uint8_t* out);
/// Rejects a bad magic, a type outside `allowedTypes` (a mask of frameBit) and a length over
/// maxLength (itself capped by kMaxFrameBytes).
Result<FrameHeader> decodeFrameHeader(const uint8_t* in, uint32_t allowedTypes, uint32_t maxLength);

/// The payload of a join frame (rank -> root): who the rank is, where its listener is and which
/// host it is on (Bootstrap::join's hostKey).
struct JoinRequest {
  int rank = 0;
  int nranks = 0;
  SocketAddress listener;
  uint64_t hostKey = 0;
};
constexpr size_t kJoinPayloadBytes = 16 + SocketAddress::kWireBytes;
std::vector<uint8_t> encodeJoin(const JoinRequest& join);
/// Checks everything a joiner claims: the size (remoteError), nranks within 1..kMaxRanks, rank
/// within 0..nranks-1 and a listener address with a port (invalidUsage naming the problem).
Result<JoinRequest> decodeJoin(const std::vector<uint8_t>& payload);

/// The payload of an identify frame (connecting rank -> listener): purpose, rank, nranks. The
/// listener checks the values against its own group; decodeIdentify checks only the size.
struct Identify {
  uint32_t purpose = 0;
  int rank = 0;
  int nranks = 0;
};
constexpr size_t kIdentifyBytes = 12;
std::vector<uint8_t> encodeIdentify(const Identify& identify);
Result<Identify> decodeIdentify(const std::vector<uint8_t>& payload);

/// Up to this many ranks the collectives go round the ring (n-1 steps); beyond it they
/// disseminate in ceil(log2 n) rounds over point-to-point connections, once every rank's listener
/// is known, and the listeners themselves come down a binomial tree from rank 0.
constexpr int kRingCollectiveMaxRanks = 8;
/// Beyond kRingCollectiveMaxRanks, where the ranks' host keys (Bootstrap::join) span two hosts
/// or more of at most this many ranks each, the collectives gather through one rank per host; a
/// leader's share (a message from and to each of its host's ranks) stays small.
constexpr int kHostGatherMaxRanks = 32;
/// Beyond kRingCollectiveMaxRanks: the rank that passes `rank` every listener, rank + 2^k for
/// the largest 2^k at most nranks - rank (0 for rank 0, the tree's root). Its edges are those of
/// dissemination's rounds (a rank sends to rank - 2^k), so the connections serve both.
int addressParent(int rank, int nranks);
/// The ranks whose listeners the root's table for `rank` holds, in order: its previous ring
/// neighbour, itself and its next; beyond kRingCollectiveMaxRanks also its addressParent, and
/// rank 0 gets every rank's (the root's work stays O(n)).
std::vector<int> rootTableRanks(int rank, int nranks);
/// Ranks' listener addresses and host keys (the root's table to each rank, the ranks' gathered
/// one), in order: kAddressEntryBytes a rank.
struct AddressTable {
  std::vector<SocketAddress> listeners;
  std::vector<uint64_t> hostKeys;
};
constexpr size_t kAddressEntryBytes = SocketAddress::kWireBytes + 8;
/// listeners and hostKeys of equal length.
std::vector<uint8_t> encodeAddressTable(const std::vector<SocketAddress>& listeners,
                                        const std::vector<uint64_t>& hostKeys);
/// remoteError unless `table` holds exactly nranks entries of well-formed addresses with ports.
Result<AddressTable> decodeAddressTable(const std::vector<uint8_t>& table, int nranks);

/// Error frames carry a status code and its message.
std::vector<uint8_t> encodeErrorPayload(const Status& status);
/// The status an error frame describes, its message prefixed with `from` (unless empty).
Status decodeErrorPayload(const std::vector<uint8_t>& payload, const std::string& from);

/// Blocking frame I/O for the caller's thread.
Status writeFrame(Socket& socket, FrameType type, uint16_t flags, uint32_t tag, const void* payload,
                  size_t bytes, const Deadline& deadline, const std::string& what);
/// Reads a whole frame; an error frame (when kError is allowed) becomes its Status.
Result<FrameHeader> readFrame(Socket& socket, uint32_t allowedTypes, uint32_t maxLength,
                              std::vector<uint8_t>* payload, const Deadline& deadline,
                              const std::string& what);

/// After a connection turned readable where the peer was not expected to speak: the status its
/// parting error frame carries, if one arrives within `seconds` (nullopt for a plain close,
/// garbage or silence).
std::optional<Status> readPartingWords(Socket& socket, double seconds);

/// A non-blocking connection in a poll loop: input read up to a wanted size, output queued and
/// flushed as the socket takes it.
class PolledConn {
 public:
  PolledConn(Socket socket, SocketAddress peer) : socket_(std::move(socket)), peer_(peer) {}

  Socket& socket() { return socket_; }
  const Socket& socket() const { return socket_; }
  const SocketAddress& peer() const { return peer_; }
  /// Reads until input().size() == want (growing the buffer as bytes arrive, not up front).
  /// kDone when complete, kWouldBlock when more must come.
  Socket::Io fill(size_t want);
  std::vector<uint8_t>& input() { return in_; }
  /// Reads one frame across calls: true when *header and *payload hold a whole frame, false when
  /// more bytes must come; an error when the peer closed or broke the framing.
  Result<bool> readFrame(uint32_t allowedTypes, uint32_t maxLength, FrameHeader* header,
                         std::vector<uint8_t>* payload);
  void queue(const void* data, size_t bytes);
  void queueFrame(FrameType type, uint16_t flags, uint32_t tag, const void* payload, size_t bytes);
  bool hasOutput() const { return outSent_ < out_.size(); }
  /// Writes queued output; kDone when all of it went.
  Socket::Io flush();
  /// The poll events this connection waits for.
  short pollEvents(bool wantInput) const;

 private:
  Socket socket_;
  SocketAddress peer_;
  std::vector<uint8_t> in_;
  std::vector<uint8_t> out_;
  size_t outSent_ = 0;
  bool haveHeader_ = false;
  FrameHeader header_;
};

/// One accepted connection on its way in: the server handshake, then its first frame (one of
/// allowedTypes, at most maxLength bytes), all before `deadline`. Never blocks.
class Admission {
 public:
  enum class State { kPending, kAdmitted, kRejected };

  Admission(Socket socket, SocketAddress peer, const Secret& secret, uint32_t allowedTypes,
            uint32_t maxLength, const Deadline& deadline)
      : conn_(std::move(socket), peer),
        handshake_(secret),
        allowedTypes_(allowedTypes),
        maxLength_(maxLength),
        deadline_(deadline) {}

  /// Moves the connection on as far as it can without blocking.
  State progress();
  State state() const { return state_; }
  /// Why the connection was rejected.
  const std::string& reason() const { return reason_; }
  /// Rejected because the peer closed before sending a byte: a probe, not worth a warning.
  bool silent() const { return silent_; }
  const FrameHeader& header() const { return header_; }
  const std::vector<uint8_t>& payload() const { return payload_; }
  const Deadline& deadline() const { return deadline_; }
  PolledConn& conn() { return conn_; }
  short pollEvents() const { return conn_.pollEvents(true); }

 private:
  State reject(std::string reason);

  PolledConn conn_;
  ServerHandshake handshake_;
  uint32_t allowedTypes_;
  uint32_t maxLength_;
  Deadline deadline_;
  State state_ = State::kPending;
  std::string reason_;
  bool silent_ = false;
  FrameHeader header_;
  std::vector<uint8_t> payload_;
};

}  // namespace braid
