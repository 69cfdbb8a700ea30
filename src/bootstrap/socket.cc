#include "bootstrap/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <thread>

#include "base/little_endian.h"

namespace braid {
namespace {

constexpr uint16_t kWireFamilyV4 = 4;
constexpr uint16_t kWireFamilyV6 = 6;

std::string formatSeconds(double seconds) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.3g", seconds);
  return text;
}

std::string_view trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

void setNoDelay(int fd) {
  int one = 1;
  // Bootstrap frames are small and latency-bound; Nagle would delay every header/payload pair.
  (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

// A peer that went away, as opposed to a local failure.
bool isPeerGone(int error) { return error == EPIPE || error == ECONNRESET || error == ENOTCONN; }

// Connect failures worth another try while the root may not be listening yet.
bool isTransientConnectError(int error) {
  return error == ECONNREFUSED || error == ETIMEDOUT || error == ENETUNREACH ||
         error == EHOSTUNREACH || error == ECONNRESET || error == EAGAIN;
}

bool isSelfConnected(const Socket& s) {
  sockaddr_storage peer{};
  socklen_t length = sizeof(peer);
  if (getpeername(s.fd(), reinterpret_cast<sockaddr*>(&peer), &length) != 0) return false;
  Result<SocketAddress> local = s.localAddress();
  return local.ok() &&
         *local == SocketAddress::fromSockaddr(reinterpret_cast<sockaddr*>(&peer), length);
}

Status ioFailure(const std::string& what, int error) {
  if (isPeerGone(error)) return remoteError(what + ": connection reset by peer");
  return errnoError(what, error);
}

// Waits for `events` on fd until ready, the deadline, or the abort flag.
Status waitFor(int fd, short events, const Deadline& deadline, const std::string& what) {
  for (;;) {
    RETURN_IF_ERROR(deadline.check(what));
    pollfd p{fd, events, 0};
    const int rc = ::poll(&p, 1, deadline.pollMs());
    if (rc > 0) return okStatus();
    if (rc < 0 && errno != EINTR) return errnoError(what + ": poll", errno);
  }
}

}  // namespace

// ---- Deadline ------------------------------------------------------------------------------

Deadline Deadline::after(double seconds, const std::atomic<bool>* abort) {
  Deadline d;
  d.abort_ = abort;
  if (seconds > 0 && std::isfinite(seconds)) {
    d.limited_ = true;
    d.seconds_ = seconds;
    d.end_ = Clock::now() +
             std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  }
  return d;
}

bool Deadline::expired() const { return limited_ && Clock::now() >= end_; }

int Deadline::pollMs(int capMs) const {
  if (!limited_) return capMs;
  const Clock::duration left = end_ - Clock::now();
  if (left <= Clock::duration::zero()) return 0;
  // Round up so a wait never spins on a sub-millisecond remainder.
  const int64_t ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
  return static_cast<int>(std::min<int64_t>(ms, capMs));
}

Status Deadline::check(const std::string& what) const {
  if (aborted()) return remoteError(what + ": aborted");
  if (expired()) return timeoutError(what + ": timed out after " + formatSeconds(seconds_) + " s");
  return okStatus();
}

// ---- SocketAddress -------------------------------------------------------------------------

SocketAddress SocketAddress::fromSockaddr(const sockaddr* address, socklen_t length) {
  SocketAddress a;
  if (address == nullptr) return a;
  if (address->sa_family == AF_INET && length >= static_cast<socklen_t>(sizeof(sockaddr_in))) {
    a.length_ = sizeof(sockaddr_in);
  } else if (address->sa_family == AF_INET6 &&
             length >= static_cast<socklen_t>(sizeof(sockaddr_in6))) {
    a.length_ = sizeof(sockaddr_in6);
  } else {
    return a;
  }
  std::memcpy(&a.storage_, address, a.length_);
  return a;
}

Result<SocketAddress> SocketAddress::parse(std::string_view text) {
  std::string host;
  std::string_view portText;
  if (!text.empty() && text.front() == '[') {
    const size_t close = text.find(']');
    if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      return invalidArgument("'" + std::string(text) + "' is not [address]:port");
    }
    host = std::string(text.substr(1, close - 1));
    portText = text.substr(close + 2);
  } else {
    const size_t colon = text.rfind(':');
    if (colon == std::string_view::npos) {
      return invalidArgument("'" + std::string(text) + "' has no :port");
    }
    host = std::string(text.substr(0, colon));
    portText = text.substr(colon + 1);
  }
  if (portText.empty() || portText.size() > 5 ||
      !std::all_of(portText.begin(), portText.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return invalidArgument("'" + std::string(text) + "' has a bad port");
  }
  const unsigned long port = std::stoul(std::string(portText));
  if (port > 65535) return invalidArgument("'" + std::string(text) + "' has a bad port");

  sockaddr_in v4{};
  if (inet_pton(AF_INET, host.c_str(), &v4.sin_addr) == 1) {
    v4.sin_family = AF_INET;
    v4.sin_port = htons(static_cast<uint16_t>(port));
    return fromSockaddr(reinterpret_cast<sockaddr*>(&v4), sizeof(v4));
  }
  sockaddr_in6 v6{};
  std::string scope;
  if (const size_t percent = host.find('%'); percent != std::string::npos) {
    scope = host.substr(percent + 1);
    host.resize(percent);
  }
  if (inet_pton(AF_INET6, host.c_str(), &v6.sin6_addr) == 1) {
    v6.sin6_family = AF_INET6;
    v6.sin6_port = htons(static_cast<uint16_t>(port));
    if (!scope.empty()) v6.sin6_scope_id = if_nametoindex(scope.c_str());
    return fromSockaddr(reinterpret_cast<sockaddr*>(&v6), sizeof(v6));
  }
  return invalidArgument("'" + host + "' is not an IPv4 or IPv6 address");
}

Result<SocketAddress> SocketAddress::fromWire(const uint8_t* in) {
  const uint16_t family = getLe16(in);
  const uint16_t port = getLe16(in + 2);
  const uint32_t scope = getLe32(in + 4);
  if (family == kWireFamilyV4) {
    if (scope != 0 || std::any_of(in + 12, in + 24, [](uint8_t b) { return b != 0; })) {
      return invalidArgument("IPv4 address with non-zero padding");
    }
    sockaddr_in v4{};
    v4.sin_family = AF_INET;
    v4.sin_port = htons(port);
    std::memcpy(&v4.sin_addr, in + 8, 4);
    return fromSockaddr(reinterpret_cast<sockaddr*>(&v4), sizeof(v4));
  }
  if (family == kWireFamilyV6) {
    sockaddr_in6 v6{};
    v6.sin6_family = AF_INET6;
    v6.sin6_port = htons(port);
    v6.sin6_scope_id = scope;
    std::memcpy(&v6.sin6_addr, in + 8, 16);
    return fromSockaddr(reinterpret_cast<sockaddr*>(&v6), sizeof(v6));
  }
  return invalidArgument("unknown address family " + std::to_string(family));
}

void SocketAddress::toWire(uint8_t* out) const {
  std::memset(out, 0, kWireBytes);
  if (family() == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(&storage_);
    putLe16(out, kWireFamilyV4);
    putLe16(out + 2, ntohs(v4->sin_port));
    std::memcpy(out + 8, &v4->sin_addr, 4);
  } else if (family() == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&storage_);
    putLe16(out, kWireFamilyV6);
    putLe16(out + 2, ntohs(v6->sin6_port));
    putLe32(out + 4, v6->sin6_scope_id);
    std::memcpy(out + 8, &v6->sin6_addr, 16);
  }
}

int SocketAddress::family() const { return valid() ? storage_.ss_family : AF_UNSPEC; }

uint16_t SocketAddress::port() const {
  if (family() == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&storage_)->sin_port);
  if (family() == AF_INET6) {
    return ntohs(reinterpret_cast<const sockaddr_in6*>(&storage_)->sin6_port);
  }
  return 0;
}

