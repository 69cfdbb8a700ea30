#include "topology/cpu_set.h"

#include <algorithm>
#include <bit>
#include <cstdlib>

namespace braid {

namespace {
constexpr int kWordBits = 64;
// Bounds a parsed list so a corrupt file cannot make us allocate gigabytes.
constexpr int kMaxCpuNumber = 1 << 20;
}  // namespace

CpuSet CpuSet::of(const std::vector<int>& cpus) {
  CpuSet s;
  for (int c : cpus) s.set(c);
  return s;
}

CpuSet CpuSet::range(int first, int last) {
  CpuSet s;
  for (int c = first; c <= last; ++c) s.set(c);
  return s;
}

Result<CpuSet> CpuSet::parseList(const std::string& text) {
  CpuSet s;
  size_t pos = 0;
  auto parseNumber = [&](int* out) -> bool {
    size_t start = pos;
    long v = 0;
    while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') {
      v = v * 10 + (text[pos] - '0');
      if (v > kMaxCpuNumber) return false;
      ++pos;
    }
    *out = static_cast<int>(v);
    return pos > start;
  };
  // Trailing newline and spaces are common in sysfs files.
  size_t end = text.find_last_not_of(" \t\r\n");
  const size_t length = end == std::string::npos ? 0 : end + 1;
  while (pos < length) {
    int first = 0;
    if (!parseNumber(&first)) return invalidArgument("bad CPU list '" + text + "'");
    int last = first;
    if (pos < length && text[pos] == '-') {
      ++pos;
      if (!parseNumber(&last) || last < first)
        return invalidArgument("bad CPU list '" + text + "'");
    }
    for (int c = first; c <= last; ++c) s.set(c);
    if (pos < length) {
      if (text[pos] != ',') return invalidArgument("bad CPU list '" + text + "'");
      ++pos;
    }
  }
  return s;
}

void CpuSet::set(int cpu) {
  if (cpu < 0) return;
  const size_t w = static_cast<size_t>(cpu / kWordBits);
  if (words_.size() <= w) words_.resize(w + 1, 0);
  words_[w] |= uint64_t{1} << (cpu % kWordBits);
}

void CpuSet::clear(int cpu) {
  if (cpu < 0) return;
  const size_t w = static_cast<size_t>(cpu / kWordBits);
  if (w >= words_.size()) return;
  words_[w] &= ~(uint64_t{1} << (cpu % kWordBits));
  trim();
}

bool CpuSet::test(int cpu) const {
  if (cpu < 0) return false;
  const size_t w = static_cast<size_t>(cpu / kWordBits);
  return w < words_.size() && (words_[w] >> (cpu % kWordBits)) & 1;
}

bool CpuSet::empty() const { return words_.empty(); }

int CpuSet::count() const {
  int n = 0;
  for (uint64_t w : words_) n += std::popcount(w);
  return n;
}

int CpuSet::first() const {
  for (size_t w = 0; w < words_.size(); ++w) {
    if (words_[w] != 0) return static_cast<int>(w) * kWordBits + std::countr_zero(words_[w]);
  }
  return -1;
}

std::vector<int> CpuSet::toVector() const {
  std::vector<int> out;
  for (size_t w = 0; w < words_.size(); ++w) {
    uint64_t bits = words_[w];
    while (bits != 0) {
      out.push_back(static_cast<int>(w) * kWordBits + std::countr_zero(bits));
      bits &= bits - 1;
    }
  }
  return out;
}

std::string CpuSet::toList() const {
  std::string out;
  const std::vector<int> cpus = toVector();
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(cpus[i]);
    if (j > i) out += '-' + std::to_string(cpus[j]);
    i = j + 1;
  }
  return out;
}

bool CpuSet::isSubsetOf(const CpuSet& other) const {
  for (size_t w = 0; w < words_.size(); ++w) {
    const uint64_t theirs = w < other.words_.size() ? other.words_[w] : 0;
    if ((words_[w] & ~theirs) != 0) return false;
  }
  return true;
}

bool CpuSet::intersects(const CpuSet& other) const {
  const size_t n = std::min(words_.size(), other.words_.size());
  for (size_t w = 0; w < n; ++w) {
    if ((words_[w] & other.words_[w]) != 0) return true;
  }
  return false;
}

CpuSet CpuSet::operator&(const CpuSet& other) const {
  CpuSet out;
  out.words_.resize(std::min(words_.size(), other.words_.size()));
  for (size_t w = 0; w < out.words_.size(); ++w) out.words_[w] = words_[w] & other.words_[w];
  out.trim();
  return out;
}

CpuSet CpuSet::operator|(const CpuSet& other) const {
  CpuSet out = *this;
  out |= other;
  return out;
}

CpuSet& CpuSet::operator|=(const CpuSet& other) {
  if (words_.size() < other.words_.size()) words_.resize(other.words_.size(), 0);
  for (size_t w = 0; w < other.words_.size(); ++w) words_[w] |= other.words_[w];
  return *this;
}

bool CpuSet::operator==(const CpuSet& other) const { return words_ == other.words_; }

void CpuSet::trim() {
  while (!words_.empty() && words_.back() == 0) words_.pop_back();
}

}  // namespace braid
