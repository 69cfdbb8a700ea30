// The bootstrap with threads as ranks: rendezvous, ring collectives, point-to-point and split.
// Every wait has a WaitPolicy timeout, so a broken bootstrap fails the test instead of hanging.
#include "bootstrap/bootstrap.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <numeric>
#include <thread>

#include "base/little_endian.h"
#include "bootstrap/bootstrap_wire.h"

namespace braid {
namespace {

constexpr double kTestTimeout = 20;

WaitPolicy testWait() {
  WaitPolicy wait;
  wait.timeoutSeconds = kTestTimeout;
  return wait;
}

braidUniqueId newRoot(const std::string& ifname = "lo") {
  Result<braidUniqueId> id = startBootstrapRoot(ifname, kTestTimeout);
  EXPECT_TRUE(id.ok()) << id.status().message();
  return id.ok() ? id.value() : braidUniqueId{};
}

using RankBody = std::function<Status(int rank, Bootstrap& b)>;

// Joins n ranks from n threads and runs body on each; the statuses of join-or-body per rank.
std::vector<Status> runRanks(int n, const braidUniqueId& id, const RankBody& body,
                             const std::string& ifname = "lo",
                             const std::function<void(int)>& beforeJoin = {},
                             const WaitPolicy& wait = testWait(),
                             const std::function<uint64_t(int)>& hostOf = {}) {
  std::vector<Status> out(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      if (beforeJoin) beforeJoin(r);
      Result<std::unique_ptr<Bootstrap>> b =
          Bootstrap::join(id, r, n, ifname, wait, hostOf ? hostOf(r) : 0);
      if (!b.ok()) {
        out[static_cast<size_t>(r)] = b.status();
        return;
      }
      EXPECT_EQ(b.value()->rank(), r);
      EXPECT_EQ(b.value()->nranks(), n);
      out[static_cast<size_t>(r)] = body(r, *b.value());
    });
  }
  for (std::thread& t : threads) t.join();
  return out;
}

void expectAllOk(const std::vector<Status>& statuses) {
  for (size_t r = 0; r < statuses.size(); ++r) {
    EXPECT_TRUE(statuses[r].ok()) << "rank " << r << ": " << statuses[r].message();
  }
}

uint8_t pattern(int rank, size_t i) { return static_cast<uint8_t>(rank * 31 + i * 7 + 1); }

// allGather of `bytes` per rank, checked.
Status checkedAllGather(int rank, Bootstrap& b, size_t bytes) {
  const int n = b.nranks();
  std::vector<uint8_t> data(bytes * static_cast<size_t>(n), 0xee);
  for (size_t i = 0; i < bytes; ++i) data[static_cast<size_t>(rank) * bytes + i] = pattern(rank, i);
  RETURN_IF_ERROR(b.allGather(data.data(), bytes));
  for (int r = 0; r < n; ++r) {
    for (size_t i = 0; i < bytes; ++i) {
      if (data[static_cast<size_t>(r) * bytes + i] != pattern(r, i)) {
        return internalError("allGather: wrong byte " + std::to_string(i) + " of rank " +
                             std::to_string(r));
      }
    }
  }
  return okStatus();
}

class Rendezvous : public ::testing::TestWithParam<int> {};

