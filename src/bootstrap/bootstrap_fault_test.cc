// The bootstrap under faults: strangers at the root and at a rank's listener, ranks that disagree,
// ranks that never come, abort, peers that go away, and descriptor leaks. Every wait is bounded.
#include <dirent.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <functional>
#include <set>
#include <string>
#include <thread>

#include "base/little_endian.h"
#include "bootstrap/auth.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/bootstrap_wire.h"
#include "bootstrap/unique_id.h"

namespace braid {
namespace {

constexpr double kTestTimeout = 20;
// Strangers that stall are dropped after this; real ranks finish their handshake well within it.
constexpr double kShortHandshake = 1;

WaitPolicy waitFor(double seconds, const std::atomic<bool>* abort = nullptr,
                   double handshake = kDefaultHandshakeSeconds) {
  WaitPolicy wait;
  wait.timeoutSeconds = seconds;
  wait.abort = abort;
  wait.handshakeSeconds = handshake;
  return wait;
}

braidUniqueId newRoot(double timeout = kTestTimeout, double handshake = kDefaultHandshakeSeconds) {
  Result<braidUniqueId> id = startBootstrapRoot("lo", timeout, handshake);
  EXPECT_TRUE(id.ok()) << id.status().message();
  return id.ok() ? id.value() : braidUniqueId{};
}

UniqueIdInfo infoOf(const braidUniqueId& id) { return decodeUniqueId(id).value(); }

Socket connectRaw(const SocketAddress& where) {
  Result<Socket> s = Socket::connectTo(where, Deadline::after(5), "stranger", false);
  EXPECT_TRUE(s.ok()) << s.status().message();
  return s.ok() ? std::move(s.value()) : Socket();
}

// True when the other end closes the connection within `seconds` (whatever it sent first).
bool droppedWithin(Socket& s, double seconds) {
  const Deadline deadline = Deadline::after(seconds);
  for (;;) {
    uint8_t byte;
    const Status st = s.readAll(&byte, 1, deadline, "stranger");
    if (st.ok()) continue;
    return st.code() == braidRemoteError;
  }
}

// A stranger that holds the secret: handshakes properly, then misbehaves.
Socket authenticated(const SocketAddress& where, const Secret& secret) {
  Socket s = connectRaw(where);
  const Status st = authenticateAsClient(s, secret, Deadline::after(5), "stranger");
  EXPECT_TRUE(st.ok()) << st.message();
  return s;
}

void sendHeader(Socket& s, FrameType type, uint32_t length) {
  uint8_t header[kFrameHeaderBytes];
  encodeFrameHeader({type, 0, 0, length}, header);
  EXPECT_TRUE(s.writeAll(header, sizeof(header), Deadline::after(5), "stranger").ok());
}

// The misbehaving connections every listener must shrug off; each is checked to be dropped.
void expectStrangersDropped(const SocketAddress& where, const Secret& secret,
                            FrameType firstFrame) {
  Socket garbage = connectRaw(where);
  std::vector<uint8_t> junk(100, 'x');
  ASSERT_TRUE(garbage.writeAll(junk.data(), junk.size(), Deadline::after(5), "g").ok());
  EXPECT_TRUE(droppedWithin(garbage, 5)) << "garbage";

  // Wrong secret: the stranger cannot verify the server and its own proof is refused.
  Socket wrong = connectRaw(where);
  Secret other = secret;
  other[0] ^= 1;
  const Status st = authenticateAsClient(wrong, other, Deadline::after(5), "wrong");
  EXPECT_EQ(st.code(), braidRemoteError);
  std::vector<uint8_t> proof(kClientProofBytes, 0x42);
  (void)wrong.writeAll(proof.data(), proof.size(), Deadline::after(5), "wrong");
  EXPECT_TRUE(droppedWithin(wrong, 5)) << "wrong secret";

  // Right secret, but a first frame that claims a gigabyte, or is of the wrong type.
  Socket big = authenticated(where, secret);
  sendHeader(big, firstFrame, 1u << 30);
  EXPECT_TRUE(droppedWithin(big, 5)) << "oversized";
  Socket wrongType = authenticated(where, secret);
  sendHeader(wrongType, FrameType::kTable, 0);
  EXPECT_TRUE(droppedWithin(wrongType, 5)) << "wrong frame type";

  // Silent, and half a hello then silence: both dropped at the handshake deadline.
  Socket silent = connectRaw(where);
  Socket half = connectRaw(where);
  ASSERT_TRUE(half.writeAll("BRHS", 4, Deadline::after(5), "half").ok());
  EXPECT_TRUE(droppedWithin(silent, 5)) << "silent";
  EXPECT_TRUE(droppedWithin(half, 5)) << "half hello";
}

TEST(BootstrapFault, StrangersAtTheRootDoNotDisturbTheRanks) {
  const braidUniqueId id = newRoot(kTestTimeout, kShortHandshake);
  const UniqueIdInfo info = infoOf(id);
  expectStrangersDropped(info.root, info.secret, FrameType::kJoin);

  // A stranger that stalls while the real ranks join.
  Socket staller = connectRaw(info.root);
  std::vector<Status> out(3);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 3; ++r) {
    ranks.emplace_back([&, r] {
      Result<std::unique_ptr<Bootstrap>> b = Bootstrap::join(id, r, 3, "lo", waitFor(kTestTimeout));
      if (!b.ok()) {
        out[static_cast<size_t>(r)] = b.status();
        return;
      }
      int v[3] = {};
      v[r] = r + 1;
      out[static_cast<size_t>(r)] = b.value()->allGather(v, sizeof(int));
      EXPECT_EQ(v[0] + v[1] + v[2], 6);
    });
  }
  for (std::thread& t : ranks) t.join();
  for (const Status& s : out) EXPECT_TRUE(s.ok()) << s.message();
  EXPECT_TRUE(droppedWithin(staller, 5));
}

TEST(BootstrapFault, StrangersAtARankListenerDoNotDisturbTheGroup) {
  const braidUniqueId id = newRoot(kTestTimeout, kShortHandshake);
  const Secret secret = infoOf(id).secret;
  std::string listener1;
  std::atomic<int> joined{0};
  std::atomic<bool> strangersDone{false};
  std::vector<Status> out(3);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 3; ++r) {
    ranks.emplace_back([&, r] {
      Result<std::unique_ptr<Bootstrap>> joinedRank =
          Bootstrap::join(id, r, 3, "lo", waitFor(kTestTimeout, nullptr, kShortHandshake));
      if (!joinedRank.ok()) {
        out[static_cast<size_t>(r)] = joinedRank.status();
        ++joined;
        return;
      }
      Bootstrap& b = *joinedRank.value();
      if (r == 1) listener1 = b.listenerAddress();
      ++joined;
      while (!strangersDone.load()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      Status s = b.barrier();
      int v[3] = {};
      v[r] = 10 * (r + 1);
      if (s.ok()) s = b.allGather(v, sizeof(int));
      EXPECT_EQ(v[0] + v[1] + v[2], 60);
      if (s.ok() && r == 0) s = b.send(1, 5, v, sizeof(v));
      if (s.ok() && r == 1) {
        int got[3] = {};
        s = b.recv(0, 5, got, sizeof(got));
        EXPECT_EQ(got[2], 30);
      }
      if (s.ok()) s = b.barrier();
      out[static_cast<size_t>(r)] = s;
    });
  }
  while (joined.load() < 3) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  if (!listener1.empty()) {
    const SocketAddress where = SocketAddress::parse(listener1).value();
    expectStrangersDropped(where, secret, FrameType::kIdentify);

    // Holding the secret but claiming an impossible identity: told why, then dropped.
    Socket liar = authenticated(where, secret);
    uint8_t identify[12];
    putLe32(identify, 2);       // point-to-point
    putLe32(identify + 4, 99);  // rank 99 of 3
    putLe32(identify + 8, 3);
    ASSERT_TRUE(writeFrame(liar, FrameType::kIdentify, 0, 0, identify, sizeof(identify),
                           Deadline::after(5), "liar")
                    .ok());
    std::vector<uint8_t> reply;
    Result<FrameHeader> answer =
        readFrame(liar, frameBit(FrameType::kError) | frameBit(FrameType::kAccept), 0, &reply,
                  Deadline::after(5), "liar");
    ASSERT_FALSE(answer.ok());
    EXPECT_EQ(answer.status().code(), braidInvalidUsage);
    EXPECT_NE(answer.status().message().find("99"), std::string::npos);
  }
  // A stranger stalls while the group works.
  Socket staller;
  if (!listener1.empty()) staller = connectRaw(SocketAddress::parse(listener1).value());
  strangersDone = true;
  for (std::thread& t : ranks) t.join();
  for (const Status& s : out) EXPECT_TRUE(s.ok()) << s.message();
  ASSERT_FALSE(listener1.empty());
}

// Joins each (rank, nranks) pair from its own thread; the statuses.
std::vector<Status> joinAll(const braidUniqueId& id, const std::vector<std::pair<int, int>>& who,
                            double timeout) {
  std::vector<Status> out(who.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < who.size(); ++i) {
    threads.emplace_back([&, i] {
      Result<std::unique_ptr<Bootstrap>> b =
          Bootstrap::join(id, who[i].first, who[i].second, "lo", waitFor(timeout));
      out[i] = b.ok() ? okStatus() : b.status();
    });
  }
  for (std::thread& t : threads) t.join();
  return out;
}

TEST(BootstrapFault, RanksThatDisagreeOnNranksAreToldWhy) {
  const std::vector<Status> out = joinAll(newRoot(), {{0, 2}, {1, 3}}, kTestTimeout);
  for (const Status& s : out) {
    EXPECT_EQ(s.code(), braidInvalidUsage) << s.message();
    EXPECT_NE(s.message().find("disagree on nranks"), std::string::npos) << s.message();
  }
}

TEST(BootstrapFault, DuplicateRankIsAnError) {
  const std::vector<Status> out = joinAll(newRoot(), {{0, 2}, {0, 2}}, kTestTimeout);
  for (const Status& s : out) {
    EXPECT_EQ(s.code(), braidInvalidUsage) << s.message();
    EXPECT_NE(s.message().find("rank 0 joined twice"), std::string::npos) << s.message();
  }
}

TEST(BootstrapFault, RankOutOfRange) {
  const braidUniqueId id = newRoot();
  Result<std::unique_ptr<Bootstrap>> local = Bootstrap::join(id, 2, 2, "lo", waitFor(5));
  ASSERT_FALSE(local.ok());
  EXPECT_EQ(local.status().code(), braidInvalidArgument);
  EXPECT_FALSE(Bootstrap::join(id, 0, 0, "lo", waitFor(5)).ok());

  // The root checks too: a joiner that claims rank 5 of 2 on the wire is told so.
  const UniqueIdInfo info = infoOf(id);
  Socket s = authenticated(info.root, info.secret);
  uint8_t join[kJoinPayloadBytes] = {};
  putLe32(join, 5);
  putLe32(join + 4, 2);
  SocketAddress::parse("127.0.0.1:9").value().toWire(join + 8);
  ASSERT_TRUE(
      writeFrame(s, FrameType::kJoin, 0, 0, join, sizeof(join), Deadline::after(5), "j").ok());
  std::vector<uint8_t> payload;
  Result<FrameHeader> reply =
      readFrame(s, frameBit(FrameType::kError) | frameBit(FrameType::kTable), 1024, &payload,
                Deadline::after(5), "join");
  ASSERT_FALSE(reply.ok());
  EXPECT_EQ(reply.status().code(), braidInvalidUsage);
  EXPECT_NE(reply.status().message().find("rank 5 is outside 0..1"), std::string::npos)
      << reply.status().message();
}

TEST(BootstrapFault, MissingRankTimesOut) {
  // The rank's own deadline.
  Result<std::unique_ptr<Bootstrap>> b = Bootstrap::join(newRoot(), 0, 2, "lo", waitFor(0.3));
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), braidTimeout) << b.status().message();

  // The root's deadline: it tells the rank which ranks never came.
  b = Bootstrap::join(newRoot(0.3), 1, 3, "lo", waitFor(kTestTimeout));
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), braidTimeout) << b.status().message();
  EXPECT_NE(b.status().message().find("missing 0, 2"), std::string::npos) << b.status().message();
}

