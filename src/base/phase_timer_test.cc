#include "base/phase_timer.h"

#include <gtest/gtest.h>
#include <time.h>

#include <chrono>
#include <thread>

namespace braid {
namespace {

double threadCpuMs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) * 1e3 + double(ts.tv_nsec) * 1e-6;
}

TEST(PhaseTimer, ClosesPhasesInOrderWithTheirWallAndCpuTime) {
  PhaseTimer timer;
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  timer.end("sleep");
  const double spinUntil = threadCpuMs() + 15;
  volatile double sink = 0;
  while (threadCpuMs() < spinUntil) sink = sink + 1;
  timer.end("spin");
  timer.end("nothing");

  ASSERT_EQ(timer.phases().size(), 3u);
  const PhaseTimer::Phase& sleep = timer.phases()[0];
  const PhaseTimer::Phase& spin = timer.phases()[1];
  EXPECT_EQ(sleep.name, "sleep");
  EXPECT_EQ(spin.name, "spin");
  EXPECT_EQ(timer.phases()[2].name, "nothing");
  EXPECT_GE(sleep.wallMs, 20.0);
  EXPECT_GE(spin.cpuMs, 15.0);  // this thread's spin, within the process's CPU
  EXPECT_GE(spin.wallMs, 15.0);
  for (const PhaseTimer::Phase& p : timer.phases()) {
    EXPECT_GE(p.wallMs, 0.0);
    EXPECT_GE(p.cpuMs, 0.0);
  }
}

TEST(PhaseTimer, SummaryNamesEveryPhaseAfterTheTotal) {
  PhaseTimer timer;
  timer.end("join");
  timer.end("topology");
  const std::string text = timer.summary();
  EXPECT_EQ(text.rfind("total ", 0), 0u) << text;
  const size_t join = text.find(": join ");
  const size_t topology = text.find(", topology ");
  ASSERT_NE(join, std::string::npos) << text;
  ASSERT_NE(topology, std::string::npos) << text;
  EXPECT_LT(join, topology);
  EXPECT_EQ(PhaseTimer().summary(), "total 0.0 ms (cpu 0.0)");
}

}  // namespace
}  // namespace braid
