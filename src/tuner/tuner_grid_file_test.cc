// The grid kept between processes: written by the rank that is told to, read by a later tuner with
// the same inputs and build, costed anew for other inputs or a damaged file, and agreed on by
// ranks that split the grid with and without the file.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "base/file.h"
#include "tuner/thread_gather.h"
#include "tuner/tuner.h"
#include "tuner/tuner_test_constants.h"

namespace braid {
namespace {

namespace fs = std::filesystem;

CostModel model(const ModelConstants& c = tunerTestConstants()) {
  std::vector<RankPlacement> p(4);
  for (RankPlacement& x : p) x.hostHash = 7;
  return CostModel::create(c, p, {}, 4).value();
}

class GridFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (fs::temp_directory_path() / ("braid_grid_file_" + std::to_string(getpid()))).string();
    Tuner::forgetGrids();
  }
  void TearDown() override {
    Tuner::forgetGrids();
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  TunerOptions options(bool writes, const std::string& dir = "") const {
    TunerOptions o;
    o.nranks = 4;
    o.maxChannels = 4;
    o.slotBytes = 512 << 10;
    o.nslots = 4;
    o.gridFileDir = dir.empty() ? dir_ : dir;
    o.writesGridFile = writes;
    return o;
  }
  /// A tuner made as by a new process (nothing of the grid held in memory).
  Tuner fresh(const TunerOptions& o, const CostModel& m = model()) {
    Tuner::forgetGrids();
    Result<Tuner> t = Tuner::create(o, m, nullptr);
    EXPECT_TRUE(t.ok()) << t.status().message();
    return t.ok() ? std::move(t).value() : Tuner();
  }
  std::vector<fs::path> gridFiles() const {
    std::vector<fs::path> files;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir_, ec)) {
      if (e.path().filename().string().rfind("grid-", 0) == 0) files.push_back(e.path());
    }
    return files;
  }
  std::string dir_;
};

TEST_F(GridFile, ALaterProcessReadsTheGridTheFirstLeft) {
  TunerOptions none = options(false);
  none.gridFileDir = "";
  const Tuner alone = fresh(none);
  EXPECT_EQ(alone.gridOrigin(), GridOrigin::kCosted);
  EXPECT_TRUE(gridFiles().empty());

  const Tuner first = fresh(options(true));
  EXPECT_EQ(first.gridOrigin(), GridOrigin::kCosted);
  ASSERT_EQ(gridFiles().size(), 1u);
  EXPECT_EQ(first.gridNote(), "kept in " + gridFiles()[0].string());

  const Tuner later = fresh(options(false));
  EXPECT_EQ(later.gridOrigin(), GridOrigin::kFile);
  EXPECT_EQ(later.gridNote(), "read from " + gridFiles()[0].string());
  EXPECT_EQ(later.digest(), alone.digest());
  EXPECT_EQ(later.formatTable(), alone.formatTable());

  // A second communicator of that process takes it from memory.
  Result<Tuner> again = Tuner::create(options(false), model(), nullptr);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->gridOrigin(), GridOrigin::kProcess);
}

TEST_F(GridFile, OnlyAWritingRankLeavesOne) {
  EXPECT_EQ(fresh(options(false)).gridOrigin(), GridOrigin::kCosted);
  EXPECT_TRUE(gridFiles().empty());
  EXPECT_EQ(fresh(options(false)).gridOrigin(), GridOrigin::kCosted);
}

TEST_F(GridFile, OtherLimitsOrConstantsAreCostedAnew) {
  fresh(options(true));
  TunerOptions fewerChannels = options(true);
  fewerChannels.maxChannels = 2;
  EXPECT_EQ(fresh(fewerChannels).gridOrigin(), GridOrigin::kCosted);
  EXPECT_EQ(fresh(options(true), model(tunerTestConstants(0.6))).gridOrigin(), GridOrigin::kCosted);
  EXPECT_EQ(gridFiles().size(), 3u);
  EXPECT_EQ(fresh(fewerChannels).gridOrigin(), GridOrigin::kFile);
}

TEST_F(GridFile, ADamagedFileIsCostedAnewAndReplaced) {
  const Tuner first = fresh(options(true));
  ASSERT_EQ(gridFiles().size(), 1u);
  const fs::path file = gridFiles()[0];
  std::string bytes = readFile(file.string()).value();
  bytes[bytes.size() - 100] ^= 0x40;  // a cell's bits, the frame intact
  std::ofstream(file, std::ios::binary | std::ios::trunc) << bytes;

  const Tuner second = fresh(options(true));
  EXPECT_EQ(second.gridOrigin(), GridOrigin::kCosted);
  EXPECT_EQ(second.digest(), first.digest());
  EXPECT_EQ(fresh(options(false)).gridOrigin(), GridOrigin::kFile);
}

