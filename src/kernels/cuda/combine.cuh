// The data loops of the CUDA kernels: combine up to kMaxStepOperands inputs into up to
// kMaxStepOutputs outputs, element-wise, by a group of threads (one block in the executor, a whole
// grid in the stand-alone kernels).
//
// out[j][i] = in[0][i] ⊕ in[1][i] ⊕ ... (folded left to right, each combination rounded to the
// storage type, Avg's division applied to the last one), or a plain copy of in[0] when nothing
// reduces. Each element is read from every input before it is written to any output, so an output
// may be the same buffer as an input (in place), never a partial overlap.
//
// When all pointers share their offset modulo 16 the bulk moves as 16-byte vectors, kUnroll of
// them in flight per thread and operand; a few head and tail elements go one at a time. Other
// alignments fall back to element (or, for copies, the widest common word) loops. Every load
// bypasses L1 (ld.global.cg): FIFO slots are rewritten by other processes while a kernel runs,
// and a stale L1 line would return old data.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/combine_args.h"
#include "kernels/cuda/device_abi.h"
#include "kernels/cuda/device_ops.cuh"

namespace braid::gpu {

/// The threads that share one loop: thread `index` of `count`.
struct ThreadRange {
  uint32_t index;
  uint32_t count;
};

constexpr int kUnroll = 4;
constexpr size_t kPackBytes = 16;

// ---- Loads and stores that bypass L1.

template <class S>
__device__ inline S loadCg(const S* p) {
  if constexpr (sizeof(S) == 1) {
    return static_cast<S>(__ldcg(reinterpret_cast<const unsigned char*>(p)));
  } else if constexpr (sizeof(S) == 2) {
    return static_cast<S>(__ldcg(reinterpret_cast<const unsigned short*>(p)));
  } else if constexpr (sizeof(S) == 4) {
    const unsigned int bits = __ldcg(reinterpret_cast<const unsigned int*>(p));
    S value;
    memcpy(&value, &bits, 4);
    return value;
  } else {
    static_assert(sizeof(S) == 8);
    const unsigned long long bits = __ldcg(reinterpret_cast<const unsigned long long*>(p));
    S value;
    memcpy(&value, &bits, 8);
    return value;
  }
}

/// An element at byte address p, which may be misaligned for S.
template <class S>
__device__ inline S loadElement(const char* p, bool aligned) {
  if (aligned) return loadCg(reinterpret_cast<const S*>(p));
  unsigned char bytes[sizeof(S)];
  for (size_t b = 0; b < sizeof(S); ++b)
    bytes[b] = __ldcg(reinterpret_cast<const unsigned char*>(p + b));
  S value;
  memcpy(&value, bytes, sizeof(S));
  return value;
}

template <class S>
__device__ inline void storeElement(char* p, S value, bool aligned) {
  if (aligned) {
    *reinterpret_cast<S*>(p) = value;
    return;
  }
  unsigned char bytes[sizeof(S)];
  memcpy(bytes, &value, sizeof(S));
  for (size_t b = 0; b < sizeof(S); ++b) p[b] = static_cast<char>(bytes[b]);
}

// ---- One element and one pack.

template <class Ty, class Op>
__device__ inline typename Ty::Storage combineOne(typename Ty::Storage acc, typename Ty::Storage x,
                                                  bool divide, int nranks) {
  auto v = Op::apply(Ty::load(acc), Ty::load(x));
  if (divide) v = avgDivide<typename Ty::Compute>(v, nranks);
  return Ty::store(v);
}

template <class Ty>
__device__ inline typename Ty::Storage finalizeOne(typename Ty::Storage x, int nranks) {
  return Ty::store(avgDivide<typename Ty::Compute>(Ty::load(x), nranks));
}

template <class S>
union Pack {
  uint4 vector;
  S elements[kPackBytes / sizeof(S)];
};

template <class Ty, class Op>
__device__ inline uint4 combinePack(uint4 acc, uint4 x, bool divide, int nranks) {
  using S = typename Ty::Storage;
  Pack<S> a, b;
  a.vector = acc;
  b.vector = x;
#pragma unroll
  for (size_t e = 0; e < kPackBytes / sizeof(S); ++e) {
    a.elements[e] = combineOne<Ty, Op>(a.elements[e], b.elements[e], divide, nranks);
  }
  return a.vector;
}

template <class Ty>
__device__ inline uint4 finalizePack(uint4 x, int nranks) {
  using S = typename Ty::Storage;
  Pack<S> a;
  a.vector = x;
#pragma unroll
  for (size_t e = 0; e < kPackBytes / sizeof(S); ++e)
    a.elements[e] = finalizeOne<Ty>(a.elements[e], nranks);
  return a.vector;
}

// ---- Loops. kIn / kOut fix the operand counts at compile time (0: take them from the args).

/// Elements [begin, end) one at a time.
template <class Ty, class Op>
__device__ void combineElements(const CombineArgs& a, size_t begin, size_t end, bool aligned,
                                ThreadRange t) {
  using S = typename Ty::Storage;
  for (size_t i = begin + t.index; i < end; i += t.count) {
    const size_t at = i * sizeof(S);
    S acc = loadElement<S>(a.in[0] + at, aligned);
    if (a.reduce) {
      for (int k = 1; k < a.nin; ++k) {
        acc = combineOne<Ty, Op>(acc, loadElement<S>(a.in[k] + at, aligned),
                                 a.final && k == a.nin - 1, a.nranks);
      }
    } else if (a.final) {
      acc = finalizeOne<Ty>(acc, a.nranks);
    }
    for (int o = 0; o < a.nout; ++o) storeElement<S>(a.out[o] + at, acc, aligned);
  }
}

/// npacks 16-byte packs starting at byte `offset` of every pointer (all 16-byte aligned there).
template <class Ty, class Op, int kIn, int kOut>
__device__ void combinePacks(const CombineArgs& a, size_t offset, size_t npacks, ThreadRange t) {
  const int nin = kIn > 0 ? kIn : a.nin;
  const int nout = kOut > 0 ? kOut : a.nout;
  const size_t stride = static_cast<size_t>(t.count) * kUnroll;
  for (size_t base = t.index; base < npacks; base += stride) {
    uint4 acc[kUnroll] = {};
    const uint4* in0 = reinterpret_cast<const uint4*>(a.in[0] + offset);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const size_t p = base + static_cast<size_t>(u) * t.count;
      if (p < npacks) acc[u] = __ldcg(in0 + p);
    }
    if (a.reduce) {
      // Unrolled only when the count is fixed: the generic loop stays small to compile.
#pragma unroll(kIn > 0 ? kIn : 1)
      for (int k = 1; k < nin; ++k) {
        const uint4* ink = reinterpret_cast<const uint4*>(a.in[k] + offset);
        uint4 x[kUnroll] = {};
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
          const size_t p = base + static_cast<size_t>(u) * t.count;
          if (p < npacks) x[u] = __ldcg(ink + p);
        }
        const bool divide = a.final && k == nin - 1;
#pragma unroll
        for (int u = 0; u < kUnroll; ++u)
          acc[u] = combinePack<Ty, Op>(acc[u], x[u], divide, a.nranks);
      }
    } else if (a.final) {
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) acc[u] = finalizePack<Ty>(acc[u], a.nranks);
    }
