#include "transport/shm/shm_segment.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <ctime>

namespace braid {
namespace {

#ifdef MADV_POPULATE_WRITE
constexpr int kPopulateWrite = MADV_POPULATE_WRITE;
#else
constexpr int kPopulateWrite = 23;  // Linux 5.14's value, for older headers
#endif

}  // namespace

ShmSegment::~ShmSegment() { reset(); }

ShmSegment::ShmSegment(ShmSegment&& other) noexcept { *this = std::move(other); }

ShmSegment& ShmSegment::operator=(ShmSegment&& other) noexcept {
  if (this != &other) {
    reset();
    name_ = std::move(other.name_);
    data_ = other.data_;
    size_ = other.size_;
    fd_ = other.fd_;
    owner_ = other.owner_;
    other.data_ = nullptr;
    other.size_ = 0;
    other.fd_ = -1;
    other.owner_ = false;
  }
  return *this;
}

void ShmSegment::reset() {
  unlink();
  if (data_ != nullptr) munmap(data_, size_);
  if (fd_ >= 0) close(fd_);
  data_ = nullptr;
  fd_ = -1;
  size_ = 0;
}

void ShmSegment::unlink() {
  if (owner_) {
    shm_unlink(name_.c_str());
    owner_ = false;
  }
}

Result<ShmSegment> ShmSegment::create(const std::string& name, size_t bytes) {
  ShmSegment seg;
  seg.fd_ = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  if (seg.fd_ < 0) return errnoError("shm_open(" + name + ") to create", errno);
  seg.name_ = name;
  seg.owner_ = true;
  if (ftruncate(seg.fd_, static_cast<off_t>(bytes)) != 0) {
    return errnoError("ftruncate(" + name + ", " + std::to_string(bytes) + ")", errno);
  }
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, seg.fd_, 0);
  if (p == MAP_FAILED) return errnoError("mmap(" + name + ")", errno);
  seg.data_ = static_cast<char*>(p);
  seg.size_ = bytes;
  return seg;
}

Result<ShmSegment> ShmSegment::open(const std::string& name, size_t bytes) {
  ShmSegment seg;
  seg.fd_ = shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0600);
  if (seg.fd_ < 0) return errnoError("shm_open(" + name + ")", errno);
  seg.name_ = name;
  struct stat st {};
  if (fstat(seg.fd_, &st) != 0) return errnoError("fstat(" + name + ")", errno);
  if (static_cast<size_t>(st.st_size) < bytes) {
    return systemError("shared memory " + name + " holds " + std::to_string(st.st_size) +
                       " bytes, expected " + std::to_string(bytes));
  }
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, seg.fd_, 0);
  if (p == MAP_FAILED) return errnoError("mmap(" + name + ")", errno);
  seg.data_ = static_cast<char*>(p);
  seg.size_ = bytes;
  return seg;
}

Status ShmSegment::reserve(size_t offset, size_t bytes, size_t touchBytes) {
  if (offset > size_ || bytes > size_ - offset) return internalError("reserve outside segment");
  const int rc = posix_fallocate(fd_, static_cast<off_t>(offset), static_cast<off_t>(bytes));
  if (rc != 0) {
    return errnoError("reserving " + std::to_string(bytes) + " bytes of shared memory in " + name_ +
                          " (is /dev/shm full?)",
                      rc);
  }
  // Map the first touchBytes into this process now: a page fault on each new page would cost
  // the first calls to reach it several us each. What the caller leaves out (a FIFO's ring for
  // large messages) faults in as it is used, so that the resident set follows what is used.
  // Best effort (kernels before 5.14 lack it; the pages then fault in as before).
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t begin = offset / page * page;
  bytes = std::min(bytes, touchBytes);
  (void)madvise(data_ + begin, offset + bytes - begin, kPopulateWrite);
  // Then read a byte of each page: under some hypervisors the first access to a page through a
  // new mapping traps to the host even when the kernel has already mapped it, which slowed the
  // first calls to reach each of a FIFO's small-message areas
  // (docs/performance-notes.md#touching-fifo-pages). The peer may already be writing there: an
  // atomic load reads without racing with it.
  for (size_t at = begin; at < offset + bytes; at += page) {
    (void)__atomic_load_n(data_ + at, __ATOMIC_RELAXED);
  }
  return okStatus();
}

std::string makeSegmentName() {
  uint64_t random = 0;
  if (getrandom(&random, sizeof(random), 0) != sizeof(random)) {
    random = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(&random)) ^
             static_cast<uint64_t>(time(nullptr));
  }
  char name[64];
  std::snprintf(name, sizeof(name), "/braid-%d-%016" PRIx64, static_cast<int>(getpid()), random);
  return name;
}

void removeStaleSegments() {
  DIR* dir = opendir("/dev/shm");
  if (dir == nullptr) return;
  while (dirent* entry = readdir(dir)) {
    int pid = 0;
    char rest[32];
    if (std::sscanf(entry->d_name, "braid-%d-%31s", &pid, rest) != 2 || pid <= 0) continue;
    if (kill(pid, 0) != 0 && errno == ESRCH) {
      shm_unlink((std::string("/") + entry->d_name).c_str());
    }
  }
  closedir(dir);
}

}  // namespace braid
