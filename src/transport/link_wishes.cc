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

Result<std::vector<LinkWishes>> exchangeLinkWishes(const TransportContext& ctx,
                                                   const std::vector<WishSet>& sets,
                                                   std::string_view what) {
  const int n = ctx.nranks;
  const int me = ctx.rank;
  const size_t k = sets.size();
  const std::string label(what);
  const std::vector<PeerInfo>* peers = ctx.peers;
  auto remote = [&](int a, int b) {
    return peers != nullptr && (*peers)[a].hostHash != (*peers)[b].hostHash;
  };
  auto wantedBy = [&](const WishSet& set, int p) {
    return p != me && p < int(set.wanted.size()) && set.wanted[p];
  };

  // Per set: the rule that fits this rank's wishes best, and the peers that break it.
  std::vector<Rule> mine(k);
  std::vector<std::vector<uint32_t>> myExceptions(k);
  size_t block = 0;
  for (size_t s = 0; s < k; ++s) {
    int remoteWanted = 0, remoteCount = 0;
    for (int p = 0; p < n; ++p) {
      if (p == me || !remote(me, p)) continue;
      ++remoteCount;
      remoteWanted += wantedBy(sets[s], p) ? 1 : 0;
    }
    const bool wantsRemote = 2 * remoteWanted > remoteCount;
    for (int p = 0; p < n; ++p) {
      if (p != me && wantedBy(sets[s], p) != (wantsRemote && remote(me, p))) {
        myExceptions[s].push_back(p);
      }
    }
    mine[s] = Rule{wantsRemote ? 1u : 0u, static_cast<uint32_t>(myExceptions[s].size())};
    block += sizeof(Rule) + sets[s].cardBytes;
  }

  // A rank's block: each set's rule and card in turn.
  std::vector<uint8_t> blocks(block * size_t(n), 0);
  for (size_t s = 0, at = block * me; s < k; at += sizeof(Rule) + sets[s].cardBytes, ++s) {
    std::memcpy(blocks.data() + at, &mine[s], sizeof(Rule));
    if (sets[s].cardBytes > 0) {
      std::memcpy(blocks.data() + at + sizeof(Rule), sets[s].card, sets[s].cardBytes);
    }
  }
  RETURN_IF_ERROR(ctx.bootstrap->allGather(blocks.data(), block)
                      .withContext(label + ": exchanging the peers each rank links"));
  std::vector<std::vector<Rule>> rules(k, std::vector<Rule>(n));
  std::vector<LinkWishes> out(k);
  for (size_t s = 0, offset = 0; s < k; offset += sizeof(Rule) + sets[s].cardBytes, ++s) {
    const size_t cardBytes = sets[s].cardBytes;
    out[s].cards.resize(cardBytes * size_t(n));
    for (int p = 0; p < n; ++p) {
      const uint8_t* at = blocks.data() + block * p + offset;
      std::memcpy(&rules[s][p], at, sizeof(Rule));
      if (cardBytes > 0) {
        std::memcpy(out[s].cards.data() + cardBytes * p, at + sizeof(Rule), cardBytes);
      }
    }
  }

  // wantsMe[s][p]: p's wishes in set s include this rank; the exceptions, when any rank has some,
  // come as a block per rank of each set's largest count.
  std::vector<std::vector<bool>> wantsMe(k, std::vector<bool>(n, false));
  std::vector<uint32_t> most(k, 0);
  size_t exceptionWords = 0;
  for (size_t s = 0; s < k; ++s) {
    for (int p = 0; p < n; ++p) {
      wantsMe[s][p] = p != me && rules[s][p].wantsRemote != 0 && remote(p, me);
      most[s] = std::max(most[s], rules[s][p].exceptions);
    }
    if (most[s] > uint32_t(n)) return internalError(label + ": a rank lists too many peers");
    exceptionWords += most[s];
  }
  if (exceptionWords > 0) {
    std::vector<uint32_t> table(exceptionWords * size_t(n), UINT32_MAX);
    for (size_t s = 0, at = exceptionWords * me; s < k; at += most[s], ++s) {
      std::copy(myExceptions[s].begin(), myExceptions[s].end(), table.begin() + at);
    }
    RETURN_IF_ERROR(ctx.bootstrap->allGather(table.data(), exceptionWords * sizeof(uint32_t))
                        .withContext(label + ": exchanging the peers each rank wants"));
    for (int p = 0; p < n; ++p) {
      if (p == me) continue;
      for (size_t s = 0, at = exceptionWords * p; s < k; at += most[s], ++s) {
        for (uint32_t i = 0; i < rules[s][p].exceptions && i < most[s]; ++i) {
          if (table[at + i] == uint32_t(me)) wantsMe[s][p] = !wantsMe[s][p];
        }
      }
    }
  }
  for (size_t s = 0; s < k; ++s) {
    out[s].linked.assign(n, false);
    for (int p = 0; p < n; ++p) {
      out[s].linked[p] = p != me && (wantedBy(sets[s], p) || wantsMe[s][p]);
    }
  }
  return out;
}

}  // namespace braid
