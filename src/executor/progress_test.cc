#include "executor/progress.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>

#include <cstdlib>
#include <thread>

namespace braid {
namespace {

int firstAllowedCpu() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0 || CPU_COUNT(&set) < 2) return -1;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) return c;
  }
  return -1;
}

// Two ranks on a host with at least two CPUs do not share cores, even when the process's first
// question comes from a helper thread confined to one CPU (the calibration's probe threads are):
// the answer describes the process, not that thread.
TEST(ProgressDeathTest, AThreadConfinedToOneCpuDoesNotShrinkTheProcess) {
  const int cpu = firstAllowedCpu();
  if (cpu < 0) GTEST_SKIP() << "needs two CPUs";
  // A fresh process, so that this is the first question it asks.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        Waker two;
        two.hostRanks = 2;
        bool sharedOnHelper = true;
        std::thread helper([&] {
          cpu_set_t one;
          CPU_ZERO(&one);
          CPU_SET(cpu, &one);
          pthread_setaffinity_np(pthread_self(), sizeof(one), &one);
          sharedOnHelper = coresShared(&two);
        });
        helper.join();
        std::exit(sharedOnHelper ? 1 : coresShared(&two) ? 2 : 0);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST(Progress, TheHostsCpusDecideWhenKnown) {
  // Two ranks each bound to a CPU of its own (a launcher's --bind-to core): this process may
  // use one CPU, but the host's ranks have two between them.
  Waker bound;
  bound.hostRanks = 2;
  bound.hostCpus = 2;
  EXPECT_FALSE(coresShared(&bound));
  bound.hostCpus = 1;  // both bound to the same CPU
  EXPECT_TRUE(coresShared(&bound));
}

TEST(Progress, RanksOutnumberingTheCpusShareCores) {
  Waker crowd;
  crowd.hostRanks = static_cast<uint32_t>(CPU_SETSIZE) + 1;
  EXPECT_TRUE(coresShared(&crowd));
  Waker unknown;  // hostRanks 0: a core per rank assumed
  EXPECT_FALSE(coresShared(&unknown));
  EXPECT_FALSE(coresShared(nullptr));
}

}  // namespace
}  // namespace braid