void SocketAddress::setPort(uint16_t port) {
  if (family() == AF_INET) reinterpret_cast<sockaddr_in*>(&storage_)->sin_port = htons(port);
  if (family() == AF_INET6) reinterpret_cast<sockaddr_in6*>(&storage_)->sin6_port = htons(port);
}

bool SocketAddress::isLoopback() const {
  if (family() == AF_INET) {
    const uint32_t a = ntohl(reinterpret_cast<const sockaddr_in*>(&storage_)->sin_addr.s_addr);
    return (a >> 24) == 127;
  }
  if (family() == AF_INET6) {
    return IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<const sockaddr_in6*>(&storage_)->sin6_addr);
  }
  return false;
}

bool SocketAddress::isLinkLocal() const {
  if (family() != AF_INET6) return false;
  return IN6_IS_ADDR_LINKLOCAL(&reinterpret_cast<const sockaddr_in6*>(&storage_)->sin6_addr);
}

std::string SocketAddress::toString() const {
  char host[INET6_ADDRSTRLEN] = "?";
  if (family() == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&storage_)->sin_addr, host,
              sizeof(host));
    return std::string(host) + ":" + std::to_string(port());
  }
  if (family() == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&storage_);
    inet_ntop(AF_INET6, &v6->sin6_addr, host, sizeof(host));
    std::string text = "[" + std::string(host);
    if (v6->sin6_scope_id != 0) text += "%" + std::to_string(v6->sin6_scope_id);
    return text + "]:" + std::to_string(port());
  }
  return "<no address>";
}

