#include "tuner/tuner.h"

#include <algorithm>
#include <sstream>

#include "algorithms/algorithms.h"

namespace braid {
namespace {

// A slot of this size stays in L2 while the receiver reads it, yet amortises the per-slot
// handshake (two counter updates) over enough bytes.
constexpr uint32_t kDefaultChunkBytes = 128 * 1024;
// Below this an all-reduce is latency-bound: one exchange round beats 2(n-1) ring steps.
constexpr uint64_t kSmallAllReduceBytes = 16 * 1024;

}  // namespace

Result<Tuner> Tuner::create(const Config& config, int nranks, int maxChannels,
                            uint32_t slotBytes) {
  Tuner t;
  t.nranks_ = nranks;
  t.nslots_ = config.nslots;
  t.maxChannels_ = maxChannels;
  t.slotBytes_ = slotBytes;
  t.chunkBytes_ = config.chunkBytes;
  t.nchannels_ = config.nchannels;
  ASSIGN_OR_RETURN(t.override_, AlgoOverride::parse(config.algo));
  // A forced algorithm the FIFO depth cannot run is an error now, not a hang later.
  for (int c = 0; c < AlgoOverride::kNumOverridable; ++c) {
    const auto coll = static_cast<Collective>(c);
    for (uint64_t bytes : {uint64_t{0}, uint64_t{1} << 62}) {
      std::optional<std::vector<Algorithm>> allowed = t.override_.allowed(coll, bytes);
      if (!allowed) continue;
      const bool any = std::any_of(allowed->begin(), allowed->end(),
                                   [&](Algorithm a) { return t.usable(a, coll); });
      if (!any) {
        return invalidArgument("BRAID_ALGO forces " + std::string(algorithmName(allowed->front())) +
                               " for " + std::string(collectiveName(coll)) + ", which needs " +
                               "BRAID_NSLOTS >= " +
                               std::to_string(minSlotsFor(allowed->front(), coll)));
      }
    }
  }
  return t;
}

bool Tuner::usable(Algorithm algo, Collective coll) const {
  return algorithmServes(algo, coll) && minSlotsFor(algo, coll) <= nslots_;
}

Algorithm Tuner::heuristic(Collective coll, uint64_t bytes) const {
  switch (coll) {
    case Collective::kAllReduce:
      if (nranks_ > 2 && bytes <= kSmallAllReduceBytes) {
        return nranks_ <= 8 ? Algorithm::kDirect : Algorithm::kRd;
      }
      return Algorithm::kRing;
    case Collective::kAllToAll:
    case Collective::kSend:
    case Collective::kRecv: return Algorithm::kPairwise;
    default: return Algorithm::kRing;
  }
}

Choice Tuner::choose(Collective coll, uint64_t bytes) const {
  Choice choice;
  choice.algo = heuristic(coll, bytes);
  std::optional<std::vector<Algorithm>> allowed = override_.allowed(coll, bytes);
  if (allowed) {
    const bool ok = std::find(allowed->begin(), allowed->end(), choice.algo) != allowed->end() &&
                    usable(choice.algo, coll);
    if (!ok) {
      for (Algorithm a : *allowed) {
        if (usable(a, coll)) {
          choice.algo = a;
          break;
        }
      }
    }
  }
  choice.chunkBytes = std::min(chunkBytes_ ? chunkBytes_ : kDefaultChunkBytes, slotBytes_);
  int channels = nchannels_ ? nchannels_ : 1;
  // A double binary tree puts its two trees on two channels.
  if (choice.algo == Algorithm::kTree && nchannels_ == 0) channels = 2;
  choice.nchannels = std::clamp(channels, 1, maxChannels_);
  if (coll == Collective::kSend || coll == Collective::kRecv) choice.nchannels = 1;
  return choice;
}

std::string Tuner::describe() const {
  std::ostringstream os;
  for (int c = 0; c < AlgoOverride::kNumOverridable; ++c) {
    const auto coll = static_cast<Collective>(c);
    os << (c ? "; " : "") << collectiveName(coll) << ":";
    const char* sep = " ";
    for (uint64_t bytes : {uint64_t{8}, uint64_t{64} << 10, uint64_t{16} << 20}) {
      const Choice ch = choose(coll, bytes);
      os << sep << bytes << "B=" << algorithmName(ch.algo) << "/" << ch.nchannels << "ch";
      sep = ", ";
    }
  }
  if (override_.active()) os << " (BRAID_ALGO: " << override_.describe() << ")";
  return os.str();
}

}  // namespace braid
