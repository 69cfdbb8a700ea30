// libFuzzer target: the unique id (128 bytes handed to every rank by whatever means the
// application likes, so as untrusted as the network), the socket-address wire form inside it and
// in the address table, and the text forms users give (addresses, BRAID_SOCKET_IFNAME). What the
// decoders accept must encode back to exactly the input.
//
// The first byte picks the decoder; the rest is its input.
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "bootstrap/socket.h"
#include "bootstrap/unique_id.h"

namespace braid {
namespace {

void check(bool ok) {
  if (!ok) __builtin_trap();
}

void fuzzUniqueId(const uint8_t* data, size_t size) {
  braidUniqueId id{};
  std::memcpy(id.internal, data, std::min<size_t>(size, sizeof(id.internal)));
  Result<UniqueIdInfo> info = decodeUniqueId(id);
  if (!info.ok()) return;
  check(info->root.port() != 0);
  const braidUniqueId again = encodeUniqueId(info.value());
  check(std::memcmp(again.internal, id.internal, sizeof(id.internal)) == 0);
}

void fuzzWireAddress(const uint8_t* data, size_t size) {
  if (size < SocketAddress::kWireBytes) return;
  Result<SocketAddress> address = SocketAddress::fromWire(data);
  if (!address.ok()) return;
  uint8_t again[SocketAddress::kWireBytes];
  address->toWire(again);
  check(std::memcmp(again, data, sizeof(again)) == 0);
  (void)address->toString();
}

void fuzzText(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  Result<SocketAddress> address = SocketAddress::parse(text);
  if (address.ok()) {
    check(address->valid());
    // Without a scope the text form parses back to the same address.
    const std::string shown = address->toString();
    if (shown.find('%') == std::string::npos) {
      Result<SocketAddress> back = SocketAddress::parse(shown);
      check(back.ok() && back.value() == address.value());
    }
  }
  Result<NameFilter> filter = parseNameFilter(text);
  if (filter.ok()) {
    for (const std::string& name : filter->names) {
      check(!name.empty() && name.find_first_of("^= \t,") == std::string::npos);
    }
    (void)filter->matches("eth0");
  }
}

}  // namespace
}  // namespace braid

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  switch (data[0] % 3) {
    case 0: braid::fuzzUniqueId(data + 1, size - 1); break;
    case 1: braid::fuzzWireAddress(data + 1, size - 1); break;
    case 2: braid::fuzzText(data + 1, size - 1); break;
  }
  return 0;
}
