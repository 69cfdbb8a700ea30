// Collectives on device memory: 2, 3 and 4 rank processes sharing GPU 0, every algorithm forced in
// turn, NULL-stream and stream calls; stream semantics (enqueue and return, ordered with kernels
// before and after), CUDA graph capture and replay, and failures (mismatched calls, timeout,
// abort) reported instead of hanging. Every test skips where no GPU is present.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "braid.h"
#include "tests/gpu/gpu_ranks.h"
#include "tests/gpu/gpu_support.h"
#include "tests/gpu/test_kernels.h"
#include "tests/support/multiprocess.h"
#include "tests/support/variants.h"

namespace braid::testing {
namespace {

/// Mapped pinned memory for flags the host and a kernel share.
struct PinnedFlags {
  int* host = nullptr;
  std::string error;
  explicit PinnedFlags(size_t n) {
    void* p = nullptr;
    error = cudaProblem(cudaHostAlloc(&p, n * sizeof(int), cudaHostAllocMapped), "cudaHostAlloc");
    if (error.empty()) {
      host = static_cast<int*>(p);
      for (size_t i = 0; i < n; ++i) host[i] = 0;
    }
  }
  ~PinnedFlags() {
    if (host != nullptr) cudaFreeHost(host);
  }
};

class GpuCollectiveTest : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(GpuCollectiveTest, MatchesReference) {
  BRAID_SKIP_WITHOUT_GPU();
  const int nranks = std::get<0>(GetParam());
  const Variant& variant = dataPathVariants()[std::get<1>(GetParam())];
  const std::vector<CollCase> cases = deviceCases(nranks, 300007);
  auto outcomes = runRanks(
      nranks,
      [&](int rank, const braidUniqueId& id) -> std::string {
        Settings settings = settingsOf(variant);
        braidComm_t comm = nullptr;
        if (std::string e = initOnGpu0(&comm, nranks, id, rank, settings); !e.empty()) return e;
        std::string error = runCasesOnDevice(comm, rank, nranks, cases);
        int device = -2;
        if (error.empty() && (braidCommCuDevice(comm, &device) != braidSuccess || device != 0)) {
          error = "braidCommCuDevice reports " + std::to_string(device) + ", not 0";
        }
        braidCommDestroy(comm);
        return error;
      },
      /*deadlineSeconds=*/300);
  EXPECT_EQ(failures(outcomes), "") << cases.size() << " cases, variant " << variant.name;
}

INSTANTIATE_TEST_SUITE_P(
    Ranks, GpuCollectiveTest,
    ::testing::Combine(::testing::Values(2, 3, 4),
                       ::testing::Range(0, static_cast<int>(dataPathVariants().size()))),
    [](const auto& info) {
      return "n" + std::to_string(std::get<0>(info.param)) + "_" +
             dataPathVariants()[std::get<1>(info.param)].name;
    });

// The call returns while the stream is still held by a kernel before it, and the kernel after it
// sees its result.
TEST(GpuStream, EnqueuesAndReturnsOrderedWithTheStream) {
  BRAID_SKIP_WITHOUT_GPU();
  constexpr int kRanks = 2;
  constexpr size_t kCount = 1 << 20;
  auto outcomes = runRanks(
      kRanks,
      [&](int rank, const braidUniqueId& id) -> std::string {
        Settings settings{"BRAID_TIMEOUT=60"};
        braidComm_t comm = nullptr;
        if (std::string e = initOnGpu0(&comm, kRanks, id, rank, settings); !e.empty()) return e;
        cudaStream_t stream = nullptr;
        PinnedFlags flags(2);  // [0]: gate open, [1]: gate timed out
        DeviceBuffer in(kCount * sizeof(float)), out(kCount * sizeof(float));
        std::string e = flags.error.empty() ? in.error() : flags.error;
        if (e.empty()) e = out.error();
        if (e.empty()) e = cudaProblem(cudaStreamCreate(&stream), "cudaStreamCreate");
        auto* inBuf = reinterpret_cast<float*>(in.data());
        auto* outBuf = reinterpret_cast<float*>(out.data());
        // A first call sets the device path up, outside the part under test.
        if (e.empty() && braidAllReduce(inBuf, outBuf, kCount, braidFloat32, braidSum, comm,
                                        stream) != braidSuccess) {
          e = std::string("warm-up all-reduce: ") + braidGetLastError(comm);
        }
        if (e.empty()) e = cudaProblem(cudaStreamSynchronize(stream), "warm-up sync");
        if (e.empty())
          e = cudaProblem(launchGate(flags.host, flags.host + 1, 60000000000ull, stream), "gate");
        if (e.empty())
          e = cudaProblem(launchFill(inBuf, kCount, 10.0f * (rank + 1), stream), "fill");
        if (e.empty()) {
          braidResult_t rc =
              braidAllReduce(inBuf, outBuf, kCount, braidFloat32, braidSum, comm, stream);
          if (rc != braidSuccess) e = std::string("all-reduce: ") + braidGetLastError(comm);
        }
        // Returned with the gate still closed: the work cannot have run.
        if (e.empty() && cudaStreamQuery(stream) != cudaErrorNotReady) {
          e = "the stream finished while its first kernel was still blocked";
        }
        if (e.empty()) e = cudaProblem(launchScale(outBuf, kCount, 2.0f, stream), "scale");
        *reinterpret_cast<volatile int*>(flags.host) = 1;
        if (e.empty()) e = cudaProblem(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
        if (e.empty() && flags.host[1] != 0) e = "the gate kernel timed out: a call blocked";
        std::vector<char> result;
        if (e.empty()) e = out.download(result, kCount * sizeof(float));
        if (e.empty()) {
          // Ranks filled 10 + i%7 and 20 + i%7; the sum doubled by the kernel after the call.
          e = firstWrongFloat(result, kCount, "", [](size_t i) {
            return 2.0f * (30.0f + 2.0f * static_cast<float>(i % 7));
          });
        }
        braidCommDestroy(comm);
        if (stream != nullptr) cudaStreamDestroy(stream);
        return e;
      },
      /*deadlineSeconds=*/180);
  EXPECT_EQ(failures(outcomes), "");
}

// Calls captured into a CUDA graph (the first device call of the communicator included) replay
// with fresh inputs.
TEST(GpuStream, GraphCaptureAndReplay) {
  BRAID_SKIP_WITHOUT_GPU();
  for (int nranks : {2, 3}) {
    constexpr size_t kCount = 100003;
    auto outcomes = runRanks(
        nranks,
        [&](int rank, const braidUniqueId& id) -> std::string {
          Settings settings{"BRAID_TIMEOUT=60"};
          braidComm_t comm = nullptr;
          if (std::string e = initOnGpu0(&comm, nranks, id, rank, settings); !e.empty()) return e;
          DeviceBuffer in(kCount * sizeof(float)), out(kCount * sizeof(float)),
              gathered(kCount * sizeof(float) * nranks);
          cudaStream_t stream = nullptr;
          std::string e = in.error() + out.error() + gathered.error();
          if (e.empty()) e = cudaProblem(cudaStreamCreate(&stream), "cudaStreamCreate");
          {
            CapturedGraph graph;
            if (e.empty()) {
              e = graph.capture(stream, [&]() -> std::string {
                auto* inBuf = reinterpret_cast<float*>(in.data());
                auto* outBuf = reinterpret_cast<float*>(out.data());
                braidResult_t a =
                    braidAllReduce(inBuf, outBuf, kCount, braidFloat32, braidSum, comm, stream);
                braidResult_t b =
                    braidAllGather(outBuf, gathered.data(), kCount, braidFloat32, comm, stream);
                if (a != braidSuccess || b != braidSuccess) {
                  return std::string("captured calls failed: ") + braidGetLastError(comm);
                }
                return "";
              });
            }
            for (int replay = 0; replay < 3 && e.empty(); ++replay) {
              std::vector<float> input(kCount);
              for (size_t i = 0; i < kCount; ++i)
                input[i] = static_cast<float>((rank + 1) * (replay + 1) + i % 5);
              e = in.upload(input.data(), kCount * sizeof(float));
              if (e.empty()) e = graph.replay(stream);
              std::vector<char> result;
              if (e.empty()) e = gathered.download(result, kCount * sizeof(float) * nranks);
              const float rankSum = static_cast<float>(nranks * (nranks + 1) / 2);
              if (e.empty()) {
                e = firstWrongFloat(
                    result, kCount * nranks, "replay " + std::to_string(replay), [&](size_t i) {
                      return rankSum * (replay + 1) + static_cast<float>(nranks * (i % kCount % 5));
                    });
              }
            }
          }
          braidCommDestroy(comm);
          if (stream != nullptr) cudaStreamDestroy(stream);
          return e;
        },
        /*deadlineSeconds=*/180);
    EXPECT_EQ(failures(outcomes), "") << nranks << " ranks";
  }
}

// Ranks that disagree on the count fail with braidInvalidUsage naming both calls (the device
// executor's error word), not a hang or corrupted data.
TEST(GpuFailure, MismatchedCallsAreReported) {
  BRAID_SKIP_WITHOUT_GPU();
  auto outcomes = runRanks(
      2,
      [&](int rank, const braidUniqueId& id) -> std::string {
        Settings settings{"BRAID_TIMEOUT=30"};
        braidComm_t comm = nullptr;
        if (std::string e = initOnGpu0(&comm, 2, id, rank, settings); !e.empty()) return e;
        DeviceBuffer buf(8192 * sizeof(float));
        const size_t count = rank == 0 ? 4096 : 4097;
        braidResult_t rc =
            braidAllReduce(buf.data(), buf.data(), count, braidFloat32, braidSum, comm, nullptr);
        const std::string detail = braidGetLastError(comm);
        braidCommAbort(comm);
        if (rc == braidSuccess) return "mismatched all-reduce succeeded";
        if (rc == braidInvalidUsage && detail.find("called") != std::string::npos) return "";
        // The rank that did not see the bad slot may learn of it from its peer instead.
        if (rc == braidInvalidUsage || rc == braidRemoteError) return "";
        return std::string("unexpected ") + braidGetErrorString(rc) + ": " + detail;
      },
      /*deadlineSeconds=*/90);
  EXPECT_EQ(failures(outcomes), "");
}

// A kernel waiting for a peer that never comes ends at BRAID_TIMEOUT with braidTimeout.
TEST(GpuFailure, StuckKernelTimesOut) {
  BRAID_SKIP_WITHOUT_GPU();
  auto outcomes = runRanks(
      2,
      [&](int rank, const braidUniqueId& id) -> std::string {
        Settings settings{"BRAID_TIMEOUT=3"};
        braidComm_t comm = nullptr;
        if (std::string e = initOnGpu0(&comm, 2, id, rank, settings); !e.empty()) return e;
        DeviceBuffer buf(1024 * sizeof(float));
        // Both set the device path up; then only rank 0 calls.
        braidResult_t rc =
            braidAllReduce(buf.data(), buf.data(), 16, braidFloat32, braidSum, comm, nullptr);
        if (rc != braidSuccess) return std::string("first call: ") + braidGetLastError(comm);
        std::string e;
        if (rank == 0) {
          rc = braidAllReduce(buf.data(), buf.data(), 1024, braidFloat32, braidSum, comm, nullptr);
          if (rc != braidTimeout) {
            e = std::string("expected braidTimeout, got ") + braidGetErrorString(rc) + ": " +
                braidGetLastError(comm);
          }
        } else {
          sleep(8);
        }
        braidCommAbort(comm);
        return e;
      },
      /*deadlineSeconds=*/90);
  EXPECT_EQ(failures(outcomes), "");
}

// braidCommAbort stops a kernel enqueued on a stream that would otherwise wait forever.
TEST(GpuFailure, AbortStopsAStreamKernel) {
  BRAID_SKIP_WITHOUT_GPU();
  auto outcomes = runRanks(
      2,
      [&](int rank, const braidUniqueId& id) -> std::string {
        Settings settings{"BRAID_TIMEOUT=0"};  // never: only the abort can end the wait
        braidComm_t comm = nullptr;
        if (std::string e = initOnGpu0(&comm, 2, id, rank, settings); !e.empty()) return e;
        DeviceBuffer buf(1024 * sizeof(float));
        cudaStream_t stream = nullptr;
        std::string e = cudaProblem(cudaStreamCreate(&stream), "cudaStreamCreate");
        if (e.empty() && braidAllReduce(buf.data(), buf.data(), 16, braidFloat32, braidSum, comm,
                                        nullptr) != braidSuccess) {
          e = std::string("first call: ") + braidGetLastError(comm);
        }
        if (e.empty() && rank == 0) {
          if (braidAllReduce(buf.data(), buf.data(), 1024, braidFloat32, braidSum, comm, stream) !=
              braidSuccess) {
            e = std::string("enqueue: ") + braidGetLastError(comm);
          }
          sleep(1);
          if (e.empty() && cudaStreamQuery(stream) != cudaErrorNotReady) {
            e = "the kernel finished without its peer";
          }
          braidCommAbort(comm);  // returns once the kernel has stopped
          if (e.empty()) e = cudaProblem(cudaStreamSynchronize(stream), "sync after abort");
        } else {
          sleep(4);
          braidCommAbort(comm);
        }
        if (stream != nullptr) cudaStreamDestroy(stream);
        return e;
      },
      /*deadlineSeconds=*/60);
  EXPECT_EQ(failures(outcomes), "");
}

}  // namespace
}  // namespace braid::testing
