// The copy and reduce loops, compiled once per instruction-set level.
//
// Deliberately without an include guard: each reduce_<level>.cc includes every header this file
// needs, defines BRAID_KERNEL_LEVEL (the namespace to put the loops in) and BRAID_KERNEL_WIDTH,
// opens `#pragma GCC target(...)` and then includes this file. Everything here has internal
// linkage, so the linker can never pick a wide-ISA copy of a function for a caller on a narrower
// CPU; the shared headers come before the pragma for the same reason (their inline functions stay
// baseline and are inlined into the wider loops, which GCC allows). The one exception is
// kernels/reduce_ops.h, the element operators shared with the CUDA kernels, included below: they
// are applied to vectors of the level's width and must be compiled for it (a baseline body gives
// their comparisons a type that AVX-512 code then takes apart lane by lane), and they are always
// inlined, so no wide-ISA copy of them exists.
//
// Plain loops are left to GCC's auto-vectoriser (checked with -fopt-info-vec, by disassembly and
// in reduce_benchmark.cc). `#pragma GCC ivdep` is correct because dst may alias a source only
// exactly, which is no loop-carried dependence; it spares the run-time overlap test that would
// otherwise send in-place calls down a scalar path. Elements are loaded and stored through memcpy
// so that no pointer needs any alignment. Float16 uses the F16C / AVX-512 conversion instructions
// where the level has them; bfloat16, and float16 on the baseline, use the bit tricks of halfs.h,
// which vectorise.

// The level is told by BRAID_KERNEL_WIDTH (128, 256 or 512 bits) rather than by __AVX2__ and
// friends: in C++ `#pragma GCC target` does not update the preprocessor's ISA macros.
#if !defined(BRAID_KERNEL_LEVEL) || !defined(BRAID_KERNEL_WIDTH)
#error "define BRAID_KERNEL_LEVEL and BRAID_KERNEL_WIDTH before including reduce_kernels_impl.h"
#endif

#include "kernels/reduce_ops.h"

