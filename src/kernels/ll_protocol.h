// The low-latency (LL) protocol of the device executor, for small messages: every 8 bytes of
// payload travel with an 8-byte flag in one 16-byte line written by a single store, so the
// receiver knows a line has arrived from the line itself. There is no slot header, no head counter
// and no fence per message, and every thread of a block writes and polls its own lines, where the
// slot protocol (executor_protocol.h) has one thread wait while the others sit at a barrier.
//
// The flag: the low 32 bits are the line's ordinal on its FIFO plus one (modulo 2^32), the high
// 32 bits a digest of the call's descriptor and the message's size, never 0. Ordinals only grow,
// so a line left from the previous lap of the ring holds another ordinal; memory that was never
// written holds flag 0, which no sender writes. A line whose ordinal matches but whose digest does
// not comes from another call (or a message of another size): the receiver reports a mismatch, as
// the slot protocol does from the header it checks.
//
// Credits: the receiver frees lines by publishing how many it has consumed, once at least a
// quarter of the ring is waiting to be freed rather than after every message; the sender
// remembers the last value it read and polls again only when it runs out of room. A message takes
// at most a quarter of the ring, so a sender whose receiver has consumed everything never waits
// (3/4 of the ring is then free).
//
// Written once over the memory operations (Mem: storeLine, loadLine, load, store, fences), like
// the slot protocol: the CUDA kernel stores a line with one 16-byte volatile store and fences
// credits at the scope the peer needs; host threads use a release store of the flag after the
// data and an acquire load before it, so the tests run the same line format, wrap-around and
// credit logic under TSan.
#pragma once

#include <cstdint>

#include "fifo/fifo.h"
#include "kernels/cuda/device_abi.h"
#include "kernels/host_device.h"

