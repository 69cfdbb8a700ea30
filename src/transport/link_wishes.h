// Which peers a network transport links, agreed at creation with O(1) bytes per rank.
//
// Each rank wants some peers over the transport. Rather than an n-bit mask per rank (n^2 bits over
// the job), every rank sends a rule - every peer on another host, or none - and the few peers its
// wishes break the rule for (usually none; sent in a second round only when some rank has any).
// A pair is linked when either rank wants it, so both ends always agree. A transport may send a
// small fixed-size card of its own (a listener address, a device's presence) in the same round,
// and several transports share the round (network_links.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "transport/transport.h"

namespace braid {

/// What exchangeLinkWishes() learned.
struct LinkWishes {
  /// Per rank: this rank or that one wants the pair (false for this rank itself).
  std::vector<bool> linked;
  /// Every rank's card, cardBytes each, in rank order.
  std::vector<uint8_t> cards;
  /// Rank `rank`'s card.
  const uint8_t* card(int rank, size_t cardBytes) const { return cards.data() + rank * cardBytes; }
};

/// One transport's part of an exchange: the peers this rank wants over it (wanted[p]) and a card
/// of cardBytes (the same size on every rank; may be 0).
struct WishSet {
  std::vector<bool> wanted;
  const void* card = nullptr;
  size_t cardBytes = 0;
};

/// Collective over ctx.bootstrap: every rank calls it with the same number of sets, one per
/// transport, and gets a LinkWishes per set, in one round (two when some rank's wishes break the
/// rule in some set). `what` ("network transports") starts the errors. Host identities come from
/// ctx.peers (none: every peer counts as on this host).
Result<std::vector<LinkWishes>> exchangeLinkWishes(const TransportContext& ctx,
                                                   const std::vector<WishSet>& sets,
                                                   std::string_view what);

}  // namespace braid
