// The device executor's protocol on host threads (HostMemoryOps): slots cross between threads
// intact and in order through shallow FIFOs; a slot of another call or size, an abort, a timeout
// and another lane's failure stop a lane as the kernel stops; the operations come in the order
// the CUDA memory operations need (fences between data and counters); and every collective x
// algorithm runs exact on host lanes standing in for thread blocks, posting and freeing exactly
// the slots countDeviceSlots counts.
#include "kernels/executor_protocol.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "algorithms/algorithms.h"
#include "kernels/host_memory_ops.h"
#include "tests/support/plan_case.h"

namespace braid::gpu {
namespace {

using testing::HostFifoMesh;
using testing::PlanCase;
using testing::PlanCaseSpec;

CallDescriptor callNumber(uint32_t seq) { return testing::allReduceCall(seq, braidInt32, 1000); }

StepContext contextOf(const ExecutorArgs& args, const DeviceCall& call) {
  return StepContext{args, call, 0, 0, 0, 0};
}

TEST(ExecutorProtocol, SlotsCrossBetweenThreadsIntactAndInOrder) {
  constexpr int kSlots = 3000;
  constexpr uint32_t kSlotBytes = 64;
  HostFifoMesh mesh(2, 1, /*nslots=*/2, kSlotBytes);
  const ExecutorArgs sender = mesh.args(0);
  const ExecutorArgs receiver = mesh.args(1);
  DeviceCall call;
  call.call = callNumber(7);
  std::thread producer([&] {
    DeviceFifo* f = sender.sendFifos + 1;  // to rank 1, channel 0
    Waiter<HostMemoryOps> waiter(sender);
    for (int k = 0; k < kSlots; ++k) {
      while (!slotFree<HostMemoryOps>(f)) ASSERT_EQ(waiter.poll(), 0u);
      const uint32_t bytes = 1 + k % kSlotBytes;
      char* data = slotData(f);
      for (uint32_t i = 0; i < bytes; ++i) data[i] = static_cast<char>(k * 31 + i);
      post<HostMemoryOps>(f, bytes, call.call);
    }
  });
  DeviceFifo* f = receiver.recvFifos + 0;  // from rank 0, channel 0
  Waiter<HostMemoryOps> waiter(receiver);
  int bad = 0;
  for (int k = 0; k < kSlots && bad == 0; ++k) {
    while (!slotArrived<HostMemoryOps>(f)) ASSERT_EQ(waiter.poll(), 0u);
    FailureSite site;
    SlotHeader header;
    const uint32_t bytes = 1 + k % kSlotBytes;
    ASSERT_EQ(checkSlot<HostMemoryOps>(f, call, bytes, site, header), 0u) << "slot " << k;
    const char* data = slotData(f);
    for (uint32_t i = 0; i < bytes; ++i) bad += data[i] != static_cast<char>(k * 31 + i);
    release<HostMemoryOps>(f);
  }
  producer.join();
  EXPECT_EQ(bad, 0);
  EXPECT_EQ(mesh.head(0, 1, 0), uint64_t{kSlots});
  EXPECT_EQ(mesh.tail(0, 1, 0), uint64_t{kSlots});
}

TEST(ExecutorProtocol, SlotOfAnotherCallFillsTheControlBlockOnce) {
  HostFifoMesh mesh(2, 1, 2, 64);
  const ExecutorArgs sender = mesh.args(0);
  const ExecutorArgs receiver = mesh.args(1);
  DeviceCall mine;
  mine.call = callNumber(3);
  post<HostMemoryOps>(sender.sendFifos + 1, 16, callNumber(4));

  DeviceFifo* f = receiver.recvFifos + 0;
  ASSERT_TRUE(slotArrived<HostMemoryOps>(f));
  LaneState state{};
  FailureSite site = siteOf(contextOf(receiver, mine), 0);
  SlotHeader header;
  const uint32_t code = checkSlot<HostMemoryOps>(f, mine, 16, site, header);
  ASSERT_EQ(code, uint32_t{kDeviceCallMismatch});
  fail<HostMemoryOps>(receiver, state, code, site);
  EXPECT_EQ(state.stop, 1);
  // A later failure of another lane neither overwrites the report nor goes unnoticed.
  LaneState other{};
  fail<HostMemoryOps>(receiver, other, kDeviceTimeout, FailureSite{});
  EXPECT_EQ(other.stop, 1);
  const DeviceControl& c = mesh.control(1);
  EXPECT_EQ(c.error, uint32_t{kDeviceCallMismatch});
  EXPECT_EQ(c.peer, 0);
  EXPECT_EQ(c.expected, callNumber(3));
  EXPECT_EQ(c.got, callNumber(4));
}

TEST(ExecutorProtocol, SlotOfAnotherSizeIsReported) {
  HostFifoMesh mesh(2, 1, 2, 64);
  DeviceCall call;
  call.call = callNumber(1);
  post<HostMemoryOps>(mesh.args(0).sendFifos + 1, 24, call.call);
  const ExecutorArgs receiver = mesh.args(1);
  FailureSite site;
  SlotHeader header;
  EXPECT_EQ(checkSlot<HostMemoryOps>(receiver.recvFifos, call, 32, site, header),
            uint32_t{kDeviceBytesMismatch});
  EXPECT_EQ(site.expectedBytes, 32u);
  EXPECT_EQ(site.gotBytes, 24u);
}

/// Polls until the waiter gives up; bounded so that a waiter that never does fails the test.
uint32_t pollUntilStopped(Waiter<HostMemoryOps>& waiter, int maxPolls) {
  for (int i = 0; i < maxPolls; ++i) {
    if (const uint32_t code = waiter.poll(); code != 0) return code;
  }
  return 0;
}

TEST(ExecutorProtocol, WaitsEndOnAbortTimeoutAndAnotherLanesFailure) {
  HostFifoMesh mesh(1, 1, 2, 64);
  ExecutorArgs args = mesh.args(0);
  args.timeoutNs = 0;  // wait forever: only the flags end it
  {
    Waiter<HostMemoryOps> waiter(args);
    EXPECT_EQ(pollUntilStopped(waiter, 5000), 0u);
    HostMemoryOps::store(&args.control->abort, 1u);
    EXPECT_EQ(pollUntilStopped(waiter, 2048), uint32_t{kDeviceAborted});
    HostMemoryOps::store(&args.control->abort, 0u);
  }
  {
    args.timeoutNs = 1'000'000;  // 1 ms: the backoff of long waits gets there within 1e5 polls
    Waiter<HostMemoryOps> waiter(args);
    EXPECT_EQ(pollUntilStopped(waiter, 100000), uint32_t{kDeviceTimeout});
    args.timeoutNs = 0;
  }
  {
    HostMemoryOps::store(args.errorLatch, uint32_t{kDeviceTimeout});
    Waiter<HostMemoryOps> waiter(args);
    EXPECT_EQ(pollUntilStopped(waiter, 64), kStopQuietly);
  }
}

// ---- The order of operations the CUDA memory operations rely on.

enum class Op { kLoad, kStore, kReadWord, kWriteWord, kWriteField, kAcquire, kRelease, kCas };

/// HostMemoryOps that also records each operation.
struct RecordingOps : HostMemoryOps {
  static std::vector<Op>& trace() {
    static thread_local std::vector<Op> ops;
    return ops;
  }
  template <class T>
  static T load(const T* p) {
    trace().push_back(Op::kLoad);
    return HostMemoryOps::load(p);
  }
  template <class T>
  static void store(T* p, T v) {
    trace().push_back(Op::kStore);
    HostMemoryOps::store(p, v);
  }
  static uint64_t readWord(const uint64_t* p) {
    trace().push_back(Op::kReadWord);
    return *p;
  }
  static void writeWord(uint64_t* p, uint64_t v) {
    trace().push_back(Op::kWriteWord);
    *p = v;
  }
  template <class T>
  static void writeField(T* p, T v) {
    trace().push_back(Op::kWriteField);
    *p = v;
  }
  static void fenceAcquire() { trace().push_back(Op::kAcquire); }
  static void fenceRelease() { trace().push_back(Op::kRelease); }
  static uint32_t compareExchange(uint32_t* p, uint32_t expected, uint32_t desired) {
    trace().push_back(Op::kCas);
    return HostMemoryOps::compareExchange(p, expected, desired);
  }
};

std::vector<Op> repeated(Op op, int n) { return std::vector<Op>(n, op); }
std::vector<Op> operator+(std::vector<Op> a, const std::vector<Op>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST(ExecutorProtocol, FencesSeparateDataFromCounters) {
  HostFifoMesh mesh(2, 1, 2, 64);
  const ExecutorArgs sender = mesh.args(0);
  const ExecutorArgs receiver = mesh.args(1);
  DeviceCall call;
  call.call = callNumber(1);
  auto& trace = RecordingOps::trace();

  // Post: the header, a release fence, then the head.
  trace.clear();
  post<RecordingOps>(sender.sendFifos + 1, 8, call.call);
  EXPECT_EQ(trace,
            repeated(Op::kWriteWord, kHeaderWords) + std::vector<Op>({Op::kRelease, Op::kStore}));

  // Arrival: the head; the check: an acquire fence before the header.
  trace.clear();
  DeviceFifo* f = receiver.recvFifos;
  ASSERT_TRUE(slotArrived<RecordingOps>(f));
  EXPECT_EQ(trace, std::vector<Op>({Op::kLoad}));
  trace.clear();
  FailureSite site;
  SlotHeader header;
  ASSERT_EQ(checkSlot<RecordingOps>(f, call, 8, site, header), 0u);
  EXPECT_EQ(trace, std::vector<Op>({Op::kAcquire}) + repeated(Op::kReadWord, kHeaderWords));

  // Release: a fence (the slot's data was read) before the tail.
  trace.clear();
  release<RecordingOps>(f);
  EXPECT_EQ(trace, (std::vector<Op>{Op::kRelease, Op::kStore}));

  // A failure: the latch, the details, a fence, then `error`.
  trace.clear();
  LaneState state{};
  site.expected = &call.call;
  site.got = &call.call;
  fail<RecordingOps>(receiver, state, kDeviceCallMismatch, site);
  EXPECT_EQ(trace, std::vector<Op>({Op::kCas}) + repeated(Op::kWriteField, 6) +
                       repeated(Op::kWriteWord, 2 * kDescriptorWords) +
                       std::vector<Op>({Op::kRelease, Op::kStore, Op::kRelease}));
}

// ---- Whole plans on host lanes.

class HostLanes : public ::testing::TestWithParam<int> {};

TEST_P(HostLanes, EveryPlanIsExactAndMovesTheCountedSlots) {
  const int n = GetParam();
  constexpr int kMaxChannels = 3;
  for (const PlanCaseSpec& spec : testing::everyCollectiveAndAlgorithm(n, 273, 256)) {
    SCOPED_TRACE(testing::describeSpec(spec));
    auto made = PlanCase::make(spec);
    ASSERT_TRUE(made.ok()) << made.status().message();
    PlanCase& pc = **made;
    HostFifoMesh mesh(n, kMaxChannels, /*nslots=*/2, spec.chunkBytes);
    testing::runOnHostLanes(pc, mesh);
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(mesh.control(r).error, 0u) << "rank " << r;
      EXPECT_EQ(pc.check(r), "");
      // The FIFO counters say what ran: exactly what countDeviceSlots says the plan moves.
      std::vector<FifoSlotCount> moved;
      for (int p = 0; p < n; ++p) {
        for (int ch = 0; ch < kMaxChannels; ++ch) {
          const uint64_t posts = mesh.head(r, p, ch);
          const uint64_t releases = mesh.tail(p, r, ch);
          if (posts != 0 || releases != 0) {
            moved.push_back({p, ch, static_cast<uint32_t>(posts), static_cast<uint32_t>(releases)});
          }
        }
      }
      std::vector<FifoSlotCount> counted;
      if (pc.runs(r)) {
        for (const FifoSlotCount& c : countDeviceSlots(pc.plan(r))) {
          if (c.posts != 0 || c.releases != 0) counted.push_back(c);
        }
      }
      EXPECT_EQ(moved, counted) << "rank " << r;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, HostLanes, ::testing::Values(2, 3, 4, 5),
                         [](const auto& info) { return "n" + std::to_string(info.param); });

}  // namespace
}  // namespace braid::gpu