TEST_P(Rendezvous, AllGatherBarrierSendRecv) {
  const int n = GetParam();
  const braidUniqueId id = newRoot();
  expectAllOk(runRanks(n, id, [n](int r, Bootstrap& b) -> Status {
    RETURN_IF_ERROR(checkedAllGather(r, b, 13));
    RETURN_IF_ERROR(b.barrier());
    RETURN_IF_ERROR(checkedAllGather(r, b, 0));
    // Blocks larger than the socket buffers.
    RETURN_IF_ERROR(checkedAllGather(r, b, 300000));

    // In-order delivery on one (peer, tag): three messages of different sizes to the next rank.
    const int next = (r + 1) % n;
    const int prev = (r + n - 1) % n;
    for (int m = 0; m < 3; ++m) {
      std::vector<int> msg(static_cast<size_t>(m + 1), r * 100 + m);
      RETURN_IF_ERROR(b.send(next, 7, msg.data(), msg.size() * sizeof(int)));
    }
    // Tags other than the one asked for are kept: two rank further, send tag 9 then tag 8, and
    // receive tag 8 first.
    const int far = (r + 2) % n;
    const int farFrom = (r + 2 * n - 2) % n;
    const uint64_t nine = 900 + static_cast<uint64_t>(r);
    const uint32_t eight = 800 + static_cast<uint32_t>(r);
    RETURN_IF_ERROR(b.send(far, 9, &nine, sizeof(nine)));
    RETURN_IF_ERROR(b.send(far, 8, &eight, sizeof(eight)));
    for (int m = 0; m < 3; ++m) {
      std::vector<int> msg(static_cast<size_t>(m + 1));
      RETURN_IF_ERROR(b.recv(prev, 7, msg.data(), msg.size() * sizeof(int)));
      for (int v : msg) EXPECT_EQ(v, prev * 100 + m) << "rank " << r << " message " << m;
    }
    uint32_t gotEight = 0;
    uint64_t gotNine = 0;
    RETURN_IF_ERROR(b.recv(farFrom, 8, &gotEight, sizeof(gotEight)));
    RETURN_IF_ERROR(b.recv(farFrom, 9, &gotNine, sizeof(gotNine)));
    EXPECT_EQ(gotEight, 800u + static_cast<uint32_t>(farFrom));
    EXPECT_EQ(gotNine, 900u + static_cast<uint64_t>(farFrom));

    // Messages to self, and an empty message.
    const char text[] = "self";
    char back[sizeof(text)] = {};
    RETURN_IF_ERROR(b.send(r, 3, text, sizeof(text)));
    RETURN_IF_ERROR(b.recv(r, 3, back, sizeof(back)));
    EXPECT_STREQ(back, text);
    RETURN_IF_ERROR(b.send(next, 11, nullptr, 0));
    RETURN_IF_ERROR(b.recv(prev, 11, nullptr, 0));
    return b.barrier();
  }));
}

// Up to 8 ranks the collectives go round the ring; 9 and up disseminate in log2 n rounds, and
// the listeners come down a tree (16: four levels below rank 0).
INSTANTIATE_TEST_SUITE_P(Ranks, Rendezvous, ::testing::Values(1, 2, 3, 5, 8, 9, 13, 16));

// With host keys at join, the collectives beyond 8 ranks gather through one rank per host: hosts
// of even and uneven size, ranks of a host spread through the order, and a single host of more
// than kHostGatherMaxRanks beside hosts of one (which disseminates as before). A split keeps the
// hosts: its group of 9 or more gathers by host from its first collective.
TEST(Bootstrap, CollectivesGatherThroughAHostLeader) {
  struct Layout {
    int n;
    std::function<uint64_t(int)> hostOf;
  };
  const std::vector<Layout> layouts = {
      {13, [](int r) { return uint64_t(r / 4); }},
      {12, [](int r) { return uint64_t(r % 3); }},
      {18, [](int r) { return uint64_t(r < 3    ? 7
                                       : r < 10 ? 5
                                                : 9 + r % 2); }},
      {kHostGatherMaxRanks + 3,
       [](int r) { return uint64_t(r < kHostGatherMaxRanks + 1 ? 0 : r); }},
  };
  for (const Layout& layout : layouts) {
    SCOPED_TRACE("ranks " + std::to_string(layout.n));
    expectAllOk(runRanks(
        layout.n, newRoot(),
        [](int r, Bootstrap& b) -> Status {
          RETURN_IF_ERROR(checkedAllGather(r, b, 13));
          RETURN_IF_ERROR(b.barrier());
          RETURN_IF_ERROR(checkedAllGather(r, b, 0));
          RETURN_IF_ERROR(checkedAllGather(r, b, 100000));  // larger than the socket buffers
          ASSIGN_OR_RETURN(SplitResult half, b.split(r % 2, -r));
          return checkedAllGather(half.bootstrap->rank(), *half.bootstrap, 7);
        },
        "lo", {}, testWait(), layout.hostOf));
  }
}