TEST(BootstrapFault, AbortEndsWaitsQuickly) {
  std::atomic<bool> abort{false};
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    abort = true;
  });
  // Waiting at the root for a rank that never comes, with no time limit.
  Result<std::unique_ptr<Bootstrap>> b = Bootstrap::join(newRoot(), 0, 2, "lo", waitFor(0, &abort));
  aborter.join();
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), braidRemoteError);
  EXPECT_NE(b.status().message().find("aborted"), std::string::npos) << b.status().message();

  // Waiting in recv for a message that never comes.
  std::atomic<bool> abortRecv{false};
  const braidUniqueId id = newRoot();
  std::vector<Status> out(2);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.emplace_back([&, r] {
      auto joined = Bootstrap::join(id, r, 2, "lo", waitFor(0, &abortRecv));
      if (!joined.ok()) {
        out[static_cast<size_t>(r)] = joined.status();
        return;
      }
      int v = 0;
      if (r == 0) {
        out[0] = joined.value()->recv(1, 77, &v, sizeof(v));
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        abortRecv = true;
      }
    });
  }
  for (std::thread& t : ranks) t.join();
  EXPECT_EQ(out[0].code(), braidRemoteError) << out[0].message();
  EXPECT_NE(out[0].message().find("aborted"), std::string::npos) << out[0].message();
  EXPECT_TRUE(out[1].ok());
}

