#include "bootstrap/bootstrap_wire.h"

#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/little_endian.h"

namespace braid {
namespace {

constexpr uint8_t kMagic[4] = {'B', 'R', 'F', 'R'};
// Buffers grow by at most this much per read, so a claimed length costs memory only as bytes
// actually arrive.
constexpr size_t kReadChunk = 1 << 20;

std::string typeName(uint16_t type) {
  switch (static_cast<FrameType>(type)) {
    case FrameType::kJoin: return "join";
    case FrameType::kTable: return "table";
    case FrameType::kError: return "error";
    case FrameType::kIdentify: return "identify";
    case FrameType::kAccept: return "accept";
    case FrameType::kRing: return "ring";
    case FrameType::kMessage: return "message";
  }
  return "unknown type " + std::to_string(type);
}

}  // namespace

void encodeFrameHeader(const FrameHeader& header, uint8_t* out) {
  std::memcpy(out, kMagic, sizeof(kMagic));
  putLe16(out + 4, static_cast<uint16_t>(header.type));
  putLe16(out + 6, header.flags);
  putLe32(out + 8, header.tag);
  putLe32(out + 12, header.length);
}

Result<FrameHeader> decodeFrameHeader(const uint8_t* in, uint32_t allowedTypes,
                                      uint32_t maxLength) {
  if (std::memcmp(in, kMagic, sizeof(kMagic)) != 0) {
    return remoteError("malformed frame (bad magic)");
  }
  FrameHeader header;
  const uint16_t type = getLe16(in + 4);
  header.type = static_cast<FrameType>(type);
  header.flags = getLe16(in + 6);
  header.tag = getLe32(in + 8);
  header.length = getLe32(in + 12);
  if (type >= 32 || (allowedTypes & (1u << type)) == 0) {
    return remoteError("unexpected " + typeName(type) + " frame");
  }
  uint32_t cap = std::min(maxLength, kMaxFrameBytes);
  if (header.type == FrameType::kError) cap = kMaxErrorBytes;
  if (header.length > cap) {
    return remoteError(typeName(type) + " frame of " + std::to_string(header.length) +
                       " bytes exceeds the limit of " + std::to_string(cap));
  }
  return header;
}

std::vector<uint8_t> encodeJoin(const JoinRequest& join) {
  std::vector<uint8_t> payload(kJoinPayloadBytes);
  putLe32(payload.data(), static_cast<uint32_t>(join.rank));
  putLe32(payload.data() + 4, static_cast<uint32_t>(join.nranks));
  join.listener.toWire(payload.data() + 8);
  putLe64(payload.data() + 8 + SocketAddress::kWireBytes, join.hostKey);
  return payload;
}

Result<JoinRequest> decodeJoin(const std::vector<uint8_t>& payload) {
  if (payload.size() != kJoinPayloadBytes) {
    return remoteError("join of " + std::to_string(payload.size()) + " bytes, expected " +
                       std::to_string(kJoinPayloadBytes));
  }
  JoinRequest join;
  join.rank = static_cast<int>(getLe32(payload.data()));
  join.nranks = static_cast<int>(getLe32(payload.data() + 4));
  const std::string who = "rank " + std::to_string(join.rank);
  if (join.nranks < 1 || join.nranks > kMaxRanks) {
    return invalidUsage(who + " claims nranks=" + std::to_string(join.nranks) + ", outside 1.." +
                        std::to_string(kMaxRanks));
  }
  if (join.rank < 0 || join.rank >= join.nranks) {
    return invalidUsage(who + " is outside 0.." + std::to_string(join.nranks - 1));
  }
  Result<SocketAddress> listener = SocketAddress::fromWire(payload.data() + 8);
  if (!listener.ok() || listener->port() == 0) {
    return invalidUsage(who + " sent a bad listener address");
  }
  join.listener = listener.value();
  join.hostKey = getLe64(payload.data() + 8 + SocketAddress::kWireBytes);
  return join;
}

std::vector<uint8_t> encodeIdentify(const Identify& identify) {
  std::vector<uint8_t> payload(kIdentifyBytes);
  putLe32(payload.data(), identify.purpose);
  putLe32(payload.data() + 4, static_cast<uint32_t>(identify.rank));
  putLe32(payload.data() + 8, static_cast<uint32_t>(identify.nranks));
  return payload;
}

Result<Identify> decodeIdentify(const std::vector<uint8_t>& payload) {
  if (payload.size() != kIdentifyBytes) {
    return remoteError("identify of " + std::to_string(payload.size()) + " bytes, expected " +
                       std::to_string(kIdentifyBytes));
  }
  Identify identify;
  identify.purpose = getLe32(payload.data());
  identify.rank = static_cast<int>(getLe32(payload.data() + 4));
  identify.nranks = static_cast<int>(getLe32(payload.data() + 8));
  return identify;
}

int addressParent(int rank, int nranks) {
  if (rank == 0) return 0;
  const int distance = nranks - rank;
  int step = 1;
  while (2 * step <= distance) step *= 2;
  return (rank + step) % nranks;
}

std::vector<int> rootTableRanks(int rank, int nranks) {
  std::vector<int> ranks = {(rank + nranks - 1) % nranks, rank, (rank + 1) % nranks};
  if (nranks <= kRingCollectiveMaxRanks) return ranks;
  if (rank != 0) {
    ranks.push_back(addressParent(rank, nranks));
    return ranks;
  }
  ranks.resize(static_cast<size_t>(nranks));
  for (int r = 0; r < nranks; ++r) ranks[static_cast<size_t>(r)] = r;
  return ranks;
}

std::vector<uint8_t> encodeAddressTable(const std::vector<SocketAddress>& listeners,
                                        const std::vector<uint64_t>& hostKeys) {
  std::vector<uint8_t> table(listeners.size() * kAddressEntryBytes);
  for (size_t r = 0; r < listeners.size(); ++r) {
    uint8_t* entry = table.data() + r * kAddressEntryBytes;
    listeners[r].toWire(entry);
    putLe64(entry + SocketAddress::kWireBytes, hostKeys[r]);
  }
  return table;
}

Result<AddressTable> decodeAddressTable(const std::vector<uint8_t>& table, int nranks) {
  if (nranks < 1 || nranks > kMaxRanks ||
      table.size() != static_cast<size_t>(nranks) * kAddressEntryBytes) {
    return remoteError("address table of " + std::to_string(table.size()) + " bytes for " +
                       std::to_string(nranks) + " ranks");
  }
  AddressTable decoded;
  decoded.listeners.reserve(static_cast<size_t>(nranks));
  decoded.hostKeys.reserve(static_cast<size_t>(nranks));
  for (int r = 0; r < nranks; ++r) {
    const uint8_t* entry = table.data() + static_cast<size_t>(r) * kAddressEntryBytes;
    Result<SocketAddress> a = SocketAddress::fromWire(entry);
    if (!a.ok() || a->port() == 0) {
      return remoteError("address table: a bad address for rank " + std::to_string(r));
    }
    decoded.listeners.push_back(a.value());
    decoded.hostKeys.push_back(getLe64(entry + SocketAddress::kWireBytes));
  }
  return decoded;
}

std::vector<uint8_t> encodeErrorPayload(const Status& status) {
  const std::string& text = status.message();
  const size_t textBytes = std::min<size_t>(text.size(), kMaxErrorBytes - 4);
  std::vector<uint8_t> payload(4 + textBytes);
  putLe32(payload.data(), static_cast<uint32_t>(status.code()));
  std::memcpy(payload.data() + 4, text.data(), textBytes);
  return payload;
}

Status decodeErrorPayload(const std::vector<uint8_t>& payload, const std::string& from) {
  if (payload.size() < 4) return remoteError(from + ": malformed error frame");
  uint32_t code = getLe32(payload.data());
  if (code == braidSuccess || code > braidTimeout) code = braidRemoteError;
  std::string text(payload.begin() + 4, payload.end());
  for (char& c : text) {
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) c = '?';
  }
  return Status(static_cast<braidResult_t>(code), from.empty() ? text : from + ": " + text);
}

