// Multi-process conformance: every collective, datatype, op, count (incl. 0 and counts not
// divisible by the rank count), in and out of place, rotating roots, at rank counts that are and
// are not powers of two, under several data-path settings. Each rank is a process.
#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "braid.h"
#include "tests/support/collective_check.h"
#include "tests/support/multiprocess.h"
#include "tests/support/variants.h"

namespace braid::testing {
namespace {

const std::vector<Variant>& variants() {
  static const std::vector<Variant> kVariants = [] {
    std::vector<Variant> all = dataPathVariants();
    // Chunks too large for a line's payload area, two data slots per FIFO: the shallowest
    // pipelines every algorithm must get through.
    all.push_back({"shallow_slots", {"BRAID_CHUNK_BYTES=6K", "BRAID_NSLOTS=2"}});
    return all;
  }();
  return kVariants;
}

std::string runConformance(int rank, int nranks, const braidUniqueId& id, const Variant& variant,
                           const std::vector<CollCase>& cases) {
  Settings settings = settingsOf(variant);
  braidComm_t comm = nullptr;
  if (std::string e = initRank(&comm, nranks, id, rank, settings); !e.empty()) return e;
  std::string error;
  for (const CollCase& c : cases) {
    error = runAndCheck(comm, rank, nranks, c);
    if (!error.empty()) break;
  }
  braidCommDestroy(comm);
  return error;
}

class CollectiveTest : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(CollectiveTest, MatchesReference) {
  const int nranks = std::get<0>(GetParam());
  const Variant& variant = variants()[std::get<1>(GetParam())];
  const std::vector<CollCase> cases =
      conformanceCases(nranks, {0, 1, 7, 273}, {65537, (1u << 20) + 3});
  auto outcomes = runRanks(
      nranks,
      [&](int rank, const braidUniqueId& id) {
        return runConformance(rank, nranks, id, variant, cases);
      },
      /*deadlineSeconds=*/240);
  EXPECT_EQ(failures(outcomes), "") << cases.size() << " cases, variant " << variant.name;
}

INSTANTIATE_TEST_SUITE_P(Ranks, CollectiveTest,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4, 5, 6, 7, 8),
                                            ::testing::Range(0, int(variants().size()))),
                         [](const auto& info) {
                           return "n" + std::to_string(std::get<0>(info.param)) + "_" +
                                  variants()[std::get<1>(info.param)].name;
                         });

// How many mappings of braidMemAlloc buffers this process has (its own and its peers').
int sharedBufferMappings() {
  std::ifstream maps("/proc/self/maps");
  int n = 0;
  for (std::string line; std::getline(maps, line);) {
    n += line.find("/memfd:braid-buffer-") != std::string::npos;
  }
  return n;
}

// Inputs in braidMemAlloc memory are lent to the peers on the host, which read them in place:
// every result as before, inputs untouched, guards intact. Each rank's own buffers are gone
// after its calls, so the mappings left are its peers' (read in place), and they go with the
// communicator.
const std::vector<Variant>& sharedBufferVariants() {
  static const std::vector<Variant> kVariants = {
      {"defaults", {}},
      {"ring", {"BRAID_ALGO=ring", "BRAID_NCHANNELS=2", "BRAID_CHUNK_BYTES=64K"}},
      {"tree", {"BRAID_ALGO=tree", "BRAID_CHUNK_BYTES=64K"}},
      {"rhd", {"BRAID_ALGO=rhd", "BRAID_CHUNK_BYTES=64K"}},
      {"rd", {"BRAID_ALGO=rd", "BRAID_CHUNK_BYTES=64K"}},
      {"direct", {"BRAID_ALGO=direct", "BRAID_CHUNK_BYTES=64K"}},
  };
  return kVariants;
}

class SharedBufferTest : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(SharedBufferTest, PeersReadInputsInPlaceAndResultsMatch) {
  const int nranks = std::get<0>(GetParam());
  const Variant& variant = sharedBufferVariants()[std::get<1>(GetParam())];
  std::vector<CollCase> cases = conformanceCases(nranks, {7}, {65537, (1u << 20) + 3});
  for (CollCase& c : cases) c.sharedBuffers = true;
  auto outcomes = runRanks(
      nranks,
      [&](int rank, const braidUniqueId& id) -> std::string {
        Settings settings = settingsOf(variant);
        braidComm_t comm = nullptr;
        if (std::string e = initRank(&comm, nranks, id, rank, settings); !e.empty()) return e;
        std::string error;
        for (const CollCase& c : cases) {
          error = runAndCheck(comm, rank, nranks, c);
          if (!error.empty()) break;
        }
        const int peersMapped = sharedBufferMappings();
        braidCommDestroy(comm);
        if (!error.empty()) return error;
        if (peersMapped == 0) return "no peer's buffer was read in place";
        if (sharedBufferMappings() != 0) return "the peers' buffers stayed mapped after destroy";
        return "";
      },
      /*deadlineSeconds=*/240);
  EXPECT_EQ(failures(outcomes), "") << cases.size() << " cases, variant " << variant.name;
}

