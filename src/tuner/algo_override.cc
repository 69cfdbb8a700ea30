#include "tuner/algo_override.h"

#include <algorithm>
#include <cctype>
#include <utility>

#include "algorithms/algorithms.h"
#include "base/config.h"
#include "base/text.h"

namespace braid {
namespace {

static_assert(kNumAlgorithms <= 32, "algorithm sets are 32-bit masks");

constexpr std::string_view kVar = "BRAID_ALGO";

uint32_t bit(Algorithm a) { return 1u << static_cast<int>(a); }

/// Splits on any of `seps`, keeping empty pieces (so that "a,,b" can be reported).
std::vector<std::string_view> split(std::string_view s, std::string_view seps) {
  std::vector<std::string_view> out;
  size_t start = 0;
  for (size_t i = 0; i <= s.size(); ++i) {
    if (i == s.size() || seps.find(s[i]) != std::string_view::npos) {
      out.push_back(s.substr(start, i - start));
      start = i + 1;
    }
  }
  return out;
}

Status error(const std::string& what, std::string_view term) {
  return invalidArgument(std::string(kVar) + ": " + what + " in '" + std::string(term) + "'");
}

std::string quoted(std::string_view s) { return "'" + std::string(s) + "'"; }

std::string knownAlgorithms() {
  std::string out;
  for (int a = 0; a < kNumAlgorithms; ++a) {
    if (a) out += ", ";
    out += algorithmName(static_cast<Algorithm>(a));
  }
  return out;
}

std::string maskNames(uint32_t mask, std::string_view sep = ", ") {
  std::string out;
  for (int a = 0; a < kNumAlgorithms; ++a) {
    if (!(mask & (1u << a))) continue;
    if (!out.empty()) out += sep;
    out += algorithmName(static_cast<Algorithm>(a));
  }
  return out;
}

std::string servedBy(uint32_t mask) { return mask ? maskNames(mask) : "none yet"; }

uint32_t servesMask(Collective coll) {
  uint32_t mask = 0;
  for (int a = 0; a < kNumAlgorithms; ++a) {
    if (algorithmServes(static_cast<Algorithm>(a), coll)) mask |= 1u << a;
  }
  return mask;
}

std::optional<Algorithm> algorithmByName(std::string_view name) {
  const std::string l = lowerCase(name);
  for (int a = 0; a < kNumAlgorithms; ++a) {
    if (algorithmName(static_cast<Algorithm>(a)) == l) return static_cast<Algorithm>(a);
  }
  return std::nullopt;
}

std::optional<Collective> collectiveByName(std::string_view name) {
  const std::string l = lowerCase(name);
  for (int c = 0; c < AlgoOverride::kNumOverridable; ++c) {
    if (collectiveName(static_cast<Collective>(c)) == l) return static_cast<Collective>(c);
  }
  if (l == "all_reduce") return Collective::kAllReduce;
  if (l == "all_gather") return Collective::kAllGather;
  if (l == "reduce_scatter") return Collective::kReduceScatter;
  if (l == "all_to_all") return Collective::kAllToAll;
  return std::nullopt;
}

std::string knownCollectives() {
  std::string out;
  for (int c = 0; c < AlgoOverride::kNumOverridable; ++c) {
    if (c) out += ", ";
    out += collectiveName(static_cast<Collective>(c));
  }
  return out;
}

std::string sizeText(uint64_t bytes) {
  static constexpr std::array<std::pair<int, char>, 4> kUnits = {
      {{40, 'T'}, {30, 'G'}, {20, 'M'}, {10, 'K'}}};
  for (const auto& [shift, suffix] : kUnits) {
    const uint64_t unit = 1ull << shift;
    if (bytes >= unit && bytes % unit == 0) return std::to_string(bytes / unit) + suffix;
  }
  return std::to_string(bytes);
}

/// One item of a term as written, before it is applied to a collective.
struct Item {
  uint64_t lo = 0;
  uint64_t hi = 0;
  bool toInf = true;
  bool exclude = false;
  uint32_t named = 0;     ///< the algorithms written
  std::string_view text;  ///< the algorithm list as written, for messages
};

/// A term: its collective (none: global) and items sorted by lo.
struct Term {
  std::optional<Collective> coll;
  std::vector<Item> items;
  std::string_view text;
};

/// `['^'] name (sep name)*` into item.exclude / item.named.
Status parseAlgorithms(std::string_view list, std::string_view seps, std::string_view term,
                       Item& item) {
  list = trimSpace(list);
  item.text = list;
  if (!list.empty() && list.front() == '^') {
    item.exclude = true;
    list = trimSpace(list.substr(1));
  }
  if (list.empty()) return error("empty algorithm list " + quoted(item.text), term);
  for (std::string_view piece : split(list, seps)) {
    const std::string_view name = trimSpace(piece);
    if (name.empty()) return error("empty algorithm name in list " + quoted(item.text), term);
    std::optional<Algorithm> algo = algorithmByName(name);
    if (!algo) {
      return invalidArgument(std::string(kVar) + ": unknown algorithm " + quoted(name) + " in " +
                             quoted(term) + " (known: " + knownAlgorithms() + ")");
    }
    item.named |= bit(*algo);
  }
  return okStatus();
}

/// `LO-HI:ALGOS` into item.
Status parseRange(std::string_view text, std::string_view term, Item& item) {
  const size_t colon = text.find(':');
  if (colon == std::string_view::npos) {
    return error("expected LO-HI:ALGOS, got " + quoted(trimSpace(text)) +
                     " (a list with size ranges must give a range for every item)",
                 term);
  }
  const std::string_view range = trimSpace(text.substr(0, colon));
  const size_t dash = range.find('-');
  if (dash == std::string_view::npos) {
    return error("bad range " + quoted(range) + " (expected LO-HI, e.g. 0-64K or 1M-inf)", term);
  }
  const std::string_view loText = trimSpace(range.substr(0, dash));
  const std::string_view hiText = trimSpace(range.substr(dash + 1));
  Result<uint64_t> lo = parseByteSize(loText);
  if (!lo.ok()) {
    return error("bad size " + quoted(loText) + " in range " + quoted(range) + " (" +
                     lo.status().message() + ")",
                 term);
  }
  item.lo = lo.value();
  if (lowerCase(hiText) == "inf") {
    item.toInf = true;
  } else {
    Result<uint64_t> hi = parseByteSize(hiText);
    if (!hi.ok()) {
      return error("bad size " + quoted(hiText) + " in range " + quoted(range) + " (" +
                       hi.status().message() + "; or 'inf')",
                   term);
    }
    item.toInf = false;
    item.hi = hi.value();
    if (item.hi <= item.lo) {
      return error("empty range " + quoted(range) + " (ranges are [LO, HI) with LO < HI)", term);
    }
  }
  return parseAlgorithms(text.substr(colon + 1), "|", term, item);
}

Result<Term> parseTerm(std::string_view text) {
  Term term;
  term.text = text;
  std::string_view body = text;
  const size_t colon = text.find(':');
  if (colon != std::string_view::npos) {
    const std::string_view prefix = trimSpace(text.substr(0, colon));
    if (std::optional<Collective> coll = collectiveByName(prefix)) {
      term.coll = coll;
      body = trimSpace(text.substr(colon + 1));
    } else if (prefix.empty() || !std::isdigit(static_cast<unsigned char>(prefix.front()))) {
      return invalidArgument(std::string(kVar) + ": unknown collective " + quoted(prefix) + " in " +
                             quoted(text) + " (known: " + knownCollectives() + ")");
    }
  }
  if (body.find(':') == std::string_view::npos) {
    Item item;
    RETURN_IF_ERROR(parseAlgorithms(body, ",|", text, item));
    term.items.push_back(item);
    return term;
  }
  for (std::string_view piece : split(body, ",")) {
    Item item;
    RETURN_IF_ERROR(parseRange(piece, text, item));
    term.items.push_back(item);
  }
  std::sort(term.items.begin(), term.items.end(),
            [](const Item& a, const Item& b) { return a.lo < b.lo; });
  for (size_t i = 1; i < term.items.size(); ++i) {
    const Item& prev = term.items[i - 1];
    if (prev.toInf || prev.hi > term.items[i].lo) {
      auto rangeText = [](const Item& it) {
        return sizeText(it.lo) + "-" + (it.toInf ? std::string("inf") : sizeText(it.hi));
      };
      return error("overlapping ranges " + quoted(rangeText(prev)) + " and " +
                       quoted(rangeText(term.items[i])),
                   text);
    }
  }
  return term;
}

}  // namespace

Result<AlgoOverride> AlgoOverride::parse(std::string_view text) {
  std::optional<Term> global;
  std::array<std::optional<Term>, kNumOverridable> own;
  for (std::string_view piece : split(text, ";")) {
    piece = trimSpace(piece);
    if (piece.empty()) continue;
    ASSIGN_OR_RETURN(Term term, parseTerm(piece));
    if (!term.coll) {
      if (global) {
        return invalidArgument(std::string(kVar) + ": two terms without a collective, " +
                               quoted(global->text) + " and " + quoted(term.text));
      }
      global = std::move(term);
      continue;
    }
    std::optional<Term>& slot = own[static_cast<int>(*term.coll)];
    if (slot) {
      return invalidArgument(std::string(kVar) + ": " + std::string(collectiveName(*term.coll)) +
                             " is named twice, in " + quoted(slot->text) + " and " +
                             quoted(term.text));
    }
    slot = std::move(term);
  }

  AlgoOverride result;
  for (int c = 0; c < kNumOverridable; ++c) {
    const Collective coll = static_cast<Collective>(c);
    const std::string collText(collectiveName(coll));
    const bool isExplicit = own[c].has_value();
    const Term* term = isExplicit ? &*own[c] : (global ? &*global : nullptr);
    if (!term) continue;
    const uint32_t serving = servesMask(coll);
    for (const Item& item : term->items) {
      Range range{item.lo, item.hi, item.toInf, 0};
      if (item.exclude) {
        range.mask = serving & ~item.named;
      } else if (isExplicit) {
        if (const uint32_t unfit = item.named & ~serving) {
          const bool several = (unfit & (unfit - 1)) != 0;
          return error(std::string(several ? "algorithms " : "algorithm ") +
                           quoted(maskNames(unfit, "', '")) + " cannot serve " + collText +
                           " (served by: " + servedBy(serving) + ")",
                       term->text);
        }
        range.mask = item.named;
      } else {
        range.mask = item.named & serving;
      }
      if (range.mask == 0) {
        const std::string what =
            (item.exclude ? quoted(item.text) + " leaves no algorithm for " + collText
                          : "no algorithm in " + quoted(item.text) + " serves " + collText) +
            " (served by: " + servedBy(serving) + ")";
        // A global list (NCCL_ALGO style) restricts only the collectives it can serve: with
        // BRAID_ALGO=ring, all-to-all keeps its own algorithms.
        if (!isExplicit && !item.exclude) continue;
        return error(what, term->text);
      }
      result.ranges_[c].push_back(range);
    }
  }
  return result;
}

std::optional<std::vector<Algorithm>> AlgoOverride::allowed(Collective coll, uint64_t bytes) const {
  const int c = static_cast<int>(coll);
  if (c < 0 || c >= kNumOverridable) return std::nullopt;
  for (const Range& r : ranges_[c]) {
    if (bytes < r.lo || (!r.toInf && bytes >= r.hi)) continue;
    std::vector<Algorithm> out;
    for (int a = 0; a < kNumAlgorithms; ++a) {
      if (r.mask & (1u << a)) out.push_back(static_cast<Algorithm>(a));
    }
    return out;
  }
  return std::nullopt;
}

bool AlgoOverride::active() const {
  return std::any_of(ranges_.begin(), ranges_.end(), [](const auto& v) { return !v.empty(); });
}

std::string AlgoOverride::describe() const {
  std::string out;
  for (int c = 0; c < kNumOverridable; ++c) {
    if (c) out += '\n';
    out += collectiveName(static_cast<Collective>(c));
    out += ": ";
    const std::vector<Range>& ranges = ranges_[c];
    if (ranges.empty()) {
      out += "tuner's choice (no override)";
      continue;
    }
    if (ranges.size() == 1 && ranges[0].lo == 0 && ranges[0].toInf) {
      out += maskNames(ranges[0].mask);
      continue;
    }
    // Ranges are sorted and disjoint: any gap is left to the tuner.
    bool gaps = ranges.front().lo != 0 || !ranges.back().toInf;
    for (size_t i = 0; i < ranges.size(); ++i) {
      const Range& r = ranges[i];
      if (i) {
        out += "; ";
        gaps = gaps || ranges[i - 1].hi != r.lo;
      }
      out += sizeText(r.lo) + "-" + (r.toInf ? std::string("inf") : sizeText(r.hi)) + " -> " +
             maskNames(r.mask, "|");
    }
    if (gaps) out += "; other sizes -> tuner's choice";
  }
  return out;
}

}  // namespace braid