TEST(Bootstrap, LateRanksStillJoin) {
  const braidUniqueId id = newRoot();
  expectAllOk(runRanks(
      4, id, [](int r, Bootstrap& b) { return checkedAllGather(r, b, 5); }, "lo",
      [](int r) { std::this_thread::sleep_for(std::chrono::milliseconds(150 * (3 - r))); }));
}

// A rank that takes longer than the timeout to reach an allGather (rank 0 of a communicator
// measuring the host) fails the others unless they grant it grace.
TEST(Bootstrap, AllGatherGraceOutlastsTheTimeout) {
  WaitPolicy shortWait;
  shortWait.timeoutSeconds = 1;
  for (const double grace : {0.0, 30.0}) {
    const std::vector<Status> statuses = runRanks(
        2, newRoot(),
        [grace](int r, Bootstrap& b) {
          if (r == 1) std::this_thread::sleep_for(std::chrono::milliseconds(2500));
          uint8_t data[2] = {static_cast<uint8_t>(r), static_cast<uint8_t>(r)};
          return b.allGather(data, 1, r == 0 ? grace : 0);
        },
        "lo", {}, shortWait);
    if (grace == 0) {
      EXPECT_EQ(statuses[0].code(), braidTimeout) << statuses[0].message();
    } else {
      expectAllOk(statuses);
    }
  }
}

TEST(Bootstrap, DefaultInterface) {
  const braidUniqueId id = newRoot("");
  expectAllOk(runRanks(
      2, id, [](int r, Bootstrap& b) { return checkedAllGather(r, b, 3); }, ""));
}

TEST(Bootstrap, AllToAllPointToPoint) {
  // Every rank sends to every rank before receiving anything: the service threads must buffer.
  const int n = 5;
  const braidUniqueId id = newRoot();
  expectAllOk(runRanks(n, id, [n](int r, Bootstrap& b) -> Status {
    std::vector<uint8_t> big(200000);
    for (int peer = 0; peer < n; ++peer) {
      std::fill(big.begin(), big.end(), static_cast<uint8_t>(r * n + peer));
      RETURN_IF_ERROR(b.send(peer, 1, big.data(), big.size()));
    }
    for (int peer = n - 1; peer >= 0; --peer) {
      RETURN_IF_ERROR(b.recv(peer, 1, big.data(), big.size()));
      const auto expected = static_cast<uint8_t>(peer * n + r);
      if (std::any_of(big.begin(), big.end(), [&](uint8_t v) { return v != expected; })) {
        return internalError("wrong payload from rank " + std::to_string(peer));
      }
    }
    return b.barrier();
  }));
}

TEST(Bootstrap, SplitIntoColorsWithKeyOrder) {
  const int n = 7;
  const std::vector<int> colors = {0, 1, 0, -1, 1, 0, -1};
  const braidUniqueId id = newRoot();
  expectAllOk(runRanks(n, id, [&](int r, Bootstrap& b) -> Status {
    // Keys reverse the parent order.
    ASSIGN_OR_RETURN(SplitResult split, b.split(colors[static_cast<size_t>(r)], 10 - r));
    if (colors[static_cast<size_t>(r)] < 0) {
      EXPECT_EQ(split.bootstrap, nullptr);
      EXPECT_TRUE(split.parentRanks.empty());
    } else {
      EXPECT_NE(split.bootstrap, nullptr);
      if (split.bootstrap == nullptr) return internalError("no bootstrap");
      Bootstrap& g = *split.bootstrap;
      const std::vector<int> expected =
          colors[static_cast<size_t>(r)] == 0 ? std::vector<int>{5, 2, 0} : std::vector<int>{4, 1};
      EXPECT_EQ(split.parentRanks, expected);
      EXPECT_EQ(g.nranks(), static_cast<int>(expected.size()));
      EXPECT_EQ(split.parentRanks[static_cast<size_t>(g.rank())], r);
      // The new group works on its own: gather parent ranks, message around its ring.
      std::vector<int> parents(static_cast<size_t>(g.nranks()));
      parents[static_cast<size_t>(g.rank())] = r;
      RETURN_IF_ERROR(g.allGather(parents.data(), sizeof(int)));
      EXPECT_EQ(parents, expected);
      const int next = (g.rank() + 1) % g.nranks();
      const int prev = (g.rank() + g.nranks() - 1) % g.nranks();
      int value = r;
      RETURN_IF_ERROR(g.send(next, 4, &value, sizeof(value)));
      RETURN_IF_ERROR(g.recv(prev, 4, &value, sizeof(value)));
      EXPECT_EQ(value, expected[static_cast<size_t>(prev)]);
      RETURN_IF_ERROR(g.barrier());

      // Split again inside the group, everyone the same key: ties go by (group) rank.
      ASSIGN_OR_RETURN(SplitResult again, g.split(0, 0));
      EXPECT_NE(again.bootstrap, nullptr);
      std::vector<int> ids(expected.size());
      std::iota(ids.begin(), ids.end(), 0);
      EXPECT_EQ(again.parentRanks, ids);
      if (again.bootstrap != nullptr)
        RETURN_IF_ERROR(checkedAllGather(again.bootstrap->rank(), *again.bootstrap, 9));
    }
    // The parent still works after its children exist.
    RETURN_IF_ERROR(checkedAllGather(r, b, 4));
    // A second split of the parent: everybody in one group.
    ASSIGN_OR_RETURN(SplitResult all, b.split(3, 0));
    if (all.bootstrap == nullptr) return internalError("no bootstrap");
    EXPECT_EQ(all.bootstrap->rank(), r);
    return checkedAllGather(r, *all.bootstrap, 6);
  }));
}

