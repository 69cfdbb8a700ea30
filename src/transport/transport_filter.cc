#include "transport/transport_filter.h"

#include <array>

#include "base/text.h"

namespace braid {
namespace {

constexpr std::array<TransportKind, 4> kKinds = {TransportKind::kShm, TransportKind::kP2p,
                                                 TransportKind::kSocket, TransportKind::kIb};

}  // namespace

std::string_view transportKindName(TransportKind kind) {
  switch (kind) {
    case TransportKind::kShm: return "shm";
    case TransportKind::kP2p: return "p2p";
    case TransportKind::kSocket: return "socket";
    case TransportKind::kIb: return "ib";
  }
  return "?";
}

Result<TransportFilter> TransportFilter::parse(std::string_view spec) {
  TransportFilter filter;
  spec = trimSpace(spec);
  if (spec.empty()) return filter;
  const bool exclude = spec.front() == '^';
  if (exclude) spec.remove_prefix(1);
  uint32_t named = 0;
  size_t start = 0;
  for (size_t i = 0; i <= spec.size(); ++i) {
    if (i < spec.size() && spec[i] != ',') continue;
    const std::string name = lowerCase(trimSpace(spec.substr(start, i - start)));
    start = i + 1;
    bool known = false;
    for (TransportKind kind : kKinds) {
      if (transportKindName(kind) == name) {
        named |= 1u << static_cast<int>(kind);
        known = true;
      }
    }
    if (!known) {
      return invalidArgument("BRAID_TRANSPORT: unknown transport '" + name +
                             "' (known: shm, p2p, socket, ib; '^' excludes)");
    }
  }
  filter.mask_ = exclude ? (0xfu & ~named) : named;
  if (filter.mask_ == 0) {
    return invalidArgument("BRAID_TRANSPORT: '" + std::string(spec) + "' allows no transport");
  }
  return filter;
}

std::string TransportFilter::describe() const {
  std::string out;
  for (TransportKind kind : kKinds) {
    if (!allows(kind)) continue;
    if (!out.empty()) out += ",";
    out += transportKindName(kind);
  }
  return out;
}

}  // namespace braid
