#include "kernels/cuda/device_abi.h"

#include <gtest/gtest.h>

#include <type_traits>

namespace braid::gpu {
namespace {

// The device executor reads steps through deviceStepShape; it must agree with the host's table.
TEST(DeviceAbi, StepShapesMatchTheHost) {
  for (int i = 0; i <= static_cast<int>(StepOp::kSendRecvReduce); ++i) {
    const auto op = static_cast<StepOp>(i);
    const StepShape host = stepShape(op);
    const StepShape device = deviceStepShape(op);
    SCOPED_TRACE(std::string(stepOpName(op)));
    EXPECT_EQ(host.recvs, device.recvs);
    EXPECT_EQ(host.sends, device.sends);
    EXPECT_EQ(host.readsSrc, device.readsSrc);
    EXPECT_EQ(host.readsSrc2, device.readsSrc2);
    EXPECT_EQ(host.writesDst, device.writesDst);
    EXPECT_EQ(host.reduces, device.reduces);
    EXPECT_EQ(host.independent, device.independent);
  }
}

// Steps, headers and the control block cross to the device byte for byte.
TEST(DeviceAbi, SharedStructsAreTriviallyCopyable) {
  EXPECT_TRUE(std::is_trivially_copyable_v<Step>);
  EXPECT_TRUE(std::is_trivially_copyable_v<SlotHeader>);
  EXPECT_TRUE(std::is_trivially_copyable_v<DeviceCall>);
  EXPECT_TRUE(std::is_trivially_copyable_v<DeviceControl>);
  EXPECT_EQ(sizeof(CallDescriptor) % 8, 0u);
  EXPECT_EQ(sizeof(SlotHeader) % 8, 0u);
}

}  // namespace
}  // namespace braid::gpu
