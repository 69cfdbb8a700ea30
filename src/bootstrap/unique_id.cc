#include "bootstrap/unique_id.h"

#include <algorithm>
#include <cstring>

#include "base/little_endian.h"

namespace braid {
namespace {

constexpr uint8_t kMagic[4] = {'B', 'R', 'I', 'D'};
constexpr size_t kAddressOffset = 8;
constexpr size_t kSecretOffset = 32;
constexpr size_t kChecksumOffset = 64;
constexpr size_t kUsedBytes = 68;
static_assert(kAddressOffset + SocketAddress::kWireBytes == kSecretOffset);
static_assert(kSecretOffset + kSecretBytes == kChecksumOffset);
static_assert(kUsedBytes <= BRAID_UNIQUE_ID_BYTES);

uint32_t fnv1a(const uint8_t* data, size_t bytes) {
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < bytes; ++i) {
    h ^= data[i];
    h *= 16777619u;
  }
  return h;
}

}  // namespace

braidUniqueId encodeUniqueId(const UniqueIdInfo& info) {
  braidUniqueId id{};
  auto* out = reinterpret_cast<uint8_t*>(id.internal);
  std::memcpy(out, kMagic, sizeof(kMagic));
  putLe16(out + 4, kUniqueIdVersion);
  info.root.toWire(out + kAddressOffset);
  std::memcpy(out + kSecretOffset, info.secret.data(), kSecretBytes);
  putLe32(out + kChecksumOffset, fnv1a(out, kChecksumOffset));
  return id;
}

Result<UniqueIdInfo> decodeUniqueId(const braidUniqueId& id) {
  const auto* in = reinterpret_cast<const uint8_t*>(id.internal);
  if (std::memcmp(in, kMagic, sizeof(kMagic)) != 0) {
    return invalidArgument("unique id: bad magic (not made by braidGetUniqueId)");
  }
  if (const uint16_t version = getLe16(in + 4); version != kUniqueIdVersion) {
    return invalidArgument("unique id: version " + std::to_string(version) + ", expected " +
                           std::to_string(kUniqueIdVersion));
  }
  if (getLe16(in + 6) != 0 ||
      std::any_of(in + kUsedBytes, in + BRAID_UNIQUE_ID_BYTES, [](uint8_t b) { return b != 0; })) {
    return invalidArgument("unique id: non-zero reserved bytes");
  }
  if (getLe32(in + kChecksumOffset) != fnv1a(in, kChecksumOffset)) {
    return invalidArgument("unique id: checksum mismatch (corrupted id)");
  }
  UniqueIdInfo info;
  Result<SocketAddress> root = SocketAddress::fromWire(in + kAddressOffset);
  if (!root.ok()) return root.status().withContext("unique id");
  if (root->port() == 0) return invalidArgument("unique id: root port is 0");
  info.root = root.value();
  std::memcpy(info.secret.data(), in + kSecretOffset, kSecretBytes);
  return info;
}

}  // namespace braid
