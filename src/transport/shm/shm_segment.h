// A POSIX shared-memory object mapped into this process (RAII). The creator unlinks the name as
// soon as every peer has mapped it, so nothing stays in /dev/shm after the processes exit; a name
// left behind by a process killed in between is removed by the next init on the host
// (removeStaleSegments).
#pragma once

#include <cstddef>
#include <string>

#include "base/status.h"

namespace braid {

class ShmSegment {
 public:
  ShmSegment() = default;
  ~ShmSegment();
  ShmSegment(ShmSegment&& other) noexcept;
  ShmSegment& operator=(ShmSegment&& other) noexcept;
  ShmSegment(const ShmSegment&) = delete;
  ShmSegment& operator=(const ShmSegment&) = delete;

  /// Creates a new object of `bytes` (sparse: pages are taken when first reserved or touched).
  static Result<ShmSegment> create(const std::string& name, size_t bytes);
  /// Maps an existing object made by another process; fails if it is smaller than `bytes`.
  static Result<ShmSegment> open(const std::string& name, size_t bytes);

  /// Removes the name (the mapping stays valid). Idempotent.
  void unlink();
  /// Commits the pages of [offset, offset+bytes) so that running out of /dev/shm is a clear
  /// error now rather than a SIGBUS on first touch, and maps and touches them in this process.
  Status reserve(size_t offset, size_t bytes) { return reserve(offset, bytes, bytes); }
  /// The same, mapping only the first `touchBytes` of the range into this process now (the rest
  /// comes into it, and into its resident set, page by page as it is first used).
  Status reserve(size_t offset, size_t bytes, size_t touchBytes);

  char* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& name() const { return name_; }

 private:
  void reset();

  std::string name_;
  char* data_ = nullptr;
  size_t size_ = 0;
  int fd_ = -1;
  bool owner_ = false;
};

/// A fresh segment name "/braid-<pid>-<random>".
std::string makeSegmentName();
/// Unlinks /dev/shm/braid-<pid>-* objects whose creating process no longer exists.
void removeStaleSegments();

}  // namespace braid
