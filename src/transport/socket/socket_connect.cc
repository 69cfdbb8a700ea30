#include "transport/socket/socket_connect.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <system_error>
#include <thread>

#include "bootstrap/auth.h"
#include "transport/socket/socket_wire.h"

namespace braid {
namespace {

using socketwire::Identify;

bool isDockerBridge(const std::string& name) { return name.rfind("docker", 0) == 0; }

/// One incoming connection on its way through the handshake and identification.
struct Pending {
  Socket socket;
  ServerHandshake handshake;
  std::vector<uint8_t> buffer;
  size_t have = 0;
  bool identified = false;
  std::chrono::steady_clock::time_point deadline;

  Pending(Socket s, const Secret& key, double seconds)
      : socket(std::move(s)),
        handshake(key),
        deadline(std::chrono::steady_clock::now() +
                 std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000))) {
    buffer.resize(handshake.bytesWanted());
  }
  size_t wanted() const { return identified ? 0 : buffer.size(); }
};

enum class Advance { kMore, kDrop, kAdmitted };

/// Feeds what the connection has sent through the handshake, then the identify message.
Advance advance(Pending& p, const MeshPlan& plan, bool anyPeer,
                std::vector<std::vector<bool>>& seen, std::vector<PeerStream>& admitted) {
  for (;;) {
    size_t got = 0;
    const Socket::Io io =
        p.socket.readSome(p.buffer.data() + p.have, p.buffer.size() - p.have, &got);
    if (io == Socket::Io::kWouldBlock) return Advance::kMore;
    if (io != Socket::Io::kDone) return Advance::kDrop;
    p.have += got;
    if (p.have < p.buffer.size()) continue;
    p.have = 0;
    if (!p.handshake.done()) {
      Result<std::vector<uint8_t>> reply = p.handshake.consume(p.buffer.data());
      if (!reply.ok()) return Advance::kDrop;
      if (!reply->empty() &&
          !p.socket.writeAll(reply->data(), reply->size(), Deadline::after(1), "handshake").ok()) {
        return Advance::kDrop;
      }
      p.buffer.assign(p.handshake.done() ? sizeof(Identify) : p.handshake.bytesWanted(), 0);
      continue;
    }
    Identify id;
    std::memcpy(&id, p.buffer.data(), sizeof(id));
    const int n = static_cast<int>(plan.streams.size());
    const int peer = static_cast<int>(id.rank);
    if (id.magic != socketwire::kIdentifyMagic || id.rank >= static_cast<uint32_t>(n) ||
        peer == plan.rank || (!anyPeer && peer > plan.rank) || plan.streams[peer] == 0 ||
        id.nstreams != static_cast<uint32_t>(plan.streams[peer]) || id.stream >= id.nstreams ||
        seen[peer][id.stream]) {
      return Advance::kDrop;
    }
    const uint32_t ack = socketwire::kAcceptMagic;
    if (!p.socket.writeAll(&ack, sizeof(ack), Deadline::after(1), "accept").ok()) {
      return Advance::kDrop;
    }
    seen[peer][id.stream] = true;
    admitted.push_back(PeerStream{peer, static_cast<int>(id.stream), std::move(p.socket)});
    return Advance::kAdmitted;
  }
}

}  // namespace

Result<InterfaceAddress> chooseTransportInterface(const std::vector<InterfaceAddress>& interfaces,
                                                  std::string_view spec) {
  if (!spec.empty()) return chooseInterface(interfaces, spec);
  std::vector<InterfaceAddress> preferred;
  for (const InterfaceAddress& entry : interfaces) {
    if (!entry.loopback && !isDockerBridge(entry.name)) preferred.push_back(entry);
  }
  Result<InterfaceAddress> best = chooseInterface(preferred, "");
  if (best.ok()) return best;
  return chooseInterface(interfaces, "");
}

Result<Socket> listenOnTransportInterface(std::string_view spec) {
  ASSIGN_OR_RETURN(const std::vector<InterfaceAddress> interfaces, listInterfaces());
  ASSIGN_OR_RETURN(const InterfaceAddress chosen, chooseTransportInterface(interfaces, spec));
  return Socket::listenOn(chosen.address);
}

