// Dispatch of the CPU kernels: the instruction-set level is chosen once, a Reducer binds its three
// functions at construction, and copies pick cached or streaming stores by size.
#include "kernels/cpu/reduce.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "base/dtype.h"
#include "kernels/cpu/halfs.h"
#include "kernels/cpu/kernel_table.h"

namespace braid::kernels {
namespace {

bool detectAvx2() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
}

// libgcc's CPU model also checks XCR0, so the OS must save the wide registers for these to pass.
bool detectAvx512() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
         __builtin_cpu_supports("f16c");
}

constexpr size_t kDefaultLastLevelCacheBytes = size_t{32} << 20;

/// Size of the largest cache cpu0 has, from sysfs (the instance a core shares, where sysconf may
/// report the sum over all of them); 0 if unknown.
size_t lastLevelCacheBytes() {
  size_t best = 0;
  int bestLevel = 0;
  for (int index = 0; index < 16; ++index) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index);
    std::ifstream levelFile(dir + "/level"), typeFile(dir + "/type"), sizeFile(dir + "/size");
    int level = 0;
    std::string type, size;
    if (!(levelFile >> level) || !(typeFile >> type) || !(sizeFile >> size)) break;
    if (type == "Instruction" || level < bestLevel || size.empty()) continue;
    size_t value = 0;
    size_t pos = 0;
    while (pos < size.size() && size[pos] >= '0' && size[pos] <= '9') {
      value = value * 10 + static_cast<size_t>(size[pos++] - '0');
    }
    const char unit = pos < size.size() ? size[pos] : 'B';
    value <<= unit == 'K' ? 10 : unit == 'M' ? 20 : unit == 'G' ? 30 : 0;
    best = value;
    bestLevel = level;
  }
  return best;
}

void reduceNothing(void*, const void*, const void*, size_t, int) {}
void finalizeNothing(void*, const void*, size_t, int) {}

}  // namespace

bool cpuIsaSupported(CpuIsa isa) {
  static const bool avx2 = detectAvx2();
  static const bool avx512 = detectAvx512();
  switch (isa) {
    case CpuIsa::kBaseline: return true;
    case CpuIsa::kAvx2: return avx2;
    case CpuIsa::kAvx512: return avx512;
  }
  return false;
}

CpuIsa bestCpuIsa() {
  static const CpuIsa best = cpuIsaSupported(CpuIsa::kAvx512) ? CpuIsa::kAvx512
                             : cpuIsaSupported(CpuIsa::kAvx2) ? CpuIsa::kAvx2
                                                              : CpuIsa::kBaseline;
  return best;
}

const char* cpuIsaName(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kBaseline: return "baseline";
    case CpuIsa::kAvx2: return "avx2";
    case CpuIsa::kAvx512: return "avx512";
  }
  return "unknown";
}

const KernelTable& kernelTable(CpuIsa isa) {
  if (!cpuIsaSupported(isa)) isa = bestCpuIsa();
  switch (isa) {
    case CpuIsa::kAvx512: return avx512Kernels();
    case CpuIsa::kAvx2: return avx2Kernels();
    case CpuIsa::kBaseline: break;
  }
  return baselineKernels();
}

const KernelTable& bestKernelTable() {
  static const KernelTable& table = kernelTable(bestCpuIsa());
  return table;
}

size_t streamingCopyThreshold() {
  // Non-temporal stores skip the read-for-ownership of the destination and leave the cache to
  // others, but the data is then in memory, not in cache, for whoever reads it next (in a
  // collective, often a peer on the same socket). So stream only when the copy's working set,
  // source plus destination, cannot stay in the last-level cache anyway
  // (docs/performance-notes.md#streaming-copies).
  static const size_t threshold = [] {
    const size_t llc = lastLevelCacheBytes();
    return (llc == 0 ? kDefaultLastLevelCacheBytes : llc) / 2;
  }();
  return threshold;
}

void copy(void* dst, const void* src, size_t bytes) {
  if (bytes == 0 || dst == src) return;
  if (bytes >= streamingCopyThreshold()) {
    bestKernelTable().copyStreaming(dst, src, bytes);
  } else {
    std::memcpy(dst, src, bytes);
  }
}

