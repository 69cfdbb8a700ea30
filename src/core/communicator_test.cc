// Communicator::prepare: the plan a call gets, host or device (plans only: no data moves, so
// device calls are planned here without a GPU).
#include "core/communicator.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "braid.h"
#include "core/comm_handle.h"

namespace braid {
namespace {

/// The channels a plan's lanes use.
std::set<int> channelsOf(const Plan& plan) {
  std::set<int> channels;
  for (const Lane& lane : plan.lanes) channels.insert(lane.channel);
  return channels;
}

class TwoRanks : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* settings[] = {"BRAID_ALGO=ring", nullptr};
    braidConfig_t config = BRAID_CONFIG_INITIALIZER;
    config.settings = settings;
    ASSERT_EQ(braidCommInitAllConfig(comms_, 2, nullptr, &config), braidSuccess)
        << braidGetLastError(nullptr);
  }
  void TearDown() override {
    for (braidComm_t c : comms_) {
      if (c != nullptr) braidCommDestroy(c);
    }
  }
  Communicator& rank0() { return *comms_[0]->impl; }

  braidComm_t comms_[2] = {nullptr, nullptr};
};

// At INFO each rank logs where its set-up's time went, phase by phase, after a join or a split.
TEST(CommunicatorInit, EachRankLogsTheTimeOfEachPhase) {
  const std::string file =
      ::testing::TempDir() + "braid_init_timings_" + std::to_string(::getpid()) + ".log";
  std::remove(file.c_str());
  const std::string fileSetting = "BRAID_DEBUG_FILE=" + file;
  const char* settings[] = {"BRAID_DEBUG=INFO", "BRAID_DEBUG_SUBSYS=INIT", fileSetting.c_str(),
                            nullptr};
  braidConfig_t config = BRAID_CONFIG_INITIALIZER;
  config.settings = settings;
  braidComm_t comms[2] = {nullptr, nullptr};
  ASSERT_EQ(braidCommInitAllConfig(comms, 2, nullptr, &config), braidSuccess)
      << braidGetLastError(nullptr);
  braidComm_t halves[2] = {nullptr, nullptr};
  std::vector<std::thread> splitters;
  for (int r = 0; r < 2; ++r) {
    splitters.emplace_back([&, r] { braidCommSplit(comms[r], r, 0, &halves[r]); });
  }
  for (std::thread& t : splitters) t.join();
  for (braidComm_t c : halves) {
    EXPECT_NE(c, nullptr);
    if (c != nullptr) braidCommDestroy(c);
  }
  for (braidComm_t c : comms) braidCommDestroy(c);

  std::ifstream in(file);
  std::string line;
  int joined = 0, split = 0;
  while (std::getline(in, line)) {
    const size_t at = line.find("init timings, ms (process CPU): total ");
    if (at == std::string::npos) continue;
    const std::string phases = line.substr(at);
    size_t last = 0;
    const bool afterJoin = phases.find(": join ") != std::string::npos;
    const bool afterSplit = phases.find(": split ") != std::string::npos;
    EXPECT_NE(afterJoin, afterSplit) << line;
    joined += afterJoin ? 1 : 0;
    split += afterSplit ? 1 : 0;
    for (const char* phase : {" topology ", " peers ", " shm ", " network ", " tuner "}) {
      const size_t found = phases.find(std::string(",") + phase);
      EXPECT_NE(found, std::string::npos) << phase << " missing: " << line;
      if (found == std::string::npos) continue;
      EXPECT_GT(found, last) << phase << " out of order: " << line;
      last = found;
    }
  }
  EXPECT_EQ(joined, 2);
  EXPECT_EQ(split, 2);
  std::remove(file.c_str());
}