namespace braid::kernels::BRAID_KERNEL_LEVEL {
namespace {

// A local helper rather than std::min, whose instantiation would be shared with other files.
inline size_t minBytes(size_t a, size_t b) { return a < b ? a : b; }

template <class T>
inline T loadAt(const std::byte* p, size_t i) {
  T x;
  std::memcpy(&x, p + i * sizeof(T), sizeof(T));
  return x;
}

template <class T>
inline void storeAt(std::byte* p, size_t i, T x) {
  std::memcpy(p + i * sizeof(T), &x, sizeof(T));
}

// ---- Element operations: SumOp, ProdOp, MaxOp, MinOp and avgDivide (kernels/reduce_ops.h).

/// The post-operation of every combination but Avg's last.
struct NoPost {
  template <class V>
  V operator()(V x) const {
    return x;
  }
};

/// Avg's last combination: the division by nranks in the compute type S.
template <class S>
struct AvgPost {
  AvgDivisor<S> divisor;
  template <class V>
  V operator()(V x) const {
    return avgDivide<S>(x, divisor);
  }
};

template <class S>
AvgPost<S> avgPost(int nranks) {
  return {static_cast<AvgDivisor<S>>(nranks)};
}

// ---- Native element types (integers, float, double).

template <class T, class Op, class Post>
inline void binaryLoop(void* dst, const void* a, const void* b, size_t n, Post post) {
  auto* d = static_cast<std::byte*>(dst);
  const auto* pa = static_cast<const std::byte*>(a);
  const auto* pb = static_cast<const std::byte*>(b);
#pragma GCC ivdep
  for (size_t i = 0; i < n; ++i) {
    storeAt<T>(d, i, post(Op::apply(loadAt<T>(pa, i), loadAt<T>(pb, i))));
  }
}

template <class T, class Post>
inline void unaryLoop(void* dst, const void* src, size_t n, Post post) {
  auto* d = static_cast<std::byte*>(dst);
  const auto* s = static_cast<const std::byte*>(src);
#pragma GCC ivdep
  for (size_t i = 0; i < n; ++i) storeAt<T>(d, i, post(loadAt<T>(s, i)));
}

// ---- 16-bit floats: widened to float, combined, rounded back once.

struct HalfFormat {
  static float toFloat(uint16_t h) { return halfs::halfToFloat(h); }
  static uint16_t fromFloat(float f) { return halfs::floatToHalf(f); }
};

struct Bfloat16Format {
  static float toFloat(uint16_t h) { return halfs::bfloat16ToFloat(h); }
  static uint16_t fromFloat(float f) { return halfs::floatToBfloat16(f); }
};

template <class Fmt, class Op, class Post>
inline void binaryLoop16(void* dst, const void* a, const void* b, size_t n, Post post) {
  auto* d = static_cast<std::byte*>(dst);
  const auto* pa = static_cast<const std::byte*>(a);
  const auto* pb = static_cast<const std::byte*>(b);
#pragma GCC ivdep
  for (size_t i = 0; i < n; ++i) {
    const float x = Fmt::toFloat(loadAt<uint16_t>(pa, i));
    const float y = Fmt::toFloat(loadAt<uint16_t>(pb, i));
    storeAt<uint16_t>(d, i, Fmt::fromFloat(post(Op::apply(x, y))));
  }
}

template <class Fmt, class Post>
inline void unaryLoop16(void* dst, const void* src, size_t n, Post post) {
  auto* d = static_cast<std::byte*>(dst);
  const auto* s = static_cast<const std::byte*>(src);
#pragma GCC ivdep
  for (size_t i = 0; i < n; ++i) {
    storeAt<uint16_t>(d, i, Fmt::fromFloat(post(Fmt::toFloat(loadAt<uint16_t>(s, i)))));
  }
}

// Hardware float16 conversion, a vector of floats at a time. _MM_FROUND_TO_NEAREST_INT is round to
// nearest even; NaNs come out quiet with their payload's top bits, as halfs::floatToHalf does.
#if BRAID_KERNEL_WIDTH >= 512
#define BRAID_HALF_VECTORS 1
struct HalfVectors {
  using V = __m512;
  static constexpr size_t kLanes = 16;
  static V load(const std::byte* p) {
    // The masked forms with every lane selected compile to the same instructions; the unmasked
    // intrinsics trip a false -Wmaybe-uninitialized inside GCC 12's own headers.
    return _mm512_maskz_cvtph_ps(0xFFFF, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static void store(std::byte* p, V v) {
    _mm256_storeu_si256(
        reinterpret_cast<__m256i*>(p),
        _mm512_maskz_cvtps_ph(0xFFFF, v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
};
#elif BRAID_KERNEL_WIDTH >= 256
#define BRAID_HALF_VECTORS 1
struct HalfVectors {
  using V = __m256;
  static constexpr size_t kLanes = 8;
  static V load(const std::byte* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static void store(std::byte* p, V v) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p),
                     _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
};
#endif

template <class Op, class Post>
void binaryHalf(void* dst, const void* a, const void* b, size_t n, Post post) {
#ifdef BRAID_HALF_VECTORS
  using HV = HalfVectors;
  constexpr size_t kLanes = HV::kLanes;
  auto* d = static_cast<std::byte*>(dst);
  const auto* pa = static_cast<const std::byte*>(a);
  const auto* pb = static_cast<const std::byte*>(b);
  size_t i = 0;
  for (; i + 2 * kLanes <= n; i += 2 * kLanes) {
    const typename HV::V x0 = HV::load(pa + 2 * i), y0 = HV::load(pb + 2 * i);
    const typename HV::V x1 = HV::load(pa + 2 * (i + kLanes)), y1 = HV::load(pb + 2 * (i + kLanes));
    HV::store(d + 2 * i, post(Op::apply(x0, y0)));
    HV::store(d + 2 * (i + kLanes), post(Op::apply(x1, y1)));
  }
  // The rest (fewer than 2 vectors) goes through zero-padded buffers one vector at a time.
  for (; i < n; i += kLanes) {
    const size_t bytes = 2 * minBytes(kLanes, n - i);
    std::byte ta[2 * kLanes] = {}, tb[2 * kLanes] = {}, td[2 * kLanes];
    std::memcpy(ta, pa + 2 * i, bytes);
    std::memcpy(tb, pb + 2 * i, bytes);
    HV::store(td, post(Op::apply(HV::load(ta), HV::load(tb))));
    std::memcpy(d + 2 * i, td, bytes);
  }
#else
  binaryLoop16<HalfFormat, Op>(dst, a, b, n, post);
#endif
}

template <class Post>
void unaryHalf(void* dst, const void* src, size_t n, Post post) {
#ifdef BRAID_HALF_VECTORS
  using HV = HalfVectors;
  constexpr size_t kLanes = HV::kLanes;
  auto* d = static_cast<std::byte*>(dst);
  const auto* s = static_cast<const std::byte*>(src);
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) HV::store(d + 2 * i, post(HV::load(s + 2 * i)));
  if (i < n) {
    const size_t bytes = 2 * (n - i);
    std::byte ts[2 * kLanes] = {}, td[2 * kLanes];
    std::memcpy(ts, s + 2 * i, bytes);
    HV::store(td, post(HV::load(ts)));
    std::memcpy(d + 2 * i, td, bytes);
  }
#else
  unaryLoop16<HalfFormat>(dst, src, n, post);
#endif
}

// ---- Kernel entry points with the table's signatures. Storage tags pick the element handling.

struct HalfTag {};
struct Bfloat16Tag {};

template <class T>
using ComputeOf =
    std::conditional_t<std::is_same_v<T, HalfTag> || std::is_same_v<T, Bfloat16Tag>, float, T>;

template <class T, class Op, class Post>
void binaryAny(void* dst, const void* a, const void* b, size_t n, Post post) {
  if constexpr (std::is_same_v<T, HalfTag>) {
    binaryHalf<Op>(dst, a, b, n, post);
  } else if constexpr (std::is_same_v<T, Bfloat16Tag>) {
    binaryLoop16<Bfloat16Format, Op>(dst, a, b, n, post);
  } else {
    binaryLoop<T, Op>(dst, a, b, n, post);
  }
}

template <class T, class Post>
void unaryAny(void* dst, const void* src, size_t n, Post post) {
  if constexpr (std::is_same_v<T, HalfTag>) {
    unaryHalf(dst, src, n, post);
  } else if constexpr (std::is_same_v<T, Bfloat16Tag>) {
    unaryLoop16<Bfloat16Format>(dst, src, n, post);
  } else {
    unaryLoop<T>(dst, src, n, post);
  }
}

template <class T, class Op>
void reduceKernel(void* dst, const void* a, const void* b, size_t n, int /*nranks*/) {
  binaryAny<T, Op>(dst, a, b, n, NoPost{});
}

template <class T>
void avgFinalKernel(void* dst, const void* a, const void* b, size_t n, int nranks) {
  binaryAny<T, SumOp>(dst, a, b, n, avgPost<ComputeOf<T>>(nranks));
}

template <class T>
void avgFinalizeKernel(void* dst, const void* src, size_t n, int nranks) {
  unaryAny<T>(dst, src, n, avgPost<ComputeOf<T>>(nranks));
}

template <size_t kElemBytes>
void copyElemsKernel(void* dst, const void* src, size_t n, int /*nranks*/) {
  if (n != 0 && dst != src) std::memcpy(dst, src, n * kElemBytes);
}

template <class T, size_t kElemBytes>
void fillType(KernelTable& t, braidDataType_t type) {
  t.reduce[type][braidSum] = &reduceKernel<T, SumOp>;
  t.reduce[type][braidProd] = &reduceKernel<T, ProdOp>;
  t.reduce[type][braidMax] = &reduceKernel<T, MaxOp>;
  t.reduce[type][braidMin] = &reduceKernel<T, MinOp>;
  t.reduce[type][braidAvg] = &reduceKernel<T, SumOp>;
  for (int op = 0; op < kNumRedOps; ++op) {
    t.reduceFinal[type][op] = t.reduce[type][op];
    t.finalize[type][op] = &copyElemsKernel<kElemBytes>;
  }
  t.reduceFinal[type][braidAvg] = &avgFinalKernel<T>;
  t.finalize[type][braidAvg] = &avgFinalizeKernel<T>;
}

// ---- Bulk copies, a 64-byte cache line at a time.

constexpr size_t kLine = 64;

// One line in registers. Explicit vectors, because GCC's inline memcpy of 64 bytes stays at 16-byte
// moves under some levels; the streaming store needs a line-aligned destination.
#if BRAID_KERNEL_WIDTH >= 512
struct Line {
  __m512i v;
  static Line load(const std::byte* p) { return {_mm512_loadu_si512(p)}; }
  void store(std::byte* p) const { _mm512_storeu_si512(p, v); }
  void stream(std::byte* p) const { _mm512_stream_si512(reinterpret_cast<__m512i*>(p), v); }
};
#elif BRAID_KERNEL_WIDTH >= 256
struct Line {
  __m256i v[2];
  static Line load(const std::byte* p) {
    return {{_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)),
             _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32))}};
  }
  void store(std::byte* p) const {
    for (int k = 0; k < 2; ++k) _mm256_storeu_si256(reinterpret_cast<__m256i*>(p + 32 * k), v[k]);
  }
  void stream(std::byte* p) const {
    for (int k = 0; k < 2; ++k) _mm256_stream_si256(reinterpret_cast<__m256i*>(p + 32 * k), v[k]);
  }
};
#else
struct Line {
  __m128i v[4];
  static Line load(const std::byte* p) {
    Line l;
    for (int k = 0; k < 4; ++k) {
      l.v[k] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * k));
    }
    return l;
  }
  void store(std::byte* p) const {
    for (int k = 0; k < 4; ++k) _mm_storeu_si128(reinterpret_cast<__m128i*>(p + 16 * k), v[k]);
  }
  void stream(std::byte* p) const {
    for (int k = 0; k < 4; ++k) _mm_stream_si128(reinterpret_cast<__m128i*>(p + 16 * k), v[k]);
  }
};
#endif

