// Where the FIFOs of one rank's device inbox lie. Pure arithmetic, shared by the receiver (which
// allocates the inbox) and every sender (which computes the same offsets in the mapping it opened),
// so it is unit-tested on the host.
//
// The inbox holds one FIFO per (sending rank, channel), only for the senders that reach this rank
// through device memory. Each FIFO is [head | tail | slot headers | slot data], then, where the
// low-latency protocol is on, [credits | lines] (kernels/ll_protocol.h): the counters on their own
// 64-byte lines, the data 256-byte aligned so that 16-byte vector loads never straddle.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "fifo/fifo.h"

namespace braid {

class P2pInboxLayout {
 public:
  static constexpr size_t kHeadOffset = 0;
  static constexpr size_t kTailOffset = 64;
  static constexpr size_t kHeadersOffset = 128;
  static constexpr size_t kAlign = 256;

  P2pInboxLayout() = default;
  /// senders[s] says whether rank s sends into this inbox; llLines: lines of each FIFO's
  /// low-latency ring (0: none, the layout of a slot-only inbox).
  P2pInboxLayout(const std::vector<bool>& senders, int maxChannels, uint32_t nslots,
                 uint32_t slotBytes, uint32_t llLines = 0)
      : maxChannels_(maxChannels),
        nslots_(nslots),
        llLines_(llLines),
        slotBytes_(roundUp(slotBytes, kAlign)) {
    index_.assign(senders.size(), -1);
    for (size_t s = 0; s < senders.size(); ++s) {
      if (senders[s]) index_[s] = nsenders_++;
    }
    dataOffset_ = roundUp(kHeadersOffset + size_t{nslots_} * sizeof(SlotHeader), kAlign);
    creditsOffset_ = dataOffset_ + size_t{nslots_} * slotBytes_;
    stride_ = creditsOffset_;
    if (llLines_ != 0) stride_ += roundUp(kLinesAfterCredits + size_t{llLines_} * 16, kAlign);
  }

  /// From the credit counter to the first line: the counter keeps a 64-byte line of its own.
  static constexpr size_t kLinesAfterCredits = 64;

  static size_t roundUp(size_t v, size_t to) { return (v + to - 1) / to * to; }

  bool hasSender(int sender) const {
    return sender >= 0 && static_cast<size_t>(sender) < index_.size() && index_[sender] >= 0;
  }
  uint32_t nslots() const { return nslots_; }
  /// The slot size rounded up to the alignment; what FIFO users see as slotBytes.
  uint32_t slotBytes() const { return static_cast<uint32_t>(slotBytes_); }
  size_t fifoStride() const { return stride_; }
  uint32_t llLines() const { return llLines_; }
  /// Within a FIFO: the low-latency ring's credit counter (its lines follow kLinesAfterCredits
  /// later); meaningful when llLines() > 0.
  size_t creditsOffset() const { return creditsOffset_; }
  size_t dataOffset() const { return dataOffset_; }
  /// Bytes of the whole inbox (at least one alignment unit, so an inbox can always be allocated).
  size_t totalBytes() const {
    const size_t bytes = size_t(nsenders_) * size_t(maxChannels_) * stride_;
    return bytes == 0 ? kAlign : bytes;
  }
  /// Offset of the FIFO that `sender` fills on `channel`; requires hasSender(sender).
  size_t fifoOffset(int sender, int channel) const {
    return (size_t(index_[sender]) * size_t(maxChannels_) + size_t(channel)) * stride_;
  }

 private:
  std::vector<int> index_;
  int nsenders_ = 0;
  int maxChannels_ = 1;
  uint32_t nslots_ = 0;
  uint32_t llLines_ = 0;
  size_t slotBytes_ = 0;
  size_t creditsOffset_ = 0;
  size_t dataOffset_ = 0;
  size_t stride_ = 0;
};

}  // namespace braid