// ---- What peers send, decoded -------------------------------------------------------------

SocketAddress address(const char* text) { return SocketAddress::parse(text).value(); }

TEST(BootstrapWire, JoinRoundTripsAndEveryClaimIsChecked) {
  const JoinRequest join{2, 5, address("10.0.0.7:4242"), 0x0123456789abcdefull};
  const std::vector<uint8_t> payload = encodeJoin(join);
  ASSERT_EQ(payload.size(), kJoinPayloadBytes);
  Result<JoinRequest> back = decodeJoin(payload);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->rank, 2);
  EXPECT_EQ(back->nranks, 5);
  EXPECT_TRUE(back->listener == join.listener);
  EXPECT_EQ(back->hostKey, join.hostKey);

  std::vector<uint8_t> shortOne(payload.begin(), payload.end() - 1);
  EXPECT_EQ(decodeJoin(shortOne).status().code(), braidRemoteError);
  auto withWord = [&](size_t at, uint32_t value) {
    std::vector<uint8_t> p = payload;
    putLe32(p.data() + at, value);
    return decodeJoin(p).status();
  };
  EXPECT_NE(withWord(4, 0).message().find("claims nranks=0"), std::string::npos);
  EXPECT_NE(withWord(4, uint32_t(kMaxRanks) + 1).message().find("outside 1.."), std::string::npos);
  EXPECT_NE(withWord(0, 5).message().find("rank 5 is outside 0..4"), std::string::npos);
  EXPECT_NE(withWord(0, 0xffffffffu).message().find("rank -1 is outside"), std::string::npos);
  EXPECT_EQ(withWord(0, 5).code(), braidInvalidUsage);
  std::vector<uint8_t> noPort = encodeJoin({0, 1, address("10.0.0.7:0")});
  EXPECT_NE(decodeJoin(noPort).status().message().find("bad listener address"), std::string::npos);
  std::vector<uint8_t> family = payload;
  family[8] = 9;  // neither IPv4 nor IPv6
  EXPECT_EQ(decodeJoin(family).status().code(), braidInvalidUsage);
}