namespace braid::gpu {

/// One line of an LL ring: 8 bytes of payload and the flag that publishes them.
struct alignas(16) LlLine {
  uint64_t data;
  uint64_t flag;
};
static_assert(sizeof(LlLine) == 16);

/// Payload bytes per line.
constexpr uint32_t kLlLineBytes = 8;
/// Largest message the LL protocol carries (the kernel stages this much per operand in shared
/// memory); larger ones take the slot protocol.
constexpr uint32_t kLlMaxMessageBytes = 2048;
/// Lines of a ring when LL is on: four of the largest messages.
constexpr uint32_t kLlDefaultLines = 4 * kLlMaxMessageBytes / kLlLineBytes;

/// One end of an LL ring. The lines and the credit counter live in the receiver's memory; the
/// sender writes lines there and reads the credits, the receiver reads lines and writes credits.
struct LlFifo {
  LlLine* lines = nullptr;      ///< nlines lines
  uint64_t* credits = nullptr;  ///< lines the receiver has consumed and freed
  uint32_t nlines = 0;          ///< 0: this FIFO has no ring; its messages take slots
  uint32_t gpuScope = 0;        ///< 1: both ends run on one GPU (fences at GPU scope suffice)
  uint64_t count = 0;           ///< lines written (send end) or consumed (receive end) so far
  /// Send end: the credits last read. Receive end: the count last published in *credits.
  uint64_t credited = 0;
};

/// The LL ring ends of a launch, indexed like ExecutorArgs' FIFO tables
/// ([peer * maxChannels + channel], device memory, ends keeping their counts between launches).
struct LlArgs {
  LlFifo* sendFifos = nullptr;
  LlFifo* recvFifos = nullptr;
};

/// What the threads of a lane share while a step moves lines: per peer of the step its ring, or
/// null where that peer's message takes a slot, and where payloads are staged (kLlMaxMessageBytes
/// each: a received message's, and what the step sends).
struct LlLaneState {
  LlFifo* recvs[kMaxStepPeers];
  LlFifo* sends[kMaxStepPeers];
  char* stageIn[kMaxStepPeers];
  char* stageOut;
  int recvLines;  ///< some message of the step arrives as lines
  int sendLines;  ///< some message leaves as lines
  int slots;      ///< some message takes a slot (its data needs the fence before the head)
};

BRAID_HOST_DEVICE inline uint32_t llLinesFor(uint32_t bytes) {
  return (bytes + kLlLineBytes - 1) / kLlLineBytes;
}

/// Whether a message of `bytes` travels as lines on f. Both ends decide alike: they see the same
/// ring size and the same message size.
BRAID_HOST_DEVICE inline bool llCarries(const LlFifo& f, uint32_t bytes) {
  return f.nlines != 0 && bytes != 0 && bytes <= kLlMaxMessageBytes &&
         4 * llLinesFor(bytes) <= f.nlines;
}

/// The digest of a message: its call's descriptor and its size, never 0.
BRAID_HOST_DEVICE inline uint32_t llDigest(const CallDescriptor& call, uint32_t bytes) {
  static_assert(sizeof(CallDescriptor) % 8 == 0);
  const uint64_t* words = reinterpret_cast<const uint64_t*>(&call);
  uint64_t h = 0x9E3779B97F4A7C15ull ^ bytes;
  for (uint32_t w = 0; w < sizeof(CallDescriptor) / 8; ++w) {
    h ^= words[w];
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 31;
  }
  const uint32_t d = static_cast<uint32_t>(h >> 32) ^ static_cast<uint32_t>(h);
  return d != 0 ? d : 1u;
}

/// The flag of the line with this ordinal.
BRAID_HOST_DEVICE inline uint64_t llFlag(uint64_t ordinal, uint32_t digest) {
  return (static_cast<uint64_t>(digest) << 32) | static_cast<uint32_t>(ordinal + 1);
}

/// What a receiver makes of a line it polls.
enum class LlLineState : uint32_t { kNotYet, kArrived, kOtherCall };

BRAID_HOST_DEVICE inline LlLineState llLineState(uint64_t flag, uint64_t ordinal, uint32_t digest) {
  if (static_cast<uint32_t>(flag) != static_cast<uint32_t>(ordinal + 1) || (flag >> 32) == 0) {
    return LlLineState::kNotYet;
  }
  return (flag >> 32) == digest ? LlLineState::kArrived : LlLineState::kOtherCall;
}

/// Up to 8 payload bytes at p as one word (the rest zero); p need not be aligned.
BRAID_HOST_DEVICE inline uint64_t llPack(const char* p, uint32_t bytes) {
  uint64_t v = 0;
  if (bytes == kLlLineBytes && (reinterpret_cast<uintptr_t>(p) & 7u) == 0) {
    return *reinterpret_cast<const uint64_t*>(p);
  }
  for (uint32_t i = 0; i < bytes; ++i) {
    v |= static_cast<uint64_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  }
  return v;
}

BRAID_HOST_DEVICE inline void llUnpack(uint64_t v, char* p, uint32_t bytes) {
  if (bytes == kLlLineBytes && (reinterpret_cast<uintptr_t>(p) & 7u) == 0) {
    *reinterpret_cast<uint64_t*>(p) = v;
    return;
  }
  for (uint32_t i = 0; i < bytes; ++i) p[i] = static_cast<char>(v >> (8 * i));
}

/// The receiver's leader: whether the first line of the next message has come (or a line of
/// another call, which llRead then reports).
template <class Mem>
BRAID_HOST_DEVICE bool llFirstLineCame(const LlFifo& f) {
  uint64_t data = 0;
  uint64_t flag = 0;
  Mem::loadLine(f.lines + f.count % f.nlines, data, flag);
  return static_cast<uint32_t>(flag) == static_cast<uint32_t>(f.count + 1) && (flag >> 32) != 0;
}

/// The sender's leader: whether f has room for `lines` more lines, reading the credits only when
/// the last value read does not leave enough.
template <class Mem>
BRAID_HOST_DEVICE bool llRoom(LlFifo& f, uint32_t lines) {
  if (f.count + lines - f.credited <= f.nlines) return true;
  f.credited = Mem::load(f.credits);
  return f.count + lines - f.credited <= f.nlines;
}

/// A sender's thread `thread` of `threads`: writes its lines of a message of `bytes` from src.
/// f.count is the message's first ordinal; llSent() advances it once every thread is done.
template <class Mem>
BRAID_HOST_DEVICE void llWrite(const LlFifo& f, const char* src, uint32_t bytes, uint32_t digest,
                               uint32_t thread, uint32_t threads) {
  const uint32_t lines = llLinesFor(bytes);
  for (uint32_t i = thread; i < lines; i += threads) {
    const uint32_t offset = i * kLlLineBytes;
    const uint32_t n = bytes - offset < kLlLineBytes ? bytes - offset : kLlLineBytes;
    const uint64_t ordinal = f.count + i;
    Mem::storeLine(f.lines + ordinal % f.nlines, llPack(src + offset, n), llFlag(ordinal, digest));
  }
}

/// The sender's leader, after every thread wrote its lines.
BRAID_HOST_DEVICE inline void llSent(LlFifo& f, uint32_t bytes) { f.count += llLinesFor(bytes); }

/// A receiver's thread `thread` of `threads`: waits for its lines of a message of `bytes` and
/// copies their payload to dst. poll() is called while a line has not arrived and returns 0 to
/// keep waiting, else why to stop. Returns 0, the code poll() returned, or kDeviceDigestMismatch
/// (with the line's ordinal in *badLine).
template <class Mem, class Poll>
BRAID_HOST_DEVICE uint32_t llRead(const LlFifo& f, char* dst, uint32_t bytes, uint32_t digest,
                                  uint32_t thread, uint32_t threads, Poll&& poll,
                                  uint64_t* badLine) {
  const uint32_t lines = llLinesFor(bytes);
  for (uint32_t i = thread; i < lines; i += threads) {
    const uint64_t ordinal = f.count + i;
    const LlLine* line = f.lines + ordinal % f.nlines;
    uint64_t data = 0;
    uint64_t flag = 0;
    LlLineState state = LlLineState::kNotYet;
    for (;;) {
      Mem::loadLine(line, data, flag);
      state = llLineState(flag, ordinal, digest);
      if (state != LlLineState::kNotYet) break;
      const uint32_t code = poll();
      if (code != 0) return code;
    }
    if (state == LlLineState::kOtherCall) {
      *badLine = ordinal;
      return kDeviceDigestMismatch;
    }
    const uint32_t offset = i * kLlLineBytes;
    llUnpack(data, dst + offset, bytes - offset < kLlLineBytes ? bytes - offset : kLlLineBytes);
  }
  return 0;
}

/// The receiver's leader, after every thread has read its lines of a message of `bytes`: counts
/// them consumed and returns credits once a quarter of the ring waits to be freed (or at once
/// with `flush`).
template <class Mem>
BRAID_HOST_DEVICE void llConsumed(LlFifo& f, uint32_t bytes, bool flush = false) {
  f.count += llLinesFor(bytes);
  if (!flush && 4 * (f.count - f.credited) < f.nlines) return;
  // The reads of the freed lines are done before the sender may overwrite them.
  if (f.gpuScope != 0) {
    Mem::fenceReleaseGpu();
  } else {
    Mem::fenceRelease();
  }
  Mem::store(f.credits, f.count);
  f.credited = f.count;
}

}  // namespace braid::gpu
