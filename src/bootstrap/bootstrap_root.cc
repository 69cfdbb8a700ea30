// The root of a rendezvous: a detached thread that serves exactly one. One poll loop drives every
// connection, so a stranger that stalls or sends garbage costs the joiners nothing: it is dropped
// when its handshake fails or its short handshake deadline passes. Joined ranks wait (their
// connections idle) until all nranks have arrived; then each gets the addresses rootTableRanks
// names (its ring neighbours' and its own, at least) and the root closes everything and exits. When
// the ranks disagree, or the rendezvous times out, each connected rank gets an error frame saying
// why; ranks that arrive shortly after a disagreement are told too.
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <system_error>
#include <thread>

#include "base/little_endian.h"
#include "base/log.h"
#include "bootstrap/auth.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/bootstrap_wire.h"
#include "bootstrap/unique_id.h"

namespace braid {
namespace {

// Unauthenticated connections held at once; more are closed on arrival.
constexpr size_t kMaxPending = 256;
// After a disagreement, how long late ranks are still told why.
constexpr double kFailureLingerSeconds = 30;

struct Member {
  PolledConn conn;
  int rank = -1;
  int nranks = 0;
  SocketAddress listener;
  uint64_t hostKey = 0;
};

class RootServer {
 public:
  RootServer(Socket listener, SocketAddress address, const Secret& secret, double timeoutSeconds,
             double handshakeSeconds)
      : listener_(std::move(listener)),
        address_(address),
        secret_(secret),
        timeoutSeconds_(timeoutSeconds),
        handshakeSeconds_(handshakeSeconds > 0 ? handshakeSeconds : kDefaultHandshakeSeconds),
        deadline_(Deadline::after(timeoutSeconds)) {}

  void run();

 private:
  void acceptAll();
  void admit(std::unique_ptr<Admission> admission);
  void fail(const Status& status);
  void complete();
  /// Queues the one frame a member gets and moves it to answering_.
  void tell(std::unique_ptr<Member> member, FrameType type, const std::vector<uint8_t>& payload);
  std::string missingRanks() const;
  bool serving() const;

