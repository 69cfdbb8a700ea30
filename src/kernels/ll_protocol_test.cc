// The low-latency protocol on host threads (HostMemoryOps): lines cross between blocks of
// threads intact and in order through a short ring, across the 2^32 wrap of the flag's ordinal;
// memory never written and lines of the previous lap are not taken for new ones; a line of
// another call or size is reported; credits go back once a quarter of the ring waits and the
// sender reads them only when it runs out of room; and every collective x algorithm runs exact
// with its small messages as lines, mixed with slots where messages are larger.
#include "kernels/ll_protocol.h"

#include <gtest/gtest.h>

#include <atomic>
#include <barrier>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "kernels/host_memory_ops.h"
#include "tests/support/plan_case.h"

namespace braid::gpu {
namespace {

using testing::HostFifoMesh;
using testing::PlanCase;
using testing::PlanCaseSpec;

CallDescriptor callNumber(uint32_t seq) { return testing::allReduceCall(seq, braidInt8, 4096); }

char payloadByte(uint64_t message, uint32_t i) { return static_cast<char>(message * 131 + i * 7); }

/// A ring both ends see, in host memory.
struct Ring {
  explicit Ring(uint32_t nlines, uint64_t start = 0) : lines(nlines, LlLine{0, 0}) {
    credits = start;
    send.lines = recv.lines = lines.data();
    send.credits = recv.credits = &credits;
    send.nlines = recv.nlines = nlines;
    send.count = send.credited = recv.count = recv.credited = start;
  }
  std::vector<LlLine> lines;
  alignas(64) uint64_t credits = 0;
  LlFifo send;
  LlFifo recv;
};

/// `messages` messages of 1..maxBytes bytes from a block of `threads` threads to another, each
/// block's leader waiting for room or counting lines consumed as the kernel's does. Returns the
/// payload bytes that arrived wrong plus the waits that ran past the deadline (30 s: every wait
/// then gives up, so a broken ring fails the test rather than hanging it).
int streamMessages(Ring& ring, int messages, uint32_t maxBytes, uint32_t threads) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  auto late = [deadline] { return std::chrono::steady_clock::now() > deadline; };
  const CallDescriptor call = callNumber(5);
  std::barrier sendBlock(threads);
  std::barrier recvBlock(threads);
  std::vector<std::thread> all;
  std::atomic<int> wrong{0};
  std::atomic<int> failures{0};
  for (uint32_t t = 0; t < threads; ++t) {
    all.emplace_back([&, t] {
      std::vector<char> src(maxBytes);
      for (int m = 0; m < messages; ++m) {
        const uint32_t bytes = 1 + static_cast<uint32_t>(m) % maxBytes;
        for (uint32_t i = 0; i < bytes; ++i) src[i] = payloadByte(m, i);
        if (t == 0) {
          while (!llRoom<HostMemoryOps>(ring.send, llLinesFor(bytes))) {
            if (late()) {
              ++failures;
              break;
            }
            std::this_thread::yield();
          }
        }
        sendBlock.arrive_and_wait();
        llWrite<HostMemoryOps>(ring.send, src.data(), bytes, llDigest(call, bytes), t, threads);
        sendBlock.arrive_and_wait();
        if (t == 0) llSent(ring.send, bytes);
      }
    });
    all.emplace_back([&, t] {
      std::vector<char> dst(maxBytes);
      for (int m = 0; m < messages; ++m) {
        const uint32_t bytes = 1 + static_cast<uint32_t>(m) % maxBytes;
        uint64_t bad = 0;
        const uint32_t code = llRead<HostMemoryOps>(
            ring.recv, dst.data(), bytes, llDigest(call, bytes), t, threads,
            [&late] {
              std::this_thread::yield();
              return late() ? uint32_t{kDeviceTimeout} : 0u;
            },
            &bad);
        failures += code != 0;
        // Each thread checks the lines it read.
        for (uint32_t line = t; line < llLinesFor(bytes); line += threads) {
          for (uint32_t i = line * kLlLineBytes; i < bytes && i < (line + 1) * kLlLineBytes; ++i) {
            wrong += dst[i] != payloadByte(m, i);
          }
        }
        recvBlock.arrive_and_wait();
        if (t == 0) llConsumed<HostMemoryOps>(ring.recv, bytes);
        recvBlock.arrive_and_wait();
      }
    });
  }
  for (std::thread& th : all) th.join();
  return wrong + failures;
}

TEST(LlProtocol, LinesCrossBetweenBlocksIntactAndInOrderThroughAShortRing) {
  Ring ring(64);
  EXPECT_EQ(streamMessages(ring, 3000, 128, 3), 0);
  EXPECT_EQ(ring.send.count, ring.recv.count);
  EXPECT_GT(ring.send.count, 64u * 100);  // the ring went round many times
}

TEST(LlProtocol, OrdinalsWrapAroundTwoToThe32) {
  // Both ends start just below the wrap: ordinal 2^32 - 1 carries 0 in the flag's low half.
  Ring ring(32, (uint64_t{1} << 32) - 50);
  EXPECT_EQ(streamMessages(ring, 200, 64, 2), 0);
  EXPECT_GT(ring.recv.count, uint64_t{1} << 32);
}

TEST(LlProtocol, UnwrittenAndStaleLinesAreNotArrivals) {
  const uint32_t digest = llDigest(callNumber(1), 8);
  EXPECT_NE(digest, 0u);
  // Never written (flag 0), even where the ordinal's low half is 0.
  EXPECT_EQ(llLineState(0, (uint64_t{1} << 32) - 1, digest), LlLineState::kNotYet);
  // The previous lap of a ring of 16 lines.
  EXPECT_EQ(llLineState(llFlag(100 - 16, digest), 100, digest), LlLineState::kNotYet);
  EXPECT_EQ(llLineState(llFlag(100, digest), 100, digest), LlLineState::kArrived);
}

TEST(LlProtocol, LineOfAnotherCallOrSizeIsReported) {
  for (const auto& [sentCall, sentBytes] : {std::pair{callNumber(2), 24u}, {callNumber(1), 16u}}) {
    Ring ring(16);
    char src[24] = {1, 2, 3};
    llWrite<HostMemoryOps>(ring.send, src, sentBytes, llDigest(sentCall, sentBytes), 0, 1);
    char dst[24];
    uint64_t bad = ~uint64_t{0};
    int polls = 0;  // bounded: a line that never comes ends the wait
    const uint32_t code = llRead<HostMemoryOps>(
        ring.recv, dst, 24, llDigest(callNumber(1), 24), 0, 1,
        [&polls] { return ++polls > 1000 ? uint32_t{kDeviceTimeout} : 0u; }, &bad);
    EXPECT_EQ(code, uint32_t{kDeviceDigestMismatch});
    EXPECT_EQ(bad, 0u);
  }
}

TEST(LlProtocol, WaitingForALineEndsWithWhatPollSays) {
  Ring ring(16);
  char dst[8];
  uint64_t bad = 0;
  int polls = 0;
  const uint32_t code = llRead<HostMemoryOps>(
      ring.recv, dst, 8, llDigest(callNumber(1), 8), 0, 1,
      [&polls] { return ++polls == 5 ? uint32_t{kDeviceTimeout} : 0u; }, &bad);
  EXPECT_EQ(code, uint32_t{kDeviceTimeout});
  EXPECT_EQ(polls, 5);
}

/// HostMemoryOps that counts the loads of counters (the sender's reads of credits) and the
/// stores (the receiver's credit returns).
struct CountingOps : HostMemoryOps {
  static inline int loads = 0;
  static inline int stores = 0;
  template <class T>
  static T load(const T* p) {
    ++loads;
    return HostMemoryOps::load(p);
  }
  template <class T>
  static void store(T* p, T v) {
    ++stores;
    HostMemoryOps::store(p, v);
  }
};

TEST(LlProtocol, CreditsGoBackEveryQuarterRingAndAreReadOnlyWhenRoomRunsOut) {
  Ring ring(64);
  const CallDescriptor call = callNumber(9);
  char data[16] = {};
  CountingOps::loads = 0;
  CountingOps::stores = 0;
  int creditReturns = 0;
  for (int m = 0; m < 64; ++m) {
    // 2 lines a message: the ring holds 32, a quarter is 8 messages.
    ASSERT_TRUE(llRoom<CountingOps>(ring.send, 2)) << "message " << m;
    llWrite<HostMemoryOps>(ring.send, data, 16, llDigest(call, 16), 0, 1);
    llSent(ring.send, 16);
    char dst[16];
    uint64_t bad = 0;
    ASSERT_EQ(llRead<HostMemoryOps>(
                  ring.recv, dst, 16, llDigest(call, 16), 0, 1,
                  [] { return uint32_t{kDeviceTimeout}; }, &bad),
              0u);
    const int before = CountingOps::stores;
    llConsumed<CountingOps>(ring.recv, 16);
    if (CountingOps::stores != before) {
      ++creditReturns;
      EXPECT_EQ((m + 1) % 8, 0) << "credits returned after message " << m;
      EXPECT_EQ(ring.credits, ring.recv.count);
    }
  }
  EXPECT_EQ(creditReturns, 8);
  // The sender read the credits once: its first 32 messages fit the ring, and the value it read
  // then covered the other 32.
  EXPECT_EQ(CountingOps::loads, 1);
  // A flush returns what is left at once.
  llWrite<HostMemoryOps>(ring.send, data, 16, llDigest(call, 16), 0, 1);
  llSent(ring.send, 16);
  llConsumed<HostMemoryOps>(ring.recv, 16, /*flush=*/true);
  EXPECT_EQ(ring.credits, ring.recv.count);
}

/// HostMemoryOps that records the operations a message costs.
enum class LineOp { kStoreLine, kLoadLine, kLoad, kStore, kRelease, kReleaseGpu };
struct RecordingLineOps : HostMemoryOps {
  static inline std::vector<LineOp> trace;
  template <class Line>
  static void storeLine(Line* l, uint64_t data, uint64_t flag) {
    trace.push_back(LineOp::kStoreLine);
    HostMemoryOps::storeLine(l, data, flag);
  }
  template <class Line>
  static void loadLine(const Line* l, uint64_t& data, uint64_t& flag) {
    trace.push_back(LineOp::kLoadLine);
    HostMemoryOps::loadLine(l, data, flag);
  }
  template <class T>
  static T load(const T* p) {
    trace.push_back(LineOp::kLoad);
    return HostMemoryOps::load(p);
  }
  template <class T>
  static void store(T* p, T v) {
    trace.push_back(LineOp::kStore);
    HostMemoryOps::store(p, v);
  }
  static void fenceRelease() { trace.push_back(LineOp::kRelease); }
  static void fenceReleaseGpu() { trace.push_back(LineOp::kReleaseGpu); }
};

TEST(LlProtocol, AMessageIsItsLinesAloneAndCreditsFenceAtThePeersScope) {
  for (const uint32_t gpuScope : {0u, 1u}) {
    Ring ring(64);
    ring.recv.gpuScope = gpuScope;
    const CallDescriptor call = callNumber(3);
    char data[24] = {};
    auto& trace = RecordingLineOps::trace;
    // Sending 3 lines: three stores, no header, counter or fence.
    trace.clear();
    ASSERT_TRUE(llRoom<RecordingLineOps>(ring.send, 3));
    llWrite<RecordingLineOps>(ring.send, data, 24, llDigest(call, 24), 0, 1);
    llSent(ring.send, 24);
    EXPECT_EQ(trace, std::vector<LineOp>(3, LineOp::kStoreLine));
    // Receiving them: one load each; consuming: nothing until a quarter of the ring waits.
    trace.clear();
    char dst[24];
    uint64_t bad = 0;
    ASSERT_EQ(llRead<RecordingLineOps>(
                  ring.recv, dst, 24, llDigest(call, 24), 0, 1,
                  [] { return uint32_t{kDeviceTimeout}; }, &bad),
              0u);
    llConsumed<RecordingLineOps>(ring.recv, 24);
    EXPECT_EQ(trace, std::vector<LineOp>(3, LineOp::kLoadLine));
    // A flush returns the credits: one fence, at GPU scope for a peer on this GPU, one store.
    trace.clear();
    llConsumed<RecordingLineOps>(ring.recv, 0, /*flush=*/true);
    EXPECT_EQ(trace, (std::vector<LineOp>{gpuScope ? LineOp::kReleaseGpu : LineOp::kRelease,
                                          LineOp::kStore}));
  }
}

TEST(LlProtocol, OnlySmallMessagesOnRingsTakeLines) {
  LlFifo none;
  EXPECT_FALSE(llCarries(none, 8));
  LlFifo ring;
  ring.nlines = kLlDefaultLines;
  EXPECT_FALSE(llCarries(ring, 0));
  EXPECT_TRUE(llCarries(ring, 1));
  EXPECT_TRUE(llCarries(ring, kLlMaxMessageBytes));
  EXPECT_FALSE(llCarries(ring, kLlMaxMessageBytes + 1));
  ring.nlines = 16;  // a message takes at most a quarter of the ring
  EXPECT_TRUE(llCarries(ring, 32));
  EXPECT_FALSE(llCarries(ring, 33));
}

// ---- Whole plans on host lanes with rings.

struct LinesCase {
  int nranks;
  uint32_t chunkBytes;  ///< 256: every message as lines; 1024: full chunks in slots, tails as lines
};

class HostLanesWithLines : public ::testing::TestWithParam<LinesCase> {};

TEST_P(HostLanesWithLines, EveryPlanIsExactAndEveryLineIsConsumed) {
  const auto [n, chunkBytes] = GetParam();
  constexpr int kMaxChannels = 3;
  constexpr uint32_t kLines = 128;  // messages up to 256 bytes take lines
  uint64_t allLines = 0;
  uint64_t allSlots = 0;
  for (const PlanCaseSpec& spec : testing::everyCollectiveAndAlgorithm(n, 273, chunkBytes)) {
    SCOPED_TRACE(testing::describeSpec(spec));
    auto made = PlanCase::make(spec);
    ASSERT_TRUE(made.ok()) << made.status().message();
    PlanCase& pc = **made;
    HostFifoMesh mesh(n, kMaxChannels, /*nslots=*/2, spec.chunkBytes, kLines);
    testing::runOnHostLanes(pc, mesh, /*lines=*/true);
    uint64_t lines = 0;
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(mesh.control(r).error, 0u) << "rank " << r;
      EXPECT_EQ(pc.check(r), "");
      for (int p = 0; p < n; ++p) {
        for (int ch = 0; ch < kMaxChannels; ++ch) {
          // What one end wrote the other consumed, and no credit runs ahead of it.
          const uint64_t sent = mesh.linesSent(r, p, ch);
          lines += sent;
          EXPECT_LE(mesh.linesCredited(r, p, ch), sent);
          EXPECT_EQ(mesh.llArgs(p).recvFifos[size_t(r) * kMaxChannels + ch].count, sent);
          allSlots += mesh.head(r, p, ch);
        }
      }
    }
    allLines += lines;
    if (chunkBytes <= 2 * kLines) {
      EXPECT_GT(lines, 0u) << "no message took lines";
    }
  }
  EXPECT_GT(allLines, 0u);
  // Chunks larger than a ring takes go in slots, beside the lines of the small messages.
  if (chunkBytes > 2 * kLines) {
    EXPECT_GT(allSlots, 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, HostLanesWithLines,
                         ::testing::Values(LinesCase{2, 256}, LinesCase{3, 256}, LinesCase{4, 256},
                                           LinesCase{5, 256}, LinesCase{3, 1024}),
                         [](const auto& info) {
                           return "n" + std::to_string(info.param.nranks) + "_chunk" +
                                  std::to_string(info.param.chunkBytes);
                         });

}  // namespace
}  // namespace braid::gpu
