#include "transport/shm/shared_buffers.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <shared_mutex>
#include <string>

#include "base/log.h"

namespace braid {
namespace {

struct Allocation {
  uint64_t id;
  int fd;
  size_t bytes;
};

// Every shared buffer of this process by its address. Lookups (one per call that could lend)
// share the lock; allocation and release take it alone.
struct Registry {
  std::shared_mutex mutex;
  std::map<uintptr_t, Allocation> byAddress;
  uint64_t lastId = 0;
};

Registry& registry() {
  static Registry* r = new Registry();  // never destroyed: buffers may outlive static teardown
  return *r;
}

std::string bufferName(uint64_t id) { return "braid-buffer-" + std::to_string(id); }

std::string peerFdPath(pid_t pid, int fd) {
  return "/proc/" + std::to_string(pid) + "/fd/" + std::to_string(fd);
}

}  // namespace

Result<void*> allocateSharedBuffer(size_t bytes) {
  if (bytes == 0) return invalidArgument("braidMemAlloc: size is 0");
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  if (bytes > SIZE_MAX - page) return invalidArgument("braidMemAlloc: size overflows");
  const size_t rounded = (bytes + page - 1) / page * page;
  Registry& r = registry();
  uint64_t id;
  {
    std::unique_lock lock(r.mutex);
    id = ++r.lastId;
  }
  const int fd = memfd_create(bufferName(id).c_str(), MFD_CLOEXEC);
  if (fd < 0) return systemError(std::string("braidMemAlloc: memfd_create: ") + strerror(errno));
  if (ftruncate(fd, static_cast<off_t>(rounded)) != 0) {
    const int err = errno;
    close(fd);
    return systemError("braidMemAlloc: cannot size a shared buffer of " + std::to_string(bytes) +
                       " bytes: " + strerror(err));
  }
  void* p = mmap(nullptr, rounded, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    const int err = errno;
    close(fd);
    return systemError("braidMemAlloc: cannot map " + std::to_string(bytes) +
                       " bytes: " + strerror(err));
  }
  std::unique_lock lock(r.mutex);
  r.byAddress.emplace(reinterpret_cast<uintptr_t>(p), Allocation{id, fd, rounded});
  return p;
}

Status freeSharedBuffer(void* ptr) {
  if (ptr == nullptr) return okStatus();
  Registry& r = registry();
  Allocation a;
  {
    std::unique_lock lock(r.mutex);
    auto it = r.byAddress.find(reinterpret_cast<uintptr_t>(ptr));
    if (it == r.byAddress.end()) {
      return invalidArgument("braidMemFree: the pointer was not returned by braidMemAlloc");
    }
    a = it->second;
    r.byAddress.erase(it);
  }
  munmap(ptr, a.bytes);
  close(a.fd);
  return okStatus();
}

std::optional<LentSpan> findSharedBuffer(const void* p, size_t bytes) {
  Registry& r = registry();
  const auto address = reinterpret_cast<uintptr_t>(p);
  std::shared_lock lock(r.mutex);
  auto it = r.byAddress.upper_bound(address);
  if (it == r.byAddress.begin()) return std::nullopt;
  --it;
  const uint64_t offset = address - it->first;
  if (offset > it->second.bytes || bytes > it->second.bytes - offset) return std::nullopt;
  LentSpan span;
  span.buffer = it->second.id;
  span.offset = offset;
  span.fd = it->second.fd;
  return span;
}

int openProbeFd() { return memfd_create("braid-probe", MFD_CLOEXEC); }

bool canOpenPeerFd(pid_t pid, int fd) {
  if (pid <= 0 || fd < 0) return false;
  const int opened = open(peerFdPath(pid, fd).c_str(), O_RDONLY | O_CLOEXEC);
  if (opened < 0) return false;
  close(opened);
  return true;
}

PeerBufferReader::~PeerBufferReader() {
  for (const Mapping& m : mappings_) munmap(const_cast<char*>(m.base), m.bytes);
}

const char* PeerBufferReader::address(const LentSpan& span, uint64_t bytes) {
  if (span.buffer == 0) {
    // An address: only meaningful where the lender is this very process.
    return sameProcess_ ? reinterpret_cast<const char*>(span.offset) : nullptr;
  }
  const Mapping* m = map(span);
  if (m == nullptr) return nullptr;
  if (span.offset > m->bytes || bytes > m->bytes - span.offset) {
    BRAID_LOG(processLogger(), kWarn, kShm,
              "process %d lent %llu bytes at offset %llu of its buffer %llu, which holds %zu",
              static_cast<int>(pid_), static_cast<unsigned long long>(bytes),
              static_cast<unsigned long long>(span.offset),
              static_cast<unsigned long long>(span.buffer), m->bytes);
    return nullptr;
  }
  return m->base + span.offset;
}

const PeerBufferReader::Mapping* PeerBufferReader::map(const LentSpan& span) {
  ++uses_;
  for (Mapping& m : mappings_) {
    if (m.buffer == span.buffer) {
      m.lastUse = uses_;
      return &m;
    }
  }
  auto fail = [&](const std::string& what) -> const Mapping* {
    BRAID_LOG(processLogger(), kWarn, kShm, "cannot map buffer %llu of process %d: %s",
              static_cast<unsigned long long>(span.buffer), static_cast<int>(pid_), what.c_str());
    return nullptr;
  };
  const std::string path = peerFdPath(pid_, span.fd);
  // The descriptor must still name the buffer the span speaks of (memfd names carry its id).
  char target[128] = {};
  const ssize_t n = readlink(path.c_str(), target, sizeof(target) - 1);
  const std::string expected = "/memfd:" + bufferName(span.buffer) + " ";
  if (n <= 0 || std::strncmp(target, expected.c_str(), expected.size()) != 0) {
    return fail(path + " is not that buffer");
  }
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return fail(path + ": " + strerror(errno));
  struct stat st {};
  void* p = MAP_FAILED;
  if (fstat(fd, &st) == 0 && st.st_size > 0) {
    p = mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_SHARED, fd, 0);
  }
  const int err = errno;
  close(fd);
  if (p == MAP_FAILED) return fail(std::string("mmap: ") + strerror(err));
  if (mappings_.size() >= kMaxMappings) {
    auto oldest =
        std::min_element(mappings_.begin(), mappings_.end(),
                         [](const Mapping& a, const Mapping& b) { return a.lastUse < b.lastUse; });
    munmap(const_cast<char*>(oldest->base), oldest->bytes);
    mappings_.erase(oldest);
  }
  mappings_.push_back(
      Mapping{span.buffer, static_cast<const char*>(p), static_cast<size_t>(st.st_size), uses_});
  return &mappings_.back();
}

}  // namespace braid