  Socket listener_;
  SocketAddress address_;
  Secret secret_;
  double timeoutSeconds_;
  double handshakeSeconds_;
  Deadline deadline_;
  std::vector<std::unique_ptr<Admission>> pending_;
  std::map<int, std::unique_ptr<Member>> joined_;   // by rank, until answered
  std::vector<std::unique_ptr<Member>> answering_;  // answered, flushing their frame
  int nranks_ = 0;                                  // from the first joiner
  int mostClaimed_ = 0;
  int told_ = 0;
  bool done_ = false;
  std::optional<Status> failure_;
  Deadline lingerUntil_;
};

void RootServer::run() {
  const Logger& log = processLogger();
  BRAID_LOG(log, kInfo, kBoot, "bootstrap root listening on %s", address_.toString().c_str());
  while (serving() || !answering_.empty()) {
    std::vector<pollfd> fds;
    if (listener_.valid()) fds.push_back({listener_.fd(), POLLIN, 0});
    for (const auto& a : pending_) fds.push_back({a->conn().socket().fd(), a->pollEvents(), 0});
    for (const auto& [rank, m] : joined_) fds.push_back({m->conn.socket().fd(), POLLIN, 0});
    for (const auto& m : answering_)
      fds.push_back({m->conn.socket().fd(), m->conn.pollEvents(false), 0});
    (void)::poll(fds.data(), fds.size(), deadline_.pollMs(100));
    // A joined rank sends nothing more unless it gives up (an error frame saying why); anything
    // else readable means it left or broke the protocol.
    std::vector<int> readable;
    size_t index = (listener_.valid() ? 1 : 0) + pending_.size();
    for (const auto& [rank, m] : joined_) {
      if ((fds[index++].revents & (POLLIN | POLLHUP | POLLERR)) != 0) readable.push_back(rank);
    }

    if (listener_.valid()) acceptAll();
    for (int rank : readable) {
      auto it = joined_.find(rank);
      if (it == joined_.end() || failure_) continue;
      FrameHeader header;
      std::vector<uint8_t> payload;
      Result<bool> got = it->second->conn.readFrame(frameBit(FrameType::kError), kMaxErrorBytes,
                                                    &header, &payload);
      if (got.ok() && !got.value()) continue;  // the rest of its frame is on the way
      const std::string who =
          "rank " + std::to_string(rank) + " (" + it->second->conn.peer().toString() + ")";
      const std::string never = missingRanks();
      const std::string missing = never.empty() ? "" : "; never joined: " + never;
      // The group cannot form without it: every rank hears why now rather than at its timeout.
      if (got.ok()) {
        // It gave up on its own clock and waits a moment for this answer, like the others.
        const Status why = decodeErrorPayload(payload, "");
        fail(Status(why.code(), who + " gave up before the rendezvous completed (" + why.message() +
                                    ")" + missing));
      } else {
        joined_.erase(it);
        fail(remoteError(who + " left before the rendezvous completed (it exited or failed)" +
                         missing));
      }
    }
    for (size_t i = 0; i < pending_.size();) {
      const Admission::State state = pending_[i]->progress();
      if (state == Admission::State::kPending) {
        ++i;
        continue;
      }
      std::unique_ptr<Admission> a = std::move(pending_[i]);
      pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(i));
      if (state == Admission::State::kRejected) {
        BRAID_LOG(log, kWarn, kBoot, "bootstrap root: dropped connection from %s: %s",
                  a->conn().peer().toString().c_str(), a->reason().c_str());
      } else {
        admit(std::move(a));
      }
    }
    if (!done_ && !failure_ && nranks_ > 0 && static_cast<int>(joined_.size()) == nranks_) {
      complete();
    }
    if (!done_ && !failure_ && deadline_.expired()) {
      if (joined_.empty() && pending_.empty()) {
        BRAID_LOG(log, kWarn, kBoot, "bootstrap root %s: nobody joined within %g s",
                  address_.toString().c_str(), timeoutSeconds_);
        done_ = true;
        break;
      }
      char seconds[32];
      std::snprintf(seconds, sizeof(seconds), "%g", timeoutSeconds_);
      fail(timeoutError("bootstrap root timed out after " + std::string(seconds) + " s with " +
                        std::to_string(joined_.size()) + " of " + std::to_string(nranks_) +
                        " ranks; missing " + missingRanks()));
    }
    for (size_t i = 0; i < answering_.size();) {
      const Socket::Io io = answering_[i]->conn.flush();
      if (io == Socket::Io::kWouldBlock && !deadline_.expired()) {
        ++i;
        continue;
      }
      answering_.erase(answering_.begin() + static_cast<std::ptrdiff_t>(i));
    }
  }
  BRAID_LOG(log, kInfo, kBoot, "bootstrap root %s closed", address_.toString().c_str());
}

bool RootServer::serving() const {
  if (done_) return false;
  if (!failure_) return true;
  // After a failure: keep telling late ranks until every claimed rank heard or the linger ends.
  return told_ < mostClaimed_ && !lingerUntil_.expired() && !deadline_.expired();
}

void RootServer::acceptAll() {
  for (;;) {
    SocketAddress peer;
    Result<Socket> s = listener_.acceptPending(&peer);
    if (!s.ok()) {
      // Out of descriptors, most likely: back off rather than spin on a readable listener.
      BRAID_LOG(processLogger(), kWarn, kBoot, "bootstrap root: %s", s.status().message().c_str());
      std::this_thread::sleep_for(std::chrono::milliseconds(kAbortPollMs));
      return;
    }
    if (!s->valid()) return;
    if (pending_.size() >= kMaxPending) {
      BRAID_LOG(processLogger(), kWarn, kBoot,
                "bootstrap root: dropped connection from %s: too many unauthenticated connections",
                peer.toString().c_str());
      continue;
    }
    pending_.push_back(std::make_unique<Admission>(std::move(s.value()), peer, secret_,
                                                   frameBit(FrameType::kJoin), kJoinPayloadBytes,
                                                   Deadline::after(handshakeSeconds_)));
  }
}

void RootServer::admit(std::unique_ptr<Admission> admission) {
  auto member = std::make_unique<Member>(Member{std::move(admission->conn()), -1, 0, {}});
  const std::string from = member->conn.peer().toString();
  Result<JoinRequest> join = decodeJoin(admission->payload());
  if (!join.ok() && join.status().code() == braidRemoteError) {
    BRAID_LOG(processLogger(), kWarn, kBoot, "bootstrap root: dropped %s: %s", from.c_str(),
              join.status().message().c_str());
    return;
  }
  if (!join.ok()) {
    // One broken joiner: the group cannot form as configured, so everyone hears why.
    if (!failure_) fail(join.status());
    tell(std::move(member), FrameType::kError, encodeErrorPayload(join.status()));
    return;
  }
  member->rank = join->rank;
  member->nranks = join->nranks;
  member->listener = join->listener;
  member->hostKey = join->hostKey;
  mostClaimed_ = std::max(mostClaimed_, member->nranks);
  if (failure_) {
    tell(std::move(member), FrameType::kError, encodeErrorPayload(*failure_));
    return;
  }
  BRAID_LOG(processLogger(), kInfo, kBoot, "bootstrap root: rank %d of %d joined from %s",
            member->rank, member->nranks, from.c_str());
  if (nranks_ == 0) nranks_ = member->nranks;
  if (member->nranks != nranks_) {
    const int other = joined_.empty() ? -1 : joined_.begin()->first;
    fail(invalidUsage("ranks disagree on nranks: rank " + std::to_string(member->rank) + " says " +
                      std::to_string(member->nranks) + ", rank " + std::to_string(other) +
                      " said " + std::to_string(nranks_)));
    tell(std::move(member), FrameType::kError, encodeErrorPayload(*failure_));
    return;
  }
  if (auto it = joined_.find(member->rank); it != joined_.end()) {
    fail(invalidUsage("rank " + std::to_string(member->rank) + " joined twice (from " +
                      it->second->conn.peer().toString() + " and " + from + ")"));
    tell(std::move(member), FrameType::kError, encodeErrorPayload(*failure_));
    return;
  }
  joined_.emplace(member->rank, std::move(member));
}

void RootServer::tell(std::unique_ptr<Member> member, FrameType type,
                      const std::vector<uint8_t>& payload) {
  member->conn.queueFrame(type, 0, 0, payload.data(), payload.size());
  ++told_;
  answering_.push_back(std::move(member));
}

void RootServer::fail(const Status& status) {
  BRAID_LOG(processLogger(), kWarn, kBoot, "bootstrap root %s: rendezvous failed: %s",
            address_.toString().c_str(), status.message().c_str());
  failure_ = status;
  lingerUntil_ = Deadline::after(kFailureLingerSeconds);
  const std::vector<uint8_t> payload = encodeErrorPayload(status);
  for (auto& [rank, member] : joined_) tell(std::move(member), FrameType::kError, payload);
  joined_.clear();
}

void RootServer::complete() {
  std::vector<SocketAddress> addresses(static_cast<size_t>(nranks_));
  std::vector<uint64_t> hostKeys(static_cast<size_t>(nranks_));
  for (const auto& [rank, member] : joined_) {
    addresses[static_cast<size_t>(rank)] = member->listener;
    hostKeys[static_cast<size_t>(rank)] = member->hostKey;
  }
  // Each rank gets a few addresses, not the whole table (rank 0 apart): the root's work stays
  // O(n). The ranks pass the rest on over the ring they then connect, or down a tree from rank 0.
  for (auto& [rank, member] : joined_) {
    std::vector<SocketAddress> told;
    std::vector<uint64_t> toldKeys;
    for (int r : rootTableRanks(rank, nranks_)) {
      told.push_back(addresses[static_cast<size_t>(r)]);
      toldKeys.push_back(hostKeys[static_cast<size_t>(r)]);
    }
    tell(std::move(member), FrameType::kTable, encodeAddressTable(told, toldKeys));
  }
  joined_.clear();
  done_ = true;
  // New connections are refused from now on; strangers still mid-handshake are dropped.
  listener_.close();
  pending_.clear();
  BRAID_LOG(processLogger(), kInfo, kBoot, "bootstrap root %s: all %d ranks joined",
            address_.toString().c_str(), nranks_);
}

std::string RootServer::missingRanks() const {
  std::string out;
  int listed = 0;
  for (int r = 0; r < nranks_; ++r) {
    if (joined_.count(r) != 0) continue;
    if (listed == 8) return out + ", ...";
    out += (listed++ == 0 ? "" : ", ") + std::to_string(r);
  }
  return out;
}

// Before the root's thread exists, the process logger is built and OpenSSL makes its lazy first
// use: a process forked while another thread is half way through a static's initialisation would
// wait for it forever.
void initialiseBeforeThreads() {
  (void)processLogger();
  std::array<uint8_t, 32> warmKey{};
  (void)hmacSha256(warmKey.data(), warmKey.size(), warmKey.data(), warmKey.size());
}

/// Starts the root's thread on `listener` and returns the id ranks join with.
Result<braidUniqueId> serveRoot(Socket listener, const SocketAddress& advertised,
                                const Secret& secret, double timeoutSeconds,
                                double handshakeSeconds) {
  UniqueIdInfo info;
  info.root = advertised;
  info.secret = secret;
  auto server = std::make_unique<RootServer>(std::move(listener), advertised, info.secret,
                                             timeoutSeconds, handshakeSeconds);
  try {
    std::thread([server = std::move(server)]() {
      server->run();
      endThreadCrypto();
    }).detach();
  } catch (const std::system_error& e) {
    return systemError(std::string("bootstrap root thread: ") + e.what());
  }
  return encodeUniqueId(info);
}

}  // namespace

