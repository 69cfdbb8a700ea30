// The service thread of one rank's bootstrap: a poll loop over the listener, connections still
// proving the secret (Admission, with a short deadline), and admitted peers whose frames it files
// into Channels for the caller to take. Nothing here blocks, so strangers cannot stall peers.
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "base/little_endian.h"
#include "base/log.h"
#include "bootstrap/bootstrap_impl.h"

namespace braid {
namespace {

constexpr size_t kMaxPending = 256;
// How often the service looks at the handshake deadlines of connections not yet admitted.
constexpr int kHandshakePollMs = 100;

}  // namespace

struct Bootstrap::Impl::Incoming {
  PolledConn conn;
  Purpose purpose = Purpose::kP2p;
  int peer = -1;
  Channel* channel = nullptr;
  bool dead = false;
};

void Bootstrap::Impl::serve() {
  const Logger& log = processLogger();
  std::vector<std::unique_ptr<Admission>> pending;
  std::vector<Incoming> incoming;
  std::vector<pollfd> fds;
  while (!stop_.load()) {
    fds.clear();
    fds.push_back({wake_.fd(), POLLIN, 0});
    fds.push_back({listener_.fd(), POLLIN, 0});
    for (const auto& a : pending) fds.push_back({a->conn().socket().fd(), a->pollEvents(), 0});
    size_t nextIndex = 0;  // where nextToWatch_ is polled, if it is
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (nextToWatch_ >= 0) {
        nextIndex = fds.size();
        fds.push_back({nextToWatch_, POLLIN, 0});
      }
      for (const Incoming& in : incoming) {
        const bool full = in.channel->queuedBytes > kMaxQueuedBytes;
        fds.push_back({in.conn.pollEvents(!full) == 0 ? -1 : in.conn.socket().fd(),
                       in.conn.pollEvents(!full), 0});
      }
    }
    const size_t polledIncoming = incoming.size();
    const size_t incomingBase = fds.size() - polledIncoming;
    // Everything but a handshake's deadline wakes the poll, and a rank's every wake-up costs
    // its host's other ranks CPU: sleep until then.
    (void)::poll(fds.data(), fds.size(), pending.empty() ? -1 : kHandshakePollMs);
    if (stop_.load()) break;
    if ((fds[0].revents & POLLIN) != 0) {
      uint64_t count = 0;
      (void)::read(wake_.fd(), &count, sizeof(count));
    }
    if (nextIndex != 0 && fds[nextIndex].revents != 0) {
      // Once is enough: take() reads what the next rank said; polling on would spin.
      {
        std::lock_guard<std::mutex> lock(mu_);
        nextToWatch_ = -1;
      }
      cv_.notify_all();
    }

    for (;;) {
      SocketAddress peer;
      Result<Socket> s = listener_.acceptPending(&peer);
      if (!s.ok()) {
        // Out of descriptors, most likely: the connection stays queued, so back off rather
        // than spin on a listener that stays readable.
        BRAID_LOG(log, kWarn, kBoot, "rank %d: %s", rank_, s.status().message().c_str());
        std::this_thread::sleep_for(std::chrono::milliseconds(kAbortPollMs));
        break;
      }
      if (!s->valid()) break;
      if (pending.size() >= kMaxPending) {
        BRAID_LOG(log, kWarn, kBoot,
                  "rank %d: dropped connection from %s: too many unauthenticated connections",
                  rank_, peer.toString().c_str());
        continue;
      }
      pending.push_back(std::make_unique<Admission>(std::move(s.value()), peer, secret_,
                                                    frameBit(FrameType::kIdentify), kIdentifyBytes,
                                                    Deadline::after(handshakeSeconds(wait_))));
    }

    for (size_t i = 0; i < pending.size();) {
      const Admission::State state = pending[i]->progress();
      if (state == Admission::State::kPending) {
        ++i;
        continue;
      }
      if (state == Admission::State::kRejected && pending[i]->silent()) {
        BRAID_LOG(log, kInfo, kBoot, "rank %d: connection from %s closed without a word", rank_,
                  pending[i]->conn().peer().toString().c_str());
      } else if (state == Admission::State::kRejected) {
        BRAID_LOG(log, kWarn, kBoot, "rank %d: dropped connection from %s: %s", rank_,
                  pending[i]->conn().peer().toString().c_str(), pending[i]->reason().c_str());
      } else {
        admit(*pending[i], incoming);
      }
      pending.erase(pending.begin() + static_cast<std::ptrdiff_t>(i));
    }

    for (size_t i = 0; i < polledIncoming; ++i) {
      Incoming& in = incoming[i];
      const short revents = fds[incomingBase + i].revents;
      if (revents == 0) continue;
      if (in.conn.hasOutput() && in.conn.flush() == Socket::Io::kClosed) {
        closeIncoming(in, "closed the connection");
        continue;
      }
      if ((revents & POLLERR) != 0) {
        // The kernel dropped the connection because the peer stopped answering (keepalive or
        // user timeout): its host is down or cut off, which a read would only call an error.
        if (const int error = in.conn.socket().takeError(); error == ETIMEDOUT) {
          closeIncoming(in,
                        "stopped answering: no reply for " +
                            std::to_string(wait_.peerTimeoutSeconds) +
                            " s (BRAID_PEER_TIMEOUT); its host is down or unreachable",
                        std::nullopt, /*unanswering=*/true);
          continue;
        } else if (error != 0) {
          closeIncoming(in, "broke the connection (" + std::string(std::strerror(error)) + ")");
          continue;
        }
      }
      if ((revents & (POLLIN | POLLHUP | POLLERR)) != 0) readFrames(in);
    }
    std::erase_if(incoming, [](const Incoming& in) { return in.dead; });
  }
}

