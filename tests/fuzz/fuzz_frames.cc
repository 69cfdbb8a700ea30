// libFuzzer target: everything a bootstrap peer sends once the handshake is done - frame headers,
// the join, identify, address-table and error payloads, and whole byte streams read frame by frame
// the way the root and each rank's listener read them. Parsers must reject what they do not
// accept without reading past what arrived, and what they accept must encode back to the input.
//
// The first byte picks the parser; the rest is its input.
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "base/little_endian.h"
#include "bootstrap/bootstrap_wire.h"

namespace braid {
namespace {

void check(bool ok) {
  if (!ok) __builtin_trap();
}

void fuzzHeader(const uint8_t* data, size_t size) {
  if (size < 8 + kFrameHeaderBytes) return;
  const uint32_t allowed = getLe32(data);
  const uint32_t maxLength = getLe32(data + 4);
  Result<FrameHeader> header = decodeFrameHeader(data + 8, allowed, maxLength);
  if (!header.ok()) return;
  const auto type = static_cast<uint16_t>(header->type);
  check(type < 32 && (allowed & (1u << type)) != 0);
  const uint32_t cap =
      header->type == FrameType::kError ? kMaxErrorBytes : std::min(maxLength, kMaxFrameBytes);
  check(header->length <= cap);
  uint8_t again[kFrameHeaderBytes];
  encodeFrameHeader(header.value(), again);
  check(std::memcmp(again, data + 8, kFrameHeaderBytes) == 0);
}

void fuzzPayloads(const uint8_t* data, size_t size) {
  const std::vector<uint8_t> payload(data, data + size);
  if (Result<JoinRequest> join = decodeJoin(payload); join.ok()) {
    check(join->nranks >= 1 && join->nranks <= kMaxRanks);
    check(join->rank >= 0 && join->rank < join->nranks);
    check(join->listener.port() != 0);
    check(encodeJoin(join.value()) == payload);
  }
  if (Result<Identify> identify = decodeIdentify(payload); identify.ok()) {
    check(encodeIdentify(identify.value()) == payload);
  }
  const int nranks =
      static_cast<int>(std::max<size_t>(1, std::min<size_t>(size / kAddressEntryBytes, 64)));
  if (Result<AddressTable> table = decodeAddressTable(payload, nranks); table.ok()) {
    check(table->listeners.size() == static_cast<size_t>(nranks));
    check(table->hostKeys.size() == static_cast<size_t>(nranks));
    check(encodeAddressTable(table->listeners, table->hostKeys) == payload);
  }
  const Status error = decodeErrorPayload(payload, "peer");
  check(error.code() > braidSuccess && error.code() <= braidTimeout);
  for (char c : error.message()) check(c >= 0x20 && c < 0x7f);
}

// A pair of connected stream sockets, `data` written into one end and that end shut.
bool feed(const uint8_t* data, size_t size, int fds[2]) {
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds) != 0) return false;
  size_t sent = 0;
  while (sent < size) {
    const ssize_t n = ::send(fds[1], data + sent, size - sent, MSG_NOSIGNAL);
    if (n <= 0) break;  // the buffer is full: what went in is the input
    sent += static_cast<size_t>(n);
  }
  ::shutdown(fds[1], SHUT_WR);
  return true;
}

void fuzzStream(const uint8_t* data, size_t size) {
  int fds[2];
  if (!feed(data, size, fds)) return;
  constexpr uint32_t kAll = 0xfe;  // every frame type
  constexpr uint32_t kMax = 4096;
  PolledConn conn{Socket(fds[0]), SocketAddress()};
  for (int frames = 0; frames < 10000; ++frames) {
    FrameHeader header;
    std::vector<uint8_t> payload;
    Result<bool> got = conn.readFrame(kAll, kMax, &header, &payload);
    if (!got.ok() || !got.value()) break;
    check(payload.size() == header.length);
    check(header.length <= (header.type == FrameType::kError ? kMaxErrorBytes : kMax));
  }
  ::close(fds[1]);
}

void fuzzPartingWords(const uint8_t* data, size_t size) {
  int fds[2];
  if (!feed(data, size, fds)) return;
  Socket socket(fds[0]);
  if (std::optional<Status> words = readPartingWords(socket, 0.1)) {
    check(!words->ok());
    for (char c : words->message()) check(c >= 0x20 && c < 0x7f);
  }
  ::close(fds[1]);
}

}  // namespace
}  // namespace braid

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  switch (data[0] % 4) {
    case 0: braid::fuzzHeader(data + 1, size - 1); break;
    case 1: braid::fuzzPayloads(data + 1, size - 1); break;
    case 2: braid::fuzzStream(data + 1, size - 1); break;
    case 3: braid::fuzzPartingWords(data + 1, size - 1); break;
  }
  return 0;
}
