// The Waker protocol (fifo.h): a post wakes a party that announced it sleeps, and no wake-up is
// lost between two threads that each sleep until the other moves.
#include "fifo/fifo.h"

#include <gtest/gtest.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>

namespace braid {
namespace {

TEST(WakerTest, PostAfterAnnouncedSleepRingsTheWaker) {
  Waker waker;
  wakeIfSleeping(&waker);
  EXPECT_EQ(waker.seq.load(), 0u) << "nobody sleeps: no wake-up";
  announceSleep(&waker);
  EXPECT_EQ(waker.sleeping.load(), 1u);
  wakeIfSleeping(&waker);
  EXPECT_EQ(waker.seq.load(), 1u);
}

// Waits until `counter` passes `seen`, sleeping on `own` as the progress engine does; counts the
// sleeps that lasted their whole timeout although the counter had moved (a lost wake-up). A sleep
// that ends early is no evidence either way: an eventfd rung for an earlier round, or a wake-up
// whose post is seen before its ring, ends one before the Waker's sequence moves.
uint64_t awaitPast(const std::atomic<uint64_t>& counter, uint64_t seen, Waker& own,
                   int& lostWakes) {
  constexpr int64_t kTimeoutNs = 2'000'000'000;  // far longer than any wake-up takes
  for (;;) {
    if (const uint64_t now = counter.load(std::memory_order_acquire); now > seen) return now;
    const uint32_t seq = own.seq.load(std::memory_order_acquire);
    announceSleep(&own);
    if (counter.load(std::memory_order_acquire) == seen) {
      const auto start = std::chrono::steady_clock::now();
      sleepOnWaker(&own, seq, kTimeoutNs);
      const bool slept =
          std::chrono::steady_clock::now() - start >= std::chrono::nanoseconds(kTimeoutNs / 10 * 9);
      if (slept && counter.load(std::memory_order_acquire) > seen) ++lostWakes;
    }
    own.sleeping.store(0, std::memory_order_relaxed);
  }
}

// Shared-memory Wakers (futex only) and proxy Wakers, which an eventfd also rings.
class WakerPingPongTest : public ::testing::TestWithParam<bool> {};

TEST_P(WakerPingPongTest, LosesNoWakeUp) {
  constexpr uint64_t kRounds = 10000;
  std::atomic<uint64_t> ping{0}, pong{0};
  Waker pinger, ponger;
  if (GetParam()) {
    pinger.eventFd = eventfd(0, EFD_NONBLOCK);
    ponger.eventFd = eventfd(0, EFD_NONBLOCK);
    ASSERT_GE(pinger.eventFd, 0);
    ASSERT_GE(ponger.eventFd, 0);
  }
  int lostByPonger = 0;
  std::thread other([&] {
    for (uint64_t seen = 0; seen < kRounds;) {
      seen = awaitPast(ping, seen, ponger, lostByPonger);
      pong.store(seen, std::memory_order_release);
      wakeIfSleeping(&pinger);
    }
  });
  int lostByPinger = 0;
  for (uint64_t k = 1; k <= kRounds; ++k) {
    ping.store(k, std::memory_order_release);
    wakeIfSleeping(&ponger);
    awaitPast(pong, k - 1, pinger, lostByPinger);
  }
  other.join();
  EXPECT_EQ(lostByPinger + lostByPonger, 0);
  if (GetParam()) {
    close(pinger.eventFd);
    close(ponger.eventFd);
  }
}

INSTANTIATE_TEST_SUITE_P(Wakers, WakerPingPongTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "ProxyWithEventFd" : "SharedMemory";
                         });

}  // namespace
}  // namespace braid
