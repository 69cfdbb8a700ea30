#include "perf/perf_launch.h"

#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace braid::perf {
namespace {

EnvLookup fakeEnv(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

TEST(PerfLaunch, NoLauncher) {
  Expected<std::optional<LauncherWorld>> r = detectLauncher(fakeEnv({{"HOME", "/root"}}));
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r.value().has_value());
}

TEST(PerfLaunch, EachLauncher) {
  const std::vector<std::pair<std::string, std::string>> launchers = {
      {"BRAID_RANK", "BRAID_WORLD_SIZE"},
      {"RANK", "WORLD_SIZE"},
      {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
      {"PMI_RANK", "PMI_SIZE"},
      {"SLURM_PROCID", "SLURM_NTASKS"}};
  for (const auto& [rankVar, sizeVar] : launchers) {
    Expected<std::optional<LauncherWorld>> r =
        detectLauncher(fakeEnv({{rankVar, "2"}, {sizeVar, "6"}}));
    ASSERT_TRUE(r.ok()) << rankVar << ": " << r.outcome().message();
    ASSERT_TRUE(r.value().has_value()) << rankVar;
    EXPECT_EQ(r.value()->rank, 2);
    EXPECT_EQ(r.value()->size, 6);
    EXPECT_EQ(r.value()->source, rankVar);
  }
}

TEST(PerfLaunch, BraidVariablesComeFirst) {
  Expected<std::optional<LauncherWorld>> r = detectLauncher(fakeEnv({{"SLURM_PROCID", "0"},
                                                                     {"SLURM_NTASKS", "1"},
                                                                     {"BRAID_RANK", "3"},
                                                                     {"BRAID_WORLD_SIZE", "4"}}));
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(r.value().has_value());
  EXPECT_EQ(r.value()->rank, 3);
  EXPECT_EQ(r.value()->source, "BRAID_RANK");
}

TEST(PerfLaunch, MalformedWorlds) {
  Expected<std::optional<LauncherWorld>> r = detectLauncher(fakeEnv({{"RANK", "1"}}));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.outcome().message().find("WORLD_SIZE"), std::string::npos);
  r = detectLauncher(fakeEnv({{"RANK", "4"}, {"WORLD_SIZE", "4"}}));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.outcome().message().find("not below"), std::string::npos);
  r = detectLauncher(fakeEnv({{"PMI_RANK", "x"}, {"PMI_SIZE", "4"}}));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.outcome().message().find("PMI_RANK"), std::string::npos);
  r = detectLauncher(fakeEnv({{"PMI_RANK", "0"}, {"PMI_SIZE", "0"}}));
  EXPECT_FALSE(r.ok());
}

TEST(PerfLaunch, ThreadsRunEveryIndex) {
  std::vector<std::atomic<int>> seen(5);
  EXPECT_EQ(runThreads(5,
                       [&](int t) {
                         seen[t].fetch_add(1);
                         return 0;
                       }),
            0);
  for (auto& s : seen) EXPECT_EQ(s.load(), 1);
  EXPECT_EQ(runThreads(4, [](int t) { return t == 2 ? 7 : (t == 3 ? 9 : 0); }), 7);
}

ParentTask payloadOf(std::string text) {
  return [text]() -> Expected<std::string> { return text; };
}

TEST(PerfLaunch, ProcessesReportTheWorstStatus) {
  Expected<int> r = runProcesses(
      3, payloadOf(""), [](int, const std::string&) { return 0; }, std::chrono::milliseconds(1000));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.value(), 0);
  // Each child exits with its own status: the parent sees every one of them.
  r = runProcesses(
      3, payloadOf(""), [](int i, const std::string&) { return i == 1 ? 5 : (i == 2 ? 4 : 0); },
      std::chrono::milliseconds(5000));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.value(), 5);
}

