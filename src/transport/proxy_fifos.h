// The FIFOs a network proxy (network_proxy.h) moves between this rank and the wire: for each
// channel of each linked peer, a send FIFO that the rank posts into and the proxy frees, and a
// receive FIFO that the proxy posts into and the rank frees. All of them live in one private
// anonymous mapping whose pages are taken when a FIFO is first used. The rank's threads open a FIFO
// when a plan first uses it; the proxy thread scans only the open ones.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "fifo/fifo.h"

namespace braid {

class ProxyFifos {
 public:
  ProxyFifos() = default;
  ~ProxyFifos();
  ProxyFifos(const ProxyFifos&) = delete;
  ProxyFifos& operator=(const ProxyFifos&) = delete;

  /// Lays out FIFOs of `nslots` slots of `slotBytes` on `maxChannels` channels for every peer with
  /// linked[peer]: address space only, and none at all when no peer is linked. `label` ("socket
  /// transport") starts the error.
  Status allocate(const std::vector<bool>& linked, int maxChannels, uint32_t nslots,
                  uint32_t slotBytes, std::string_view label);

  bool linked(int peer) const {
    return peer >= 0 && peer < static_cast<int>(slot_.size()) && slot_[peer] >= 0;
  }
  /// A linked peer's place among the linked peers (0, 1, ...), -1 for the others: where its FIFOs
  /// sit, and any per-peer block of the proxy's own.
  int slot(int peer) const { return slot_[peer]; }
  /// FIFOs in each direction, of linked peers or not: nranks * maxChannels.
  size_t count() const { return slot_.size() * size_t(maxChannels_); }
  size_t index(int peer, int channel) const { return size_t(peer) * maxChannels_ + channel; }
  int peerOf(size_t index) const { return static_cast<int>(index / maxChannels_); }
  int channelOf(size_t index) const { return static_cast<int>(index % maxChannels_); }
  /// Send FIFO `index` (send) or receive FIFO `index` of a linked peer.
  FifoView view(size_t index, bool send) const {
    const size_t fifo = (size_t(slot_[peerOf(index)]) * maxChannels_ + channelOf(index)) * 2;
    char* base = arena_ + (fifo + (send ? 0 : 1)) * fifoBytes_;
    FifoView v;
    v.control = reinterpret_cast<FifoControl*>(base);
    v.headers = reinterpret_cast<SlotHeader*>(base + sizeof(FifoControl));
    v.data = base + metaBytes_;
    v.nslots = nslots_;
    v.slotBytes = slotBytes_;
    return v;
  }
  /// Bytes of one FIFO: its control block and slot headers (metaBytes()), then its slots.
  size_t fifoBytes() const { return fifoBytes_; }
  size_t metaBytes() const { return metaBytes_; }

  // The rank's threads.

  /// Marks send FIFO `index` open; true the first time.
  bool openSend(size_t index) { return open(sendOpen_[index]); }
  /// Marks receive FIFO `index` open; true the first time.
  bool openRecv(size_t index) { return open(recvOpen_[index]); }

  // The proxy thread.

  /// Takes in the FIFOs opened since the last call; returns whether any were.
  bool refreshOpened();
  /// The open send FIFOs, by index, as of the last refreshOpened().
  const std::vector<int>& openedSends() const { return openedSends_; }
  /// The open receive FIFOs, by index, as of the last refreshOpened().
  const std::vector<int>& openedRecvs() const { return openedRecvs_; }

 private:
  bool open(std::atomic<bool>& flag) {
    if (flag.exchange(true)) return false;
    generation_.fetch_add(1, std::memory_order_release);
    return true;
  }

  int maxChannels_ = 1;
  uint32_t nslots_ = 0;
  uint32_t slotBytes_ = 0;
  size_t metaBytes_ = 0;
  size_t fifoBytes_ = 0;
  std::vector<int> slot_;  ///< per rank
  char* arena_ = nullptr;
  size_t arenaBytes_ = 0;

  // Shared with the rank's threads.
  std::vector<std::atomic<bool>> sendOpen_;  ///< by FIFO index
  std::vector<std::atomic<bool>> recvOpen_;
  std::atomic<uint64_t> generation_{0};  ///< FIFOs opened so far

  // The proxy thread's.
  uint64_t generationSeen_ = 0;
  std::vector<int> openedSends_;
  std::vector<int> openedRecvs_;
};

}  // namespace braid