Status writeFrame(Socket& socket, FrameType type, uint16_t flags, uint32_t tag, const void* payload,
                  size_t bytes, const Deadline& deadline, const std::string& what) {
  if (bytes > kMaxFrameBytes) {
    return invalidArgument(what + ": " + std::to_string(bytes) +
                           " bytes exceed the bootstrap message limit of " +
                           std::to_string(kMaxFrameBytes));
  }
  uint8_t header[kFrameHeaderBytes];
  encodeFrameHeader({type, flags, tag, static_cast<uint32_t>(bytes)}, header);
  RETURN_IF_ERROR(socket.writeAll(header, sizeof(header), deadline, what));
  return socket.writeAll(payload, bytes, deadline, what);
}

Result<FrameHeader> readFrame(Socket& socket, uint32_t allowedTypes, uint32_t maxLength,
                              std::vector<uint8_t>* payload, const Deadline& deadline,
                              const std::string& what) {
  uint8_t raw[kFrameHeaderBytes];
  RETURN_IF_ERROR(socket.readAll(raw, sizeof(raw), deadline, what));
  Result<FrameHeader> header = decodeFrameHeader(raw, allowedTypes, maxLength);
  if (!header.ok()) return header.status().withContext(what);
  payload->resize(header->length);
  RETURN_IF_ERROR(socket.readAll(payload->data(), payload->size(), deadline, what));
  if (header->type == FrameType::kError) return decodeErrorPayload(*payload, what);
  return header;
}