TEST_F(TwoRanks, DeviceCallsSpreadOverAChannelPer256KiB) {
  std::vector<float> in(size_t{4} << 20), out(in.size());  // 16 MiB
  CallArgs args;
  args.coll = Collective::kAllReduce;
  args.sendbuff = in.data();
  args.recvbuff = out.data();
  args.count = in.size();

  Result<PreparedCall> host = rank0().prepare(args);
  ASSERT_TRUE(host.ok()) << host.status().message();
  const std::set<int> hostChannels = channelsOf(*host.value().plan);

  args.onDevice = true;
  Result<PreparedCall> device = rank0().prepare(args);
  ASSERT_TRUE(device.ok()) << device.status().message();
  const std::set<int> deviceChannels = channelsOf(*device.value().plan);

  // 16 MiB is 64 times 256 KiB: every one of the 32 device channels, then the call check's lane
  // on the channel after them; host calls stay within the host's channels.
  const int deviceMax = rank0().deviceMaxChannels();
  EXPECT_EQ(deviceMax, 32);
  EXPECT_EQ(deviceChannels.size(), size_t(deviceMax) + 1);
  EXPECT_EQ(*deviceChannels.rbegin(), deviceMax);
  EXPECT_LT(hostChannels.size(), deviceChannels.size());
  EXPECT_LT(*hostChannels.rbegin(), deviceMax);

  // A small device call keeps the tuner's channels: 64 KiB is less than one 256 KiB share.
  args.count = 16 << 10;
  args.onDevice = false;
  Result<PreparedCall> smallHost = rank0().prepare(args);
  ASSERT_TRUE(smallHost.ok()) << smallHost.status().message();
  const size_t smallHostChannels = channelsOf(*smallHost.value().plan).size();
  args.onDevice = true;
  Result<PreparedCall> smallDevice = rank0().prepare(args);
  ASSERT_TRUE(smallDevice.ok()) << smallDevice.status().message();
  EXPECT_EQ(channelsOf(*smallDevice.value().plan).size(), smallHostChannels);
}

/// The ranks a plan's steps exchange with.
std::set<int> peersOf(const Plan& plan) {
  std::set<int> peers;
  for (const Lane& lane : plan.lanes) {
    for (const Step& step : lane.steps) {
      for (int i = 0; i < step.nsend && i < kMaxStepPeers; ++i) peers.insert(step.sendPeers[i]);
      for (int i = 0; i < step.nrecv && i < kMaxStepPeers; ++i) peers.insert(step.recvPeers[i]);
    }
  }
  return peers;
}

TEST(FourRanks, DeviceCallsOverGpuIslandsAreTunedWithStagedHopsPriced) {
  const char* settings[] = {"BRAID_CALL_CHECK=0", nullptr};
  braidConfig_t config = BRAID_CONFIG_INITIALIZER;
  config.settings = settings;
  braidComm_t comms[4] = {};
  ASSERT_EQ(braidCommInitAllConfig(comms, 4, nullptr, &config), braidSuccess)
      << braidGetLastError(nullptr);
  Communicator& rank0 = *comms[0]->impl;
  std::vector<float> in(size_t{4} << 20), out(in.size());  // 16 MiB
  CallArgs args;
  args.coll = Collective::kAllReduce;
  args.sendbuff = in.data();
  args.recvbuff = out.data();
  args.count = in.size();
  args.onDevice = true;
  const Choice host = rank0.tuner().choose(Collective::kAllReduce, args.count * sizeof(float));

  // Every GPU reaches every other (one island): the host tuner's choice, as before.
  rank0.setDeviceIslands({0, 0, 0, 0});
  Result<PreparedCall> oneIsland = rank0.prepare(args);
  ASSERT_TRUE(oneIsland.ok()) << oneIsland.status().message();
  EXPECT_EQ(oneIsland.value().plan->algo, host.algo);

  // Two hosts of two GPUs: hierarchical, grouped by island. Rank 0 exchanges with its island
  // mate and with one rank of the other island, never with rank 3 (its ring neighbour).
  rank0.setDeviceIslands({0, 0, 1, 1});
  Result<PreparedCall> twoIslands = rank0.prepare(args);
  ASSERT_TRUE(twoIslands.ok()) << twoIslands.status().message();
  EXPECT_EQ(twoIslands.value().plan->algo, Algorithm::kHier);
  EXPECT_EQ(peersOf(*twoIslands.value().plan), (std::set<int>{1, 2}));
  // Host calls keep the host tuner's choices.
  args.onDevice = false;
  Result<PreparedCall> hostCall = rank0.prepare(args);
  ASSERT_TRUE(hostCall.ok()) << hostCall.status().message();
  EXPECT_EQ(hostCall.value().plan->algo, host.algo);

  for (braidComm_t c : comms) braidCommDestroy(c);
}

}  // namespace
}  // namespace braid
