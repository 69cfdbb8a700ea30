// A registration cache: memory regions registered with the protection domain, reused for every
// buffer that lies inside one already registered, deregistered least-recently-used first once
// more than maxEntries are unused, and all at destruction. Registering pins pages and costs tens
// of microseconds, so the transport registers each FIFO once, on first use.
//
// GPUDirect RDMA (device memory exported as a dma-buf) goes through acquireDmabuf, which needs a
// build with CUDA support and a libibverbs with ibv_reg_dmabuf_mr; otherwise it says which is
// missing and callers keep to host memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>

#include "base/status.h"
#include "transport/ib/verbs_api.h"

namespace braid {

#if BRAID_HAVE_IBVERBS

class MrCache {
 public:
  MrCache(const VerbsApi& api, ibv_pd* pd, size_t maxEntries = 256)
      : api_(api), pd_(pd), maxEntries_(maxEntries) {}
  ~MrCache();
  MrCache(const MrCache&) = delete;
  MrCache& operator=(const MrCache&) = delete;

  /// A region covering [addr, addr + bytes) with local and remote write access, registered
  /// (page-aligned) on a miss. Referenced until release().
  Result<ibv_mr*> acquire(const void* addr, size_t bytes);
  void release(ibv_mr* mr);
  /// A dma-buf region for GPUDirect RDMA (not cached: the exporter owns its lifetime).
  Result<ibv_mr*> acquireDmabuf(int fd, uint64_t offset, size_t bytes, uint64_t iova);

  size_t entries() const { return entries_.size(); }
  uint64_t hits() const { return hits_; }
  uint64_t misses() const { return misses_; }

 private:
  struct Entry {
    ibv_mr* mr = nullptr;
    uintptr_t end = 0;
    int refs = 0;
    uint64_t lastUse = 0;
  };
  void evictUnused();

  const VerbsApi& api_;
  ibv_pd* pd_;
  size_t maxEntries_;
  std::map<uintptr_t, Entry> entries_;  ///< by start address
  uint64_t clock_ = 0;
  uint64_t hits_ = 0;
  uint64_t misses_ = 0;
};

#endif  // BRAID_HAVE_IBVERBS

}  // namespace braid
