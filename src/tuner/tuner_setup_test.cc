// setUpTuner with threads as ranks over a real bootstrap: rank 0's calibration reaches every rank,
// all ranks build the same table, the calibration cache is read on the next init, and tuning
// files that are malformed or differ between ranks fail everywhere with a clear message.
#include "tuner/tuner_setup.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>

#include "base/config.h"
#include "base/log.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/bootstrap_threads.h"
#include "topology/discover.h"
#include "topology/locality.h"
#include "tuner/calibration.h"
#include "tuner/tuner.h"

namespace braid {
namespace {

constexpr double kTimeout = 60;

class TunerSetUp : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/braid-tuner-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
    Result<Topology> t = discoverTopology({});
    ASSERT_TRUE(t.ok()) << t.status().message();
    topology_ = std::move(t).value();
    clearProcessCalibrations();
  }
  void TearDown() override {
    clearProcessCalibrations();
    std::filesystem::remove_all(dir_);
  }

  std::string write(const std::string& name, const std::string& text) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path) << text;
    return path;
  }

  /// Runs setUpTuner on n threads; tuningFile(r) is rank r's BRAID_TUNING_FILE. Returns each
  /// rank's tuner digest or error; rank 0 logs at INFO to `log`.
  std::vector<Result<uint64_t>> run(int n, const std::function<std::string(int)>& tuningFile,
                                    const std::string& log) {
    std::vector<Result<uint64_t>> out(size_t(n), Result<uint64_t>(internalError("not run")));
    const std::vector<Status> joined = onBootstrapThreads(n, kTimeout, [&](int r, Bootstrap& b) {
      Config config;
      config.slotBytes = 512 << 10;
      config.tuningFile = tuningFile(r);
      config.netProbe = netProbe_;
      Logger logger(r == 0 ? LogLevel::kInfo : LogLevel::kNone, kAllSubsys, r == 0 ? log : "");
      TunerContext ctx;
      ctx.config = &config;
      ctx.logger = &logger;
      ctx.bootstrap = &b;
      ctx.topology = &topology_;
      ctx.placements.assign(size_t(n), {77, computeLocality(topology_, topology_.allPus())});
      for (int q = 0; q < n; ++q) ctx.placements[size_t(q)].hostHash = hostOf_(q);
      ctx.rank = r;
      ctx.maxChannels = 4;
      ctx.calibrationDir = dir_ + "/cache";
      Result<Tuner> t = setUpTuner(ctx);
      if (t.ok()) {
        out[size_t(r)] = t.value().digest();
      } else {
        out[size_t(r)] = t.status();
      }
      return okStatus();
    });
    for (int r = 0; r < n; ++r) {
      if (!joined[size_t(r)].ok()) out[size_t(r)] = joined[size_t(r)];
    }
    return out;
  }

  static std::string read(const std::string& path) {
    std::ifstream in(path);
    std::ostringstream os;
    os << in.rdbuf();
    return os.str();
  }

  std::string dir_;
  Topology topology_;
  std::function<uint64_t(int)> hostOf_ = [](int) { return uint64_t{77}; };
  int netProbe_ = 1;
};

TEST_F(TunerSetUp, EveryRankBuildsRankZerosTableAndTheCacheIsReadNextTime) {
  const std::string log1 = dir_ + "/first.log";
  std::vector<Result<uint64_t>> first = run(
      3, [](int) { return std::string(); }, log1);
  for (int r = 0; r < 3; ++r) {
    ASSERT_TRUE(first[size_t(r)].ok()) << r << ": " << first[size_t(r)].status().message();
    EXPECT_EQ(first[size_t(r)].value(), first[0].value());
  }
  const std::string text1 = read(log1);
  EXPECT_NE(text1.find("calibration measured " + dir_ + "/cache/calibration-"), std::string::npos)
      << text1;
  EXPECT_NE(text1.find("tuner table for 3 ranks"), std::string::npos) << text1;
  EXPECT_NE(text1.find("allreduce"), std::string::npos);

  // The next process (the cache in memory forgotten) reads the file, and builds the same table.
  // A file whose hand-off is over twice today's was measured in a disturbed moment (a busy CI
  // host) and is measured again by design; then the next process reads the new file.
  uint64_t measured = first[0].value();
  bool readTheFile = false;
  for (int attempt = 0; attempt < 3 && !readTheFile; ++attempt) {
    clearProcessCalibrations();
    const std::string log = dir_ + "/next-" + std::to_string(attempt) + ".log";
    std::vector<Result<uint64_t>> next = run(
        3, [](int) { return std::string(); }, log);
    ASSERT_TRUE(next[0].ok()) << next[0].status().message();
    const std::string text = read(log);
    if (text.find("calibration cache file " + dir_ + "/cache/calibration-") != std::string::npos) {
      EXPECT_EQ(next[0].value(), measured);
      readTheFile = true;
    } else {
      ASSERT_NE(text.find("measuring again: its hand-off of"), std::string::npos) << text;
      measured = next[0].value();
    }
  }
  EXPECT_TRUE(readTheFile) << "the cached calibration was measured again three times in a row";
}

