// What travels on the socket transport's TCP streams after the handshake: frames, each a fixed
// header optionally followed by payload bytes.
//
//   data    a piece of one FIFO slot: channel, the slot's sequence number, the piece's offset and
//           size within the slot, the slot's total size and its CallDescriptor. A slot is cut into
//           up to BRAID_SOCKET_NSTREAMS pieces sent on different streams; the receiver posts the
//           slot once all its bytes are in, and posts slots in sequence order.
//   credit  the receiver's tail of one channel's FIFO: the sender may have slots up to
//           tail + nslots in flight, so a receiver always has room for what arrives and never
//           stops reading a stream (no head-of-line blocking between channels sharing it).
//   notice  the sender's communicator failed; the payload is the reason (at most kMaxNoticeBytes).
//
// Frames are host-endian: the transport refuses to build for big-endian hosts rather than
// byte-swap every header (every platform Braid targets is little-endian).
#pragma once

#include <bit>
#include <cstdint>

#include "fifo/fifo.h"

namespace braid::socketwire {

static_assert(std::endian::native == std::endian::little, "socket frames are little-endian");

enum class FrameKind : uint32_t { kData = 1, kCredit = 2, kNotice = 3 };

struct FrameHeader {
  FrameKind kind;
  uint32_t channel;
  uint64_t seq;     ///< data: slot sequence number; credit: the receiver's tail; notice: the
                    ///< collectives the failed rank had finished
  uint32_t offset;  ///< data: where the piece starts in the slot
  uint32_t bytes;   ///< payload bytes that follow this header
  uint32_t total;   ///< data: bytes of the whole slot; notice: the braidResult_t
  int32_t origin;   ///< notice: the rank that failed
  CallDescriptor call;
};
static_assert(sizeof(FrameHeader) == 56);

constexpr uint32_t kMaxNoticeBytes = 512;

/// The first bytes a connecting rank sends after the handshake, and the acceptor's answer.
struct Identify {
  uint32_t magic;     ///< kIdentifyMagic
  uint32_t rank;      ///< the connecting rank
  uint32_t stream;    ///< which of the pair's streams this connection is
  uint32_t nstreams;  ///< streams the connecting rank will open to this peer
};
constexpr uint32_t kIdentifyMagic = 0x4b535242;  // "BRSK"
constexpr uint32_t kAcceptMagic = 0x4b4f5242;    // "BROK"

}  // namespace braid::socketwire
