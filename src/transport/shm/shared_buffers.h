// Shared buffers: host memory that ranks on the same host read from one another's processes.
//
// braidMemAlloc hands out memfd-backed mappings and records them here. When a collective's input
// lies in one, the shm transport lends it (fifo.h's LentSpan) instead of copying it into a FIFO:
// the receiving process maps the buffer through /proc/<pid>/fd/<fd> on first sight and reads it in
// place, so each byte is copied once rather than twice. Ranks that are threads of one process lend
// any memory the same way, by address. A peer's mappings stay in the reader's cache (a few dozen
// per peer) after the owner frees the buffer: the pages go back once both have let go.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "base/status.h"
#include "fifo/fifo.h"

namespace braid {

/// Maps `bytes` of shared memory (page-aligned, zero-filled) and records it as a shared buffer.
Result<void*> allocateSharedBuffer(size_t bytes);
/// Unmaps a buffer allocateSharedBuffer returned; anything else is an error saying so.
Status freeSharedBuffer(void* ptr);
/// The span of [p, p + bytes) when it lies inside one shared buffer.
std::optional<LentSpan> findSharedBuffer(const void* p, size_t bytes);

/// A fresh descriptor (-1 on failure; the caller closes it) for peers to test, at init, whether
/// they may open this process's descriptors through /proc (same user, a /proc that shows them,
/// not undumpable).
int openProbeFd();
/// Whether this process can open descriptor `fd` of process `pid` through /proc.
bool canOpenPeerFd(pid_t pid, int fd);

/// What one peer lends this process: addresses in this process when it is the same one, else
/// its shared buffers, mapped read-only on first use and cached.
class PeerBufferReader final : public LentReader {
 public:
  /// `pid`: the peer's process (comparable with this one's); `sameProcess`: it is this one.
  PeerBufferReader(pid_t pid, bool sameProcess) : pid_(pid), sameProcess_(sameProcess) {}
  ~PeerBufferReader() override;
  PeerBufferReader(const PeerBufferReader&) = delete;
  PeerBufferReader& operator=(const PeerBufferReader&) = delete;

  const char* address(const LentSpan& span, uint64_t bytes) override;

 private:
  struct Mapping {
    uint64_t buffer;
    const char* base;
    size_t bytes;
    uint64_t lastUse;
  };
  /// At most this many of the peer's buffers stay mapped; the least recently read goes first.
  static constexpr size_t kMaxMappings = 32;

  const Mapping* map(const LentSpan& span);

  pid_t pid_;
  bool sameProcess_;
  uint64_t uses_ = 0;
  std::vector<Mapping> mappings_;
};

}  // namespace braid
