#include "env_translate.h"

#include <gtest/gtest.h>

namespace braid::ncclshim {
namespace {

std::string algo(std::string_view value, std::vector<std::string>* notes = nullptr) {
  std::vector<std::string> ignored;
  std::string out;
  const std::string error = translateAlgo(value, &out, notes ? notes : &ignored);
  return error.empty() ? out : "error: " + error;
}

TEST(NcclEnvTranslate, AlgoNamesMapToBraidNames) {
  EXPECT_EQ(algo("Ring"), "ring");
  EXPECT_EQ(algo("Tree,Ring"), "tree,ring");
  EXPECT_EQ(algo("^Tree"), "^tree");
  EXPECT_EQ(algo("allreduce:Tree;broadcast:Ring"), "allreduce:tree;broadcast:ring");
  EXPECT_EQ(algo("rhd"), "rhd");  // Braid's own names pass through
}

TEST(NcclEnvTranslate, AlgoDropsNcclOnlyAlgorithmsWithANote) {
  std::vector<std::string> notes;
  EXPECT_EQ(algo("NVLS,Ring,CollNetDirect", &notes), "ring");
  ASSERT_EQ(notes.size(), 2u);
  EXPECT_NE(notes[0].find("nvls"), std::string::npos);
  // A term left with nothing Braid has is dropped whole: the tuner chooses.
  notes.clear();
  EXPECT_EQ(algo("allreduce:NVLS;broadcast:tree", &notes), "broadcast:tree");
  EXPECT_EQ(notes.size(), 2u);
  EXPECT_EQ(algo("^PAT"), "");
}

TEST(NcclEnvTranslate, AlgoRangesPassThroughAndUnknownNamesFail) {
  EXPECT_EQ(algo("allreduce:0-64K:rhd,64K-inf:ring"), "allreduce:0-64k:rhd,64k-inf:ring");
  EXPECT_EQ(algo("Ring;;"), "ring");
  // Names NCCL does not have go to Braid, which validates them at init.
  EXPECT_EQ(algo("Ring,hier"), "ring,hier");
  EXPECT_EQ(algo("ring,tr*ee").rfind("error: NCCL_ALGO: 'tr*ee'", 0), 0u);
}

TEST(NcclEnvTranslate, DebugSubsysMapsNamesAndKeepsNegation) {
  std::string out;
  EXPECT_EQ(translateDebugSubsys("INIT,GRAPH,TUNING", &out), "");
  EXPECT_EQ(out, "INIT,TOPO,TUNE");
  EXPECT_EQ(translateDebugSubsys("^bootstrap,PROFILE", &out), "");
  EXPECT_EQ(out, "^BOOT");
  EXPECT_EQ(translateDebugSubsys("ENV,INIT", &out), "");
  EXPECT_EQ(out, "INIT");
  EXPECT_NE(translateDebugSubsys("INIT,WHATEVER", &out), "");
}

TEST(NcclEnvTranslate, EnvironmentBecomesSettings) {
  EnvTranslation t;
  ASSERT_EQ(translateEnvironment(
                {"NCCL_DEBUG=info", "NCCL_ALGO=Tree", "NCCL_SOCKET_IFNAME=^lo", "NCCL_NTHREADS=512",
                 "PATH=/bin", "NCCL_HOSTID=h1", "NCCL_IB_GID_INDEX=3"},
                &t),
            "");
  EXPECT_EQ(t.settings, (std::vector<std::string>{"BRAID_DEBUG=INFO", "BRAID_ALGO=tree",
                                                  "BRAID_SOCKET_IFNAME=^lo", "BRAID_IB_GID_INDEX=3",
                                                  "BRAID_HOSTID=h1"}));
  EXPECT_TRUE(t.printVersion);
  ASSERT_EQ(t.sources.size(), 5u);
  EXPECT_EQ(t.sources[1], (std::pair<std::string, std::string>{"BRAID_ALGO", "NCCL_ALGO=Tree"}));
  bool ignoredNoted = false;
  for (const std::string& note : t.notes) {
    if (note.find("NCCL_NTHREADS ignored") != std::string::npos) ignoredNoted = true;
  }
  EXPECT_TRUE(ignoredNoted);
}

TEST(NcclEnvTranslate, BraidVariablesWin) {
  EnvTranslation t;
  ASSERT_EQ(translateEnvironment({"NCCL_ALGO=Ring", "BRAID_ALGO=rhd"}, &t), "");
  EXPECT_TRUE(t.settings.empty());
  ASSERT_FALSE(t.notes.empty());
  EXPECT_NE(t.notes[0].find("BRAID_ALGO is set"), std::string::npos);
}

TEST(NcclEnvTranslate, TransportSwitchesAndChannels) {
  EnvTranslation t;
  ASSERT_EQ(translateEnvironment({"NCCL_P2P_DISABLE=1", "NCCL_SHM_DISABLE=0", "NCCL_NET=Socket",
                                  "NCCL_MIN_NCHANNELS=4", "NCCL_MAX_NCHANNELS=4"},
                                 &t),
            "");
  EXPECT_EQ(t.settings, (std::vector<std::string>{"BRAID_NCHANNELS=4", "BRAID_TRANSPORT=^p2p,ib"}));
  EnvTranslation unequal;
  ASSERT_EQ(translateEnvironment({"NCCL_MIN_NCHANNELS=2", "NCCL_MAX_NCHANNELS=8"}, &unequal), "");
  EXPECT_TRUE(unequal.settings.empty());
}

TEST(NcclEnvTranslate, MalformedValuesNameTheVariable) {
  EnvTranslation t;
  EXPECT_EQ(translateEnvironment({"NCCL_DEBUG=LOUD"}, &t).rfind("NCCL_DEBUG:", 0), 0u);
  EXPECT_EQ(translateEnvironment({"NCCL_IB_DISABLE=yes"}, &t).rfind("NCCL_IB_DISABLE:", 0), 0u);
  EXPECT_EQ(translateEnvironment({"NCCL_NET=Carrier"}, &t).rfind("NCCL_NET:", 0), 0u);
  EXPECT_EQ(translateEnvironment({"NCCL_ALGO=ring/tree"}, &t).rfind("NCCL_ALGO:", 0), 0u);
}

TEST(NcclEnvTranslate, NetName) {
  std::string transport;
  EXPECT_EQ(translateNetName("Socket", &transport), "");
  EXPECT_EQ(transport, "^ib");
  EXPECT_EQ(translateNetName("IB", &transport), "");
  EXPECT_EQ(transport, "");
  EXPECT_NE(translateNetName("Pigeon", &transport), "");
}

}  // namespace
}  // namespace braid::ncclshim
