#include "bootstrap/auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <pthread.h>
#include <sys/random.h>

#include <cerrno>
#include <cstring>
#include <string_view>

#include "base/little_endian.h"

namespace braid {
namespace {

constexpr uint8_t kMagic[4] = {'B', 'R', 'H', 'S'};
constexpr uint16_t kVersion = 1;
constexpr size_t kNonceBytes = 32;
constexpr std::string_view kServerLabel = "braid-auth-v1 server";
constexpr std::string_view kClientLabel = "braid-auth-v1 client";
constexpr std::string_view kSplitLabel = "braid-split-v1";
constexpr std::string_view kShrinkLabel = "braid-shrink-v1";

// A process that made a unique id often forks its ranks next, while its bootstrap root thread
// may be authenticating the first of them. OpenSSL takes process-wide locks inside an HMAC (a
// thread's first use registers it) and as a thread that used it exits, and a child forked while
// another thread holds one would wait for it forever. So every HMAC and every thread's OpenSSL
// cleanup (endThreadCrypto) hold this mutex, and fork() takes it first (pthread_atfork): a fork
// waits out OpenSSL's work in progress instead of copying its locks.
pthread_mutex_t gOpensslInUse = PTHREAD_MUTEX_INITIALIZER;

void holdOpenssl() { pthread_mutex_lock(&gOpensslInUse); }
void releaseOpenssl() { pthread_mutex_unlock(&gOpensslInUse); }

// Registered when the library loads, before any thread of ours can be in OpenSSL.
const bool gForkWaitsForOpenssl = pthread_atfork(holdOpenssl, releaseOpenssl, releaseOpenssl) == 0;

void writePreamble(uint8_t* out) {
  std::memcpy(out, kMagic, sizeof(kMagic));
  putLe16(out + 4, kVersion);
  putLe16(out + 6, 0);
}

Status checkPreamble(const uint8_t* in, const char* who) {
  if (std::memcmp(in, kMagic, sizeof(kMagic)) != 0) {
    return remoteError(std::string(who) + " is not speaking the braid bootstrap handshake");
  }
  if (getLe16(in + 4) != kVersion || getLe16(in + 6) != 0) {
    return remoteError(std::string(who) + " speaks handshake version " +
                       std::to_string(getLe16(in + 4)) + ", expected " + std::to_string(kVersion));
  }
  return okStatus();
}

Result<Digest> proof(const Secret& secret, std::string_view label, const uint8_t* clientNonce,
                     const uint8_t* serverNonce) {
  uint8_t message[64 + 2 * kNonceBytes];
  std::memcpy(message, label.data(), label.size());
  std::memcpy(message + label.size(), clientNonce, kNonceBytes);
  std::memcpy(message + label.size() + kNonceBytes, serverNonce, kNonceBytes);
  return hmacSha256(secret.data(), secret.size(), message, label.size() + 2 * kNonceBytes);
}

bool sameDigest(const uint8_t* a, const uint8_t* b) {
  return CRYPTO_memcmp(a, b, sizeof(Digest)) == 0;
}

}  // namespace

Status randomBytes(void* out, size_t bytes) {
  auto* p = static_cast<uint8_t*>(out);
  size_t done = 0;
  while (done < bytes) {
    const ssize_t n = getrandom(p + done, bytes - done, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errnoError("getrandom", errno);
    }
    done += static_cast<size_t>(n);
  }
  return okStatus();
}

Result<Secret> newSecret() {
  Secret secret{};
  RETURN_IF_ERROR(randomBytes(secret.data(), secret.size()));
  return secret;
}

void endThreadCrypto() {
  holdOpenssl();
  OPENSSL_thread_stop();
  releaseOpenssl();
}

Result<Digest> hmacSha256(const uint8_t* key, size_t keyBytes, const void* data, size_t bytes) {
  Digest digest{};
  unsigned int length = 0;
  holdOpenssl();
  const unsigned char* made =
      HMAC(EVP_sha256(), key, static_cast<int>(keyBytes), static_cast<const unsigned char*>(data),
           bytes, digest.data(), &length);
  releaseOpenssl();
  // A failure must never leave a predictable (all-zero) proof behind.
  if (made == nullptr || length != digest.size()) {
    return internalError("HMAC-SHA256 failed");
  }
  return digest;
}

Result<Secret> deriveSplitSecret(const Secret& parent, uint64_t counter, int32_t color) {
  uint8_t message[kSplitLabel.size() + 12];
  std::memcpy(message, kSplitLabel.data(), kSplitLabel.size());
  putLe64(message + kSplitLabel.size(), counter);
  putLe32(message + kSplitLabel.size() + 8, static_cast<uint32_t>(color));
  ASSIGN_OR_RETURN(const Digest digest,
                   hmacSha256(parent.data(), parent.size(), message, sizeof(message)));
  Secret secret{};
  std::memcpy(secret.data(), digest.data(), secret.size());
  return secret;
}

Result<Secret> deriveShrinkSecret(const Secret& parent, uint64_t counter,
                                  const std::vector<int>& excluded) {
  std::vector<uint8_t> message(kShrinkLabel.size() + 8 + 4 * excluded.size());
  std::memcpy(message.data(), kShrinkLabel.data(), kShrinkLabel.size());
  putLe64(message.data() + kShrinkLabel.size(), counter);
  for (size_t i = 0; i < excluded.size(); ++i) {
    putLe32(message.data() + kShrinkLabel.size() + 8 + 4 * i, static_cast<uint32_t>(excluded[i]));
  }
  ASSIGN_OR_RETURN(const Digest digest,
                   hmacSha256(parent.data(), parent.size(), message.data(), message.size()));
  Secret secret{};
  std::memcpy(secret.data(), digest.data(), secret.size());
  return secret;
}

Result<ClientHandshake> ClientHandshake::start(const Secret& secret) {
  ClientHandshake h;
  h.secret_ = secret;
  writePreamble(h.hello_.data());
  RETURN_IF_ERROR(randomBytes(h.hello_.data() + 8, kNonceBytes));
  return h;
}

Result<std::array<uint8_t, kClientProofBytes>> ClientHandshake::answer(
    const uint8_t* serverHello) const {
  RETURN_IF_ERROR(checkPreamble(serverHello, "the peer"));
  const uint8_t* clientNonce = hello_.data() + 8;
  const uint8_t* serverNonce = serverHello + 8;
  if (CRYPTO_memcmp(clientNonce, serverNonce, kNonceBytes) == 0) {
    return remoteError("the peer echoed our nonce back (reflection)");
  }
  ASSIGN_OR_RETURN(const Digest expected, proof(secret_, kServerLabel, clientNonce, serverNonce));
  if (!sameDigest(expected.data(), serverHello + 8 + kNonceBytes)) {
    return remoteError("the peer failed to prove the secret (not a member of this bootstrap)");
  }
  return proof(secret_, kClientLabel, clientNonce, serverNonce);
}

size_t ServerHandshake::bytesWanted() const {
  switch (step_) {
    case Step::kHello: return kClientHelloBytes;
    case Step::kProof: return kClientProofBytes;
    default: return 0;
  }
}

Result<std::vector<uint8_t>> ServerHandshake::consume(const uint8_t* data) {
  if (step_ == Step::kHello) {
    step_ = Step::kFailed;
    RETURN_IF_ERROR(checkPreamble(data, "the client"));
    std::vector<uint8_t> reply(kServerHelloBytes);
    writePreamble(reply.data());
    uint8_t* serverNonce = reply.data() + 8;
    RETURN_IF_ERROR(randomBytes(serverNonce, kNonceBytes));
    const uint8_t* clientNonce = data + 8;
    ASSIGN_OR_RETURN(const Digest mine, proof(secret_, kServerLabel, clientNonce, serverNonce));
    std::memcpy(reply.data() + 8 + kNonceBytes, mine.data(), mine.size());
    ASSIGN_OR_RETURN(expectedProof_, proof(secret_, kClientLabel, clientNonce, serverNonce));
    step_ = Step::kProof;
    return reply;
  }
  if (step_ == Step::kProof) {
    if (!sameDigest(expectedProof_.data(), data)) {
      step_ = Step::kFailed;
      return remoteError("the client failed to prove the secret");
    }
    step_ = Step::kDone;
    return std::vector<uint8_t>();
  }
  return internalError("handshake: no step expects data");
}

Status authenticateAsClient(Socket& socket, const Secret& secret, const Deadline& deadline,
                            const std::string& what) {
  ASSIGN_OR_RETURN(const ClientHandshake handshake, ClientHandshake::start(secret));
  RETURN_IF_ERROR(
      socket.writeAll(handshake.hello().data(), kClientHelloBytes, deadline, what + ": handshake"));
  uint8_t serverHello[kServerHelloBytes];
  RETURN_IF_ERROR(socket.readAll(serverHello, sizeof(serverHello), deadline, what + ": handshake"));
  Result<std::array<uint8_t, kClientProofBytes>> answer = handshake.answer(serverHello);
  if (!answer.ok()) return answer.status().withContext(what);
  return socket.writeAll(answer->data(), kClientProofBytes, deadline, what + ": handshake");
}

}  // namespace braid