TEST(BootstrapFault, RankThatLeavesTheRendezvousFailsItForEveryone) {
  const braidUniqueId id = newRoot();
  const UniqueIdInfo info = infoOf(id);
  Status joined;
  std::thread rank0([&] {
    Result<std::unique_ptr<Bootstrap>> b = Bootstrap::join(id, 0, 3, "lo", waitFor(kTestTimeout));
    joined = b.ok() ? okStatus() : b.status();
  });
  {
    // Rank 1 joins, then goes away before rank 2 ever comes.
    Socket rank1 = authenticated(info.root, info.secret);
    const std::vector<uint8_t> join =
        encodeJoin({1, 3, SocketAddress::parse("127.0.0.1:9").value()});
    ASSERT_TRUE(writeFrame(rank1, FrameType::kJoin, 0, 0, join.data(), join.size(),
                           Deadline::after(5), "rank 1")
                    .ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  const Deadline quick = Deadline::after(5);
  rank0.join();
  EXPECT_FALSE(quick.expired()) << "rank 0 waited for its timeout";
  EXPECT_EQ(joined.code(), braidRemoteError) << joined.message();
  EXPECT_NE(joined.message().find("rank 1 ("), std::string::npos) << joined.message();
  EXPECT_NE(joined.message().find("left before the rendezvous completed"), std::string::npos)
      << joined.message();
  EXPECT_NE(joined.message().find("never joined: 2"), std::string::npos) << joined.message();
}

TEST(BootstrapFault, RankThatGivesUpTellsEveryoneWhoNeverCame) {
  const braidUniqueId id = newRoot();
  std::vector<Status> out(2);
  std::thread impatient([&] {
    auto b = Bootstrap::join(id, 0, 3, "lo", waitFor(0.5));
    out[0] = b.ok() ? okStatus() : b.status();
  });
  std::thread patient([&] {
    auto b = Bootstrap::join(id, 1, 3, "lo", waitFor(kTestTimeout));
    out[1] = b.ok() ? okStatus() : b.status();
  });
  impatient.join();
  patient.join();
  for (const Status& s : out) {
    // Both report the timeout (not a lost peer), and both say which rank never came.
    EXPECT_EQ(s.code(), braidTimeout) << s.message();
    EXPECT_NE(s.message().find("never joined: 2"), std::string::npos) << s.message();
  }
}

// Rank `victim` of n joins with a listener of its own, gets its table and vanishes before it
// connects the ring; the others join and then meet in a barrier. Every one of them must fail
// (in join or in the barrier) naming the victim, long before the timeout.
void expectVanishedRankNamed(int n, int victim) {
  SCOPED_TRACE("n " + std::to_string(n) + ", victim " + std::to_string(victim));
  const braidUniqueId id = newRoot();
  const UniqueIdInfo info = infoOf(id);
  std::vector<Status> out(static_cast<size_t>(n));
  std::vector<std::thread> ranks;
  for (int r = 0; r < n; ++r) {
    if (r == victim) continue;
    ranks.emplace_back([&, r] {
      auto b = Bootstrap::join(id, r, n, "lo", waitFor(kTestTimeout));
      out[static_cast<size_t>(r)] = b.ok() ? b.value()->barrier() : b.status();
    });
  }
  {
    Socket listener = Socket::listenOn(SocketAddress::parse("127.0.0.1:0").value()).value();
    Socket gone = authenticated(info.root, info.secret);
    const std::vector<uint8_t> join = encodeJoin({victim, n, listener.localAddress().value()});
    ASSERT_TRUE(writeFrame(gone, FrameType::kJoin, 0, 0, join.data(), join.size(),
                           Deadline::after(5), "victim")
                    .ok());
    std::vector<uint8_t> table;
    const size_t tableBytes = rootTableRanks(victim, n).size() * kAddressEntryBytes;
    ASSERT_TRUE(readFrame(gone, frameBit(FrameType::kTable), static_cast<uint32_t>(tableBytes),
                          &table, Deadline::after(kTestTimeout), "victim")
                    .ok());
  }
  const Deadline quick = Deadline::after(5);
  for (std::thread& t : ranks) t.join();
  EXPECT_FALSE(quick.expired()) << "the ranks waited for their timeout";
  const std::string name = "rank " + std::to_string(victim);
  for (int r = 0; r < n; ++r) {
    if (r == victim) continue;
    const Status& s = out[static_cast<size_t>(r)];
    EXPECT_EQ(s.code(), braidRemoteError) << "rank " << r << ": " << s.message();
    // Refused (it is gone) or cut off during the handshake (it went while we connected).
    EXPECT_TRUE(s.message().find(name + " exited") != std::string::npos ||
                s.message().find(name + " closed the connection") != std::string::npos)
        << "rank " << r << ": " << s.message();
  }
}

TEST(BootstrapFault, RankThatDiesAfterTheRendezvousIsReportedNotWaitedFor) {
  // Rank 1 waits for a ring connection that never comes, and rank 2 cannot reach rank 0.
  expectVanishedRankNamed(3, 0);
  // Beyond 8 ranks the listeners come down a tree from rank 0: its root (every rank below it),
  // an inner rank (ranks 6 and 2 hear from rank 10) and a leaf.
  for (int victim : {0, 10, 4}) expectVanishedRankNamed(12, victim);
}

// Runs n ranks; `body` per rank gets its own bootstrap as a unique_ptr so it can destroy it.
std::vector<Status> runOwned(int n,
                             const std::function<Status(int, std::unique_ptr<Bootstrap>)>& body,
                             const std::function<uint64_t(int)>& hostOf = {}) {
  const braidUniqueId id = newRoot();
  std::vector<Status> out(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      auto b = Bootstrap::join(id, r, n, "lo", waitFor(kTestTimeout), hostOf ? hostOf(r) : 0);
      out[static_cast<size_t>(r)] = b.ok() ? body(r, std::move(b.value())) : b.status();
    });
  }
  for (std::thread& t : threads) t.join();
  return out;
}

