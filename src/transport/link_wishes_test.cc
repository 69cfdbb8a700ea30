// exchangeLinkWishes: ranks as threads on described hosts agree on which pairs link, whether the
// wishes fit the rule (every remote peer) or break it, and every rank gets every card.
#include "transport/link_wishes.h"

#include <gtest/gtest.h>

#include <cstring>
#include <functional>

#include "bootstrap/bootstrap_threads.h"

namespace braid {
namespace {

constexpr double kTimeout = 30;

/// Rank r's context among ranks on hosts hostOf; `peers` holds their host identities.
TransportContext contextOn(const std::vector<int>& hostOf, int r, Bootstrap& bootstrap,
                           std::vector<PeerInfo>& peers) {
  const int n = static_cast<int>(hostOf.size());
  peers.assign(n, PeerInfo{});
  for (int p = 0; p < n; ++p) peers[p].hostHash = 100 + hostOf[p];
  TransportContext ctx;
  ctx.bootstrap = &bootstrap;
  ctx.rank = r;
  ctx.nranks = n;
  ctx.peers = &peers;
  return ctx;
}

/// Runs the exchange on n ranks on hosts hostOf, rank r wanting p when wants(r, p), and checks
/// that each rank links exactly the pairs either end wants and sees each rank's card (r * 7 + 1).
void expectAgreement(const std::vector<int>& hostOf, const std::function<bool(int, int)>& wants) {
  const int n = static_cast<int>(hostOf.size());
  const std::vector<Status> statuses =
      onBootstrapThreads(n, kTimeout, [&](int r, Bootstrap& bootstrap) -> Status {
        std::vector<PeerInfo> peers;
        const TransportContext ctx = contextOn(hostOf, r, bootstrap, peers);
        std::vector<bool> wanted(n, false);
        for (int p = 0; p < n; ++p) wanted[p] = p != r && wants(r, p);
        const uint32_t card = uint32_t(r) * 7 + 1;
        ASSIGN_OR_RETURN(const std::vector<LinkWishes> sets,
                         exchangeLinkWishes(ctx, {WishSet{wanted, &card, sizeof(card)}}, "test"));
        const LinkWishes& got = sets.front();
        for (int p = 0; p < n; ++p) {
          const bool expected = p != r && (wants(r, p) || wants(p, r));
          if (got.linked[p] != expected) {
            return internalError("rank " + std::to_string(r) + " links rank " + std::to_string(p) +
                                 ": " + (got.linked[p] ? "yes" : "no"));
          }
          uint32_t theirs = 0;
          std::memcpy(&theirs, got.card(p, sizeof(theirs)), sizeof(theirs));
          if (theirs != uint32_t(p) * 7 + 1) {
            return internalError("rank " + std::to_string(p) + "'s card is wrong");
          }
        }
        return okStatus();
      });
  for (int r = 0; r < n; ++r) EXPECT_TRUE(statuses[r].ok()) << statuses[r].message();
}

TEST(LinkWishes, EveryRemotePeerFitsTheRule) {
  expectAgreement({0, 0, 1, 1, 2}, [&](int a, int b) {
    const std::vector<int> hosts = {0, 0, 1, 1, 2};
    return hosts[a] != hosts[b];
  });
}

TEST(LinkWishes, ExceptionsEitherWayAreHonoured) {
  // Rank 4 wants nobody (others still want it), rank 0 also wants its host mate 1, rank 2 wants
  // only rank 4, rank 3 wants everyone remote but rank 0.
  const std::vector<int> hosts = {0, 0, 1, 1, 2};
  expectAgreement(hosts, [&](int a, int b) {
    if (a == 4) return false;
    if (a == 0 && b == 1) return true;
    if (a == 2) return b == 4;
    if (a == 3 && b == 0) return false;
    return hosts[a] != hosts[b];
  });
}

TEST(LinkWishes, NobodyWantsAnything) {
  expectAgreement({0, 1, 2}, [](int, int) { return false; });
}

// Two transports in one exchange: the first set fits the rule, the second breaks it on some
// ranks, and their cards differ in size; each set is agreed as if it were exchanged alone.
TEST(LinkWishes, SetsShareOneExchange) {
  const std::vector<int> hosts = {0, 0, 1, 1, 2, 2};
  const int n = static_cast<int>(hosts.size());
  auto wantsFirst = [&](int a, int b) { return hosts[a] != hosts[b]; };
  auto wantsSecond = [&](int a, int b) { return a != b && (a + b) % 3 == 0; };
  const std::vector<Status> statuses =
      onBootstrapThreads(n, kTimeout, [&](int r, Bootstrap& bootstrap) -> Status {
        std::vector<PeerInfo> peers;
        const TransportContext ctx = contextOn(hosts, r, bootstrap, peers);
        std::vector<bool> first(n, false), second(n, false);
        for (int p = 0; p < n; ++p) {
          first[p] = p != r && wantsFirst(r, p);
          second[p] = p != r && wantsSecond(r, p);
        }
        const uint32_t small = uint32_t(r) * 7 + 1;
        const uint64_t large = uint64_t(r) * 1000003 + 5;
        ASSIGN_OR_RETURN(const std::vector<LinkWishes> got,
                         exchangeLinkWishes(ctx,
                                            {WishSet{first, &small, sizeof(small)},
                                             WishSet{second, &large, sizeof(large)}},
                                            "test"));
        if (got.size() != 2) return internalError("not one result per set");
        for (int p = 0; p < n; ++p) {
          const bool one = p != r && (wantsFirst(r, p) || wantsFirst(p, r));
          const bool two = p != r && (wantsSecond(r, p) || wantsSecond(p, r));
          if (got[0].linked[p] != one || got[1].linked[p] != two) {
            return internalError("rank " + std::to_string(r) + " links rank " + std::to_string(p) +
                                 " wrongly");
          }
          uint32_t theirSmall = 0;
          uint64_t theirLarge = 0;
          std::memcpy(&theirSmall, got[0].card(p, sizeof(theirSmall)), sizeof(theirSmall));
          std::memcpy(&theirLarge, got[1].card(p, sizeof(theirLarge)), sizeof(theirLarge));
          if (theirSmall != uint32_t(p) * 7 + 1 || theirLarge != uint64_t(p) * 1000003 + 5) {
            return internalError("rank " + std::to_string(p) + "'s cards are wrong");
          }
        }
        return okStatus();
      });
  for (int r = 0; r < n; ++r) EXPECT_TRUE(statuses[r].ok()) << statuses[r].message();
}

}  // namespace
}  // namespace braid