void Bootstrap::Impl::admit(Admission& admission, std::vector<Incoming>& incoming) {
  PolledConn& conn = admission.conn();
  Result<Identify> identify = decodeIdentify(admission.payload());
  if (!identify.ok()) {
    BRAID_LOG(processLogger(), kWarn, kBoot, "rank %d: dropped %s: %s", rank_,
              conn.peer().toString().c_str(), identify.status().message().c_str());
    return;
  }
  const uint32_t purpose = identify->purpose;
  const int from = identify->rank;
  const int theirNranks = identify->nranks;
  const int prev = (rank_ + nranks_ - 1) % nranks_;
  Channel* channel = nullptr;
  Status problem;
  bool sayingFarewell = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (theirNranks != nranks_) {
      problem = invalidUsage("rank " + std::to_string(from) + " belongs to a group of " +
                             std::to_string(theirNranks) + " ranks, rank " + std::to_string(rank_) +
                             " to one of " + std::to_string(nranks_));
    } else if (purpose == static_cast<uint32_t>(Purpose::kRing)) {
      if (farewell_ && from == prev) {
        problem = *farewell_;
        sayingFarewell = true;
      } else if (from != prev) {
        problem =
            invalidUsage("rank " + std::to_string(from) + " tried to join the ring of rank " +
                         std::to_string(rank_) + ", whose predecessor is " + std::to_string(prev));
      } else if (ringIn_.open) {
        problem = invalidUsage("rank " + std::to_string(from) + " connected the ring twice");
      } else {
        channel = &ringIn_;
      }
    } else if (purpose == static_cast<uint32_t>(Purpose::kGather)) {
      if (from < 0 || from >= nranks_ || from == rank_) {
        problem =
            invalidUsage("dissemination connection claims to be from rank " + std::to_string(from));
      } else if (gatherIn_[from].open) {
        problem = invalidUsage("rank " + std::to_string(from) +
                               " opened a second dissemination connection");
      } else {
        channel = &gatherIn_[from];
      }
    } else if (purpose == static_cast<uint32_t>(Purpose::kP2p)) {
      if (from < 0 || from >= nranks_ || from == rank_) {
        problem = invalidUsage("point-to-point connection claims to be from rank " +
                               std::to_string(from));
      } else if (p2pIn_[static_cast<size_t>(from)].open) {
        problem = invalidUsage("rank " + std::to_string(from) +
                               " opened a second point-to-point connection");
      } else {
        channel = &p2pIn_[static_cast<size_t>(from)];
      }
    } else {
      problem = invalidUsage("unknown connection purpose " + std::to_string(purpose));
    }
    if (channel != nullptr) {
      channel->open = true;
      if (channel == &ringIn_) ringInFd_ = conn.socket().fd();
    }
  }
  if (!problem.ok()) {
    if (!sayingFarewell) {
      BRAID_LOG(processLogger(), kWarn, kBoot, "rank %d: refused %s: %s", rank_,
                conn.peer().toString().c_str(), problem.message().c_str());
    }
    // Best effort: the frame is tiny and the socket fresh, so one write normally takes it all.
    const std::vector<uint8_t> error = encodeErrorPayload(problem);
    conn.queueFrame(FrameType::kError, 0, 0, error.data(), error.size());
    (void)conn.flush();
    if (sayingFarewell) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        toldPrevious_ = true;
      }
      cv_.notify_all();
    }
    return;
  }
  cv_.notify_all();
  if (purpose != static_cast<uint32_t>(Purpose::kGather)) {
    conn.socket().setPeerTimeout(wait_.peerTimeoutSeconds);
  }
  conn.queueFrame(FrameType::kAccept, 0, 0, nullptr, 0);
  (void)conn.flush();
  incoming.push_back(
      Incoming{std::move(conn), static_cast<Purpose>(purpose), from, channel, false});
}