template <bool kStream>
inline void putLine(std::byte* dst, const Line& line) {
  if constexpr (kStream) {
    line.stream(dst);
  } else {
    line.store(dst);
  }
}

/// dst1 and dst2 (either may be null) <- src, whole lines, each line of src loaded once for both;
/// two lines per iteration so that loads run ahead of the stores.
template <bool kStream1, bool kStream2>
void copyLines(std::byte* dst1, std::byte* dst2, const std::byte* src, size_t lines) {
  size_t l = 0;
  for (; l + 2 <= lines; l += 2) {
    const size_t at = l * kLine;
    const Line x = Line::load(src + at);
    const Line y = Line::load(src + at + kLine);
    if (dst1 != nullptr) {
      putLine<kStream1>(dst1 + at, x);
      putLine<kStream1>(dst1 + at + kLine, y);
    }
    if (dst2 != nullptr) {
      putLine<kStream2>(dst2 + at, x);
      putLine<kStream2>(dst2 + at + kLine, y);
    }
  }
  if (l < lines) {
    const size_t at = l * kLine;
    const Line x = Line::load(src + at);
    if (dst1 != nullptr) putLine<kStream1>(dst1 + at, x);
    if (dst2 != nullptr) putLine<kStream2>(dst2 + at, x);
  }
}

