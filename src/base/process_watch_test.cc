#include "base/process_watch.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

namespace braid {
namespace {

// Forks a child that sleeps until killed; the caller reaps it.
pid_t forkSleeper() {
  const pid_t pid = fork();
  if (pid == 0) {
    for (;;) pause();
  }
  return pid;
}

// Polls `watch` for up to `seconds` (a dying process takes a moment to become a zombie).
bool exitsWithin(const ProcessWatch& watch, double seconds) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
    if (watch.exited()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

TEST(ProcessWatch, ALiveProcessIsNotExited) {
  const pid_t child = forkSleeper();
  ASSERT_GT(child, 0);
  ProcessWatch watch(child);
  ProcessWatch fallback = ProcessWatch::withoutPidfd(child);
  EXPECT_FALSE(watch.exited());
  EXPECT_FALSE(fallback.exited());
  EXPECT_NE(processState(child), 'Z');
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
}

TEST(ProcessWatch, AZombieIsExited) {
  const pid_t child = forkSleeper();
  ASSERT_GT(child, 0);
  ProcessWatch watch(child);
  ProcessWatch fallback = ProcessWatch::withoutPidfd(child);
  kill(child, SIGKILL);
  // Not reaped: kill(pid, 0) still succeeds on it, the watchers must not be fooled.
  EXPECT_TRUE(exitsWithin(watch, 10));
  EXPECT_TRUE(exitsWithin(fallback, 10));
  EXPECT_EQ(kill(child, 0), 0) << "the child should still be a zombie";
  EXPECT_EQ(processState(child), 'Z');
  waitpid(child, nullptr, 0);
  EXPECT_TRUE(watch.exited());
  EXPECT_TRUE(fallback.exited());
}

TEST(ProcessWatch, AReapedProcessIsExited) {
  const pid_t child = fork();
  if (child == 0) _exit(0);
  ASSERT_GT(child, 0);
  ProcessWatch watch(child);
  waitpid(child, nullptr, 0);
  EXPECT_TRUE(watch.exited());
  EXPECT_TRUE(ProcessWatch::withoutPidfd(child).exited());
}

TEST(ProcessWatch, NothingWatchedNeverExits) {
  EXPECT_FALSE(ProcessWatch().exited());
  EXPECT_FALSE(ProcessWatch(0).exited());
  ProcessWatch self(getpid());
  EXPECT_FALSE(self.exited());
  ProcessWatch moved = std::move(self);
  EXPECT_FALSE(moved.exited());
  EXPECT_EQ(moved.pid(), getpid());
  EXPECT_EQ(self.pid(), 0);  // NOLINT(bugprone-use-after-move): a moved-from watch is empty
}

TEST(ProcessWatch, StateOfThisProcessIsReadable) {
  const char state = processState(getpid());
  EXPECT_TRUE(state == 'R' || state == 'S') << "state '" << state << "'";
  EXPECT_EQ(processState(-5), 0);
}

}  // namespace
}  // namespace braid