#pragma unroll(kOut > 0 ? kOut : 1)
    for (int o = 0; o < nout; ++o) {
      uint4* out = reinterpret_cast<uint4*>(a.out[o] + offset);
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const size_t p = base + static_cast<size_t>(u) * t.count;
        if (p < npacks) out[p] = acc[u];
      }
    }
  }
}

/// OR of every pointer's address, and OR of each pointer's difference from in[0].
__device__ inline void alignmentOf(const CombineArgs& a, int nin, uintptr_t& all, uintptr_t& diff) {
  const uintptr_t p0 = reinterpret_cast<uintptr_t>(a.in[0]);
  all = p0;
  diff = 0;
  for (int k = 1; k < nin; ++k) {
    all |= reinterpret_cast<uintptr_t>(a.in[k]);
    diff |= reinterpret_cast<uintptr_t>(a.in[k]) ^ p0;
  }
  for (int o = 0; o < a.nout; ++o) {
    all |= reinterpret_cast<uintptr_t>(a.out[o]);
    diff |= reinterpret_cast<uintptr_t>(a.out[o]) ^ p0;
  }
}

/// Combines a.count elements of type Ty with Op (see CombineArgs).
template <class Ty, class Op, int kIn = 0, int kOut = 0>
__device__ void combineTyped(const CombineArgs& a, ThreadRange t) {
  using S = typename Ty::Storage;
  const int nin = a.reduce ? a.nin : 1;
  uintptr_t all = 0, diff = 0;
  alignmentOf(a, nin, all, diff);
  const bool aligned = (all & (sizeof(S) - 1)) == 0;
  const uintptr_t p0 = reinterpret_cast<uintptr_t>(a.in[0]);
  const size_t headBytes = (kPackBytes - (p0 & (kPackBytes - 1))) & (kPackBytes - 1);
  if ((diff & (kPackBytes - 1)) != 0 || !aligned || headBytes % sizeof(S) != 0) {
    combineElements<Ty, Op>(a, 0, a.count, aligned, t);
    return;
  }
  const size_t head = headBytes / sizeof(S) < a.count ? headBytes / sizeof(S) : a.count;
  const size_t perPack = kPackBytes / sizeof(S);
  const size_t npacks = (a.count - head) / perPack;
  const size_t bodyEnd = head + npacks * perPack;
  combineElements<Ty, Op>(a, 0, head, true, t);
  combinePacks<Ty, Op, kIn, kOut>(a, head * sizeof(S), npacks, t);
  combineElements<Ty, Op>(a, bodyEnd, a.count, true, t);
}