INSTANTIATE_TEST_SUITE_P(Ranks, SharedBufferTest,
                         ::testing::Combine(::testing::Values(2, 3, 4),
                                            ::testing::Range(0,
                                                             int(sharedBufferVariants().size()))),
                         [](const auto& info) {
                           return "n" + std::to_string(std::get<0>(info.param)) + "_" +
                                  sharedBufferVariants()[std::get<1>(info.param)].name;
                         });

// In place, what a rank sends is lent once nothing of the call writes over it again: a ring
// all-reduce lends the blocks it completes. Each rank frees its buffer before it looks, so a
// braid buffer still mapped is its peer's, read in place.
TEST(SharedBufferInPlace, RingAllReduceLendsTheBlocksItCompletes) {
  constexpr size_t kCount = 1 << 18;
  auto outcomes = runRanks(
      2,
      [&](int rank, const braidUniqueId& id) -> std::string {
        Settings settings;
        settings.add("BRAID_ALGO=ring");
        settings.add("BRAID_TIMEOUT=60");
        braidComm_t comm = nullptr;
        if (braidCommInitRankConfig(&comm, 2, id, rank, settings.config()) != braidSuccess) {
          return std::string("init failed: ") + braidGetLastError(nullptr);
        }
        void* memory = nullptr;
        if (braidMemAlloc(&memory, kCount * sizeof(float)) != braidSuccess) {
          braidCommDestroy(comm);
          return std::string("braidMemAlloc: ") + braidGetLastError(nullptr);
        }
        auto* data = static_cast<float*>(memory);
        std::string error;
        for (int call = 0; call < 3 && error.empty(); ++call) {
          for (size_t i = 0; i < kCount; ++i) data[i] = float(i % 1000) + float(rank + call);
          if (braidAllReduce(data, data, kCount, braidFloat32, braidSum, comm, nullptr) !=
              braidSuccess) {
            error = std::string("all-reduce: ") + braidGetLastError(comm);
          }
          for (size_t i = 0; i < kCount && error.empty(); ++i) {
            const float want = 2 * float(i % 1000) + float(1 + 2 * call);
            if (data[i] != want) {
              error = "element " + std::to_string(i) + " is " + std::to_string(data[i]) + ", not " +
                      std::to_string(want);
            }
          }
        }
        braidMemFree(memory);
        const int peersMapped = sharedBufferMappings();
        braidCommDestroy(comm);
        if (!error.empty()) return error;
        if (peersMapped == 0) return "the peer's buffer was never read in place";
        return "";
      },
      /*deadlineSeconds=*/120);
  EXPECT_EQ(failures(outcomes), "");
}

// A few hundred random calls (collective, type, op, count, root, in-place) in the same order on
// every rank, as an application would issue them.
std::vector<CollCase> randomCases(int nranks, uint32_t seed, int ncases) {
  std::mt19937 rng(seed);
  std::vector<CollCase> cases;
  for (int i = 0; i < ncases; ++i) {
    CollCase c;
    c.coll = static_cast<TestColl>(rng() % 7);
    c.type = static_cast<braidDataType_t>(rng() % 10);
    c.op = isReduction(c.coll) ? static_cast<braidRedOp_t>(rng() % 5) : braidSum;
    // Mostly small counts, sometimes large ones, sometimes zero.
    const uint32_t r = rng() % 100;
    c.count = r < 5 ? 0 : r < 80 ? rng() % 1000 : r < 97 ? rng() % 100000 : rng() % 1500000;
    c.root = static_cast<int>(rng() % nranks);
    c.inPlace = c.coll != TestColl::kSendRecvRing && (rng() % 2) == 0;
    c.seed = rng() % 1000;
    cases.push_back(c);
  }
  return cases;
}

class RandomSequenceTest : public ::testing::TestWithParam<int> {};

TEST_P(RandomSequenceTest, MatchesReference) {
  const int nranks = GetParam();
  const std::vector<CollCase> cases = randomCases(nranks, 1234u + nranks, 300);
  const Variant plain{"defaults", {}};
  auto outcomes = runRanks(
      nranks,
      [&](int rank, const braidUniqueId& id) {
        return runConformance(rank, nranks, id, plain, cases);
      },
      /*deadlineSeconds=*/240);
  EXPECT_EQ(failures(outcomes), "");
}

INSTANTIATE_TEST_SUITE_P(Ranks, RandomSequenceTest, ::testing::Values(2, 3, 5, 6, 8),
                         [](const auto& info) { return "n" + std::to_string(info.param); });

}  // namespace
}  // namespace braid::testing
