// CpuSet: a growable set of PU (logical CPU) numbers, as the OS numbers them. Used for the
// cpusets of topology nodes and for a process's CPU binding.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace braid {

/// A set of PU numbers (see above).
class CpuSet {
 public:
  CpuSet() = default;
  /// The set holding exactly `cpus` (negative numbers are ignored).
  static CpuSet of(const std::vector<int>& cpus);
  /// The set {first, ..., last}.
  static CpuSet range(int first, int last);
  /// Parses the kernel's list format ("0-3,8,10-11"; empty means the empty set), as in
  /// /sys/devices/system/cpu/online or a NUMA node's cpulist.
  static Result<CpuSet> parseList(const std::string& text);

  void set(int cpu);
  void clear(int cpu);
  bool test(int cpu) const;
  bool empty() const;
  int count() const;
  /// Lowest member, or -1 when empty.
  int first() const;
  /// Members in increasing order.
  std::vector<int> toVector() const;
  /// Kernel list format, e.g. "0-3,8".
  std::string toList() const;

  bool isSubsetOf(const CpuSet& other) const;
  bool intersects(const CpuSet& other) const;
  CpuSet operator&(const CpuSet& other) const;
  CpuSet operator|(const CpuSet& other) const;
  CpuSet& operator|=(const CpuSet& other);
  bool operator==(const CpuSet& other) const;

 private:
  void trim();
  std::vector<uint64_t> words_;  ///< bit i of word w is cpu 64*w+i; no trailing zero words
};

}  // namespace braid
