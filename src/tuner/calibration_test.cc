#include "tuner/calibration.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "tuner/calibration_probe.h"

namespace braid {
namespace {

Calibration sample() {
  Calibration c;
  c.stepUs = 0.021;
  c.hopUs = 0.17;
  c.crowdedHopUs = 3.25;
  c.crowdedPostUs = 0.75;
  c.copyCacheGBps = 21.5;
  c.copyDramGBps = 9.75;
  c.reduceCacheGBps = 14.125;
  c.reduceDramGBps = 6.0 / 7.0;  // not representable in few digits: the text must be exact
  c.copyLlcGBps = 11.5;
  c.transferGBps = 12.5;
  c.cacheMiB = 32.5;
  c.crowdedSwitchFactor = 2.25;
  c.cpus = 2;
  return c;
}

TEST(Calibration, TextRoundTripsExactly) {
  const Calibration c = sample();
  const std::string text = formatCalibration(c, "fp");
  Result<Calibration> back = parseCalibration(text, "fp", "test");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back.value(), c);
}

TEST(Calibration, ParseErrorsNameTheOriginAndLine) {
  const std::string good = formatCalibration(sample(), "fp");
  struct Case {
    std::string text;
    std::string expect;
  };
  std::string badNumber = good;
  const size_t hop = badNumber.find("\nhop_us ") + 1;
  badNumber.replace(hop, badNumber.find('\n', hop) - hop, "hop_us 0.1x");
  const std::vector<Case> cases = {
      {good + "bogus 1\n", "f.txt:18: unknown key 'bogus'"},
      {badNumber, "bad number '0.1x' for hop_us"},
      {"format 5\nfingerprint fp\nstep_us 1\n", "no 'hop_us' line"},
      {"format 4\n", "f.txt:1: unknown format '4'"},
      {"format 5\nfingerprint other\n", "f.txt:2: recorded for another binary or host (other)"},
      {"format 5\nstep_us\n", "f.txt:2: expected 'key value'"},
  };
  for (const Case& c : cases) {
    Result<Calibration> r = parseCalibration(c.text, "fp", "f.txt");
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_NE(r.status().message().find(c.expect), std::string::npos) << r.status().message();
  }
  Calibration negative = sample();
  negative.copyDramGBps = -1;
  Result<Calibration> r = parseCalibration(formatCalibration(negative, "fp"), "fp", "f.txt");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("copy_dram_gbps"), std::string::npos);
}

// Files written before the last-level cache's copy rate was measured still load: the model
// then serves that cache at the core cache's rate, as it did when they were written.
TEST(Calibration, TheLastLevelCacheRateIsOptional) {
  std::string text = formatCalibration(sample(), "fp");
  const size_t llc = text.find("copy_llc_gbps ");
  ASSERT_NE(llc, std::string::npos);
  text.erase(llc, text.find('\n', llc) + 1 - llc);
  Result<Calibration> old = parseCalibration(text, "fp", "f.txt");
  ASSERT_TRUE(old.ok()) << old.status().message();
  EXPECT_EQ(old.value().copyLlcGBps, 0.0);
  Calibration unmeasured = sample();
  unmeasured.copyLlcGBps = 0;
  EXPECT_TRUE(validateCalibration(unmeasured).ok());
  unmeasured.copyLlcGBps = -2;
  EXPECT_FALSE(validateCalibration(unmeasured).ok());
}

TEST(Calibration, ValidateRejectsImpossibleValues) {
  EXPECT_TRUE(validateCalibration(sample()).ok());
  Calibration c = sample();
  c.crowdedHopUs = -1;
  EXPECT_FALSE(validateCalibration(c).ok());
  c = sample();
  c.stepUs = std::nan("");
  EXPECT_FALSE(validateCalibration(c).ok());
  c = sample();
  c.cpus = 0;
  EXPECT_FALSE(validateCalibration(c).ok());
}

TEST(Calibration, ProbeMeasuresThroughTheDataPath) {
  ProbeOptions options;
  options.effort = 0.1;
  options.repeats = 1;
  options.llcBytes = 1 << 20;  // the smallest streaming buffers
  Result<Calibration> c = measureCalibration(options);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_TRUE(validateCalibration(c.value()).ok());
  EXPECT_GT(c.value().hopUs, 0);
  // Too small a cache to check (sizes start at 4 MiB): the topology's figure stands, and no
  // working set fits it beyond a core's own caches.
  EXPECT_EQ(c.value().cacheMiB, 1.0);
  EXPECT_EQ(c.value().copyLlcGBps, 0.0);
}

// A rank a launcher bound to one CPU (mpirun --bind-to core) still calibrates the host: the probe
// runs its threads on the CPUs the host offers, not on the one the rank was given.
TEST(Calibration, ProbeOfARankBoundToOneCpuMeasuresAcrossCores) {
  cpu_set_t all;
  CPU_ZERO(&all);
  ASSERT_EQ(sched_getaffinity(0, sizeof(all), &all), 0);
  if (CPU_COUNT(&all) < 2) GTEST_SKIP() << "needs two CPUs";
  int first = 0;
  while (!CPU_ISSET(first, &all)) ++first;
  Result<Calibration> c = internalError("not run");
  std::thread bound([&] {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(first, &one);
    ASSERT_EQ(pthread_setaffinity_np(pthread_self(), sizeof(one), &one), 0);
    ProbeOptions options;
    options.effort = 0.1;
    options.repeats = 1;
    options.llcBytes = 1 << 20;
    c = measureCalibration(options);
    cpu_set_t after;
    CPU_ZERO(&after);
    ASSERT_EQ(pthread_getaffinity_np(pthread_self(), sizeof(after), &after), 0);
    EXPECT_TRUE(CPU_EQUAL(&after, &one)) << "the probe changed its caller's affinity";
  });
  bound.join();
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_GE(c.value().cpus, 2);
}

