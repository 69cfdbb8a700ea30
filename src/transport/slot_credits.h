// Credits: how a network proxy bounds what a sender has in flight by the receiver's free slots.
// The sending proxy puts slot `queued` on the wire only once the rank has posted it and the
// receiver's last credit (its FIFO's tail) leaves a slot free for it; the receiving proxy passes
// its FIFO's tail on as a credit whenever the rank frees slots. Both network proxies count so;
// only how a slot or a credit travels differs (network_proxy.h has the loops).
#pragma once

#include <cstdint>

namespace braid {

/// The sending side of one (peer, channel).
struct SendCredits {
  uint64_t queued = 0;      ///< slots put on the wire (or queued for it)
  uint64_t released = 0;    ///< slots freed: the FIFO's tail
  uint64_t creditTail = 0;  ///< the receiver's tail as it last told us

  /// Whether slot `queued` may go: the rank posted it (`head`) and the receiver has room for it.
  bool mayQueue(uint64_t head, uint32_t nslots) const {
    return queued < head && queued < creditTail + nslots;
  }
  /// Takes a credit: the receiver's new tail. False, keeping the old one, for a credit that goes
  /// back or frees slots never queued.
  bool takeCredit(uint64_t tail) {
    if (tail < creditTail || tail > queued) return false;
    creditTail = tail;
    return true;
  }
};

/// The receiving side of one (peer, channel).
struct RecvCredits {
  uint64_t posted = 0;      ///< slots whole and posted to the rank: the FIFO's head
  uint64_t creditSent = 0;  ///< the FIFO's tail as last passed on to the sender
};

}  // namespace braid
