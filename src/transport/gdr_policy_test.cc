// BRAID_GDR's decision: off and "no RDMA peer" say nothing; auto falls back with one line naming
// every reason; 1 fails naming them; with every condition met, GPUDirect RDMA is used.
#include "transport/gdr_policy.h"

#include <gtest/gtest.h>

#include "base/config.h"

namespace braid {
namespace {

GdrInputs blocked(GdrMode mode) {
  GdrInputs in;
  in.mode = mode;
  in.rdmaPeers = {1, 3};
  in.nicWhyNot = "this libibverbs has no ibv_reg_dmabuf_mr";
  in.pathWhyNot = "the staged path has no FIFOs in device memory yet";
  return in;
}

TEST(GdrPolicy, ConfigSettingMapsToAMode) {
  EXPECT_EQ(gdrModeOf(Config::load({}).value().gdr), GdrMode::kAuto);
  EXPECT_EQ(gdrModeOf(Config::load({"BRAID_GDR=auto"}).value().gdr), GdrMode::kAuto);
  EXPECT_EQ(gdrModeOf(Config::load({"BRAID_GDR=0"}).value().gdr), GdrMode::kOff);
  EXPECT_EQ(gdrModeOf(Config::load({"BRAID_GDR=1"}).value().gdr), GdrMode::kRequired);
  Result<Config> bad = Config::load({"BRAID_GDR=yes"});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("BRAID_GDR"), std::string::npos);
}

TEST(GdrPolicy, AutoFallsBackWithOneLineNamingEveryReason) {
  Result<GdrDecision> d = decideGdr(blocked(GdrMode::kAuto));
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_FALSE(d->use);
  EXPECT_EQ(d->info,
            "GPUDirect RDMA not used (this libibverbs has no ibv_reg_dmabuf_mr; the staged path "
            "has no FIFOs in device memory yet): device buffers to RDMA peers are staged through "
            "pinned host memory");
}

TEST(GdrPolicy, RequiredFailsNamingWhy) {
  GdrInputs in = blocked(GdrMode::kRequired);
  in.gpuWhyNot = "GPU 0 does not support GPUDirect RDMA";
  Result<GdrDecision> d = decideGdr(in);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), braidInvalidUsage);
  for (const char* reason : {"BRAID_GDR=1", "GPU 0 does not support GPUDirect RDMA",
                             "ibv_reg_dmabuf_mr", "no FIFOs in device memory"}) {
    EXPECT_NE(d.status().message().find(reason), std::string::npos) << d.status().message();
  }
}

TEST(GdrPolicy, OffOrNoRdmaPeerSaysNothing) {
  for (GdrMode mode : {GdrMode::kOff, GdrMode::kAuto, GdrMode::kRequired}) {
    GdrInputs in = blocked(mode);
    if (mode != GdrMode::kOff) in.rdmaPeers.clear();
    Result<GdrDecision> d = decideGdr(in);
    ASSERT_TRUE(d.ok()) << d.status().message();
    EXPECT_FALSE(d->use);
    EXPECT_EQ(d->info, "");
  }
}

TEST(GdrPolicy, UsedWhereEverythingAllowsIt) {
  for (GdrMode mode : {GdrMode::kAuto, GdrMode::kRequired}) {
    GdrInputs in;
    in.mode = mode;
    in.rdmaPeers = {2};
    Result<GdrDecision> d = decideGdr(in);
    ASSERT_TRUE(d.ok());
    EXPECT_TRUE(d->use);
    EXPECT_NE(d->info.find("1 RDMA peer(s)"), std::string::npos) << d->info;
  }
}

}  // namespace
}  // namespace braid
