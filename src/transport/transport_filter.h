// BRAID_TRANSPORT: which transports a communicator may use. "shm,socket" allows exactly those,
// "^ib" every transport but ib, an empty value all of them. Names are case-insensitive; an unknown
// name is an error naming the variable, so a typo never silently changes the data path.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"

namespace braid {

enum class TransportKind : uint8_t { kShm, kP2p, kSocket, kIb };

/// "shm", "p2p", "socket", "ib".
std::string_view transportKindName(TransportKind kind);

class TransportFilter {
 public:
  /// Allows everything.
  TransportFilter() = default;
  /// Parses the BRAID_TRANSPORT grammar.
  static Result<TransportFilter> parse(std::string_view spec);

  bool allows(TransportKind kind) const { return (mask_ >> static_cast<int>(kind)) & 1u; }
  /// "shm,socket" (the allowed set), for logs.
  std::string describe() const;

 private:
  uint32_t mask_ = 0xfu;
};

}  // namespace braid