/// The bytes before `p` reaches a line boundary (at most `bytes`).
inline size_t headToLine(const void* p, size_t bytes) {
  const size_t head = (kLine - (reinterpret_cast<uintptr_t>(p) & (kLine - 1))) & (kLine - 1);
  return minBytes(head, bytes);
}

/// Copies `bytes` of src to the non-null destinations through a buffer (so dst == src is fine).
inline void copyPiece(std::byte* dst1, std::byte* dst2, const std::byte* src, size_t bytes) {
  std::byte piece[kLine];
  while (bytes > 0) {
    const size_t n = minBytes(bytes, kLine);
    std::memcpy(piece, src, n);
    if (dst1 != nullptr) std::memcpy(dst1, piece, n);
    if (dst2 != nullptr) std::memcpy(dst2, piece, n);
    src += n;
    if (dst1 != nullptr) dst1 += n;
    if (dst2 != nullptr) dst2 += n;
    bytes -= n;
  }
}

void copy2CachedKernel(void* dst1, void* dst2, const void* src, size_t bytes) {
  auto* d1 = static_cast<std::byte*>(dst1);
  auto* d2 = static_cast<std::byte*>(dst2);
  const auto* s = static_cast<const std::byte*>(src);
  const size_t lines = bytes / kLine;
  copyLines<false, false>(d1, d2, s, lines);
  const size_t done = lines * kLine;
  copyPiece(d1 + done, d2 + done, s + done, bytes - done);
}