// ---- Plain copies (type-agnostic): in[0] to every output, in the widest common word.

template <class W>
__device__ void copyWords(const CombineArgs& a, size_t offset, size_t nwords, ThreadRange t) {
  const size_t stride = static_cast<size_t>(t.count) * kUnroll;
  const W* in = reinterpret_cast<const W*>(a.in[0] + offset);
  for (size_t base = t.index; base < nwords; base += stride) {
    W v[kUnroll] = {};
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const size_t p = base + static_cast<size_t>(u) * t.count;
      if (p < nwords) v[u] = __ldcg(in + p);
    }
    for (int o = 0; o < a.nout; ++o) {
      W* out = reinterpret_cast<W*>(a.out[o] + offset);
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const size_t p = base + static_cast<size_t>(u) * t.count;
        if (p < nwords) out[p] = v[u];
      }
    }
  }
}

template <class W>
__device__ void copyAligned(const CombineArgs& a, size_t bytes, ThreadRange t) {
  const uintptr_t p0 = reinterpret_cast<uintptr_t>(a.in[0]);
  size_t head = (sizeof(W) - (p0 & (sizeof(W) - 1))) & (sizeof(W) - 1);
  if (head > bytes) head = bytes;
  const size_t nwords = (bytes - head) / sizeof(W);
  const size_t tail = head + nwords * sizeof(W);
  copyWords<unsigned char>(a, 0, head, t);
  copyWords<W>(a, head, nwords, t);
  copyWords<unsigned char>(a, tail, bytes - tail, t);
}

/// Copies `bytes` bytes of in[0] to every output.
__device__ inline void copyBytes(const CombineArgs& a, size_t bytes, ThreadRange t) {
  uintptr_t all = 0, diff = 0;
  alignmentOf(a, 1, all, diff);
  if ((diff & 15) == 0) {
    copyAligned<uint4>(a, bytes, t);
  } else if ((diff & 7) == 0) {
    copyAligned<unsigned long long>(a, bytes, t);
  } else if ((diff & 3) == 0) {
    copyAligned<unsigned int>(a, bytes, t);
  } else if ((diff & 1) == 0) {
    copyAligned<unsigned short>(a, bytes, t);
  } else {
    copyWords<unsigned char>(a, 0, bytes, t);
  }
}

}  // namespace braid::gpu
