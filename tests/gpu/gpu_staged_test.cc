// Device buffers across hosts: rank processes sharing GPU 0 split into two "hosts" (BRAID_HOSTID by
// rank parity), so that a device call to the other host takes the staged path - FIFOs in pinned
// host memory that a network proxy moves, over RDMA where the machine has a port, else TCP -
// while ranks of one host keep the GPU path. Every collective with every algorithm forced in turn
// at n = 2, 3, 4 (hier: inside each host over GPU memory, between them staged), NULL-stream and
// stream calls alternating; then without ib (TCP), and BRAID_TRANSPORT=socket (one host, every
// peer staged); then a CUDA graph replayed over staged FIFOs (the proxy armed from a host node of
// the graph); and a device call to another host with ib and socket excluded fails naming the
// peer. Every test skips where no GPU is present.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "braid.h"
#include "tests/gpu/gpu_support.h"
#include "tests/support/multiprocess.h"

namespace braid::testing {
namespace {

struct StagedVariant {
  std::string name;
  std::vector<std::string> settings;
  bool twoHosts = true;  ///< BRAID_HOSTID by rank parity
};

const std::vector<StagedVariant>& stagedVariants() {
  static const std::vector<StagedVariant> kVariants = {
      {"defaults", {}},
      {"small_chunks", {"BRAID_CHUNK_BYTES=1K", "BRAID_NSLOTS=2", "BRAID_NCHANNELS=2"}},
      {"ring", {"BRAID_ALGO=ring", "BRAID_NCHANNELS=3", "BRAID_CHUNK_BYTES=8K"}},
      {"tree", {"BRAID_ALGO=tree", "BRAID_CHUNK_BYTES=8K"}},
      {"rhd", {"BRAID_ALGO=rhd", "BRAID_CHUNK_BYTES=8K"}},
      {"rd", {"BRAID_ALGO=rd", "BRAID_CHUNK_BYTES=8K"}},
      {"direct", {"BRAID_ALGO=direct", "BRAID_CHUNK_BYTES=8K"}},
      // All-reduce inside each "host" over GPU memory, between them over the staged FIFOs.
      {"hier", {"BRAID_ALGO=hier", "BRAID_NCHANNELS=2", "BRAID_CHUNK_BYTES=8K"}},
      // Where the machine has an RDMA port, "defaults" stages over ib: this one keeps TCP tested.
      {"no_ib", {"BRAID_TRANSPORT=^ib"}},
      {"socket_only", {"BRAID_TRANSPORT=socket"}, false},
  };
  return kVariants;
}

std::string hostOf(int rank) { return "BRAID_HOSTID=staged-test-host-" + std::to_string(rank % 2); }

std::string initOnGpu0(braidComm_t* comm, int nranks, const braidUniqueId& id, int rank,
                       Settings& settings) {
  if (std::string e = cudaProblem(cudaSetDevice(0), "cudaSetDevice(0)"); !e.empty()) return e;
  braidResult_t rc = braidCommInitRankConfig(comm, nranks, id, rank, settings.config());
  if (rc != braidSuccess) {
    return std::string("init failed: ") + braidGetErrorString(rc) + ": " +
           braidGetLastError(nullptr);
  }
  return "";
}

class GpuStagedCollectiveTest : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(GpuStagedCollectiveTest, MatchesReference) {
  BRAID_SKIP_WITHOUT_GPU();
  const int nranks = std::get<0>(GetParam());
  const StagedVariant& variant = stagedVariants()[std::get<1>(GetParam())];
  const std::vector<CollCase> cases = deviceCases(nranks, 100003);
  auto outcomes = runRanks(
      nranks,
      [&](int rank, const braidUniqueId& id) -> std::string {
        Settings settings;
        for (const std::string& s : variant.settings) settings.add(s);
        if (variant.twoHosts) settings.add(hostOf(rank));
        settings.add("BRAID_TIMEOUT=60");
        braidComm_t comm = nullptr;
        if (std::string e = initOnGpu0(&comm, nranks, id, rank, settings); !e.empty()) return e;
        cudaStream_t stream = nullptr;
        std::string error = cudaProblem(cudaStreamCreate(&stream), "cudaStreamCreate");
        for (size_t i = 0; i < cases.size() && error.empty(); ++i) {
          error = runAndCheckOnDevice(comm, rank, nranks, cases[i], i % 2 ? stream : nullptr);
        }
        braidCommDestroy(comm);
        if (stream != nullptr) cudaStreamDestroy(stream);
        return error;
      },
      /*deadlineSeconds=*/300);
  EXPECT_EQ(failures(outcomes), "") << cases.size() << " cases, variant " << variant.name;
}

INSTANTIATE_TEST_SUITE_P(
    Staged, GpuStagedCollectiveTest,
    ::testing::Combine(::testing::Values(2, 3, 4),
                       ::testing::Range(0, static_cast<int>(stagedVariants().size()))),
    [](const auto& info) {
      return "n" + std::to_string(std::get<0>(info.param)) + "_" +
             stagedVariants()[std::get<1>(info.param)].name;
    });

// A graph captured over staged FIFOs replays with fresh inputs: each replay arms the proxy from
// the graph's host node.
TEST(GpuStaged, GraphReplaysOverStagedFifos) {
  BRAID_SKIP_WITHOUT_GPU();
  constexpr int kRanks = 2;
  constexpr size_t kCount = 100003;
  auto outcomes = runRanks(
      kRanks,
      [&](int rank, const braidUniqueId& id) -> std::string {
        Settings settings{"BRAID_TIMEOUT=60", hostOf(rank)};
        braidComm_t comm = nullptr;
        if (std::string e = initOnGpu0(&comm, kRanks, id, rank, settings); !e.empty()) return e;
        DeviceBuffer in(kCount * sizeof(float)), out(kCount * sizeof(float));
        cudaStream_t stream = nullptr;
        cudaGraph_t graph = nullptr;
        cudaGraphExec_t exec = nullptr;
        std::string e = in.error() + out.error();
        if (e.empty()) e = cudaProblem(cudaStreamCreate(&stream), "cudaStreamCreate");
        auto* inBuf = reinterpret_cast<float*>(in.data());
        auto* outBuf = reinterpret_cast<float*>(out.data());
        if (e.empty()) {
          e = cudaProblem(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal),
                          "begin capture");
        }
        if (e.empty() && braidAllReduce(inBuf, outBuf, kCount, braidFloat32, braidSum, comm,
                                        stream) != braidSuccess) {
          e = std::string("captured all-reduce: ") + braidGetLastError(comm);
        }
        if (e.empty()) e = cudaProblem(cudaStreamEndCapture(stream, &graph), "end capture");
        if (e.empty()) e = cudaProblem(cudaGraphInstantiate(&exec, graph, 0), "instantiate");
        for (int replay = 0; replay < 3 && e.empty(); ++replay) {
          std::vector<float> values(kCount, float(rank + 1 + 10 * replay));
          e = in.upload(values.data(), kCount * sizeof(float));
          if (e.empty()) e = cudaProblem(cudaGraphLaunch(exec, stream), "graph launch");
          if (e.empty()) e = cudaProblem(cudaStreamSynchronize(stream), "sync");
          std::vector<char> result;
          if (e.empty()) e = out.download(result, kCount * sizeof(float));
          const float expected = float(3 + 20 * replay);
          for (size_t i = 0; e.empty() && i < kCount; ++i) {
            float got;
            std::memcpy(&got, result.data() + i * sizeof(float), sizeof(float));
            if (got != expected) {
              e = "replay " + std::to_string(replay) + " element " + std::to_string(i) + " is " +
                  std::to_string(got) + ", expected " + std::to_string(expected);
            }
          }
        }
        if (exec != nullptr) cudaGraphExecDestroy(exec);
        if (graph != nullptr) cudaGraphDestroy(graph);
        braidCommDestroy(comm);
        if (stream != nullptr) cudaStreamDestroy(stream);
        return e;
      },
      /*deadlineSeconds=*/120);
  EXPECT_EQ(failures(outcomes), "");
}

// With the networks excluded, nothing reaches the other host: the call fails on every rank, naming
// the peer and why.
TEST(GpuStaged, NoPathToAnotherHostIsReported) {
  BRAID_SKIP_WITHOUT_GPU();
  constexpr int kRanks = 2;
  auto outcomes = runRanks(
      kRanks,
      [&](int rank, const braidUniqueId& id) -> std::string {
        Settings settings{"BRAID_TIMEOUT=30", hostOf(rank), "BRAID_TRANSPORT=^socket,ib"};
        braidComm_t comm = nullptr;
        if (std::string e = initOnGpu0(&comm, kRanks, id, rank, settings); !e.empty()) return e;
        DeviceBuffer buf(1024 * sizeof(float));
        std::string e = buf.error();
        const braidResult_t rc =
            braidAllReduce(buf.data(), buf.data(), 1024, braidFloat32, braidSum, comm, nullptr);
        const std::string text = braidGetLastError(comm);
        if (e.empty() && rc == braidSuccess) e = "the all-reduce succeeded without a path";
        const std::string peer = "rank " + std::to_string(1 - rank);
        if (e.empty() && (text.find(peer) == std::string::npos ||
                          text.find("another host") == std::string::npos ||
                          text.find("BRAID_TRANSPORT excludes socket") == std::string::npos)) {
          e = "the error does not name " + peer + " and both reasons: " + text;
        }
        braidCommDestroy(comm);
        return e;
      },
      /*deadlineSeconds=*/60);
  EXPECT_EQ(failures(outcomes), "");
}

}  // namespace
}  // namespace braid::testing