void copyCachedKernel(void* dst, const void* src, size_t bytes) {
  auto* d = static_cast<std::byte*>(dst);
  const auto* s = static_cast<const std::byte*>(src);
  const size_t lines = bytes / kLine;
  copyLines<false, false>(d, nullptr, s, lines);
  const size_t done = lines * kLine;
  copyPiece(d + done, nullptr, s + done, bytes - done);
}

/// Streams whole lines to the destinations; a destination whose offset from dst1 is not a whole
/// number of lines cannot be aligned together with it and gets ordinary stores. The fence makes
/// the weakly ordered non-temporal stores visible before any later store (such as a FIFO flag).
void copy2StreamingKernel(void* dst1, void* dst2, const void* src, size_t bytes) {
  auto* d1 = static_cast<std::byte*>(dst1);
  auto* d2 = static_cast<std::byte*>(dst2);
  const auto* s = static_cast<const std::byte*>(src);
  const size_t head = headToLine(d1, bytes);
  copyPiece(d1, d2, s, head);
  const size_t lines = (bytes - head) / kLine;
  const bool together =
      d2 == nullptr ||
      ((reinterpret_cast<uintptr_t>(d2) - reinterpret_cast<uintptr_t>(d1)) & (kLine - 1)) == 0;
  if (together) {
    copyLines<true, true>(d1 + head, d2 == nullptr ? nullptr : d2 + head, s + head, lines);
  } else {
    copyLines<true, false>(d1 + head, d2 + head, s + head, lines);
  }
  const size_t done = head + lines * kLine;
  copyPiece(d1 + done, d2 == nullptr ? nullptr : d2 + done, s + done, bytes - done);
  _mm_sfence();
}

void copyStreamingKernel(void* dst, const void* src, size_t bytes) {
  copy2StreamingKernel(dst, nullptr, src, bytes);
}

KernelTable makeTable(CpuIsa isa) {
  KernelTable t{};
  t.isa = isa;
  fillType<int8_t, 1>(t, braidInt8);
  fillType<uint8_t, 1>(t, braidUint8);
  fillType<int32_t, 4>(t, braidInt32);
  fillType<uint32_t, 4>(t, braidUint32);
  fillType<int64_t, 8>(t, braidInt64);
  fillType<uint64_t, 8>(t, braidUint64);
  fillType<HalfTag, 2>(t, braidFloat16);
  fillType<float, 4>(t, braidFloat32);
  fillType<double, 8>(t, braidFloat64);
  fillType<Bfloat16Tag, 2>(t, braidBfloat16);
  t.copyCached = &copyCachedKernel;
  t.copyStreaming = &copyStreamingKernel;
  t.copy2Cached = &copy2CachedKernel;
  t.copy2Streaming = &copy2StreamingKernel;
  return t;
}

}  // namespace
}  // namespace braid::kernels::BRAID_KERNEL_LEVEL

#undef BRAID_HALF_VECTORS
#undef BRAID_KERNEL_LEVEL
#undef BRAID_KERNEL_WIDTH
