// The braidUniqueId layout: where the root listens and the secret that admits a process to the
// rendezvous. The 128 bytes are, little-endian:
//   0  magic "BRID"        4  version (u16)     6  reserved, zero (u16)
//   8  root address in SocketAddress wire form (24 bytes: family, port, scope, address)
//  32  secret (32 bytes)
//  64  FNV-1a checksum of bytes 0..63 (u32)     68..127  zero
// decodeUniqueId rejects anything else, so a truncated, corrupted or foreign id is an error at
// init rather than a connection attempt to a random address.
#pragma once

#include <array>
#include <cstdint>

#include "base/status.h"
#include "bootstrap/socket.h"
#include "braid.h"

namespace braid {

constexpr size_t kSecretBytes = 32;
using Secret = std::array<uint8_t, kSecretBytes>;

/// What a unique id says.
struct UniqueIdInfo {
  SocketAddress root;
  Secret secret{};
};

constexpr uint16_t kUniqueIdVersion = 1;

braidUniqueId encodeUniqueId(const UniqueIdInfo& info);
/// invalidArgument naming what is wrong when `id` is not a well-formed id of this version.
Result<UniqueIdInfo> decodeUniqueId(const braidUniqueId& id);

}  // namespace braid
