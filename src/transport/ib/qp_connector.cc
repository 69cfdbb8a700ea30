#include "transport/ib/qp_connector.h"

#if BRAID_HAVE_IBVERBS

#include <algorithm>
#include <chrono>
#include <cstring>
#include <system_error>

#include "bootstrap/auth.h"

namespace braid {
namespace {

constexpr uint32_t kRequestMagic = 0x51514252;  // "RBQQ"
constexpr uint32_t kReplyMagic = 0x52514252;    // "RBQR"
constexpr uint32_t kReadyMagic = 0x59514252;    // "RBQY"
// How long a connection to the listener may take to prove the key and say who it is.
constexpr double kHandshakeSeconds = 5;

/// A rank's attempt: its half of the pair.
struct Request {
  uint32_t magic = kRequestMagic;
  uint32_t reserved = 0;
  QpInfo info;
};

enum class Verdict : uint32_t {
  kAccept = 1,  ///< info is the peer's half, sent after its queue pair reached RTR
  kDefer = 2,   ///< the answering rank is lower and connecting (or connected): its attempt wins
  kRefuse = 3,  ///< reason says why
};

/// The acceptor's answer.
struct Reply {
  uint32_t magic = kReplyMagic;
  Verdict verdict = Verdict::kRefuse;
  QpInfo info;
  char reason[240] = {};
};

void setReason(Reply& reply, const std::string& why) {
  const size_t n = std::min(why.size(), sizeof(reply.reason) - 1);
  std::memcpy(reply.reason, why.data(), n);
  reply.reason[n] = '\0';
}

}  // namespace

Result<std::unique_ptr<QpConnector>> QpConnector::start(IbProxy* proxy, Socket listener,
                                                        const Secret& key, MeshPlan plan,
                                                        std::vector<std::string> names,
                                                        QpConnectorTimes times) {
  std::unique_ptr<QpConnector> c(new QpConnector());
  c->proxy_ = proxy;
  c->key_ = key;
  c->plan_ = plan;
  c->names_ = std::move(names);
  c->times_ = times;
  c->pairs_.resize(plan.streams.size());
  QpConnector* raw = c.get();
  ASSIGN_OR_RETURN(c->acceptor_, StreamAcceptor::start(
                                     std::move(listener), key, std::move(plan), kHandshakeSeconds,
                                     [raw](PeerStream s) { raw->serveApart(std::move(s)); }));
  return c;
}

QpConnector::~QpConnector() {
  stopping_.store(true);
  acceptor_.reset();
  // No more servers start now; the running ones end within a poll of stopping_.
  std::lock_guard<std::mutex> lock(serversMu_);
  for (std::thread& t : servers_) t.join();
}

void QpConnector::serveApart(PeerStream stream) {
  // Each exchange on a thread of its own: a peer that stalls mid-exchange must not hold up the
  // acceptor, whose other connections have seconds to pass the handshake.
  const int peer = stream.peer;
  std::lock_guard<std::mutex> lock(serversMu_);
  try {
    servers_.emplace_back([this, s = std::move(stream)]() mutable { serve(std::move(s)); });
  } catch (const std::system_error& e) {
    finish(peer, systemError(std::string("RDMA transport: exchange thread: ") + e.what()));
  }
}

int QpConnector::connectedPeers() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(std::count_if(pairs_.begin(), pairs_.end(),
                                        [](const Pair& p) { return p.state == State::kUp; }));
}

Result<QpInfo> QpConnector::openLocked(int peer) {
  Pair& pair = pairs_[peer];
  if (pair.opened) return proxy_->localInfo(peer);
  pair.opened = true;  // a failure leaves the rest to the proxy's destructor
  return proxy_->openPeer(peer);
}

void QpConnector::finish(int peer, const Status& status) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    Pair& pair = pairs_[peer];
    if (pair.state == State::kUp || pair.state == State::kFailed) return;
    if (status.ok()) {
      pair.state = State::kUp;
      proxy_->peerConnected(peer);
    } else {
      pair.state = State::kFailed;
      pair.failure = status;
      proxy_->peerLost(peer);
    }
  }
  changed_.notify_all();
}

Status QpConnector::awaitFinal(int peer, std::unique_lock<std::mutex>& lock) {
  const Deadline deadline = Deadline::after(times_.timeoutSeconds, times_.abort);
  for (;;) {
    const Pair& pair = pairs_[peer];
    if (pair.state == State::kUp) return okStatus();
    if (pair.state == State::kFailed) return pair.failure;
    RETURN_IF_ERROR(
        deadline.check("RDMA transport: waiting for the queue pair with " + names_[peer]));
    changed_.wait_for(lock, std::chrono::milliseconds(50));
  }
}

Status QpConnector::connect(int peer) {
  std::unique_lock<std::mutex> lock(mu_);
  if (peer < 0 || peer >= static_cast<int>(pairs_.size()) || plan_.streams[peer] == 0) {
    return internalError("RDMA transport: rank " + std::to_string(peer) + " is not linked");
  }
  Pair& pair = pairs_[peer];
  if (pair.state != State::kNone) return awaitFinal(peer, lock);
  pair.state = State::kConnecting;
  Result<QpInfo> mine = openLocked(peer);
  lock.unlock();
  if (!mine.ok()) {
    finish(peer, mine.status().withContext("RDMA transport: queue pair for " + names_[peer]));
    lock.lock();
    return awaitFinal(peer, lock);
  }
  bool deferred = false;
  Status tried = attempt(peer, mine.value(), &deferred);
  if (!tried.ok()) {
    // A listener that refuses or a stream that breaks means the peer's process is gone: say so as
    // a lost peer, so every survivor names the rank that left.
    const braidResult_t code = tried.code();
    if (code == braidRemoteError || code == braidSystemError) {
      tried = remoteError(names_[peer] +
                          " left before its RDMA queue pair connected: " + tried.message());
    }
    finish(peer, tried);
  } else if (!deferred) {
    finish(peer, okStatus());
  }
  lock.lock();
  return awaitFinal(peer, lock);
}

