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

#include <string>
#include <tuple>
#include <vector>

#include "braid.h"
#include "tests/gpu/gpu_ranks.h"
#include "tests/gpu/gpu_support.h"
#include "tests/support/multiprocess.h"
#include "tests/support/variants.h"

namespace braid::testing {
namespace {

struct StagedVariant {
  Variant variant;
  bool twoHosts = true;  ///< BRAID_HOSTID by rank parity
};

const std::vector<StagedVariant>& stagedVariants() {
  static const std::vector<StagedVariant> kVariants = [] {
    std::vector<StagedVariant> all;
    for (const Variant& v : dataPathVariants()) all.push_back({v});
    // All-reduce inside each "host" over GPU memory, between them over the staged FIFOs.
    all.push_back({{"hier", {"BRAID_ALGO=hier", "BRAID_NCHANNELS=2", "BRAID_CHUNK_BYTES=8K"}}});
    // Where the machine has an RDMA port, "defaults" stages over ib: this one keeps TCP tested.
    all.push_back({{"no_ib", {"BRAID_TRANSPORT=^ib"}}});
    all.push_back({{"socket_only", {"BRAID_TRANSPORT=socket"}}, /*twoHosts=*/false});
    return all;
  }();
  return kVariants;
}

std::string hostOf(int rank) { return "BRAID_HOSTID=staged-test-host-" + std::to_string(rank % 2); }

class GpuStagedCollectiveTest : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(GpuStagedCollectiveTest, MatchesReference) {
  BRAID_SKIP_WITHOUT_GPU();
  const int nranks = std::get<0>(GetParam());
  const StagedVariant& staged = stagedVariants()[std::get<1>(GetParam())];
  const Variant& variant = staged.variant;
  const std::vector<CollCase> cases = deviceCases(nranks, 100003);
  auto outcomes = runRanks(
      nranks,
      [&](int rank, const braidUniqueId& id) -> std::string {
        Settings settings = settingsOf(variant);
        if (staged.twoHosts) settings.add(hostOf(rank));
        braidComm_t comm = nullptr;
        if (std::string e = initOnGpu0(&comm, nranks, id, rank, settings); !e.empty()) return e;
        const std::string error = runCasesOnDevice(comm, rank, nranks, cases);
        braidCommDestroy(comm);
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
             stagedVariants()[std::get<1>(info.param)].variant.name;
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
        std::string e = in.error() + out.error();
        if (e.empty()) e = cudaProblem(cudaStreamCreate(&stream), "cudaStreamCreate");
        {
          CapturedGraph graph;
          if (e.empty()) {
            e = graph.capture(stream, [&]() -> std::string {
              if (braidAllReduce(in.data(), out.data(), kCount, braidFloat32, braidSum, comm,
                                 stream) != braidSuccess) {
                return std::string("captured all-reduce: ") + braidGetLastError(comm);
              }
              return "";
            });
          }
          for (int replay = 0; replay < 3 && e.empty(); ++replay) {
            std::vector<float> values(kCount, float(rank + 1 + 10 * replay));
            e = in.upload(values.data(), kCount * sizeof(float));
            if (e.empty()) e = graph.replay(stream);
            std::vector<char> result;
            if (e.empty()) e = out.download(result, kCount * sizeof(float));
            const float expected = float(3 + 20 * replay);
            if (e.empty()) {
              e = firstWrongFloat(result, kCount, "replay " + std::to_string(replay),
                                  [&](size_t) { return expected; });
            }
          }
        }
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
