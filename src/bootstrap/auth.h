// Proof of the shared secret, without sending it: every bootstrap connection starts with a mutual
// HMAC-SHA256 challenge-response.
//
//   client -> server  hello:  "BRHS", version, 0, client nonce (32)                   40 bytes
//   server -> client  hello:  "BRHS", version, 0, server nonce (32), server proof (32) 72 bytes
//   client -> server  proof:  client proof (32)                                       32 bytes
//
// server proof = HMAC(secret, "braid-auth-v1 server" | client nonce | server nonce), and the client
// proof the same with "client". Both nonces are fresh per connection, so a recorded exchange is
// useless later, and the distinct labels stop a proof from being reflected back to its sender.
// The client checks the server before it answers, the server checks the client before it accepts
// anything else; comparisons are constant-time.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "bootstrap/socket.h"
#include "bootstrap/unique_id.h"

namespace braid {

using Digest = std::array<uint8_t, 32>;

/// Fills `bytes` bytes with randomness from the kernel's CSPRNG.
Status randomBytes(void* out, size_t bytes);
/// A fresh random secret.
Result<Secret> newSecret();
/// HMAC-SHA256 of `data` under `key`. A fork() waits until no thread is inside one, so that a
/// child never inherits OpenSSL's locks held.
Result<Digest> hmacSha256(const uint8_t* key, size_t keyBytes, const void* data, size_t bytes);
/// Frees the calling thread's OpenSSL state while fork() waits, as hmacSha256 does; a thread of
/// the library that may have authenticated calls it last (else OpenSSL frees that state as the
/// thread exits, under its locks, whenever that happens).
void endThreadCrypto();
/// The secret of the group of `color` made by split number `counter` of a bootstrap that holds
/// `parent`: every member derives it locally, nothing travels.
Result<Secret> deriveSplitSecret(const Secret& parent, uint64_t counter, int32_t color);
/// The secret of the group left by shrink number `counter` of a bootstrap that holds `parent`,
/// once the ranks in `excluded` (ascending) are gone: derived locally by every remaining rank.
Result<Secret> deriveShrinkSecret(const Secret& parent, uint64_t counter,
                                  const std::vector<int>& excluded);

constexpr size_t kClientHelloBytes = 40;
constexpr size_t kServerHelloBytes = 72;
constexpr size_t kClientProofBytes = 32;

/// The connecting side of the handshake.
class ClientHandshake {
 public:
  static Result<ClientHandshake> start(const Secret& secret);
  const std::array<uint8_t, kClientHelloBytes>& hello() const { return hello_; }
  /// Checks the server's hello (kServerHelloBytes); returns the proof to send back.
  Result<std::array<uint8_t, kClientProofBytes>> answer(const uint8_t* serverHello) const;

 private:
  Secret secret_{};
  std::array<uint8_t, kClientHelloBytes> hello_{};
};

/// The accepting side, fed by a poll loop: read bytesWanted(), consume() them, send the reply.
class ServerHandshake {
 public:
  explicit ServerHandshake(const Secret& secret) : secret_(secret) {}
  /// Bytes the next step needs; 0 once done.
  size_t bytesWanted() const;
  bool done() const { return step_ == Step::kDone; }
  /// Consumes exactly bytesWanted() bytes; returns what to send back (maybe nothing), or why the
  /// peer is rejected.
  Result<std::vector<uint8_t>> consume(const uint8_t* data);

 private:
  enum class Step { kHello, kProof, kDone, kFailed };
  Secret secret_{};
  Step step_ = Step::kHello;
  Digest expectedProof_{};
};

/// The client side over a connected socket: sends the hello, checks the server, sends the proof.
Status authenticateAsClient(Socket& socket, const Secret& secret, const Deadline& deadline,
                            const std::string& what);

}  // namespace braid