void copy2(void* dst1, void* dst2, const void* src, size_t bytes) {
  if (bytes == 0) return;
  // Three bytes touched per byte copied rather than two: the same working-set rule.
  if (bytes >= streamingCopyThreshold() / 3 * 2) {
    bestKernelTable().copy2Streaming(dst1, dst2, src, bytes);
  } else {
    // Two memcpys, not one pass that stores to both: a destination is often a FIFO slot whose
    // lines a peer's cache holds, and vector stores wait on each line's ownership where
    // memcpy's string moves do not (docs/performance-notes.md#copies-to-two-destinations).
    copy(dst1, src, bytes);
    copy(dst2, src, bytes);
  }
}

void copyStreaming(void* dst, const void* src, size_t bytes) {
  if (bytes == 0 || dst == src) return;
  bestKernelTable().copyStreaming(dst, src, bytes);
}

namespace {

// dst = operand(0) op operand(1) op ... op operand(n - 1), the last step finalized if asked.
template <typename Operand>
void reduceChain(const Reducer& reducer, char* dst, Operand operand, int n, size_t count,
                 bool finalize) {
  for (int k = 1; k < n; ++k) {
    const char* acc = k == 1 ? operand(0) : dst;
    if (finalize && k == n - 1) {
      reducer.reduceFinal(dst, acc, operand(k), count);
    } else {
      reducer.reduce(dst, acc, operand(k), count);
    }
  }
}

}  // namespace

void reduceAll(const Reducer& reducer, char* dst, const char* const* operands, int n, size_t count,
               bool finalize) {
  reduceChain(
      reducer, dst, [&](int k) { return operands[k]; }, n, count, finalize);
}

void reduceToAll(const Reducer& reducer, char* const* outputs, int noutputs, bool streamFirst,
                 const char* const* operands, int noperands, size_t bytes, bool finalize) {
  // Built well inside a core's first-level cache, then copied: reducing straight into a slot
  // whose lines a peer's cache holds waits on each line's ownership, as copy2() explains
  // (docs/performance-notes.md#staged-reductions).
  constexpr size_t kStageBytes = 16384;
  alignas(64) thread_local char stage[kStageBytes];
  for (size_t at = 0; at < bytes; at += kStageBytes) {
    const size_t n = std::min(kStageBytes, bytes - at);
    reduceChain(
        reducer, stage, [&](int k) { return operands[k] + at; }, noperands, n / reducer.elemSize(),
        finalize);
    for (int i = 0; i < noutputs; ++i) {
      if (streamFirst && i == 0) {
        copyStreaming(outputs[i] + at, stage, n);
      } else {
        std::memcpy(outputs[i] + at, stage, n);
      }
    }
  }
}

bool streamOutputs(size_t workingSetBytes) {
  return workingSetBytes >= 2 * streamingCopyThreshold();
}

Reducer::Reducer() : Reducer(braidFloat32, braidSum, 1) {}

Reducer::Reducer(braidDataType_t type, braidRedOp_t op, int nranks)
    : Reducer(type, op, nranks, bestCpuIsa()) {}

Reducer::Reducer(braidDataType_t type, braidRedOp_t op, int nranks, CpuIsa isa)
    : type_(type),
      op_(op),
      nranks_(nranks < 1 ? 1 : nranks),
      elemSize_(dataTypeSize(type)),
      valid_(isValidDataType(type) && isValidRedOp(op)),
      reduce_(&reduceNothing),
      reduceFinal_(&reduceNothing),
      finalize_(&finalizeNothing) {
  if (!valid_) return;
  const KernelTable& table = kernelTable(isa);
  reduce_ = table.reduce[type][op];
  reduceFinal_ = table.reduceFinal[type][op];
  finalize_ = table.finalize[type][op];
}

float halfToFloat(unsigned short h) { return halfs::halfToFloat(h); }
unsigned short floatToHalf(float f) { return halfs::floatToHalf(f); }
float bfloat16ToFloat(unsigned short b) { return halfs::bfloat16ToFloat(b); }
unsigned short floatToBfloat16(float f) { return halfs::floatToBfloat16(f); }

}  // namespace braid::kernels