Result<braidUniqueId> startBootstrapRoot(const std::string& ifname, double timeoutSeconds,
                                         double handshakeSeconds) {
  initialiseBeforeThreads();
  ASSIGN_OR_RETURN(const InterfaceAddress interface, selectInterface(ifname));
  ASSIGN_OR_RETURN(Socket listener, Socket::listenOn(interface.address));
  ASSIGN_OR_RETURN(const SocketAddress address, listener.localAddress());
  ASSIGN_OR_RETURN(const Secret secret, newSecret());
  return serveRoot(std::move(listener), address, secret, timeoutSeconds, handshakeSeconds);
}

Result<braidUniqueId> startBootstrapRootAt(const SocketAddress& bindAddress,
                                           const SocketAddress& advertised, const Secret& secret,
                                           double timeoutSeconds, double handshakeSeconds) {
  initialiseBeforeThreads();
  // A fixed port is reused run after run: connections the previous root closed sit in TIME_WAIT.
  Socket listener(::socket(bindAddress.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!listener.valid()) return errnoError("socket", errno);
  const int one = 1;
  (void)::setsockopt(listener.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(listener.fd(), bindAddress.raw(), bindAddress.length()) != 0) {
    return errnoError("bootstrap root: bind " + bindAddress.toString(), errno);
  }
  if (::listen(listener.fd(), 512) != 0) return errnoError("bootstrap root: listen", errno);
  return serveRoot(std::move(listener), advertised, secret, timeoutSeconds, handshakeSeconds);
}

}  // namespace braid