TEST(BootstrapWire, IdentifyAndAddressTables) {
  const std::vector<uint8_t> identify = encodeIdentify({2, 7, 8});
  Result<Identify> back = decodeIdentify(identify);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->purpose, 2u);
  EXPECT_EQ(back->rank, 7);
  EXPECT_EQ(back->nranks, 8);
  EXPECT_FALSE(decodeIdentify(std::vector<uint8_t>(11)).ok());
  EXPECT_FALSE(decodeIdentify(std::vector<uint8_t>(13)).ok());

  const std::vector<SocketAddress> addresses = {address("127.0.0.1:1"), address("[::1]:2"),
                                                address("10.1.2.3:65535")};
  const std::vector<uint64_t> hostKeys = {7, 0, ~0ull};
  const std::vector<uint8_t> table = encodeAddressTable(addresses, hostKeys);
  Result<AddressTable> decoded = decodeAddressTable(table, 3);
  ASSERT_TRUE(decoded.ok()) << decoded.status().message();
  for (size_t r = 0; r < addresses.size(); ++r) {
    EXPECT_TRUE(decoded->listeners[r] == addresses[r]);
    EXPECT_EQ(decoded->hostKeys[r], hostKeys[r]);
  }
  // The size must match nranks exactly, and every entry must be an address with a port.
  EXPECT_FALSE(decodeAddressTable(table, 2).ok());
  EXPECT_FALSE(decodeAddressTable(table, 4).ok());
  EXPECT_FALSE(decodeAddressTable({}, 0).ok());
  std::vector<uint8_t> zeroPort = encodeAddressTable({address("127.0.0.1:0")}, {0});
  EXPECT_NE(decodeAddressTable(zeroPort, 1).status().message().find("rank 0"), std::string::npos);
  std::vector<uint8_t> padded = table;
  padded[12] = 1;  // nothing may hide in the unused bytes of an IPv4 entry (the first)
  EXPECT_FALSE(decodeAddressTable(padded, 3).ok());
}

TEST(BootstrapWire, AddressTreeReachesEveryRankOnceInLog2Rounds) {
  for (int n : {9, 12, 16, 17, 100, 1000, 4097}) {
    int deepest = 0;
    for (int r = 1; r < n; ++r) {
      // Each hop up the tree drops the distance from rank 0's highest bit: at most log2 n hops.
      int depth = 0;
      for (int at = r; at != 0; at = addressParent(at, n)) {
        const int parent = addressParent(at, n);
        ASSERT_LT((n - parent) % n, n - at) << "n " << n << " rank " << at;
        ++depth;
      }
      deepest = std::max(deepest, depth);
      const std::vector<int> told = rootTableRanks(r, n);
      ASSERT_EQ(told.size(), 4u);
      EXPECT_EQ(told[0], (r + n - 1) % n);
      EXPECT_EQ(told[1], r);
      EXPECT_EQ(told[2], (r + 1) % n);
      EXPECT_EQ(told[3], addressParent(r, n));
    }
    EXPECT_LE(1 << (deepest - 1), n) << "n " << n;
    EXPECT_EQ(rootTableRanks(0, n).size(), static_cast<size_t>(n));
  }
  EXPECT_EQ(addressParent(0, 12), 0);
  EXPECT_EQ(addressParent(10, 12), 0);  // distance 2
  EXPECT_EQ(addressParent(9, 12), 11);  // distance 3 = 1 + 2
  EXPECT_EQ(addressParent(2, 12), 10);  // distance 10 = 2 + 8
  EXPECT_EQ(rootTableRanks(0, 8), (std::vector<int>{7, 0, 1}));
  EXPECT_EQ(rootTableRanks(5, 8), (std::vector<int>{4, 5, 6}));
}

TEST(BootstrapWire, ErrorPayloadsAreClampedAndPrintable) {
  const Status s = decodeErrorPayload(encodeErrorPayload(invalidUsage("rank 3 called x")), "peer");
  EXPECT_EQ(s.code(), braidInvalidUsage);
  EXPECT_EQ(s.message(), "peer: rank 3 called x");
  EXPECT_EQ(decodeErrorPayload(encodeErrorPayload(timeoutError("t")), "").message(), "t");
  std::vector<uint8_t> odd = {0, 0, 0, 0, 'a', 0x07, '\n', 0xff};
  const Status cleaned = decodeErrorPayload(odd, "");
  EXPECT_EQ(cleaned.code(), braidRemoteError);  // "success" is no error code
  EXPECT_EQ(cleaned.message(), "a???");
  putLe32(odd.data(), 1000);
  EXPECT_EQ(decodeErrorPayload(odd, "").code(), braidRemoteError);
  EXPECT_EQ(decodeErrorPayload({1, 2}, "x").code(), braidRemoteError);
  // Long messages are cut to the frame limit, never past it.
  EXPECT_LE(encodeErrorPayload(remoteError(std::string(10000, 'z'))).size(), kMaxErrorBytes);
}

}  // namespace
}  // namespace braid