/// A barrier after which rank `leaving` may leave: it waits until every other rank says it is
/// past the barrier, since a rank still finishing it when `leaving` went would fail there, not in
/// the collective a test is about.
Status leaveAfterTheBarrier(Bootstrap& b, int r, int leaving, int nranks) {
  RETURN_IF_ERROR(b.barrier());
  int token = r;
  if (r != leaving) return b.send(leaving, 7, &token, sizeof(token));
  for (int peer = 0; peer < nranks; ++peer) {
    if (peer != leaving) RETURN_IF_ERROR(b.recv(peer, 7, &token, sizeof(token)));
  }
  return okStatus();
}

TEST(BootstrapFault, PeerThatLeavesIsARemoteErrorNotAHang) {
  // Ring: rank 2 leaves; ranks 0 and 1 fail in their allGather with remoteError (the failure
  // travels around the ring), long before their 20 s timeout.
  std::vector<Status> out = runOwned(3, [](int r, std::unique_ptr<Bootstrap> b) -> Status {
    RETURN_IF_ERROR(leaveAfterTheBarrier(*b, r, 2, 3));
    if (r == 2) return okStatus();  // destroyed on return
    int v[3] = {};
    Status s = b->allGather(v, sizeof(int));
    EXPECT_EQ(s.code(), braidRemoteError) << s.message();
    // The ring stays broken and says so at once.
    EXPECT_EQ(b->barrier().code(), s.code());
    return okStatus();
  });
  for (const Status& s : out) EXPECT_TRUE(s.ok()) << s.message();

  // Point to point: rank 1 sends once and leaves; the second recv fails, and so does a send.
  out = runOwned(2, [](int r, std::unique_ptr<Bootstrap> b) -> Status {
    int v = 41;
    if (r == 1) {
      RETURN_IF_ERROR(b->send(0, 1, &v, sizeof(v)));
      return b->barrier();
    }
    RETURN_IF_ERROR(b->barrier());
    RETURN_IF_ERROR(b->recv(1, 1, &v, sizeof(v)));
    EXPECT_EQ(v, 41);
    const Status again = b->recv(1, 1, &v, sizeof(v));
    EXPECT_EQ(again.code(), braidRemoteError) << again.message();
    EXPECT_NE(again.message().find("rank 1 closed the connection"), std::string::npos)
        << again.message();
    const Status toGone = b->send(1, 2, &v, sizeof(v));
    EXPECT_EQ(toGone.code(), braidRemoteError) << toGone.message();
    return okStatus();
  });
  for (const Status& s : out) EXPECT_TRUE(s.ok()) << s.message();
}