namespace {

/// Accepts streams until `enough` says so, the deadline passes or `stopFd` (if >= 0) turns
/// readable; `admit` takes each stream as it passes the handshake. anyPeer: from any rank of the
/// plan, else from lower ranks only.
Status acceptLoop(Socket& listener, const Secret& key, const MeshPlan& plan, bool anyPeer,
                  const Deadline& deadline, double handshakeSeconds,
                  const std::function<bool()>& enough, const std::function<void(PeerStream)>& admit,
                  const std::string& waitingFor, int stopFd = -1) {
  const int n = static_cast<int>(plan.streams.size());
  std::vector<std::vector<bool>> seen(n);
  for (int p = 0; p < n; ++p) seen[p].assign(static_cast<size_t>(plan.streams[p]), false);
  std::vector<std::unique_ptr<Pending>> pending;
  constexpr size_t kMaxPending = 256;
  while (!enough()) {
    RETURN_IF_ERROR(deadline.check(waitingFor));
    std::vector<pollfd> fds;
    fds.push_back({listener.fd(), POLLIN, 0});
    for (const auto& p : pending) fds.push_back({p->socket.fd(), POLLIN, 0});
    if (stopFd >= 0) fds.push_back({stopFd, POLLIN, 0});
    // Only handshakes under way have deadlines of their own to look at.
    const int waitMs = pending.empty() ? deadline.eventWaitMs() : deadline.pollMs();
    if (::poll(fds.data(), fds.size(), waitMs) < 0 && errno != EINTR) {
      return errnoError("socket transport: poll", errno);
    }
    if (stopFd >= 0 && fds.back().revents != 0) return okStatus();
    if (fds[0].revents != 0) {
      for (;;) {
        ASSIGN_OR_RETURN(Socket s, listener.acceptPending(nullptr));
        if (!s.valid()) break;
        if (pending.size() >= kMaxPending) continue;  // closed at once
        pending.push_back(std::make_unique<Pending>(std::move(s), key, handshakeSeconds));
      }
    }
    const auto now = std::chrono::steady_clock::now();
    for (size_t i = 0; i < pending.size();) {
      Advance a = Advance::kMore;
      std::vector<PeerStream> admitted;
      if (fds.size() > i + 1 && fds[i + 1].fd == pending[i]->socket.fd() &&
          fds[i + 1].revents != 0) {
        a = advance(*pending[i], plan, anyPeer, seen, admitted);
      }
      for (PeerStream& stream : admitted) admit(std::move(stream));
      if (a == Advance::kMore && now > pending[i]->deadline) a = Advance::kDrop;
      if (a == Advance::kMore) {
        ++i;
        continue;
      }
      // Keep fds and pending aligned: drop the entry from both.
      pending.erase(pending.begin() + static_cast<std::ptrdiff_t>(i));
      if (i + 1 < fds.size()) fds.erase(fds.begin() + static_cast<std::ptrdiff_t>(i + 1));
    }
  }
  return okStatus();
}

}  // namespace

Result<std::vector<PeerStream>> acceptStreams(Socket& listener, const Secret& key,
                                              const MeshPlan& plan, const Deadline& deadline,
                                              double handshakeSeconds) {
  const int n = static_cast<int>(plan.streams.size());
  size_t expected = 0;
  for (int p = 0; p < plan.rank && p < n; ++p) expected += static_cast<size_t>(plan.streams[p]);
  std::vector<PeerStream> admitted;
  RETURN_IF_ERROR(acceptLoop(
      listener, key, plan, /*anyPeer=*/false, deadline, handshakeSeconds,
      [&] { return admitted.size() >= expected; },
      [&](PeerStream s) { admitted.push_back(std::move(s)); },
      "socket transport: waiting for streams from lower ranks"));
  return admitted;
}