// Past its budget every measurement still runs once: a slow host gets a complete calibration.
TEST(Calibration, ProbePastItsBudgetStillMeasuresEverything) {
  ProbeOptions options;
  options.llcBytes = 1 << 20;
  options.budgetSeconds = 0;
  Result<Calibration> c = measureCalibration(options);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_TRUE(validateCalibration(c.value()).ok());
  EXPECT_GT(c.value().crowdedHopUs, 0);
}

class CalibrationCache : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/braid-calib-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = std::string(pattern) + "/nested/braid";
    clearProcessCalibrations();
  }
  void TearDown() override {
    clearProcessCalibrations();
    std::filesystem::remove_all(std::filesystem::path(dir_).parent_path().parent_path());
  }
  std::string dir_;
};

// Rewrites a cached file with `c`, its hand-off set to `hopUs` (the smallest valid one leaves no
// measurement faster: the file is kept).
Calibration rewrite(const CalibrationResult& r, uint64_t host, double hopUs) {
  Calibration c = r.calibration;
  c.hopUs = hopUs;
  std::ofstream(r.cacheFile, std::ios::trunc) << formatCalibration(c, calibrationFingerprint(host));
  return c;
}

TEST_F(CalibrationCache, SecondInitReadsTheFile) {
  constexpr uint64_t kHost = 0x1234abcd;
  Result<CalibrationResult> first = hostCalibration(dir_, kHost, 1 << 20);
  ASSERT_TRUE(first.ok()) << first.status().message();
  EXPECT_EQ(first.value().source, CalibrationSource::kMeasured);
  // (A slow host - a sanitizer build - may note that the probe ran past its budget.)
  EXPECT_EQ(first.value().note.find("not cached"), std::string::npos) << first.value().note;
  ASSERT_TRUE(std::filesystem::exists(first.value().cacheFile));

  // The same process asks again: no file access needed.
  Result<CalibrationResult> again = hostCalibration(dir_, kHost, 1 << 20);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again.value().source, CalibrationSource::kProcessCache);
  EXPECT_EQ(again.value().calibration, first.value().calibration);

  // A new process (simulated by forgetting) reads the file and gets the very same values.
  const Calibration cached = rewrite(first.value(), kHost, 1e-3);
  clearProcessCalibrations();
  Result<CalibrationResult> second = hostCalibration(dir_, kHost, 1 << 20);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second.value().source, CalibrationSource::kCacheFile);
  EXPECT_EQ(second.value().calibration, cached);
  EXPECT_EQ(second.value().cacheFile, first.value().cacheFile);

  // Another host has its own file.
  clearProcessCalibrations();
  Result<CalibrationResult> other = hostCalibration(dir_, kHost + 1, 1 << 20);
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(other.value().source, CalibrationSource::kMeasured);
  EXPECT_NE(other.value().cacheFile, first.value().cacheFile);
}

TEST_F(CalibrationCache, CorruptFileIsMeasuredAgainAndRewritten) {
  constexpr uint64_t kHost = 77;
  Result<CalibrationResult> first = hostCalibration(dir_, kHost, 1 << 20);
  ASSERT_TRUE(first.ok());
  { std::ofstream(first.value().cacheFile, std::ios::trunc) << "format 3\nstep_us oops\n"; }
  clearProcessCalibrations();
  Result<CalibrationResult> second = hostCalibration(dir_, kHost, 1 << 20);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second.value().source, CalibrationSource::kMeasured);
  EXPECT_NE(second.value().note.find("measuring again"), std::string::npos) << second.value().note;
  rewrite(second.value(), kHost, 1e-3);
  clearProcessCalibrations();
  Result<CalibrationResult> third = hostCalibration(dir_, kHost, 1 << 20);
  ASSERT_TRUE(third.ok());
  EXPECT_EQ(third.value().source, CalibrationSource::kCacheFile);
}

TEST_F(CalibrationCache, FileFromADisturbedMomentIsMeasuredAgain) {
  // A cached hand-off far slower than the one measured now (a core held back while the file was
  // written): the file no longer describes the host.
  constexpr uint64_t kHost = 78;
  Result<CalibrationResult> first = hostCalibration(dir_, kHost, 1 << 20);
  ASSERT_TRUE(first.ok());
  rewrite(first.value(), kHost, 5e4);
  clearProcessCalibrations();
  Result<CalibrationResult> second = hostCalibration(dir_, kHost, 1 << 20);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second.value().source, CalibrationSource::kMeasured);
  EXPECT_NE(second.value().note.find("hand-off of 50000.000 us"), std::string::npos)
      << second.value().note;
  EXPECT_LT(second.value().calibration.hopUs, 5e4);
}

TEST_F(CalibrationCache, UnwritableFolderIsNoError) {
  Result<CalibrationResult> r = hostCalibration("/proc/braid-no-such-dir", 5, 1 << 20);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r.value().source, CalibrationSource::kMeasured);
  EXPECT_NE(r.value().note.find("not cached"), std::string::npos);
}

TEST(Calibration, FingerprintNamesHostAndBinary) {
  const std::string fp = calibrationFingerprint(0xff);
  EXPECT_NE(fp.find("host=00000000000000ff"), std::string::npos) << fp;
  EXPECT_NE(fp.find("binary="), std::string::npos);
  EXPECT_NE(calibrationFingerprint(1), fp);
}

}  // namespace
}  // namespace braid
