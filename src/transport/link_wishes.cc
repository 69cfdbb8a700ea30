#include "transport/link_wishes.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "bootstrap/bootstrap.h"

namespace braid {
namespace {

/// The rule each rank sends ahead of its card.
struct Rule {
  uint32_t wantsRemote;  ///< 1: wants every peer on another host; 0: none
  uint32_t exceptions;   ///< how many peers break the rule
};

}  // namespace

Result<LinkWishes> exchangeLinkWishes(const TransportContext& ctx, const std::vector<bool>& wanted,
                                      const void* card, size_t cardBytes, std::string_view what) {
  const int n = ctx.nranks;
  const int me = ctx.rank;
  const std::string label(what);
  const std::vector<PeerInfo>* peers = ctx.peers;
  auto remote = [&](int a, int b) {
    return peers != nullptr && (*peers)[a].hostHash != (*peers)[b].hostHash;
  };
  auto wantedBy = [&](int p) { return p != me && p < int(wanted.size()) && wanted[p]; };

  // The rule that fits this rank's wishes best, and the peers that break it.
  int remoteWanted = 0, remoteCount = 0;
  for (int p = 0; p < n; ++p) {
    if (p == me || !remote(me, p)) continue;
    ++remoteCount;
    remoteWanted += wantedBy(p) ? 1 : 0;
  }
  const bool wantsRemote = 2 * remoteWanted > remoteCount;
  std::vector<uint32_t> myExceptions;
  for (int p = 0; p < n; ++p) {
    if (p != me && wantedBy(p) != (wantsRemote && remote(me, p))) myExceptions.push_back(p);
  }

  const size_t block = sizeof(Rule) + cardBytes;
  std::vector<uint8_t> blocks(block * size_t(n), 0);
  const Rule mine{wantsRemote ? 1u : 0u, static_cast<uint32_t>(myExceptions.size())};
  std::memcpy(blocks.data() + block * me, &mine, sizeof(mine));
  if (cardBytes > 0) std::memcpy(blocks.data() + block * me + sizeof(Rule), card, cardBytes);
  RETURN_IF_ERROR(ctx.bootstrap->allGather(blocks.data(), block)
                      .withContext(label + ": exchanging the peers each rank links"));
  std::vector<Rule> rules(n);
  LinkWishes out;
  out.cards.resize(cardBytes * size_t(n));
  for (int p = 0; p < n; ++p) {
    std::memcpy(&rules[p], blocks.data() + block * p, sizeof(Rule));
    if (cardBytes > 0) {
      std::memcpy(out.cards.data() + cardBytes * p, blocks.data() + block * p + sizeof(Rule),
                  cardBytes);
    }
  }

  // wantsMe[p]: p's wishes include this rank; the exceptions, when any rank has some, come as a
  // block of the largest count per rank.
  std::vector<bool> wantsMe(n, false);
  for (int p = 0; p < n; ++p) wantsMe[p] = p != me && rules[p].wantsRemote != 0 && remote(p, me);
  uint32_t most = 0;
  for (const Rule& r : rules) most = std::max(most, r.exceptions);
  if (most > 0) {
    if (most > uint32_t(n)) return internalError(label + ": a rank lists too many peers");
    std::vector<uint32_t> table(size_t(most) * size_t(n), UINT32_MAX);
    std::copy(myExceptions.begin(), myExceptions.end(), table.begin() + size_t(most) * me);
    RETURN_IF_ERROR(ctx.bootstrap->allGather(table.data(), most * sizeof(uint32_t))
                        .withContext(label + ": exchanging the peers each rank wants"));
    for (int p = 0; p < n; ++p) {
      if (p == me) continue;
      for (uint32_t i = 0; i < rules[p].exceptions && i < most; ++i) {
        if (table[size_t(most) * p + i] == uint32_t(me)) wantsMe[p] = !wantsMe[p];
      }
    }
  }
  out.linked.assign(n, false);
  for (int p = 0; p < n; ++p) out.linked[p] = p != me && (wantedBy(p) || wantsMe[p]);
  return out;
}

}  // namespace braid
