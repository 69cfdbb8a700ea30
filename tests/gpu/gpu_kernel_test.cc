// The stand-alone CUDA kernels against the CPU kernels: every datatype x op, with and without
// Avg's division, at sizes and alignments that exercise the vector body, the head and tail
// elements and the unaligned fall-back. Results must match bit for bit (NaN payloads aside).
// One process, in-process CUDA: this suite has no forked ranks.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "kernels/cpu/reduce.h"
#include "kernels/cuda/kernels.h"
#include "tests/gpu/gpu_support.h"

namespace braid::gpu {
namespace {

using testing::cudaProblem;

bool isNan(const char* p, braidDataType_t type) {
  switch (type) {
    case braidFloat32: {
      float v;
      std::memcpy(&v, p, 4);
      return std::isnan(v);
    }
    case braidFloat64: {
      double v;
      std::memcpy(&v, p, 8);
      return std::isnan(v);
    }
    case braidFloat16: {
      uint16_t v;
      std::memcpy(&v, p, 2);
      return (v & 0x7c00) == 0x7c00 && (v & 0x03ff) != 0;
    }
    case braidBfloat16: {
      uint16_t v;
      std::memcpy(&v, p, 2);
      return (v & 0x7f80) == 0x7f80 && (v & 0x007f) != 0;
    }
    default: return false;
  }
}

/// Random elements; floats are mostly ordinary numbers with a few zeros of both signs,
/// infinities and NaNs.
std::vector<char> randomElements(braidDataType_t type, size_t count, std::mt19937& rng) {
  const size_t es = dataTypeSize(type);
  std::vector<char> out(count * es);
  std::uniform_real_distribution<float> real(-100.0f, 100.0f);
  for (size_t i = 0; i < count; ++i) {
    char* p = out.data() + i * es;
    const uint32_t pick = rng() % 64;
    const float special = pick == 0   ? NAN
                          : pick == 1 ? INFINITY
                          : pick == 2 ? -0.0f
                          : pick == 3 ? 0.0f
                                      : real(rng);
    switch (type) {
      case braidFloat32: std::memcpy(p, &special, 4); break;
      case braidFloat64: {
        const double d = static_cast<double>(special) * 1.000001;
        std::memcpy(p, &d, 8);
        break;
      }
      case braidFloat16: {
        const uint16_t h = kernels::floatToHalf(special);
        std::memcpy(p, &h, 2);
        break;
      }
      case braidBfloat16: {
        const uint16_t b = kernels::floatToBfloat16(special);
        std::memcpy(p, &b, 2);
        break;
      }
      default:
        for (size_t b = 0; b < es; ++b) p[b] = static_cast<char>(rng());
        break;
    }
  }
  return out;
}

class DeviceArena {
 public:
  explicit DeviceArena(size_t bytes) {
    error_ = cudaProblem(cudaMalloc(&ptr_, bytes), "cudaMalloc");
  }
  ~DeviceArena() {
    if (ptr_ != nullptr) cudaFree(ptr_);
  }
  char* data() const { return static_cast<char*>(ptr_); }
  const std::string& error() const { return error_; }

