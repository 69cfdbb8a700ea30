#include "device/device_dispatch.h"

#include <gtest/gtest.h>

#include <vector>

#include "device/device_memory.h"

namespace braid {
namespace {

CallArgs collective(Collective coll) {
  CallArgs a;
  a.coll = coll;
  return a;
}

CallArgs p2p(Collective coll, int peer) {
  CallArgs a;
  a.coll = coll;
  a.root = peer;
  return a;
}

TEST(DevicePhases, CollectivesFollowEverything) {
  const std::vector<int> phases =
      devicePhases({collective(Collective::kAllReduce), p2p(Collective::kSend, 1),
                    collective(Collective::kBroadcast), p2p(Collective::kRecv, 2)});
  EXPECT_EQ(phases, (std::vector<int>{0, 1, 2, 3}));
}

TEST(DevicePhases, PointToPointOnDifferentConnectorsRunTogether) {
  // A ring exchange and an all-to-all written with send/recv: one launch each.
  EXPECT_EQ(devicePhases({p2p(Collective::kSend, 1), p2p(Collective::kRecv, 3)}),
            (std::vector<int>{0, 0}));
  EXPECT_EQ(devicePhases({p2p(Collective::kSend, 1), p2p(Collective::kRecv, 1),
                          p2p(Collective::kSend, 2), p2p(Collective::kRecv, 2)}),
            (std::vector<int>{0, 0, 0, 0}));
}

TEST(DevicePhases, SameConnectorKeepsItsOrder) {
  // The k-th transfer on a connector runs in phase k-1 on both ends, so phases match across ranks.
  EXPECT_EQ(devicePhases({p2p(Collective::kSend, 1), p2p(Collective::kSend, 1),
                          p2p(Collective::kRecv, 1), p2p(Collective::kSend, 2)}),
            (std::vector<int>{0, 1, 0, 0}));
}

class RouteTest : public ::testing::Test {
 protected:
  void SetUp() override {
    setPointerClassifierForTesting([this](const void* p) -> std::optional<PointerInfo> {
      if (p == device0_) return PointerInfo{MemoryKind::kDevice, 0};
      if (p == device0b_) return PointerInfo{MemoryKind::kDevice, 0};
      if (p == device1_) return PointerInfo{MemoryKind::kDevice, 1};
      return std::nullopt;
    });
  }
  void TearDown() override { setPointerClassifierForTesting({}); }

  CallArgs call(Collective coll, const void* send, void* recv) {
    CallArgs a;
    a.coll = coll;
    a.sendbuff = send;
    a.recvbuff = recv;
    a.count = 4;
    return a;
  }

  char host_[64] = {};
  char hostB_[64] = {};
  char storage_[3] = {};
  void* device0_ = &storage_[0];
  void* device0b_ = &storage_[1];
  void* device1_ = &storage_[2];
};

TEST_F(RouteTest, HostBuffersTakeTheHostPath) {
  Result<DeviceRoute> r = routeCall(call(Collective::kAllReduce, host_, hostB_), nullptr);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_FALSE(r->device);
  EXPECT_EQ(pointerInfo(host_).kind, MemoryKind::kHost);
  EXPECT_EQ(pointerInfo(nullptr).kind, MemoryKind::kHost);
}

TEST_F(RouteTest, DeviceBuffersTakeTheDevicePath) {
  Result<DeviceRoute> r = routeCall(call(Collective::kAllReduce, device0_, device0b_), nullptr);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->device);
  EXPECT_EQ(r->deviceOrdinal, 0);
}

TEST_F(RouteTest, MixedBuffersAreRejected) {
  Result<DeviceRoute> r = routeCall(call(Collective::kAllReduce, device0_, hostB_), nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), braidInvalidArgument);
  EXPECT_NE(r.status().message().find("recvbuff is host memory"), std::string::npos);

  r = routeCall(call(Collective::kAllGather, device0_, device1_), nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), braidInvalidArgument);
  EXPECT_NE(r.status().message().find("device 1"), std::string::npos);
}

TEST_F(RouteTest, PointToPointLooksOnlyAtItsBuffer) {
  // A send's recvbuff (and a receive's sendbuff) is not part of the call.
  Result<DeviceRoute> r = routeCall(call(Collective::kSend, device1_, hostB_), nullptr);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->device);
  EXPECT_EQ(r->deviceOrdinal, 1);
  r = routeCall(call(Collective::kRecv, device1_, hostB_), nullptr);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_FALSE(r->device);
}

TEST_F(RouteTest, StreamWithHostBuffersFails) {
  int fakeStream = 0;
  Result<DeviceRoute> r = routeCall(call(Collective::kAllReduce, host_, hostB_), &fakeStream);
  ASSERT_FALSE(r.ok());
  if (!builtWithCuda()) {
    EXPECT_EQ(r.status().code(), braidUnhandledCudaError);
  } else {
    // No usable CUDA here: why; with a GPU: the buffers are the problem.
    EXPECT_TRUE(r.status().code() == braidUnhandledCudaError ||
                r.status().code() == braidInvalidUsage)
        << r.status().message();
  }
}

}  // namespace
}  // namespace braid