Status QpConnector::attempt(int peer, const QpInfo& mine, bool* deferred) {
  const Deadline deadline = Deadline::after(times_.timeoutSeconds, times_.abort);
  const std::string what = "RDMA transport: queue pair exchange with " + names_[peer];
  // A live peer's kernel and acceptor take the stream at once: a host that does not answer fails
  // within the peer timeout, not the (longer) call timeout.
  double connectSeconds = times_.timeoutSeconds;
  if (times_.peerTimeoutSeconds > 0 &&
      (connectSeconds <= 0 || times_.peerTimeoutSeconds < connectSeconds)) {
    connectSeconds = times_.peerTimeoutSeconds;
  }
  ASSIGN_OR_RETURN(std::vector<PeerStream> streams,
                   connectPeer(key_, plan_, peer, Deadline::after(connectSeconds, times_.abort),
                               "RDMA transport"));
  Socket& socket = streams.front().socket;
  socket.setPeerTimeout(times_.peerTimeoutSeconds);
  Request request;
  request.info = mine;
  RETURN_IF_ERROR(socket.writeAll(&request, sizeof(request), deadline, what));
  Reply reply;
  RETURN_IF_ERROR(socket.readAll(&reply, sizeof(reply), deadline, what + ": its answer"));
  if (reply.magic != kReplyMagic) return remoteError(what + ": a malformed answer");
  if (reply.verdict == Verdict::kDefer) {
    *deferred = true;
    return okStatus();
  }
  if (reply.verdict != Verdict::kAccept) {
    reply.reason[sizeof(reply.reason) - 1] = '\0';
    return invalidUsage(names_[peer] + " refused the RDMA queue pair: " + reply.reason);
  }
  // The peer's queue pair is at RTR: ours may go to RTS and write; the confirmation lets the
  // peer write too, now that ours is at RTR as well.
  RETURN_IF_ERROR(proxy_->connect(peer, reply.info));
  const uint32_t ready = kReadyMagic;
  return socket.writeAll(&ready, sizeof(ready), deadline, what + ": confirming");
}

void QpConnector::serve(PeerStream stream) {
  const int peer = stream.peer;
  bool answered = false;
  Status status = answer(peer, stream.socket, &answered);
  if (answered) {
    if (!status.ok() && status.code() != braidInvalidUsage) {
      status = remoteError("the RDMA queue pair exchange with " + names_[peer] +
                           " failed: " + status.message());
    }
    finish(peer, status);
  }
  endThreadCrypto();
}

Status QpConnector::answer(int peer, Socket& socket, bool* answered) {
  const Deadline deadline = Deadline::after(times_.timeoutSeconds, &stopping_);
  const std::string what = "RDMA transport: queue pair exchange with " + names_[peer];
  socket.setPeerTimeout(times_.peerTimeoutSeconds);
  Request request;
  RETURN_IF_ERROR(socket.readAll(&request, sizeof(request), deadline, what));
  if (request.magic != kRequestMagic) return remoteError(what + ": a malformed request");
  Reply reply;
  Result<QpInfo> mine = internalError("unset");
  {
    std::lock_guard<std::mutex> lock(mu_);
    Pair& pair = pairs_[peer];
    const int me = plan_.rank;
    if (pair.state == State::kNone || (pair.state == State::kConnecting && me > peer)) {
      // This side serves: a first attempt, or one that beats this rank's own (lower rank wins).
      if (pair.state == State::kNone) pair.state = State::kServing;
      *answered = true;
      mine = openLocked(peer);
    } else if (me < peer && (pair.state == State::kConnecting || pair.state == State::kUp)) {
      // This rank's own attempt wins, or has already won: the asker's acceptor serves (or served)
      // it, and the asker's attempt waits for that. (The asker's request may arrive after this
      // rank's attempt completed: exchanges run on threads of their own.)
      reply.verdict = Verdict::kDefer;
    } else {
      setReason(reply, "the pair is already connected or failed");
    }
  }
  if (*answered) {
    Status connected = mine.ok() ? proxy_->connect(peer, request.info) : mine.status();
    if (!connected.ok()) {
      setReason(reply, connected.message());
      (void)socket.writeAll(&reply, sizeof(reply), deadline, what);
      return connected;
    }
    // Sent only now that this side's queue pair is at RTR: the peer may write at once.
    reply.verdict = Verdict::kAccept;
    reply.info = proxy_->localInfo(peer);
  }
  RETURN_IF_ERROR(socket.writeAll(&reply, sizeof(reply), deadline, what));
  if (!*answered) return okStatus();
  uint32_t ready = 0;
  RETURN_IF_ERROR(socket.readAll(&ready, sizeof(ready), deadline, what + ": its confirmation"));
  if (ready != kReadyMagic) return remoteError(what + ": a malformed confirmation");
  return okStatus();
}

}  // namespace braid

#endif  // BRAID_HAVE_IBVERBS
