// FNV-1a over bytes: the keys of cache files, host identities and file checksums (not for
// anything an adversary chooses).
#pragma once

#include <cstdint>
#include <string_view>

namespace braid {

constexpr uint64_t kFnv1aOffset = 1469598103934665603ull;

/// FNV-1a of `bytes`, continuing from `h` (kFnv1aOffset to start).
inline uint64_t fnv1a(std::string_view bytes, uint64_t h = kFnv1aOffset) {
  for (unsigned char c : bytes) h = (h ^ c) * 1099511628211ull;
  return h;
}

}  // namespace braid
