#include "tuner/tuner.h"

#include <algorithm>

namespace braid {
namespace {

// A slot of this size stays in L2 while the receiver reads it, yet amortises the per-slot
// handshake (two counter updates) over enough bytes.
constexpr uint32_t kDefaultChunkBytes = 128 * 1024;

}  // namespace

Tuner::Tuner(const Config& config, int nranks, int maxChannels, uint32_t slotBytes)
    : nranks_(nranks),
      maxChannels_(maxChannels),
      slotBytes_(slotBytes),
      chunkBytes_(config.chunkBytes),
      nchannels_(config.nchannels) {}

Choice Tuner::choose(Collective coll, uint64_t /*bytes*/) const {
  Choice choice;
  switch (coll) {
    case Collective::kAllToAll:
    case Collective::kSend:
    case Collective::kRecv: choice.algo = Algorithm::kPairwise; break;
    default: choice.algo = Algorithm::kRing; break;
  }
  choice.chunkBytes = std::min(chunkBytes_ ? chunkBytes_ : kDefaultChunkBytes, slotBytes_);
  choice.nchannels = std::clamp(nchannels_ ? nchannels_ : 1, 1, maxChannels_);
  if (coll == Collective::kSend || coll == Collective::kRecv) choice.nchannels = 1;
  return choice;
}

}  // namespace braid
