// Multi-process conformance: every collective, datatype, op, count (incl. 0 and counts not
// divisible by the rank count), in and out of place, rotating roots, at rank counts that are and
// are not powers of two, under several data-path settings. Each rank is a process.
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "braid.h"
#include "tests/support/collective_check.h"
#include "tests/support/multiprocess.h"

namespace braid::testing {
namespace {

struct Variant {
  std::string name;
  std::vector<std::string> settings;
};

const std::vector<Variant>& variants() {
  static const std::vector<Variant> kVariants = {
      {"defaults", {}},
      // Tiny slots, shallow FIFOs and two channels: every path pipelines over many chunks.
      {"small_chunks", {"BRAID_CHUNK_BYTES=1K", "BRAID_NSLOTS=2", "BRAID_NCHANNELS=2"}},
      // Every algorithm forced in turn (for the collectives it serves), one with several channels.
      {"ring", {"BRAID_ALGO=ring", "BRAID_NCHANNELS=3", "BRAID_CHUNK_BYTES=8K"}},
      {"tree", {"BRAID_ALGO=tree", "BRAID_CHUNK_BYTES=8K"}},
      {"rhd", {"BRAID_ALGO=rhd", "BRAID_CHUNK_BYTES=8K"}},
      {"rd", {"BRAID_ALGO=rd", "BRAID_CHUNK_BYTES=8K"}},
      {"direct", {"BRAID_ALGO=direct", "BRAID_CHUNK_BYTES=8K"}},
  };
  return kVariants;
}

std::string runConformance(int rank, int nranks, const braidUniqueId& id, const Variant& variant,
                           const std::vector<CollCase>& cases) {
  Settings settings;
  for (const std::string& s : variant.settings) settings.add(s);
  settings.add("BRAID_TIMEOUT=60");
  braidComm_t comm = nullptr;
  braidResult_t rc = braidCommInitRankConfig(&comm, nranks, id, rank, settings.config());
  if (rc != braidSuccess) {
    return std::string("init failed: ") + braidGetErrorString(rc) + ": " + braidGetLastError(nullptr);
  }
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
                                            ::testing::Range(0, 7)),
                         [](const auto& info) {
                           return "n" + std::to_string(std::get<0>(info.param)) + "_" +
                                  variants()[std::get<1>(info.param)].name;
                         });

}  // namespace
}  // namespace braid::testing
