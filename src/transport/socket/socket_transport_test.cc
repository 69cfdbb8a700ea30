// The socket transport with threads as ranks over loopback: slots of every size (empty, small,
// split over several streams) arrive intact and in order through shallow FIFOs, a destroyed
// transport first delivers what it posted, a peer that goes away or fails is reported, strangers
// without the communicator's secret are turned away, and interfaces are chosen as documented.
#include "transport/socket/socket_transport.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <thread>

#include "base/config.h"
#include "base/log.h"
#include "bootstrap/auth.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/bootstrap_threads.h"
#include "transport/socket/socket_connect.h"
#include "transport/socket/socket_wire.h"

namespace braid {
namespace {

constexpr double kTimeout = 30;
using Clock = std::chrono::steady_clock;

struct RankEnv {
  int rank = 0;
  int nranks = 0;
  Bootstrap* bootstrap = nullptr;
  SocketTransport* transport = nullptr;
  Waker* waker = nullptr;
  std::atomic<bool>* abort = nullptr;
};

Config testConfig(int nslots, uint32_t slotBytes, int nstreams) {
  Config c;
  c.timeoutSeconds = kTimeout;
  c.nslots = nslots;
  c.slotBytes = slotBytes;
  c.socketNstreams = nstreams;
  c.socketIfname = "lo";
  return c;
}

/// Runs body on n ranks (threads), each with its own bootstrap and socket transport linking it
/// with every peer `wants` names; the transport is destroyed after body (flushing) unless body
/// reset it. Returns each rank's status.
std::vector<Status> runRanks(
    int n, const Config& config,
    const std::function<Status(RankEnv&, std::unique_ptr<SocketTransport>&)>& body,
    const std::function<bool(int, int)>& wants = {}) {
  return onBootstrapThreads(n, kTimeout, [&](int r, Bootstrap& bootstrap) -> Status {
    Logger logger(LogLevel::kWarn, kAllSubsys, "");
    std::vector<PeerInfo> peers(n);
    for (int p = 0; p < n; ++p) std::snprintf(peers[p].hostName, 64, "h%d", p);
    Waker waker;
    std::atomic<bool> abort{false};
    TransportContext ctx;
    ctx.bootstrap = &bootstrap;
    ctx.config = &config;
    ctx.logger = &logger;
    ctx.rank = r;
    ctx.nranks = n;
    ctx.maxChannels = 2;
    ctx.peers = &peers;
    ctx.rankWaker = &waker;
    ctx.abort = &abort;
    std::vector<bool> wanted(n, false);
    for (int p = 0; p < n; ++p) wanted[p] = p != r && (!wants || wants(r, p));
    ASSIGN_OR_RETURN(std::unique_ptr<SocketTransport> t, SocketTransport::create(ctx, wanted));
    RankEnv env{r, n, &bootstrap, t.get(), &waker, &abort};
    return body(env, t);
  });
}

void expectAllOk(const std::vector<Status>& statuses) {
  for (size_t r = 0; r < statuses.size(); ++r) {
    EXPECT_TRUE(statuses[r].ok()) << "rank " << r << ": " << statuses[r].message();
  }
}

uint8_t pattern(int from, int to, int channel, int msg, size_t i) {
  return static_cast<uint8_t>(from * 37 + to * 11 + channel * 5 + msg * 3 + i * 7 + 1);
}

// Sizes that cover an empty slot, a tiny one, one just below the split threshold, one split in
// two and a full slot split over every stream.
const std::vector<uint32_t> kSizes = {0, 1, 100, 64 * 1024 - 4, 70000, 256 * 1024};

/// Every rank sends `messages` slots to every linked peer on both channels and checks what it
/// receives from each, driving all FIFOs from one thread as the executor would.
Status exchange(RankEnv& env, int messages, bool useWaker) {
  struct Out {
    int peer, channel;
    SendConnector c;
    int next = 0;
  };
  struct In {
    int peer, channel;
    RecvConnector c;
    int next = 0;
  };
  std::vector<Out> outs;
  std::vector<In> ins;
  for (int p = 0; p < env.nranks; ++p) {
    if (!env.transport->canConnect(p)) continue;
    for (int c = 0; c < 2; ++c) {
      ASSIGN_OR_RETURN(SendConnector s, env.transport->sendConnector(p, c));
      ASSIGN_OR_RETURN(RecvConnector r, env.transport->recvConnector(p, c));
      outs.push_back({p, c, s});
      ins.push_back({p, c, r});
    }
  }
  const auto deadline = Clock::now() + std::chrono::seconds(static_cast<int>(kTimeout));
  size_t done = 0;
  while (done < outs.size() + ins.size()) {
    if (Clock::now() > deadline) return timeoutError("exchange stuck");
    bool moved = false;
    done = 0;
    for (Out& o : outs) {
      while (o.next < messages) {
        char* slot = o.c.trySlot();
        if (slot == nullptr) break;
        const uint32_t bytes = kSizes[o.next % kSizes.size()];
        for (uint32_t i = 0; i < bytes; ++i)
          slot[i] = static_cast<char>(pattern(env.rank, o.peer, o.channel, o.next, i));
        CallDescriptor call;
        call.seq = static_cast<uint32_t>(o.next);
        call.count = bytes;
        o.c.post(bytes, call);
        ++o.next;
        moved = true;
      }
      done += o.next == messages;
    }
    for (In& in : ins) {
      while (in.next < messages) {
        const SlotHeader* h = in.c.tryPeek();
        if (h == nullptr) break;
        const uint32_t bytes = kSizes[in.next % kSizes.size()];
        if (h->bytes != bytes || h->call.seq != static_cast<uint32_t>(in.next) ||
            h->call.count != bytes) {
          return internalError("slot " + std::to_string(in.next) + " from rank " +
                               std::to_string(in.peer) + " has header bytes=" +
                               std::to_string(h->bytes) + " seq=" + std::to_string(h->call.seq));
        }
        const char* data = in.c.slotData();
        for (uint32_t i = 0; i < bytes; ++i) {
          if (static_cast<uint8_t>(data[i]) != pattern(in.peer, env.rank, in.channel, in.next, i)) {
            return internalError("byte " + std::to_string(i) + " of slot " +
                                 std::to_string(in.next) + " from rank " + std::to_string(in.peer) +
                                 " channel " + std::to_string(in.channel) + " is wrong");
          }
        }
        in.c.release();
        ++in.next;
        moved = true;
      }
      done += in.next == messages;
    }
    if (moved) continue;
    if (!useWaker) {
      std::this_thread::yield();
      continue;
    }
    // Sleep as the progress engine does: the proxy must wake us.
    const uint32_t seq = env.waker->seq.load();
    env.waker->sleeping.store(1);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    bool ready = false;
    for (In& in : ins) ready |= in.next < messages && in.c.tryPeek() != nullptr;
    for (Out& o : outs) ready |= o.next < messages && o.c.trySlot() != nullptr;
    if (!ready) sleepOnWaker(env.waker, seq, 200'000'000);
    env.waker->sleeping.store(0);
  }
  return okStatus();
}

TEST(SocketTransport, DeliversEverySlotInOrder) {
  for (int n : {2, 3}) {
    const Config config = testConfig(/*nslots=*/2, 256 * 1024, /*nstreams=*/3);
    expectAllOk(runRanks(n, config, [](RankEnv& env, std::unique_ptr<SocketTransport>& t) {
      if (t->linkedPeers() != env.nranks - 1) return internalError("not every peer is linked");
      if (t->streamsPerPeer() != 3) return internalError("expected 3 streams per peer");
      return exchange(env, 40, /*useWaker=*/false);
    }));
  }
}

TEST(SocketTransport, SleepingRankIsWokenByTheProxy) {
  const Config config = testConfig(/*nslots=*/4, 256 * 1024, /*nstreams=*/1);
  expectAllOk(runRanks(2, config, [](RankEnv& env, std::unique_ptr<SocketTransport>&) {
    return exchange(env, 60, /*useWaker=*/true);
  }));
}

TEST(SocketTransport, LinksOnlyPairsThatAskedAndAgreeOnStreams) {
  // Rank 0 wants rank 1 only; rank 2 wants rank 1 only; nobody wants 0-2. Rank 1 wants nobody
  // but is linked with both, because a pair is linked when either side asks.
  const Config config = testConfig(2, 256 * 1024, 2);
  expectAllOk(runRanks(
      3, config,
      [](RankEnv& env, std::unique_ptr<SocketTransport>& t) {
        const bool expect[3][3] = {{false, true, false}, {true, false, true}, {false, true, false}};
        for (int p = 0; p < 3; ++p) {
          if (t->canConnect(p) != expect[env.rank][p]) {
            return internalError("rank " + std::to_string(env.rank) + " link to " +
                                 std::to_string(p) + " is " + (t->canConnect(p) ? "up" : "down"));
          }
        }
        return exchange(env, 10, false);
      },
      [](int r, int p) { return r != 1 && p == 1; }));
}

// Every pair is linked, but streams open only when a rank first sends: in a ring of 5 each rank
// ends up with streams to its two neighbours (the one it sent to, the one that sent to it).
TEST(SocketTransport, StreamsOpenOnFirstSendOnly) {
  const Config config = testConfig(2, 64 * 1024, 2);
  expectAllOk(runRanks(5, config, [](RankEnv& env, std::unique_ptr<SocketTransport>& t) {
    if (t->linkedPeers() != env.nranks - 1) return internalError("not every peer is linked");
    if (t->connectedPeers() != 0) return internalError("streams opened before any send");
    RETURN_IF_ERROR(env.bootstrap->barrier());  // everyone looked before anyone sends
    const int next = (env.rank + 1) % env.nranks;
    const int prev = (env.rank + env.nranks - 1) % env.nranks;
    ASSIGN_OR_RETURN(SendConnector s, t->sendConnector(next, 0));
    ASSIGN_OR_RETURN(RecvConnector r, t->recvConnector(prev, 0));
    char* slot = s.trySlot();
    if (slot == nullptr) return internalError("FIFO full");
    std::memset(slot, env.rank, 100);
    s.post(100, CallDescriptor{});
    const auto deadline = Clock::now() + std::chrono::seconds(20);
    const SlotHeader* h = nullptr;
    while ((h = r.tryPeek()) == nullptr) {
      if (Clock::now() > deadline) return timeoutError("the neighbour's slot never came");
      std::this_thread::yield();
    }
    if (h->bytes != 100 || r.slotData()[99] != static_cast<char>(prev)) {
      return internalError("wrong slot from rank " + std::to_string(prev));
    }
    r.release();
    RETURN_IF_ERROR(env.bootstrap->barrier());
    if (t->connectedPeers() != 2) {
      return internalError("streams to " + std::to_string(t->connectedPeers()) +
                           " peers, not the 2 neighbours");
    }
    return env.bootstrap->barrier();
  }));
}

TEST(SocketTransport, DestroyFlushesWhatWasPosted) {
  const Config config = testConfig(4, 256 * 1024, 2);
  constexpr int kMessages = 4;  // fits in the FIFO: rank 0 posts all and leaves at once
  expectAllOk(runRanks(2, config, [&](RankEnv& env, std::unique_ptr<SocketTransport>& t) {
    if (env.rank == 0) {
      ASSIGN_OR_RETURN(SendConnector s, t->sendConnector(1, 0));
      for (int m = 0; m < kMessages; ++m) {
        char* slot = s.trySlot();
        if (slot == nullptr) return internalError("FIFO full");
        std::memset(slot, 'a' + m, kSizes.back());
        CallDescriptor call;
        call.seq = static_cast<uint32_t>(m);
        s.post(kSizes.back(), call);
      }
      t.reset();  // flushes
      return env.bootstrap->barrier();
    }
    ASSIGN_OR_RETURN(RecvConnector r, t->recvConnector(0, 0));
    const auto deadline = Clock::now() + std::chrono::seconds(20);
    for (int m = 0; m < kMessages;) {
      if (Clock::now() > deadline) return timeoutError("slot " + std::to_string(m) + " never came");
      const SlotHeader* h = r.tryPeek();
      if (h == nullptr) {
        std::this_thread::yield();
        continue;
      }
      if (h->bytes != kSizes.back() || r.slotData()[h->bytes - 1] != 'a' + m) {
        return internalError("slot " + std::to_string(m) + " is wrong");
      }
      r.release();
      ++m;
    }
    return env.bootstrap->barrier();
  }));
}

TEST(SocketTransport, PeerThatGoesAwayIsReported) {
  const Config config = testConfig(2, 64 * 1024, 2);
  expectAllOk(runRanks(2, config, [](RankEnv& env, std::unique_ptr<SocketTransport>& t) {
    if (env.rank == 0 && !t->peerAlive(1)) return internalError("rank 1 reported gone too early");
    // Streams open on first use: rank 0 sends first, so the pair is linked.
    if (env.rank == 0) RETURN_IF_ERROR(t->sendConnector(1, 0).status());
    if (env.rank == 0 && !t->peerAlive(1)) return internalError("rank 1 gone once linked");
    RETURN_IF_ERROR(env.bootstrap->barrier());  // rank 1 leaves only after rank 0 looked
    if (env.rank == 1) {
      env.abort->store(true);  // no flush, no linger: as if the process died
      t.reset();
      return okStatus();
    }
    const auto deadline = Clock::now() + std::chrono::seconds(20);
    while (t->peerAlive(1)) {
      if (Clock::now() > deadline) return timeoutError("rank 1's exit was never noticed");
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (t->failure()) return internalError("a clean close is no protocol failure");
    return okStatus();
  }));
}

TEST(SocketTransport, FailureNoticeReachesPeers) {
  const Config config = testConfig(2, 64 * 1024, 1);
  expectAllOk(runRanks(3, config, [](RankEnv& env, std::unique_ptr<SocketTransport>& t) {
    if (env.rank == 2) {
      // Streams open on first use: the notice goes to the peers rank 2 has sent to.
      RETURN_IF_ERROR(t->sendConnector(0, 0).status());
      RETURN_IF_ERROR(t->sendConnector(1, 0).status());
      t->notifyFailure(2, PeerFailure{invalidUsage("mismatched call"), /*collectivesDone=*/7});
    }
    if (env.rank != 2) {
      const auto deadline = Clock::now() + std::chrono::seconds(20);
      while (!t->peerFailure(2)) {
        if (Clock::now() > deadline) return timeoutError("no notice arrived");
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
      const PeerFailure f = *t->peerFailure(2);
      if (f.status.code() != braidInvalidUsage || f.collectivesDone != 7 ||
          f.status.message().find("mismatched call") == std::string::npos ||
          f.status.message().find("rank 2") == std::string::npos) {
        return internalError("unexpected notice: " + f.status.message());
      }
      if (t->peerFailure(1 - env.rank)) return internalError("a notice from a healthy peer");
      if (!t->peerFailure(kAnyPeer)) return internalError("kAnyPeer missed rank 2's notice");
      if (t->failure()) return internalError("a notice is no protocol failure");
    }
    return env.bootstrap->barrier();
  }));
}

// ---- Connection setup -----------------------------------------------------------------------

TEST(SocketConnect, StrangersAreTurnedAway) {
  Result<Socket> listener = Socket::listenOn(SocketAddress::parse("127.0.0.1:0").value());
  ASSERT_TRUE(listener.ok()) << listener.status().message();
  const SocketAddress where = listener->localAddress().value();
  ASSERT_TRUE(newSecret().ok());
  const Secret key = newSecret().value();
  const Secret wrongKey = newSecret().value();
  MeshPlan plan;
  plan.rank = 1;
  plan.addresses = {SocketAddress(), where};
  plan.streams = {1, 0};

  std::optional<Result<std::vector<PeerStream>>> accepted;
  std::thread acceptor(
      [&] { accepted.emplace(acceptStreams(*listener, key, plan, Deadline::after(20), 2)); });
  const Deadline d = Deadline::after(10);
  // A process without the secret fails the handshake.
  Result<Socket> stranger = Socket::connectTo(where, d, "stranger", true);
  ASSERT_TRUE(stranger.ok());
  EXPECT_FALSE(authenticateAsClient(*stranger, wrongKey, d, "stranger").ok());
  // One with the secret that claims a stream nobody expects is dropped too.
  Result<Socket> liar = Socket::connectTo(where, d, "liar", true);
  ASSERT_TRUE(liar.ok());
  ASSERT_TRUE(authenticateAsClient(*liar, key, d, "liar").ok());
  const socketwire::Identify bad{socketwire::kIdentifyMagic, 0, 5, 1};
  ASSERT_TRUE(liar->writeAll(&bad, sizeof(bad), d, "liar").ok());
  uint32_t ack = 0;
  EXPECT_FALSE(liar->readAll(&ack, sizeof(ack), d, "liar").ok());
  // A silent connection is dropped once its handshake time is up, without blocking the rest.
  Result<Socket> silent = Socket::connectTo(where, d, "silent", true);
  ASSERT_TRUE(silent.ok());
  // The real rank 0 gets in.
  MeshPlan lower;
  lower.rank = 0;
  lower.addresses = {SocketAddress(), where};
  lower.streams = {0, 1};
  Result<std::vector<PeerStream>> mine = connectStreams(key, lower, d);
  acceptor.join();
  ASSERT_TRUE(mine.ok()) << mine.status().message();
  ASSERT_EQ(mine->size(), 1u);
  ASSERT_TRUE(accepted->ok()) << accepted->status().message();
  ASSERT_EQ(accepted->value().size(), 1u);
  EXPECT_EQ(accepted->value()[0].peer, 0);
  EXPECT_EQ(accepted->value()[0].index, 0);
}

InterfaceAddress iface(const std::string& name, const std::string& ip, bool loopback) {
  InterfaceAddress a;
  a.name = name;
  a.address = SocketAddress::parse(ip + ":0").value();
  a.up = true;
  a.loopback = loopback;
  return a;
}

TEST(SocketConnect, InterfaceChoiceSkipsLoopbackAndDocker) {
  const std::vector<InterfaceAddress> all = {iface("lo", "127.0.0.1", true),
                                             iface("docker0", "172.17.0.1", false),
                                             iface("eth0", "10.0.0.5", false)};
  EXPECT_EQ(chooseTransportInterface(all, "").value().name, "eth0");
  EXPECT_EQ(chooseTransportInterface(all, "docker").value().name, "docker0");
  EXPECT_EQ(chooseTransportInterface(all, "^eth").value().name, "docker0");
  const std::vector<InterfaceAddress> noNic = {iface("lo", "127.0.0.1", true),
                                               iface("docker0", "172.17.0.1", false)};
  // Only loopback and docker: loopback over docker is not better, but something must be used.
  EXPECT_TRUE(chooseTransportInterface(noNic, "").ok());
  EXPECT_FALSE(chooseTransportInterface(noNic, "=ib0").ok());
}

TEST(SocketProxyWaker, PostRingsTheEventfdOnlyWhileAsleep) {
  Waker w;
  w.eventFd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  ASSERT_GE(w.eventFd, 0);
  pollfd p{w.eventFd, POLLIN, 0};
  wakeIfSleeping(&w);
  EXPECT_EQ(::poll(&p, 1, 0), 0) << "an awake proxy must not be rung";
  w.sleeping.store(1);
  wakeIfSleeping(&w);
  EXPECT_EQ(::poll(&p, 1, 0), 1);
  ::close(w.eventFd);
}

}  // namespace
}  // namespace braid
