// TCP sockets for the bootstrap: deadlines with an abort flag, socket addresses and their wire
// form, the interface-name grammar of BRAID_SOCKET_IFNAME, and an RAII socket whose blocking
// operations are poll loops that wake at least every kAbortPollMs to look at the abort flag.
// Every socket is non-blocking and close-on-exec; writes use MSG_NOSIGNAL so a dead peer is an
// error, never SIGPIPE.
#pragma once

#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace braid {

/// How often blocking waits look at the abort flag.
constexpr int kAbortPollMs = 50;
/// The longest an event-driven wait with no abort flag sleeps: a safety net only. Many ranks
/// sharing a core pay for every wake-up (docs/scale.md#waits-that-cost-nothing).
constexpr int kQuietWaitMs = 1000;

/// When a wait must end: a point in time (or never) and an optional abort flag.
class Deadline {
 public:
  /// seconds <= 0 means no time limit.
  static Deadline after(double seconds, const std::atomic<bool>* abort = nullptr);
  static Deadline never(const std::atomic<bool>* abort = nullptr) { return after(0, abort); }

  bool expired() const;
  bool aborted() const { return abort_ != nullptr && abort_->load(std::memory_order_relaxed); }
  /// Milliseconds for poll(): the time left, at most capMs (so the abort flag is seen), >= 0.
  int pollMs(int capMs = kAbortPollMs) const;
  /// Milliseconds for a wait that whatever else may end it wakes (a notify, a descriptor's
  /// event): the time left, at most kAbortPollMs when there is an abort flag to look at, else at
  /// most kQuietWaitMs.
  int eventWaitMs() const { return pollMs(abort_ != nullptr ? kAbortPollMs : kQuietWaitMs); }
  /// The limit this deadline was made with (0 = none), for messages.
  double seconds() const { return seconds_; }
  /// timeoutError / remoteError("aborted") naming `what` when the wait must end, else ok.
  Status check(const std::string& what) const;

 private:
  using Clock = std::chrono::steady_clock;
  bool limited_ = false;
  Clock::time_point end_{};
  double seconds_ = 0;
  const std::atomic<bool>* abort_ = nullptr;
};

/// An IPv4 or IPv6 socket address.
class SocketAddress {
 public:
  /// Bytes of the wire form: family (2), port (2), IPv6 scope id (4), address (16).
  static constexpr size_t kWireBytes = 24;

  SocketAddress() = default;
  static SocketAddress fromSockaddr(const sockaddr* address, socklen_t length);
  /// "1.2.3.4:80" or "[::1]:80" (a port is required).
  static Result<SocketAddress> parse(std::string_view text);
  /// Decodes the wire form, rejecting unknown families and non-zero padding.
  static Result<SocketAddress> fromWire(const uint8_t* in);
  void toWire(uint8_t* out) const;

  bool valid() const { return length_ != 0; }
  int family() const;
  uint16_t port() const;
  void setPort(uint16_t port);
  bool isLoopback() const;
  bool isLinkLocal() const;
  const sockaddr* raw() const { return reinterpret_cast<const sockaddr*>(&storage_); }
  socklen_t length() const { return length_; }
  std::string toString() const;
  bool operator==(const SocketAddress& other) const;

 private:
  sockaddr_storage storage_{};
  socklen_t length_ = 0;
};

/// The BRAID_SOCKET_IFNAME / BRAID_IB_HCA grammar: a comma-separated list of name prefixes;
/// a leading '^' excludes the listed names instead, a leading '=' (after any '^') makes them
/// exact names. An empty spec matches everything.
struct NameFilter {
  bool exclude = false;
  bool exact = false;
  std::vector<std::string> names;

  bool matches(std::string_view name) const;
};
Result<NameFilter> parseNameFilter(std::string_view spec);

/// One address of one network interface.
struct InterfaceAddress {
  std::string name;
  SocketAddress address;
  bool up = false;
  bool loopback = false;
};

/// Every address of every interface, from getifaddrs.
Result<std::vector<InterfaceAddress>> listInterfaces();
/// Picks the address to listen on: among interfaces that are up and match `spec`, a
/// non-loopback one before loopback, IPv4 before IPv6, link-local IPv6 last, first listed first.
Result<InterfaceAddress> chooseInterface(const std::vector<InterfaceAddress>& interfaces,
                                         std::string_view spec);
/// listInterfaces + chooseInterface.
Result<InterfaceAddress> selectInterface(std::string_view spec);

/// An owned TCP socket.
class Socket {
 public:
  /// What a non-blocking read or write did.
  enum class Io { kDone, kWouldBlock, kClosed, kError };

  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  ~Socket() { close(); }
  Socket(Socket&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  Socket& operator=(Socket&& other) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  /// Binds `address` (port 0: an ephemeral port) and listens.
  static Result<Socket> listenOn(const SocketAddress& address, int backlog = 512);
  /// Connects within the deadline. retryRefused: keep retrying while nobody listens yet
  /// (for the root); otherwise a refusal is a remoteError at once (the peer is gone).
  static Result<Socket> connectTo(const SocketAddress& address, const Deadline& deadline,
                                  const std::string& what, bool retryRefused);

  bool valid() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  void close();
  /// Ends both directions without releasing the descriptor (safe while another thread polls it).
  void shutdownBoth();
  Result<SocketAddress> localAddress() const;
  /// Makes the kernel drop the connection with ETIMEDOUT once the peer has not answered for
  /// about `seconds` (BRAID_PEER_TIMEOUT), whether data is waiting to go (TCP_USER_TIMEOUT) or
  /// the stream is idle (keepalive probes every second after a third of it). seconds <= 0 turns
  /// both off. Best effort: an option the kernel refuses is left as it was.
  void setPeerTimeout(double seconds);
  /// The error pending on the socket (SO_ERROR, cleared by reading it); 0 when none.
  int takeError() const;

  /// Accepts one pending connection; an invalid Socket when none is pending.
  Result<Socket> acceptPending(SocketAddress* peer);

  /// A non-blocking eventfd, for another thread to end this one's poll with wake().
  static Result<Socket> wakeFd(const std::string& what);
  /// Makes a wakeFd() readable (until it is read).
  void wake() const;

  /// Blocking (poll-based) transfers of exactly `bytes`. Errors name `what`: timeoutError,
  /// remoteError when the peer closed or reset the connection or on abort, systemError otherwise.
  Status writeAll(const void* data, size_t bytes, const Deadline& deadline,
                  const std::string& what);
  Status readAll(void* data, size_t bytes, const Deadline& deadline, const std::string& what);

  /// Non-blocking transfers: `*done` bytes moved (maybe fewer than asked).
  Io readSome(void* data, size_t bytes, size_t* done);
  Io writeSome(const void* data, size_t bytes, size_t* done);

 private:
  int fd_ = -1;
};

}  // namespace braid