TEST_F(GridFile, AFolderThatCannotBeWrittenIsNoErrorAndSaysWhy) {
  fs::create_directories(dir_);
  const std::string blocker = dir_ + "/a-file";
  std::ofstream(blocker) << "x";
  const Tuner t = fresh(options(true, blocker + "/below"));
  EXPECT_EQ(t.gridOrigin(), GridOrigin::kCosted);
  EXPECT_EQ(t.gridNote().rfind("not kept: ", 0), 0u) << t.gridNote();
}

/// Tuners of `sharers` ranks (threads) that split the grid, rank r made with options(r).
template <typename OptionsOf>
std::vector<Result<Tuner>> shareAmong(int sharers, OptionsOf optionsOf, bool keptFirst = false) {
  Tuner::forgetGrids();
  ThreadGather gather(sharers);
  std::vector<Result<Tuner>> ranks(size_t(sharers), Result<Tuner>(internalError("not run")));
  std::vector<std::thread> threads;
  for (int r = 0; r < sharers; ++r) {
    threads.emplace_back([&, r] {
      // keptFirst: as setUpTuner does where some ranks lack the grid, a rank that finds it sends
      // its share from the tuner it made of it.
      if (keptFirst) {
        Result<std::optional<Tuner>> kept =
            Tuner::createFromKeptGrid(optionsOf(r), model(), nullptr, sharers);
        if (kept.ok() && kept->has_value()) {
          const Status shared = (*kept)->shareKeptGrid(model(), gather.share(r));
          ranks[size_t(r)] = shared.ok() ? Result<Tuner>(std::move(**kept)) : Result<Tuner>(shared);
          return;
        }
      }
      ranks[size_t(r)] = Tuner::create(optionsOf(r), model(), nullptr, gather.share(r));
    });
  }
  for (std::thread& t : threads) t.join();
  return ranks;
}

// A rank asks first whether the grid is kept, costing nothing: not before the first process kept
// it, then the tuner create builds; in a process of its own, or beside one that holds the grid.
// Ranks split among differ by their key (staged from 32 on), so 64 sharers find no grid of 4's.
TEST_F(GridFile, ATunerFromTheKeptGridIsTheOneCreateBuilds) {
  Tuner::forgetGrids();
  Result<std::optional<Tuner>> none = Tuner::createFromKeptGrid(options(true), model(), nullptr, 4);
  ASSERT_TRUE(none.ok()) << none.status().message();
  EXPECT_FALSE(none->has_value());
  EXPECT_TRUE(gridFiles().empty());

  const Tuner first = fresh(options(true));
  for (bool sameProcess : {false, true}) {
    if (!sameProcess) Tuner::forgetGrids();
    Result<std::optional<Tuner>> kept =
        Tuner::createFromKeptGrid(options(false), model(), nullptr, 4);
    ASSERT_TRUE(kept.ok()) << kept.status().message();
    ASSERT_TRUE(kept->has_value());
    EXPECT_EQ((*kept)->digest(), first.digest());
    EXPECT_EQ((*kept)->gridOrigin(), sameProcess ? GridOrigin::kProcess : GridOrigin::kFile);
  }
  Result<std::optional<Tuner>> staged =
      Tuner::createFromKeptGrid(options(false), model(), nullptr, 64);
  ASSERT_TRUE(staged.ok()) << staged.status().message();
  EXPECT_FALSE(staged->has_value());
  // Bad settings fail as create does.
  TunerOptions bad = options(false);
  bad.algo = "allreduce:nosuch";
  EXPECT_FALSE(Tuner::createFromKeptGrid(bad, model(), nullptr, 4).ok());
}

// Some ranks find the file and others do not (hosts with and without it), from 32 ranks on with
// the long sizes shared in rounds: every rank still ends with the grid they all cost together.
TEST_F(GridFile, RanksWithAndWithoutTheFileAgree) {
  constexpr int kSharers = 40;
  std::vector<Result<Tuner>> costed = shareAmong(kSharers, [&](int r) { return options(r == 0); });
  ASSERT_TRUE(costed[0].ok()) << costed[0].status().message();
  ASSERT_EQ(gridFiles().size(), 1u);
  const std::string empty = dir_ + "/empty";
  for (bool keptFirst : {false, true}) {
    std::vector<Result<Tuner>> mixed = shareAmong(
        kSharers, [&](int r) { return options(false, r % 2 == 0 ? dir_ : empty); }, keptFirst);
    int fromFile = 0;
    for (int r = 0; r < kSharers; ++r) {
      ASSERT_TRUE(mixed[size_t(r)].ok())
          << "rank " << r << ": " << mixed[size_t(r)].status().message();
      EXPECT_EQ(mixed[size_t(r)]->digest(), costed[0]->digest()) << "rank " << r;
      fromFile += mixed[size_t(r)]->gridOrigin() == GridOrigin::kFile;
    }
    EXPECT_GT(fromFile, 0) << (keptFirst ? "kept first" : "create");
  }
  // Only a tuner made of a kept grid has one to share.
  Tuner::forgetGrids();
  const Tuner fromCreate = fresh(options(false));
  EXPECT_FALSE(fromCreate.shareKeptGrid(model(), {}).ok());
}

}  // namespace
}  // namespace braid