TEST(PerfLaunch, BindToCpuGivesEachIndexOneAllowedCpuInTurn) {
  cpu_set_t allowed;
  ASSERT_EQ(sched_getaffinity(0, sizeof(allowed), &allowed), 0);
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
  }
  ASSERT_FALSE(cpus.empty());
  // Each child binds itself (the test process keeps its affinity) and reports where it runs.
  const int n = static_cast<int>(cpus.size()) + 1;  // one more than CPUs: index n-1 wraps to 0
  Expected<int> r = runProcesses(
      n, payloadOf(""),
      [&cpus](int i, const std::string&) {
        if (!bindToCpu(i).ok()) return 1;
        cpu_set_t now;
        if (sched_getaffinity(0, sizeof(now), &now) != 0) return 2;
        const int expected = cpus[static_cast<size_t>(i) % cpus.size()];
        return CPU_COUNT(&now) == 1 && CPU_ISSET(expected, &now) ? 0 : 3;
      },
      std::chrono::milliseconds(5000));
  ASSERT_TRUE(r.ok()) << r.outcome().message();
  EXPECT_EQ(r.value(), 0);
  cpu_set_t mine;
  ASSERT_EQ(sched_getaffinity(0, sizeof(mine), &mine), 0);
  EXPECT_TRUE(CPU_EQUAL(&mine, &allowed));
}

TEST(PerfLaunch, EveryChildGetsThePayload) {
  const pid_t parent = getpid();
  const std::string big(100000, 'x');  // more than a pipe holds at once
  Expected<int> r = runProcesses(
      3, payloadOf(big + "!"),
      [parent, &big](int, const std::string& payload) {
        const bool ownProcess = getppid() == parent && getpid() != parent;
        return ownProcess && payload == big + "!" ? 0 : 1;
      },
      std::chrono::milliseconds(1000));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.value(), 0);
}

TEST(PerfLaunch, ChildrenAreForkedBeforeThePayloadTask) {
  // The task starts a thread that holds a lock; children forked before it find the lock free.
  static std::mutex lock;
  std::atomic<bool> held{false};
  std::atomic<bool> release{false};
  std::thread holder;
  Expected<int> r = runProcesses(
      2,
      [&]() -> Expected<std::string> {
        holder = std::thread([&] {
          std::lock_guard<std::mutex> guard(lock);
          held = true;
          while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        });
        while (!held) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        return std::string("go");
      },
      [](int, const std::string&) {
        if (!lock.try_lock()) return 1;
        lock.unlock();
        return 0;
      },
      std::chrono::milliseconds(1000));
  release = true;
  holder.join();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.value(), 0);
}

TEST(PerfLaunch, FailedPayloadTaskStopsTheChildren) {
  Expected<int> r = runProcesses(
      2, []() -> Expected<std::string> { return failure("no ids today"); },
      [](int, const std::string&) { return 0; }, std::chrono::milliseconds(1000));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.outcome().message(), "no ids today");
}

TEST(PerfLaunch, SignalDeathAndStragglersAreKilled) {
  Expected<int> r = runProcesses(
      2, payloadOf(""),
      [](int i, const std::string&) {
        if (i == 0) {
          signal(SIGHUP, SIG_DFL);  // a test run under nohup inherits it ignored
          raise(SIGHUP);
        }
        // A peer stuck waiting for the dead one.
        std::this_thread::sleep_for(std::chrono::seconds(60));
        return 0;
      },
      std::chrono::milliseconds(200));
  ASSERT_TRUE(r.ok());
  // The straggler did not sleep its minute out: it was killed (SIGKILL outranks SIGHUP).
  EXPECT_EQ(r.value(), 128 + SIGKILL);
}

TEST(PerfLaunch, RejectsNoProcesses) {
  EXPECT_FALSE(
      runProcesses(
          0, payloadOf(""), [](int, const std::string&) { return 0; }, std::chrono::milliseconds(1))
          .ok());
}

}  // namespace
}  // namespace braid::perf