bool SocketAddress::operator==(const SocketAddress& other) const {
  if (family() != other.family() || port() != other.port()) return false;
  if (family() == AF_INET) {
    return std::memcmp(&reinterpret_cast<const sockaddr_in*>(&storage_)->sin_addr,
                       &reinterpret_cast<const sockaddr_in*>(&other.storage_)->sin_addr, 4) == 0;
  }
  if (family() == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&storage_);
    const auto* b = reinterpret_cast<const sockaddr_in6*>(&other.storage_);
    return std::memcmp(&a->sin6_addr, &b->sin6_addr, 16) == 0 &&
           a->sin6_scope_id == b->sin6_scope_id;
  }
  return true;
}

// ---- Interface selection -------------------------------------------------------------------

bool NameFilter::matches(std::string_view name) const {
  if (names.empty()) return true;
  bool hit = false;
  for (const std::string& n : names) {
    if (exact ? name == n : name.substr(0, n.size()) == n) hit = true;
  }
  return exclude ? !hit : hit;
}

Result<NameFilter> parseNameFilter(std::string_view spec) {
  NameFilter filter;
  std::string_view rest = trim(spec);
  if (rest.empty()) return filter;
  if (rest.front() == '^') {
    filter.exclude = true;
    rest.remove_prefix(1);
  }
  if (!rest.empty() && rest.front() == '=') {
    filter.exact = true;
    rest.remove_prefix(1);
  }
  for (;;) {
    const size_t comma = rest.find(',');
    const std::string_view token = trim(rest.substr(0, comma));
    if (token.empty()) {
      return invalidArgument("'" + std::string(spec) + "': empty name in the list");
    }
    for (char c : token) {
      if (c == '^' || c == '=' || c == ' ' || c == '\t') {
        return invalidArgument("'" + std::string(spec) + "': '" + std::string(1, c) +
                               "' inside a name (only one leading '^' and '=' are allowed)");
      }
    }
    filter.names.emplace_back(token);
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return filter;
}

Result<std::vector<InterfaceAddress>> listInterfaces() {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return errnoError("getifaddrs", errno);
  std::vector<InterfaceAddress> out;
  for (const ifaddrs* ifa = list; ifa != nullptr; ifa = ifa->ifa_next) {
    if (ifa->ifa_addr == nullptr) continue;
    const int family = ifa->ifa_addr->sa_family;
    if (family != AF_INET && family != AF_INET6) continue;
    InterfaceAddress entry;
    entry.name = ifa->ifa_name;
    entry.address = SocketAddress::fromSockaddr(
        ifa->ifa_addr, family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6));
    entry.address.setPort(0);
    entry.up = (ifa->ifa_flags & IFF_UP) != 0;
    entry.loopback = (ifa->ifa_flags & IFF_LOOPBACK) != 0 || entry.address.isLoopback();
    out.push_back(std::move(entry));
  }
  freeifaddrs(list);
  return out;
}