std::optional<Status> readPartingWords(Socket& socket, double seconds) {
  const Deadline deadline = Deadline::after(seconds);
  uint8_t raw[kFrameHeaderBytes];
  if (!socket.readAll(raw, sizeof(raw), deadline, "parting words").ok()) return std::nullopt;
  Result<FrameHeader> header = decodeFrameHeader(raw, frameBit(FrameType::kError), kMaxErrorBytes);
  if (!header.ok()) return std::nullopt;
  std::vector<uint8_t> payload(header->length);
  if (!socket.readAll(payload.data(), payload.size(), deadline, "parting words").ok()) {
    return std::nullopt;
  }
  return decodeErrorPayload(payload, "");
}

// ---- PolledConn ----------------------------------------------------------------------------

Socket::Io PolledConn::fill(size_t want) {
  while (in_.size() < want) {
    const size_t old = in_.size();
    const size_t chunk = std::min(want - old, kReadChunk);
    in_.resize(old + chunk);
    size_t n = 0;
    const Socket::Io io = socket_.readSome(in_.data() + old, chunk, &n);
    in_.resize(old + n);
    if (io != Socket::Io::kDone) return io;
  }
  return Socket::Io::kDone;
}

Result<bool> PolledConn::readFrame(uint32_t allowedTypes, uint32_t maxLength, FrameHeader* header,
                                   std::vector<uint8_t>* payload) {
  const size_t want = haveHeader_ ? header_.length : kFrameHeaderBytes;
  switch (fill(want)) {
    case Socket::Io::kDone: break;
    case Socket::Io::kWouldBlock: return false;
    case Socket::Io::kClosed:
      if (!haveHeader_ && in_.empty()) return remoteError(kConnectionClosed);
      return remoteError(kConnectionClosedMidFrame);
    case Socket::Io::kError: return errnoError("read", errno);
  }
  if (!haveHeader_) {
    ASSIGN_OR_RETURN(header_, decodeFrameHeader(in_.data(), allowedTypes, maxLength));
    haveHeader_ = true;
    in_.clear();
    return readFrame(allowedTypes, maxLength, header, payload);
  }
  *header = header_;
  *payload = std::move(in_);
  in_.clear();
  haveHeader_ = false;
  return true;
}

void PolledConn::queue(const void* data, size_t bytes) {
  const auto* p = static_cast<const uint8_t*>(data);
  out_.insert(out_.end(), p, p + bytes);
}

void PolledConn::queueFrame(FrameType type, uint16_t flags, uint32_t tag, const void* payload,
                            size_t bytes) {
  uint8_t header[kFrameHeaderBytes];
  encodeFrameHeader({type, flags, tag, static_cast<uint32_t>(bytes)}, header);
  queue(header, sizeof(header));
  queue(payload, bytes);
}

Socket::Io PolledConn::flush() {
  while (outSent_ < out_.size()) {
    size_t n = 0;
    const Socket::Io io = socket_.writeSome(out_.data() + outSent_, out_.size() - outSent_, &n);
    if (io != Socket::Io::kDone) return io;
    outSent_ += n;
  }
  out_.clear();
  outSent_ = 0;
  return Socket::Io::kDone;
}

short PolledConn::pollEvents(bool wantInput) const {
  return static_cast<short>((wantInput ? POLLIN : 0) | (hasOutput() ? POLLOUT : 0));
}

// ---- Admission -----------------------------------------------------------------------------

Admission::State Admission::reject(std::string reason) {
  state_ = State::kRejected;
  reason_ = std::move(reason);
  return state_;
}

Admission::State Admission::progress() {
  if (state_ != State::kPending) return state_;
  for (;;) {
    if (conn_.hasOutput()) {
      const Socket::Io io = conn_.flush();
      if (io == Socket::Io::kWouldBlock) break;
      if (io != Socket::Io::kDone) return reject("connection lost during the handshake");
    }
    if (!handshake_.done()) {
      const Socket::Io io = conn_.fill(handshake_.bytesWanted());
      if (io == Socket::Io::kWouldBlock) break;
      if (io == Socket::Io::kClosed) {
        // Nothing sent at all: a liveness probe (Bootstrap's ring wait) or a port scan.
        silent_ = handshake_.bytesWanted() == kClientHelloBytes && conn_.input().empty();
        return reject(silent_ ? "closed without sending anything" : "closed during the handshake");
      }
      if (io == Socket::Io::kError) return reject(std::string("read: ") + std::strerror(errno));
      Result<std::vector<uint8_t>> reply = handshake_.consume(conn_.input().data());
      conn_.input().clear();
      if (!reply.ok()) return reject(reply.status().message());
      conn_.queue(reply->data(), reply->size());
      continue;
    }
    Result<bool> got = conn_.readFrame(allowedTypes_, maxLength_, &header_, &payload_);
    if (!got.ok()) return reject(got.status().message());
    if (!got.value()) break;
    state_ = State::kAdmitted;
    return state_;
  }
  if (deadline_.expired()) {
    return reject("did not complete the handshake within " +
                  std::to_string(static_cast<int>(deadline_.seconds() * 1000)) + " ms");
  }
  return state_;
}

}  // namespace braid