bool Bootstrap::Impl::readFrames(Incoming& in) {
  // An error frame is a peer's last word: why it gives up (breakRing).
  const uint32_t allowed =
      (in.purpose == Purpose::kRing ? frameBit(FrameType::kRing) : frameBit(FrameType::kMessage)) |
      frameBit(FrameType::kError);
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (in.channel->queuedBytes > kMaxQueuedBytes) return true;
    }
    FrameHeader header;
    std::vector<uint8_t> payload;
    Result<bool> got = in.conn.readFrame(allowed, kMaxFrameBytes, &header, &payload);
    if (!got.ok()) {
      const std::string& why = got.status().message();
      if (why == kConnectionClosed) {
        closeIncoming(in, "closed the connection");
      } else if (why == kConnectionClosedMidFrame) {
        closeIncoming(in, "closed the connection in the middle of a frame (it exited or failed)");
      } else {
        BRAID_LOG(processLogger(), kWarn, kBoot, "rank %d: dropped rank %d: %s", rank_, in.peer,
                  why.c_str());
        closeIncoming(in, "broke the connection (" + why + ")");
      }
      return false;
    }
    if (!got.value()) return true;
    if (header.type == FrameType::kError) {
      const Status why = decodeErrorPayload(payload, "");
      closeIncoming(in, "gave up: " + why.message(), why);
      return false;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      in.channel->queuedBytes += payload.size();
      in.channel->frames.push_back({header.flags, header.tag, std::move(payload)});
    }
    cv_.notify_all();
  }
}

void Bootstrap::Impl::closeIncoming(Incoming& in, const std::string& reason,
                                    std::optional<Status> upstream, bool unanswering) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    in.channel->closed = true;
    in.channel->unanswering = unanswering;
    in.channel->reason = "rank " + std::to_string(in.peer) + " " + reason;
    if (upstream) in.channel->upstream = upstream;
    if (in.channel == &ringIn_) ringInFd_ = -1;
  }
  cv_.notify_all();
  in.conn.socket().close();
  in.dead = true;
}

}  // namespace braid