Result<InterfaceAddress> chooseInterface(const std::vector<InterfaceAddress>& interfaces,
                                         std::string_view spec) {
  ASSIGN_OR_RETURN(const NameFilter filter, parseNameFilter(spec));
  const bool defaultPolicy = filter.names.empty();
  const InterfaceAddress* best = nullptr;
  int bestRank = 0;
  std::string seen;
  for (const InterfaceAddress& entry : interfaces) {
    if (seen.find(entry.name) == std::string::npos) seen += (seen.empty() ? "" : ", ") + entry.name;
    if (!entry.up || !entry.address.valid() || !filter.matches(entry.name)) continue;
    const bool linkLocal = entry.address.isLinkLocal();
    // Link-local IPv6 needs a scope on every host; only use it when asked for by name.
    if (linkLocal && defaultPolicy) continue;
    const int rank = (entry.loopback ? 4 : 0) + (entry.address.family() == AF_INET6 ? 2 : 0) +
                     (linkLocal ? 1 : 0);
    if (best == nullptr || rank < bestRank) {
      best = &entry;
      bestRank = rank;
    }
  }
  if (best == nullptr) {
    return invalidArgument("no interface that is up matches BRAID_SOCKET_IFNAME='" +
                           std::string(spec) + "' (interfaces: " + seen + ")");
  }
  return *best;
}

Result<InterfaceAddress> selectInterface(std::string_view spec) {
  ASSIGN_OR_RETURN(const std::vector<InterfaceAddress> interfaces, listInterfaces());
  return chooseInterface(interfaces, spec);
}

// ---- Socket --------------------------------------------------------------------------------

