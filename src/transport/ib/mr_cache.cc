#include "transport/ib/mr_cache.h"

#if BRAID_HAVE_IBVERBS

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace braid {
namespace {

constexpr int kAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;

}  // namespace

MrCache::~MrCache() {
  for (auto& [start, e] : entries_) api_.deregMr(e.mr);
}

Result<ibv_mr*> MrCache::acquire(const void* addr, size_t bytes) {
  const auto begin = reinterpret_cast<uintptr_t>(addr);
  const uintptr_t end = begin + bytes;
  ++clock_;
  // Any region that starts at or before addr may cover it.
  for (auto it = entries_.upper_bound(begin); it != entries_.begin();) {
    --it;
    if (it->second.end >= end) {
      ++it->second.refs;
      it->second.lastUse = clock_;
      ++hits_;
      return it->second.mr;
    }
  }
  ++misses_;
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t alignedBegin = begin / page * page;
  const uintptr_t alignedEnd = (end + page - 1) / page * page;
  ibv_mr* mr =
      api_.regMr(pd_, reinterpret_cast<void*>(alignedBegin), alignedEnd - alignedBegin, kAccess);
  if (mr == nullptr) {
    return systemError("ibv_reg_mr of " + std::to_string(alignedEnd - alignedBegin) +
                       " bytes failed: " + std::strerror(errno) +
                       " (locked-memory limit? see ulimit -l)");
  }
  Entry e;
  e.mr = mr;
  e.end = alignedEnd;
  e.refs = 1;
  e.lastUse = clock_;
  entries_[alignedBegin] = e;
  evictUnused();
  return mr;
}

void MrCache::release(ibv_mr* mr) {
  for (auto& [start, e] : entries_) {
    if (e.mr == mr && e.refs > 0) {
      --e.refs;
      break;
    }
  }
  evictUnused();
}

void MrCache::evictUnused() {
  while (entries_.size() > maxEntries_) {
    auto victim = entries_.end();
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
      if (it->second.refs == 0 &&
          (victim == entries_.end() || it->second.lastUse < victim->second.lastUse)) {
        victim = it;
      }
    }
    if (victim == entries_.end()) return;  // everything is in use
    api_.deregMr(victim->second.mr);
    entries_.erase(victim);
  }
}

Result<ibv_mr*> MrCache::acquireDmabuf(int fd, uint64_t offset, size_t bytes, uint64_t iova) {
#if !BRAID_HAVE_CUDA
  (void)fd;
  (void)offset;
  (void)bytes;
  (void)iova;
  return invalidUsage("GPUDirect RDMA needs CUDA buffers, and this build has no CUDA support");
#else
  if (api_.regDmabufMr == nullptr) {
    return systemError("GPUDirect RDMA: this libibverbs has no ibv_reg_dmabuf_mr");
  }
  ibv_mr* mr = api_.regDmabufMr(pd_, offset, bytes, iova, fd, kAccess);
  if (mr == nullptr)
    return systemError(std::string("ibv_reg_dmabuf_mr failed: ") + std::strerror(errno));
  return mr;
#endif
}

}  // namespace braid

#endif  // BRAID_HAVE_IBVERBS
