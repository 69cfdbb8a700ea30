#include "core/tools_api.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include "algorithms/algorithms.h"
#include "base/config.h"
#include "tuner/tuner.h"
#include "tuner/tuning_table.h"

namespace braid::tools {
namespace {

TEST(ToolsApi, QueriesNeedALiveCommunicator) {
  TunerChoice choice;
  EXPECT_EQ(tunerChoice(nullptr, "allreduce", 8, false, &choice), "null communicator");
  double us = 0;
  EXPECT_FALSE(tunerPredictionUs(nullptr, "allreduce", "ring", 8, &us).empty());
  std::string table;
  EXPECT_FALSE(tunerTable(nullptr, &table).empty());
}

TEST(ToolsApi, AlgorithmsAreTheLibrarysByName) {
  std::vector<std::string> expected;
  for (Algorithm a : braid::algorithmsFor(Collective::kAllReduce)) {
    expected.emplace_back(algorithmName(a));
  }
  EXPECT_EQ(algorithmsFor("allreduce"), expected);
  EXPECT_TRUE(algorithmsFor("allreduse").empty());
}

TEST(ToolsApi, TuneSpaceIsTheTunersCandidates) {
  TuneSpace space;
  ASSERT_EQ(tuneSpace(&space), "");
  EXPECT_EQ(space.chunkBytes,
            std::vector<uint32_t>(Tuner::kChunkCandidates.begin(), Tuner::kChunkCandidates.end()));
  EXPECT_EQ(space.channels,
            std::vector<int>(Tuner::kChannelCandidates.begin(), Tuner::kChannelCandidates.end()));
  EXPECT_GT(space.slotBytes, 0u);
  EXPECT_GE(space.maxChannels, 1);
}

TEST(ToolsApi, EnvironmentVariablesAreTheConfigTable) {
  const std::vector<EnvVariable> vars = environmentVariables();
  ASSERT_EQ(vars.size(), configVariables().size());
  for (size_t i = 0; i < vars.size(); ++i) {
    EXPECT_EQ(vars[i].name, configVariables()[i].name);
    EXPECT_EQ(vars[i].defaultText, configVariables()[i].defaultText);
    EXPECT_EQ(vars[i].doc, configVariables()[i].doc);
  }
}

TEST(ToolsApi, ParsersAreTheConfigs) {
  int64_t n = 0;
  EXPECT_EQ(parseInteger("-1", -1, 4, &n), "");
  EXPECT_EQ(n, -1);
  EXPECT_EQ(parseInteger("5", -1, 4, &n), braid::parseInteger("5", -1, 4).status().message());
  uint64_t bytes = 0;
  EXPECT_EQ(parseByteSize("3M", &bytes), "");
  EXPECT_EQ(bytes, 3u << 20);
  EXPECT_EQ(parseByteSize("3X", &bytes), braid::parseByteSize("3X").status().message());
}

class TuningFile : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/braid-tools-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string path(const std::string& name) const { return dir_ + "/" + name; }

 private:
  std::string dir_;
};

TEST_F(TuningFile, MergeWritesATableTheTunerReads) {
  const std::string file = path("t.tuning");
  const std::vector<TuningLine> allreduce = {{0, 512, false, "direct", 32 << 10, 1, 5},
                                             {512, 0, true, "ring", 512 << 10, 2, 300}};
  ASSERT_EQ(mergeTuningTable(file, "allreduce", 4, allreduce), "");
  ASSERT_EQ(mergeTuningTable(file, "broadcast", 4, {{0, 0, true, "tree", 128 << 10, 4, -1}}), "");
  Result<TuningTable> table = TuningTable::load(file);
  ASSERT_TRUE(table.ok()) << table.status().message();
  EXPECT_EQ(table->find(Collective::kAllReduce, 4, 100)->algo, Algorithm::kDirect);
  const TuningEntry* large = table->find(Collective::kAllReduce, 4, 600);
  ASSERT_NE(large, nullptr);
  EXPECT_EQ(large->algo, Algorithm::kRing);
  EXPECT_EQ(large->chunkBytes, 512u << 10);
  EXPECT_EQ(large->nchannels, 2);
  EXPECT_EQ(table->find(Collective::kBroadcast, 4, 100)->algo, Algorithm::kTree);
  // Merging again replaces only its own collective's lines.
  ASSERT_EQ(mergeTuningTable(file, "allreduce", 4, {{0, 0, true, "rd", 32 << 10, 1, 7}}), "");
  table = TuningTable::load(file);
  ASSERT_TRUE(table.ok());
  EXPECT_EQ(table->find(Collective::kAllReduce, 4, 600)->algo, Algorithm::kRd);
  EXPECT_EQ(table->find(Collective::kBroadcast, 4, 100)->algo, Algorithm::kTree);
}

TEST_F(TuningFile, AFileThatIsNoTableIsLeftAlone) {
  const std::string file = path("notes.txt");
  std::ofstream(file) << "my notes\n";
  const std::string error =
      mergeTuningTable(file, "allreduce", 2, {{0, 0, true, "ring", 32 << 10, 1, 1}});
  EXPECT_EQ(error.rfind("--tune: not overwriting " + file + ": ", 0), 0u) << error;
  std::ifstream in(file);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "my notes\n");
  EXPECT_NE(mergeTuningTable(path("x"), "allreduce", 2, {{0, 0, true, "bogus", 32 << 10, 1, 1}}),
            "");
  EXPECT_NE(mergeTuningTable(path("y"), "send", 2, {}), "");
}

}  // namespace
}  // namespace braid::tools
