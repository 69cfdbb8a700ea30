// BRAID_ALGO: the user's forced algorithm choices, parsed once at init and queried by the tuner.
//
// Grammar (names are case-insensitive; spaces around every token are ignored):
//
//   value   := term (';' term)*           empty terms (e.g. a trailing ';') are ignored
//   term    := [coll ':'] body
//   body    := list | ranges
//   list    := ['^'] algo ((',' | '|') algo)*
//   ranges  := range (',' range)*
//   range   := size '-' (size | 'inf') ':' ['^'] algo ('|' algo)*
//   coll    := allreduce | broadcast | reduce | allgather | reducescatter | alltoall
//              (also all_reduce, all_gather, reduce_scatter, all_to_all)
//   algo    := any algorithmName(): ring, pairwise, tree, rhd, rd, direct, ...
//   size    := bytes with an optional K, M, G or T suffix (powers of 1024), as parseByteSize reads
//
// How a term is read:
//   - A term is per-collective when the text before its first ':' is a collective name; when
//     that text starts with a digit the whole term is a (global) range list; any other text
//     before a ':' is an unknown collective.
//   - After the collective prefix, a body that contains a ':' is a range list, otherwise a plain
//     list. So `allreduce:ring,tree` is one allowed set and `allreduce:0-64K:rhd,64K-inf:ring`
//     two ranges; inside a range, alternatives are separated by '|' because ',' separates ranges.
//     Every item of a range list must be a range: `allreduce:0-64K:rhd,ring` is an error.
//   - '^' excludes: the set is every algorithm that serves the collective except those listed.
//   - Ranges are half-open [LO, HI); `inf` has no upper bound. The ranges of one term must not
//     overlap; a size no range covers is left to the tuner's own choice.
//   - A term without a collective (at most one) applies to every collective no other term names;
//     a per-collective term replaces it for that collective entirely. Each collective may be
//     named once.
//   - Send and receive are not overridable: allowed() never restricts them.
//
// Validation happens in parse(), never silently: an unknown algorithm or collective, a bad or
// overlapping range, an empty set, or a named algorithm that cannot serve a collective it is named
// for is an invalidArgument naming BRAID_ALGO and quoting the offending token. A global list
// simply does not apply an algorithm to a collective it cannot serve (`ring,pairwise` gives
// all-reduce ring and all-to-all pairwise), and a collective none of whose algorithms it names
// keeps the tuner's choice (`ring` alone leaves all-to-all alone), as NCCL_ALGO does.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "algorithms/plan.h"
#include "base/status.h"

namespace braid {

/// The parsed BRAID_ALGO value (grammar above). Immutable once parsed; cheap to query.
class AlgoOverride {
 public:
  /// No override: allowed() is unrestricted everywhere.
  AlgoOverride() = default;

  /// The collectives BRAID_ALGO can name: all-reduce .. all-to-all (not send / recv).
  static constexpr int kNumOverridable = static_cast<int>(Collective::kAllToAll) + 1;

  /// Parses a BRAID_ALGO value; "" (or only spaces and ';') means no override.
  static Result<AlgoOverride> parse(std::string_view text);

  /// The algorithms allowed for `coll` at a message of `bytes`, in enum order; an empty optional
  /// means no restriction (the tuner chooses among all algorithms that serve `coll`). A returned
  /// set is never empty and holds only algorithms that serve `coll`.
  std::optional<std::vector<Algorithm>> allowed(Collective coll, uint64_t bytes) const;

  /// Whether any collective is restricted at all.
  bool active() const;

  /// One line per overridable collective, e.g. "allreduce: 0-64K -> rhd; 64K-inf -> ring", for
  /// the BRAID_DEBUG=INFO log.
  std::string describe() const;

 private:
  /// One size range of one collective and its allowed algorithms (a bit per Algorithm).
  struct Range {
    uint64_t lo = 0;
    uint64_t hi = 0;    ///< exclusive; unused when toInf
    bool toInf = true;  ///< no upper bound
    uint32_t mask = 0;
  };

  /// Per collective, its ranges sorted by lo; empty means no override for it.
  std::array<std::vector<Range>, kNumOverridable> ranges_;
};

}  // namespace braid
