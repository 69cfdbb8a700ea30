#include "transport/proxy_fifos.h"

#include <sys/mman.h>

#include <cerrno>
#include <new>
#include <string>
#include <type_traits>

namespace braid {
namespace {

size_t roundUp(size_t v, size_t to) { return (v + to - 1) / to * to; }

}  // namespace

ProxyFifos::~ProxyFifos() {
  if (arena_ != nullptr) ::munmap(arena_, arenaBytes_);
}

Status ProxyFifos::allocate(const std::vector<bool>& linked, int maxChannels, uint32_t nslots,
                            uint32_t slotBytes, std::string_view label) {
  const int n = static_cast<int>(linked.size());
  maxChannels_ = maxChannels;
  nslots_ = nslots;
  slotBytes_ = slotBytes;
  metaBytes_ = roundUp(sizeof(FifoControl) + nslots * sizeof(SlotHeader), 4096);
  fifoBytes_ = metaBytes_ + roundUp(size_t(nslots) * slotBytes, 4096);
  slot_.assign(n, -1);
  int linkedPeers = 0;
  for (int r = 0; r < n; ++r) {
    if (linked[r]) slot_[r] = linkedPeers++;
  }
  sendOpen_ = std::vector<std::atomic<bool>>(count());  // all false
  recvOpen_ = std::vector<std::atomic<bool>>(count());
  if (linkedPeers == 0) return okStatus();
  // Address space only: pages are taken when a FIFO is first used.
  const size_t wanted = size_t(linkedPeers) * maxChannels * 2 * fifoBytes_;
  void* mem = ::mmap(nullptr, wanted, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (mem == MAP_FAILED) {
    const int error = errno;
    return errnoError(
        std::string(label) + ": mapping " + std::to_string(wanted) + " bytes of FIFOs", error);
  }
  arena_ = static_cast<char*>(mem);
  arenaBytes_ = wanted;
  // A FifoControl starts as zeros, which a fresh anonymous mapping already holds: constructing
  // one in every FIFO would take a page per FIFO of every linked peer, used or not.
  static_assert(std::is_trivially_destructible_v<FifoControl>);
  return okStatus();
}

bool ProxyFifos::refreshOpened() {
  const uint64_t generation = generation_.load(std::memory_order_acquire);
  if (generation == generationSeen_) return false;
  generationSeen_ = generation;
  openedSends_.clear();
  openedRecvs_.clear();
  const size_t fifos = count();
  for (size_t f = 0; f < fifos; ++f) {
    if (sendOpen_[f].load(std::memory_order_acquire)) openedSends_.push_back(static_cast<int>(f));
    if (recvOpen_[f].load(std::memory_order_acquire)) openedRecvs_.push_back(static_cast<int>(f));
  }
  return true;
}

}  // namespace braid