TEST(BootstrapFault, EveryRankNamesWhereTheRingBroke) {
  // Rank 2 leaves; whichever neighbour notices first, the failure that goes round the ring (both
  // ways) names rank 2 on every rank.
  std::vector<Status> out = runOwned(4, [](int r, std::unique_ptr<Bootstrap> b) -> Status {
    RETURN_IF_ERROR(leaveAfterTheBarrier(*b, r, 2, 4));
    if (r == 2) return okStatus();  // destroyed on return
    int v[4] = {};
    const Status s = b->allGather(v, sizeof(int));
    EXPECT_EQ(s.code(), braidRemoteError) << "rank " << r << ": " << s.message();
    EXPECT_NE(s.message().find("rank 2 closed"), std::string::npos)
        << "rank " << r << ": " << s.message();
    return okStatus();
  });
  for (const Status& s : out) EXPECT_TRUE(s.ok()) << s.message();
}

TEST(BootstrapFault, SizeMismatchNamesBothSizes) {
  std::vector<Status> out = runOwned(2, [](int r, std::unique_ptr<Bootstrap> b) -> Status {
    uint8_t buf[16] = {};
    if (r == 0) {
      RETURN_IF_ERROR(b->send(1, 3, buf, 8));
    } else {
      const Status s = b->recv(0, 3, buf, 16);
      EXPECT_EQ(s.code(), braidInvalidUsage);
      EXPECT_NE(s.message().find("sent 8 bytes, this rank expects 16"), std::string::npos)
          << s.message();
    }
    // allGather with different block sizes fails on both ranks.
    const Status g = b->allGather(buf, r == 0 ? 4 : 8);
    EXPECT_EQ(g.code(), braidInvalidUsage) << g.message();
    return okStatus();
  });
  for (const Status& s : out) EXPECT_TRUE(s.ok()) << s.message();
}

