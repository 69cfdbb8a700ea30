// A CUDA build on a machine without a usable GPU: device calls fail with braidUnhandledCudaError
// and a reason, host calls are unaffected. The device pointers are simulated (a test classifier
// marks two host arrays as device memory), so this runs wherever there is no GPU; with one it
// skips, since the device path would then really run on those host arrays.
#include <gtest/gtest.h>

#include <string>

#include "braid.h"
#include "device/device_memory.h"
#include "tests/gpu/gpu_support.h"
#include "tests/support/multiprocess.h"

namespace braid::testing {
namespace {

TEST(GpuAbsent, DeviceCallsFailCleanlyAndHostCallsStillWork) {
  if (visibleGpus() > 0) GTEST_SKIP() << "a GPU is present: the device path really runs";
  constexpr int kRanks = 2;
  auto outcomes = runRanks(
      kRanks,
      [&](int rank, const braidUniqueId& id) -> std::string {
        float fakeIn[16] = {}, fakeOut[16] = {};
        setPointerClassifierForTesting([&](const void* p) -> std::optional<PointerInfo> {
          if (p == fakeIn || p == fakeOut) return PointerInfo{MemoryKind::kDevice, 0};
          return std::nullopt;
        });
        braidComm_t comm = nullptr;
        if (braidCommInitRank(&comm, kRanks, id, rank) != braidSuccess) {
          return std::string("init: ") + braidGetLastError(nullptr);
        }
        std::string e;
        braidResult_t rc =
            braidAllReduce(fakeIn, fakeOut, 16, braidFloat32, braidSum, comm, nullptr);
        if (rc != braidUnhandledCudaError) {
          e = std::string("device call returned ") + braidGetErrorString(rc);
        } else if (std::string(braidGetLastError(comm)).empty()) {
          e = "device call failed without a reason";
        }
        // A stream with host buffers: CUDA cannot run here either.
        int notAStream = 0;
        float in[16], out[16];
        for (int i = 0; i < 16; ++i) in[i] = static_cast<float>(rank + i);
        rc = braidAllReduce(in, out, 16, braidFloat32, braidSum, comm, &notAStream);
        if (e.empty() && rc != braidUnhandledCudaError) {
          e = std::string("stream call returned ") + braidGetErrorString(rc);
        }
        // Host buffers on the same communicator still work.
        rc = braidAllReduce(in, out, 16, braidFloat32, braidSum, comm, nullptr);
        if (e.empty() && rc != braidSuccess) {
          e = std::string("host call after the device failure: ") + braidGetLastError(comm);
        }
        for (int i = 0; e.empty() && i < 16; ++i) {
          const float expected = static_cast<float>(0 + 1 + 2 * i);
          if (out[i] != expected) e = "host all-reduce element " + std::to_string(i) + " wrong";
        }
        braidCommDestroy(comm);
        setPointerClassifierForTesting({});
        return e;
      },
      /*deadlineSeconds=*/120);
  EXPECT_EQ(failures(outcomes), "");
}

}  // namespace
}  // namespace braid::testing