Result<std::vector<PeerStream>> connectPeer(const Secret& key, const MeshPlan& plan, int p,
                                            const Deadline& deadline, std::string_view label) {
  std::vector<PeerStream> out;
  for (int s = 0; s < plan.streams[p]; ++s) {
    const std::string what = std::string(label) + ": stream " + std::to_string(s) + " to rank " +
                             std::to_string(p) + " at " + plan.addresses[p].toString();
    ASSIGN_OR_RETURN(Socket socket, Socket::connectTo(plan.addresses[p], deadline, what,
                                                      /*retryRefused=*/false));
    RETURN_IF_ERROR(authenticateAsClient(socket, key, deadline, what));
    const Identify id{socketwire::kIdentifyMagic, static_cast<uint32_t>(plan.rank),
                      static_cast<uint32_t>(s), static_cast<uint32_t>(plan.streams[p])};
    RETURN_IF_ERROR(socket.writeAll(&id, sizeof(id), deadline, what));
    uint32_t ack = 0;
    RETURN_IF_ERROR(socket.readAll(&ack, sizeof(ack), deadline, what + ": acceptance"));
    if (ack != socketwire::kAcceptMagic) {
      return remoteError(what + ": rank " + std::to_string(p) + " did not accept the stream");
    }
    out.push_back(PeerStream{p, s, std::move(socket)});
  }
  return out;
}

Result<std::vector<PeerStream>> connectStreams(const Secret& key, const MeshPlan& plan,
                                               const Deadline& deadline) {
  std::vector<PeerStream> out;
  const int n = static_cast<int>(plan.streams.size());
  for (int p = plan.rank + 1; p < n; ++p) {
    ASSIGN_OR_RETURN(std::vector<PeerStream> streams, connectPeer(key, plan, p, deadline));
    for (PeerStream& s : streams) out.push_back(std::move(s));
  }
  return out;
}

Result<std::vector<PeerStream>> buildMesh(Socket& listener, const Secret& key, const MeshPlan& plan,
                                          double timeoutSeconds) {
  // The acceptor gives up as soon as this rank's own connecting fails.
  std::atomic<bool> stopAccepting{false};
  std::optional<Result<std::vector<PeerStream>>> accepted;
  std::thread acceptor;
  try {
    acceptor = std::thread([&] {
      accepted.emplace(acceptStreams(listener, key, plan,
                                     Deadline::after(timeoutSeconds, &stopAccepting),
                                     /*handshakeSeconds=*/5));
      endThreadCrypto();
    });
  } catch (const std::system_error& e) {
    return systemError(std::string("socket transport: acceptor thread: ") + e.what());
  }
  Result<std::vector<PeerStream>> connected =
      connectStreams(key, plan, Deadline::after(timeoutSeconds));
  if (!connected.ok()) stopAccepting.store(true);
  acceptor.join();
  if (!connected.ok()) return connected.status();
  if (!accepted->ok()) return accepted->status();
  std::vector<PeerStream> all = std::move(*accepted).value();
  for (PeerStream& s : connected.value()) all.push_back(std::move(s));
  return all;
}

}  // namespace braid

namespace braid {

Result<std::unique_ptr<StreamAcceptor>> StreamAcceptor::start(Socket listener, const Secret& key,
                                                              MeshPlan plan,
                                                              double handshakeSeconds,
                                                              Deliver deliver) {
  std::unique_ptr<StreamAcceptor> a(new StreamAcceptor());
  a->listener_ = std::move(listener);
  a->key_ = key;
  a->plan_ = std::move(plan);
  a->handshakeSeconds_ = handshakeSeconds;
  a->deliver_ = std::move(deliver);
  ASSIGN_OR_RETURN(a->stop_, Socket::wakeFd("socket transport: acceptor"));
  try {
    a->thread_ = std::thread([raw = a.get()] { raw->run(); });
  } catch (const std::system_error& e) {
    return systemError(std::string("socket transport: acceptor thread: ") + e.what());
  }
  return a;
}

StreamAcceptor::~StreamAcceptor() {
  stop_.wake();
  if (thread_.joinable()) thread_.join();
}

void StreamAcceptor::run() {
  // Runs until stopped: the deadline never passes; the eventfd ends the wait, so the thread
  // sleeps between connections instead of waking to look at a flag.
  (void)acceptLoop(
      listener_, key_, plan_, /*anyPeer=*/true, Deadline::never(), handshakeSeconds_,
      [] { return false; }, [this](PeerStream s) { deliver_(std::move(s)); },
      "socket transport: accepting streams", stop_.fd());
  endThreadCrypto();
}

}  // namespace braid