// Beyond 8 ranks the collectives disseminate over point-to-point connections, or gather
// through a leader per host when the ranks joined with host keys; the ring still carries a failure
// to every rank. The rank that leaves is a host's leader (0) or one of its other ranks (5, 11).
TEST(BootstrapFault, DisseminationFailsEveryRankNamingTheOneThatLeft) {
  constexpr int kRanks = 12;
  for (const bool byHost : {false, true}) {
    for (int gone : {0, 5, 11}) {
      SCOPED_TRACE((byHost ? "hosts of 4, rank " : "rank ") + std::to_string(gone) + " leaves");
      std::vector<Status> out = runOwned(
          kRanks,
          [gone, byHost](int r, std::unique_ptr<Bootstrap> b) -> Status {
            RETURN_IF_ERROR(leaveAfterTheBarrier(*b, r, gone, kRanks));
            if (r == gone) return okStatus();  // destroyed on return
            int v[kRanks] = {};
            v[r] = r;
            const Status s = b->allGather(v, sizeof(int));
            EXPECT_EQ(s.code(), braidRemoteError) << "rank " << r << ": " << s.message();
            EXPECT_NE(s.message().find("rank " + std::to_string(gone) + " closed"),
                      std::string::npos)
                << "rank " << r << ": " << s.message();
            // A rank of the leaving rank's host (not its leader) waited on its leader.
            if (byHost && r / 4 == gone / 4 && r % 4 != 0 && gone % 4 != 0) {
              EXPECT_NE(s.message().find("through host leader rank"), std::string::npos)
                  << "rank " << r << ": " << s.message();
            }
            EXPECT_EQ(b->barrier().code(), s.code()) << "rank " << r;
            return okStatus();
          },
          byHost ? std::function<uint64_t(int)>([](int r) { return uint64_t(r / 4); }) : nullptr);
      for (const Status& s : out) EXPECT_TRUE(s.ok()) << s.message();
    }
  }
}