 private:
  void* ptr_ = nullptr;
  std::string error_;
};

struct Shape {
  size_t count;
  size_t dstShift, aShift, bShift;  ///< in elements, from 256-byte aligned bases
};

class GpuKernelTest : public ::testing::TestWithParam<std::tuple<int, int>> {
 protected:
  void SetUp() override {
    if (testing::visibleGpus() == 0) GTEST_SKIP() << "no CUDA device here";
  }
};

TEST_P(GpuKernelTest, ReduceMatchesCpu) {
  const auto type = static_cast<braidDataType_t>(std::get<0>(GetParam()));
  const auto op = static_cast<braidRedOp_t>(std::get<1>(GetParam()));
  const size_t es = dataTypeSize(type);
  const int nranks = 3;
  std::mt19937 rng(1234 + 10 * type + op);
  const Shape shapes[] = {{1, 0, 0, 0},     {7, 0, 0, 0},   {1000, 1, 1, 1},   {4099, 3, 3, 3},
                          {65539, 0, 0, 0}, {777, 0, 1, 2}, {1 << 20, 5, 5, 5}};
  const size_t slack = 64;
  for (const Shape& s : shapes) {
    for (bool final : {false, true}) {
      SCOPED_TRACE("count " + std::to_string(s.count) + " shifts " + std::to_string(s.dstShift) +
                   "/" + std::to_string(s.aShift) + "/" + std::to_string(s.bShift) +
                   (final ? " final" : ""));
      const std::vector<char> a = randomElements(type, s.count, rng);
      const std::vector<char> b = randomElements(type, s.count, rng);
      const size_t region = (s.count + slack) * es + 256;
      DeviceArena arena(3 * region);
      ASSERT_EQ(arena.error(), "");
      char* dA = arena.data() + s.aShift * es;
      char* dB = arena.data() + region + s.bShift * es;
      char* dDst = arena.data() + 2 * region + s.dstShift * es;
      ASSERT_EQ(cudaProblem(cudaMemcpy(dA, a.data(), a.size(), cudaMemcpyHostToDevice), "a"), "");
      ASSERT_EQ(cudaProblem(cudaMemcpy(dB, b.data(), b.size(), cudaMemcpyHostToDevice), "b"), "");
      Status launched = launchReduce(dDst, dA, dB, s.count, type, op, nranks, final, nullptr);
      ASSERT_TRUE(launched.ok()) << launched.message();
      std::vector<char> got(s.count * es);
      ASSERT_EQ(
          cudaProblem(cudaMemcpy(got.data(), dDst, got.size(), cudaMemcpyDeviceToHost), "dst"), "");

      std::vector<char> want(s.count * es);
      const kernels::Reducer reducer(type, op, nranks);
      if (final) {
        reducer.reduceFinal(want.data(), a.data(), b.data(), s.count);
      } else {
        reducer.reduce(want.data(), a.data(), b.data(), s.count);
      }
      size_t wrong = 0;
      for (size_t i = 0; i < s.count; ++i) {
        const char* w = want.data() + i * es;
        const char* g = got.data() + i * es;
        if (std::memcmp(w, g, es) == 0 || (isNan(w, type) && isNan(g, type))) continue;
        if (++wrong <= 3) ADD_FAILURE() << "element " << i << " differs";
      }
      EXPECT_EQ(wrong, 0u);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    AllTypesAndOps, GpuKernelTest,
    ::testing::Combine(::testing::Range(0, 10), ::testing::Range(0, 5)), [](const auto& info) {
      return std::string(dataTypeName(static_cast<braidDataType_t>(std::get<0>(info.param)))) +
             "_" + std::string(redOpName(static_cast<braidRedOp_t>(std::get<1>(info.param))));
    });

TEST(GpuCopy, AnyAlignmentAndSize) {
  if (testing::visibleGpus() == 0) GTEST_SKIP() << "no CUDA device here";
  std::mt19937 rng(99);
  const size_t maxBytes = (1 << 20) + 64;
  std::vector<char> src(maxBytes);
  for (char& c : src) c = static_cast<char>(rng());
  DeviceArena in(maxBytes + 64), out(maxBytes + 64);
  ASSERT_EQ(in.error(), "");
  ASSERT_EQ(out.error(), "");
  ASSERT_EQ(cudaProblem(cudaMemcpy(in.data(), src.data(), maxBytes, cudaMemcpyHostToDevice), "src"),
            "");
  for (size_t bytes :
       {size_t{1}, size_t{15}, size_t{16}, size_t{17}, size_t{4097}, size_t{1 << 20}}) {
    for (size_t srcShift : {0, 1, 4, 8}) {
      for (size_t dstShift : {0, 1, 2, 8}) {
        SCOPED_TRACE(std::to_string(bytes) + " bytes, shifts " + std::to_string(srcShift) + "/" +
                     std::to_string(dstShift));
        ASSERT_EQ(cudaProblem(cudaMemset(out.data(), 0x3c, maxBytes + 64), "memset"), "");
        Status s = launchCopy(out.data() + dstShift, in.data() + srcShift, bytes, nullptr);
        ASSERT_TRUE(s.ok()) << s.message();
        std::vector<char> got(bytes + 2 * 8);
        // Read one guard-ish byte range around the destination as well.
        const size_t from = dstShift >= 1 ? dstShift - 1 : 0;
        ASSERT_EQ(cudaProblem(
                      cudaMemcpy(got.data(), out.data() + from, bytes + 2, cudaMemcpyDeviceToHost),
                      "dst"),
                  "");
        const char* body = got.data() + (dstShift - from);
        EXPECT_EQ(std::memcmp(body, src.data() + srcShift, bytes), 0);
        EXPECT_EQ(static_cast<unsigned char>(body[bytes]), 0x3c) << "wrote past the end";
        if (dstShift >= 1) {
          EXPECT_EQ(static_cast<unsigned char>(got[0]), 0x3c) << "wrote before the start";
        }
      }
    }
  }
}

}  // namespace
}  // namespace braid::gpu
