// libFuzzer target: the handshake that guards every bootstrap connection, from both sides, and
// the non-blocking admission of a connection (handshake, then its first frame) that the root and
// each rank's listener run. Whatever a stranger sends, it must never be admitted without the
// secret, and a member's first frame must be held to the type and length the listener allows.
//
// The first byte picks the side; the rest is what the other side sends.
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <vector>

#include "bootstrap/auth.h"
#include "bootstrap/bootstrap_wire.h"

namespace braid {
namespace {

void check(bool ok) {
  if (!ok) __builtin_trap();
}

const Secret& secret() {
  static const Secret s = [] {
    Secret v{};
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<uint8_t>(i * 37 + 11);
    return v;
  }();
  return s;
}

// The server side fed a client's hello and proof: the proof cannot be right without the secret.
void fuzzServer(const uint8_t* data, size_t size) {
  ServerHandshake server(secret());
  size_t used = 0;
  while (!server.done() && size - used >= server.bytesWanted()) {
    const size_t want = server.bytesWanted();
    Result<std::vector<uint8_t>> reply = server.consume(data + used);
    used += want;
    if (!reply.ok()) return;
    if (want == kClientHelloBytes) {
      check(reply->size() == kServerHelloBytes && std::memcmp(reply->data(), "BRHS", 4) == 0);
    }
  }
  check(!server.done());
}

// The client side fed a server's hello: it cannot prove the secret for our fresh nonce.
void fuzzClient(const uint8_t* data, size_t size) {
  if (size < kServerHelloBytes) return;
  Result<ClientHandshake> client = ClientHandshake::start(secret());
  if (!client.ok()) return;
  check(!client->answer(data).ok());
}

struct Pair {
  int fds[2] = {-1, -1};
  ~Pair() {
    if (fds[1] >= 0) ::close(fds[1]);
  }
};

void sendAll(int fd, const uint8_t* data, size_t size) {
  size_t sent = 0;
  while (sent < size) {
    const ssize_t n = ::send(fd, data + sent, size - sent, MSG_NOSIGNAL);
    if (n <= 0) return;
    sent += static_cast<size_t>(n);
  }
}

constexpr uint32_t kAllowed = frameBit(FrameType::kJoin) | frameBit(FrameType::kIdentify);
constexpr uint32_t kMaxLength = 64;

Admission::State runAdmission(Admission& admission) {
  for (int i = 0; i < 1000 && admission.progress() == Admission::State::kPending; ++i) {
  }
  return admission.state();
}

// A stranger's bytes straight into an admission: never admitted.
void fuzzStranger(const uint8_t* data, size_t size) {
  Pair pair;
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, pair.fds) != 0) return;
  sendAll(pair.fds[1], data, size);
  ::shutdown(pair.fds[1], SHUT_WR);
  Admission admission(Socket(pair.fds[0]), SocketAddress(), secret(), kAllowed, kMaxLength,
                      Deadline::after(5));
  check(runAdmission(admission) != Admission::State::kAdmitted);
}

// A member that proves the secret, then sends these bytes as its first frame.
void fuzzMember(const uint8_t* data, size_t size) {
  Pair pair;
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, pair.fds) != 0) return;
  Admission admission(Socket(pair.fds[0]), SocketAddress(), secret(), kAllowed, kMaxLength,
                      Deadline::after(5));
  Result<ClientHandshake> client = ClientHandshake::start(secret());
  if (!client.ok()) return;
  sendAll(pair.fds[1], client->hello().data(), kClientHelloBytes);
  uint8_t serverHello[kServerHelloBytes];
  size_t got = 0;
  for (int i = 0; i < 1000 && got < sizeof(serverHello); ++i) {
    admission.progress();
    const ssize_t n = ::recv(pair.fds[1], serverHello + got, sizeof(serverHello) - got, 0);
    if (n > 0) got += static_cast<size_t>(n);
  }
  check(got == sizeof(serverHello));
  Result<std::array<uint8_t, kClientProofBytes>> proof = client->answer(serverHello);
  check(proof.ok());
  sendAll(pair.fds[1], proof->data(), proof->size());
  sendAll(pair.fds[1], data, size);
  ::shutdown(pair.fds[1], SHUT_WR);
  if (runAdmission(admission) == Admission::State::kAdmitted) {
    const auto type = static_cast<uint16_t>(admission.header().type);
    check(type < 32 && (kAllowed & (1u << type)) != 0);
    check(admission.payload().size() == admission.header().length);
    check(admission.payload().size() <= kMaxLength);
  }
}

}  // namespace
}  // namespace braid

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  switch (data[0] % 4) {
    case 0: braid::fuzzServer(data + 1, size - 1); break;
    case 1: braid::fuzzClient(data + 1, size - 1); break;
    case 2: braid::fuzzStranger(data + 1, size - 1); break;
    case 3: braid::fuzzMember(data + 1, size - 1); break;
  }
  return 0;
}