Socket& Socket::operator=(Socket&& other) noexcept {
  if (this != &other) {
    close();
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

void Socket::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void Socket::shutdownBoth() {
  if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
}

void Socket::setPeerTimeout(double seconds) {
  if (fd_ < 0) return;
  const int on = seconds > 0 ? 1 : 0;
  (void)setsockopt(fd_, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof(on));
  const unsigned int userTimeoutMs =
      seconds > 0 ? static_cast<unsigned int>(std::min(seconds * 1e3, 2e9)) : 0;
  (void)setsockopt(fd_, IPPROTO_TCP, TCP_USER_TIMEOUT, &userTimeoutMs, sizeof(userTimeoutMs));
  if (seconds <= 0) return;
  // Idle for a third of the limit, then a probe a second: the user timeout ends the connection
  // at the first probe after `seconds` without an answer, so within a second of the limit.
  const int idle = std::clamp(static_cast<int>(seconds / 3), 1, 32767);
  const int interval = 1;
  const int count = std::clamp(static_cast<int>(seconds) + 1, 1, 127);
  (void)setsockopt(fd_, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
  (void)setsockopt(fd_, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof(interval));
  (void)setsockopt(fd_, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof(count));
}

int Socket::takeError() const {
  int error = 0;
  socklen_t length = sizeof(error);
  if (fd_ < 0 || getsockopt(fd_, SOL_SOCKET, SO_ERROR, &error, &length) != 0) return 0;
  return error;
}

Result<SocketAddress> Socket::localAddress() const {
  sockaddr_storage storage{};
  socklen_t length = sizeof(storage);
  if (getsockname(fd_, reinterpret_cast<sockaddr*>(&storage), &length) != 0) {
    return errnoError("getsockname", errno);
  }
  return SocketAddress::fromSockaddr(reinterpret_cast<sockaddr*>(&storage), length);
}

Result<Socket> Socket::listenOn(const SocketAddress& address, int backlog) {
  if (!address.valid()) return invalidArgument("listen: no address");
  Socket s(::socket(address.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!s.valid()) return errnoError("socket", errno);
  // A fixed port may still be held by an earlier connection in TIME_WAIT; that must not stop a
  // new listener (a port in active use still fails).
  int one = 1;
  (void)setsockopt(s.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(s.fd(), address.raw(), address.length()) != 0) {
    return errnoError("bind " + address.toString(), errno);
  }
  if (::listen(s.fd(), backlog) != 0) return errnoError("listen " + address.toString(), errno);
  return s;
}

Result<Socket> Socket::connectTo(const SocketAddress& address, const Deadline& deadline,
                                 const std::string& what, bool retryRefused) {
  const std::string context = what + ": connect to " + address.toString();
  for (;;) {
    RETURN_IF_ERROR(deadline.check(context));
    Socket s(::socket(address.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!s.valid()) return errnoError("socket", errno);
    setNoDelay(s.fd());
    int error = 0;
    if (::connect(s.fd(), address.raw(), address.length()) != 0) {
      error = errno;
      if (error == EINPROGRESS || error == EINTR) {
        RETURN_IF_ERROR(waitFor(s.fd(), POLLOUT, deadline, context));
        socklen_t length = sizeof(error);
        if (getsockopt(s.fd(), SOL_SOCKET, SO_ERROR, &error, &length) != 0) error = errno;
      }
    }
    // A loopback connect to a port nobody listens on can pick that very port as its source and
    // connect to itself (TCP simultaneous open); that socket would also keep the listener out.
    if (error == 0 && !isSelfConnected(s)) return s;
    if (error == 0) error = ECONNREFUSED;
    if (!isTransientConnectError(error)) return errnoError(context, error);
    if (!retryRefused && error == ECONNREFUSED) {
      return remoteError(context + ": connection refused (nobody listening)");
    }
    // Not reachable yet: back off briefly (still watching the abort flag) and try again.
    std::this_thread::sleep_for(std::chrono::milliseconds(deadline.pollMs()));
  }
}

Result<Socket> Socket::wakeFd(const std::string& what) {
  Socket s(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!s.valid()) return errnoError(what + ": eventfd", errno);
  return s;
}

void Socket::wake() const {
  const uint64_t one = 1;
  if (fd_ >= 0) (void)!::write(fd_, &one, sizeof(one));
}

Result<Socket> Socket::acceptPending(SocketAddress* peer) {
  sockaddr_storage storage{};
  socklen_t length = sizeof(storage);
  const int fd =
      ::accept4(fd_, reinterpret_cast<sockaddr*>(&storage), &length, SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (fd < 0) {
    const int error = errno;
    if (error == EAGAIN || error == EWOULDBLOCK || error == EINTR || error == ECONNABORTED ||
        error == EPROTO) {
      return Socket();
    }
    return errnoError("accept", error);
  }
  setNoDelay(fd);
  if (peer != nullptr) {
    *peer = SocketAddress::fromSockaddr(reinterpret_cast<sockaddr*>(&storage), length);
  }
  return Socket(fd);
}

Socket::Io Socket::readSome(void* data, size_t bytes, size_t* done) {
  *done = 0;
  if (bytes == 0) return Io::kDone;
  const ssize_t n = ::recv(fd_, data, bytes, 0);
  if (n > 0) {
    *done = static_cast<size_t>(n);
    return Io::kDone;
  }
  if (n == 0) return Io::kClosed;
  if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return Io::kWouldBlock;
  return isPeerGone(errno) ? Io::kClosed : Io::kError;
}

Socket::Io Socket::writeSome(const void* data, size_t bytes, size_t* done) {
  *done = 0;
  if (bytes == 0) return Io::kDone;
  const ssize_t n = ::send(fd_, data, bytes, MSG_NOSIGNAL);
  if (n >= 0) {
    *done = static_cast<size_t>(n);
    return Io::kDone;
  }
  if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return Io::kWouldBlock;
  return isPeerGone(errno) ? Io::kClosed : Io::kError;
}

Status Socket::writeAll(const void* data, size_t bytes, const Deadline& deadline,
                        const std::string& what) {
  const auto* p = static_cast<const uint8_t*>(data);
  size_t sent = 0;
  while (sent < bytes) {
    size_t n = 0;
    switch (writeSome(p + sent, bytes - sent, &n)) {
      case Io::kDone: sent += n; break;
      case Io::kWouldBlock: RETURN_IF_ERROR(waitFor(fd_, POLLOUT, deadline, what)); break;
      case Io::kClosed: return remoteError(what + ": connection closed by peer");
      case Io::kError: return ioFailure(what, errno);
    }
  }
  return okStatus();
}

Status Socket::readAll(void* data, size_t bytes, const Deadline& deadline,
                       const std::string& what) {
  auto* p = static_cast<uint8_t*>(data);
  size_t got = 0;
  while (got < bytes) {
    size_t n = 0;
    switch (readSome(p + got, bytes - got, &n)) {
      case Io::kDone: got += n; break;
      case Io::kWouldBlock: RETURN_IF_ERROR(waitFor(fd_, POLLIN, deadline, what)); break;
      case Io::kClosed: return remoteError(what + ": connection closed by peer");
      case Io::kError: return ioFailure(what, errno);
    }
  }
  return okStatus();
}

}  // namespace braid