// The grid, costed by the ranks together, is kept beside the calibration by the first rank of each
// host; the next process with the same inputs reads it and costs nothing.
TEST_F(TunerSetUp, TheNextProcessReadsTheGridTheFirstKept) {
  Tuner::forgetGrids();
  const std::string log1 = dir_ + "/first.log";
  std::vector<Result<uint64_t>> first = run(
      3, [](int) { return std::string(); }, log1);
  ASSERT_TRUE(first[0].ok()) << first[0].status().message();
  EXPECT_NE(read(log1).find("(grid costed: kept in " + dir_ + "/cache/grid-"), std::string::npos)
      << read(log1);
  // As in the test above, a calibration measured again makes other constants, and another grid,
  // kept in turn: the process after reads that one.
  uint64_t kept = first[0].value();
  bool readTheGrid = false;
  for (int attempt = 0; attempt < 3 && !readTheGrid; ++attempt) {
    clearProcessCalibrations();
    Tuner::forgetGrids();
    const std::string log = dir_ + "/next-" + std::to_string(attempt) + ".log";
    std::vector<Result<uint64_t>> next = run(
        3, [](int) { return std::string(); }, log);
    ASSERT_TRUE(next[0].ok()) << next[0].status().message();
    const std::string text = read(log);
    if (text.find("calibration cache file") != std::string::npos) {
      // Rank 0 reads the file, or finds what another rank of this process read from it.
      const bool fromFile =
          text.find("(grid from a file: read from " + dir_ + "/cache/grid-") != std::string::npos;
      EXPECT_TRUE(fromFile || text.find("(grid from this process") != std::string::npos) << text;
      // Every rank found it, so they compared digests and gathered nothing else.
      EXPECT_NE(text.find("every rank had it, no cells gathered"), std::string::npos) << text;
      EXPECT_EQ(next[0].value(), kept);
      readTheGrid = true;
    } else {
      kept = next[0].value();
    }
  }
  EXPECT_TRUE(readTheGrid) << "the cached calibration was measured again three times in a row";
  Tuner::forgetGrids();
}

TEST_F(TunerSetUp, MalformedTuningFileFailsEveryRankNamingTheLine) {
  const std::string file = write("bad.tuning",
                                 "braid-tuning-table 1\n"
                                 "allreduce 2 0 inf ring 128K 1\n"
                                 "allreduce 2 0 1K rd 128K 1\n");
  std::vector<Result<uint64_t>> out = run(
      2, [&](int) { return file; }, dir_ + "/log");
  for (int r = 0; r < 2; ++r) {
    ASSERT_FALSE(out[size_t(r)].ok()) << r;
    EXPECT_NE(out[size_t(r)].status().message().find("BRAID_TUNING_FILE"), std::string::npos);
    EXPECT_NE(out[size_t(r)].status().message().find(file + ":3: size range overlaps"),
              std::string::npos)
        << out[size_t(r)].status().message();
  }
}

TEST_F(TunerSetUp, TuningFilesThatDifferBetweenRanksAreAnError) {
  const std::string a = write("a.tuning", "braid-tuning-table 1\nallreduce 2 0 inf ring 128K 1\n");
  const std::string b = write("b.tuning", "braid-tuning-table 1\nallreduce 2 0 inf rd 128K 1\n");
  std::vector<Result<uint64_t>> out = run(
      2, [&](int r) { return r == 0 ? a : b; }, dir_ + "/log");
  for (int r = 0; r < 2; ++r) {
    ASSERT_FALSE(out[size_t(r)].ok()) << r;
    EXPECT_NE(
        out[size_t(r)].status().message().find("rank 1 built another tuner table than rank 0"),
        std::string::npos)
        << out[size_t(r)].status().message();
  }
  // The same file on both: fine, and it differs from the model alone.
  std::vector<Result<uint64_t>> same = run(
      2, [&](int) { return a; }, dir_ + "/log");
  std::vector<Result<uint64_t>> none = run(
      2, [&](int) { return std::string(); }, dir_ + "/log");
  ASSERT_TRUE(same[0].ok()) << same[0].status().message();
  ASSERT_TRUE(none[0].ok()) << none[0].status().message();
  EXPECT_EQ(same[0].value(), same[1].value());
  EXPECT_NE(same[0].value(), none[0].value());
}

TEST_F(TunerSetUp, RanksOnTwoHostsShareTheProbedLinkAndTheProbeCanBeTurnedOff) {
  // Ranks 0 and 2 on one "host", 1 and 3 on another, all on loopback.
  hostOf_ = [](int r) { return uint64_t(100 + r % 2); };
  const std::string probed = dir_ + "/probed.log";
  std::vector<Result<uint64_t>> withProbe = run(
      4, [](int) { return std::string(); }, probed);
  for (int r = 0; r < 4; ++r) {
    ASSERT_TRUE(withProbe[size_t(r)].ok()) << r << ": " << withProbe[size_t(r)].status().message();
    EXPECT_EQ(withProbe[size_t(r)].value(), withProbe[0].value()) << r;
  }
  const std::string text = read(probed);
  EXPECT_NE(text.find("measured by the link probe (rank 0 <-> rank 1"), std::string::npos) << text;

  netProbe_ = 0;
  const std::string off = dir_ + "/off.log";
  std::vector<Result<uint64_t>> without = run(
      4, [](int) { return std::string(); }, off);
  for (int r = 0; r < 4; ++r) {
    ASSERT_TRUE(without[size_t(r)].ok()) << r << ": " << without[size_t(r)].status().message();
    EXPECT_EQ(without[size_t(r)].value(), without[0].value()) << r;
  }
  EXPECT_NE(
      read(off).find("from the topology (NIC port, else the default link): BRAID_NET_PROBE=0"),
      std::string::npos)
      << read(off);
}

}  // namespace
}  // namespace braid
