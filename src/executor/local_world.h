// Ranks as threads (or turns) of one process: FIFOs and Wakers in process memory, laid out as
// the shm transport lays them out, behind the Transport and ProgressClient interfaces. For the
// executor's tests and benchmarks, which need no bootstrap or communicator.
#pragma once

#include <cstdlib>
#include <memory>
#include <new>
#include <optional>
#include <string>

#include "executor/progress.h"
#include "fifo/fifo.h"
#include "transport/transport.h"

namespace braid {

constexpr size_t kLocalFifoMetaBytes = 8192;

/// FIFOs for every (receiver, sender) pair and one Waker per rank, in one allocation.
class LocalWorld {
 public:
  /// hostRanks as the shm transport would set it (0: the engine assumes a core per rank).
  LocalWorld(int nranks, uint32_t hostRanks, uint32_t slotBytes, uint32_t nslots)
      : nranks_(nranks), slotBytes_(slotBytes), nslots_(nslots), wakers_(new Waker[nranks]) {
    for (int r = 0; r < nranks; ++r) wakers_[r].hostRanks = hostRanks;
    stride_ = kLocalFifoMetaBytes + size_t{nslots} * slotBytes;
    memory_.reset(std::aligned_alloc(4096, stride_ * nranks * nranks));
    for (int r = 0; r < nranks; ++r) {
      for (int s = 0; s < nranks; ++s) new (fifo(r, s).control) FifoControl();
    }
  }
  int nranks() const { return nranks_; }
  Waker* waker(int rank) { return &wakers_[rank]; }
  FifoView fifo(int receiver, int sender) const {
    char* base =
        static_cast<char*>(memory_.get()) + (size_t(receiver) * nranks_ + sender) * stride_;
    FifoView v;
    v.control = reinterpret_cast<FifoControl*>(base);
    v.headers = reinterpret_cast<SlotHeader*>(base + sizeof(FifoControl));
    v.data = base + kLocalFifoMetaBytes;
    v.nslots = nslots_;
    v.slotBytes = slotBytes_;
    return v;
  }

 private:
  int nranks_;
  uint32_t slotBytes_;
  uint32_t nslots_;
  size_t stride_ = 0;
  struct FreeDeleter {
    void operator()(void* p) const { std::free(p); }
  };
  std::unique_ptr<Waker[]> wakers_;
  std::unique_ptr<void, FreeDeleter> memory_;
};

/// What ShmTransport hands out, over LocalWorld's memory (one channel).
class LocalTransport final : public Transport {
 public:
  LocalTransport(LocalWorld* world, int rank) : world_(world), rank_(rank) {}
  std::string_view name() const override { return "local"; }
  bool canConnect(int peer) const override { return peer != rank_; }
  Result<SendConnector> sendConnector(int peer, int) override {
    return SendConnector(world_->fifo(peer, rank_), world_->waker(peer));
  }
  Result<RecvConnector> recvConnector(int peer, int) override {
    return RecvConnector(world_->fifo(rank_, peer), world_->waker(peer));
  }

 private:
  LocalWorld* world_;
  int rank_;
};

/// A communicator that never fails, for LocalWorld's ranks.
class LocalClient final : public ProgressClient {
 public:
  LocalClient(LocalWorld* world, int rank) : world_(world), rank_(rank) {}
  Status health() override { return okStatus(); }
  std::optional<PeerFailure> peerFailure(int) override { return std::nullopt; }
  bool peerAlive(int) override { return true; }
  std::string describePeer(int peer) const override { return "rank " + std::to_string(peer); }
  Waker* waker() override { return world_->waker(rank_); }
  double timeoutSeconds() const override { return 60; }
  std::string who() const override { return "rank " + std::to_string(rank_); }

 private:
  LocalWorld* world_;
  int rank_;
};

}  // namespace braid