// A rank that fails the collective after a barrier may do so while slower ranks still finish
// the barrier: the ring then tells them in it, which is where their first error shows.
TEST(BootstrapFault, DisseminationTellsRanksInDifferentCollectivesApart) {
  constexpr int kRanks = 10;
  std::vector<Status> out = runOwned(kRanks, [](int r, std::unique_ptr<Bootstrap> b) -> Status {
    uint8_t buf[8 * kRanks] = {};
    // Rank 3 gives another block size; every rank fails, none waits for its timeout.
    Status s = b->barrier();
    if (s.ok()) s = b->allGather(buf, r == 3 ? 4 : 8);
    EXPECT_EQ(s.code(), braidInvalidUsage) << "rank " << r << ": " << s.message();
    EXPECT_NE(s.message().find("ranks gave different block sizes"), std::string::npos)
        << "rank " << r << ": " << s.message();
    return okStatus();
  });
  for (const Status& s : out) EXPECT_TRUE(s.ok()) << s.message();

  out = runOwned(kRanks, [](int r, std::unique_ptr<Bootstrap> b) -> Status {
    uint8_t buf[kRanks] = {};
    // Rank 6 enters a barrier while the others all-gather.
    Status s = b->barrier();
    if (s.ok()) s = r == 6 ? b->barrier() : b->allGather(buf, 1);
    EXPECT_EQ(s.code(), braidInvalidUsage) << "rank " << r << ": " << s.message();
    EXPECT_NE(s.message().find("ranks called different bootstrap collectives"), std::string::npos)
        << "rank " << r << ": " << s.message();
    return okStatus();
  });
  for (const Status& s : out) EXPECT_TRUE(s.ok()) << s.message();
}

// Open descriptors as (number, what they point at), so that a descriptor closed and reused for
// something else counts as new.
std::set<std::pair<int, std::string>> openFds() {
  std::set<std::pair<int, std::string>> fds;
  if (DIR* dir = opendir("/proc/self/fd")) {
    while (const dirent* entry = readdir(dir)) {
      if (entry->d_name[0] == '.') continue;
      const std::string path = std::string("/proc/self/fd/") + entry->d_name;
      char target[256] = {};
      const ssize_t n = readlink(path.c_str(), target, sizeof(target) - 1);
      fds.emplace(std::atoi(entry->d_name),
                  n > 0 ? std::string(target, static_cast<size_t>(n)) : "");
    }
    closedir(dir);
  }
  return fds;
}

// Descriptors open now that were not open in `before` (ignoring the directory stream's own).
std::vector<std::string> leakedSince(const std::set<std::pair<int, std::string>>& before) {
  std::vector<std::string> leaked;
  for (const auto& fd : openFds()) {
    if (before.count(fd) == 0 && fd.second.find("/proc/") == std::string::npos) {
      leaked.push_back(std::to_string(fd.first) + " -> " + fd.second);
    }
  }
  return leaked;
}

// At 3 ranks the collectives go round the ring; at 12 they disseminate over connections of their
// own, which destroying closes too.
TEST(BootstrapFault, DestroyingClosesEveryDescriptor) {
  const auto before = openFds();
  for (const int n : {3, 12}) {
    std::vector<Status> out = runOwned(n, [n](int r, std::unique_ptr<Bootstrap> b) -> Status {
      std::vector<int> v(static_cast<size_t>(n), r);
      RETURN_IF_ERROR(b->allGather(v.data(), sizeof(int)));
      RETURN_IF_ERROR(b->send((r + 1) % n, 0, v.data(), sizeof(int)));
      RETURN_IF_ERROR(b->recv((r + n - 1) % n, 0, v.data(), sizeof(int)));
      ASSIGN_OR_RETURN(SplitResult split, b->split(r == 0 ? -1 : 0, 0));
      if (split.bootstrap != nullptr) RETURN_IF_ERROR(split.bootstrap->barrier());
      return b->barrier();
    });
    for (const Status& s : out) EXPECT_TRUE(s.ok()) << s.message();
  }
  // Failed joins release everything too (the root exits at its own 0.3 s timeout).
  EXPECT_FALSE(Bootstrap::join(newRoot(0.3), 0, 2, "lo", waitFor(0.2)).ok());
  // Root threads close their sockets as they exit, just after they finish.
  const Deadline deadline = Deadline::after(5);
  while (!leakedSince(before).empty() && !deadline.expired()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(leakedSince(before), std::vector<std::string>{});
}

}  // namespace
}  // namespace braid
