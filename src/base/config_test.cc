#include "base/config.h"

#include <gtest/gtest.h>

#include <csignal>

namespace braid {
namespace {

TEST(Config, FifoBytesDefaultsToOneMiBAndParsesSizes) {
  Result<Config> plain = Config::load({});
  ASSERT_TRUE(plain.ok()) << plain.status().message();
  EXPECT_EQ(plain->fifoBytes, 1u << 20);
  EXPECT_EQ(shmRingBytes(*plain), 3u * (512 << 10)) << "raised to three 512 KiB slots";
  Result<Config> deep = Config::load({"BRAID_FIFO_BYTES=4M"});  // above three slots
  ASSERT_TRUE(deep.ok()) << deep.status().message();
  EXPECT_EQ(shmRingBytes(*deep), 4u << 20);
}

TEST(Config, TheRingHoldsThreeOfTheLargestChunks) {
  // Asking for less than three slots' worth gets three: every call's window must fit.
  Result<Config> small = Config::load({"BRAID_FIFO_BYTES=64K"});
  ASSERT_TRUE(small.ok());
  EXPECT_EQ(shmRingBytes(*small), 3 * uint64_t{small->slotBytes});
  Result<Config> bigChunks = Config::load({"BRAID_FIFO_BYTES=1M", "BRAID_CHUNK_BYTES=2M"});
  ASSERT_TRUE(bigChunks.ok());
  EXPECT_EQ(shmRingBytes(*bigChunks), 6u << 20);
  // Whole cache lines, so payloads stay aligned.
  Result<Config> odd = Config::load({"BRAID_FIFO_BYTES=3000000"});
  ASSERT_TRUE(odd.ok());
  EXPECT_EQ(shmRingBytes(*odd) % 64, 0u);
  EXPECT_GE(shmRingBytes(*odd), 3000000u);
}

TEST(Config, FifoBytesOutOfRangeIsAClearError) {
  for (const char* bad : {"BRAID_FIFO_BYTES=1K", "BRAID_FIFO_BYTES=1G", "BRAID_FIFO_BYTES=lots"}) {
    Result<Config> c = Config::load({bad});
    ASSERT_FALSE(c.ok()) << bad;
    EXPECT_NE(c.status().message().find("BRAID_FIFO_BYTES"), std::string::npos)
        << c.status().message();
  }
}

TEST(Config, SecondsAreNonNegativeAndFinite) {
  EXPECT_EQ(parseSeconds("300").value(), 300.0);
  EXPECT_EQ(parseSeconds("0.5").value(), 0.5);
  for (const char* bad : {"", "-1", "inf", "nan", "5s", "1e999"}) {
    EXPECT_FALSE(parseSeconds(bad).ok()) << bad;
  }
  EXPECT_EQ(parseSeconds("-1").status().message(), "'-1' is not a non-negative number of seconds");
  // BRAID_TIMEOUT reads its value by the same rule.
  Result<Config> c = Config::load({"BRAID_TIMEOUT=-1"});
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(), "BRAID_TIMEOUT: '-1' is not a non-negative number of seconds");
  EXPECT_EQ(Config::load({"BRAID_TIMEOUT=2.5"}).value().timeoutSeconds, 2.5);
}

TEST(Config, PeerTimeoutIsSecondsAtMostThirtyByDefault) {
  const Config defaults = Config::load().value();
  EXPECT_GT(defaults.peerTimeoutSeconds, 0);
  EXPECT_LE(defaults.peerTimeoutSeconds, 30);
  EXPECT_EQ(Config::load({"BRAID_PEER_TIMEOUT=7.5"}).value().peerTimeoutSeconds, 7.5);
  EXPECT_EQ(Config::load({"BRAID_PEER_TIMEOUT=0"}).value().peerTimeoutSeconds, 0);
  Result<Config> bad = Config::load({"BRAID_PEER_TIMEOUT=soon"});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "BRAID_PEER_TIMEOUT: 'soon' is not a non-negative number of seconds");
}

TEST(Config, ReportSignalIsOffByDefaultAndNamesACatchableSignal) {
  EXPECT_EQ(Config::load().value().reportSignal, 0);
  EXPECT_EQ(Config::load({"BRAID_REPORT_SIGNAL=USR1"}).value().reportSignal, SIGUSR1);
  EXPECT_EQ(Config::load({"BRAID_REPORT_SIGNAL=SIGUSR2"}).value().reportSignal, SIGUSR2);
  EXPECT_EQ(Config::load({"BRAID_REPORT_SIGNAL=" + std::to_string(SIGRTMIN)}).value().reportSignal,
            SIGRTMIN);
  for (const char* bad : {"KILL", "9", "0", "HUP!", "usr1x"}) {
    Result<Config> c = Config::load({std::string("BRAID_REPORT_SIGNAL=") + bad});
    ASSERT_FALSE(c.ok()) << bad;
    EXPECT_EQ(c.status().message(), std::string("BRAID_REPORT_SIGNAL: '") + bad +
                                        "' is not a signal that can be caught (USR1, USR2 or a "
                                        "number)");
  }
}

TEST(Config, IntegersAreDecimalAndWithinTheirRange) {
  EXPECT_EQ(parseInteger("42", 0, 100).value(), 42);
  EXPECT_EQ(parseInteger("-1", -1, 1).value(), -1);
  for (const char* bad : {"", "1K", "0x10", "2.5", "101", "-2", "99999999999999999999"}) {
    EXPECT_FALSE(parseInteger(bad, -1, 100).ok()) << bad;
  }
  EXPECT_EQ(parseInteger("7", 0, 5).status().message(), "'7' is not an integer in [0, 5]");
  // The BRAID_ variables read integers by the same rule.
  Result<Config> c = Config::load({"BRAID_NSLOTS=1K"});
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(), "BRAID_NSLOTS: '1K' is not an integer in [2, 64]");
}

TEST(Config, DeviceProtocolIsAutoSimpleOrLl) {
  EXPECT_EQ(Config::load({}).value().deviceProto, Config::DeviceProto::kAuto);
  EXPECT_EQ(Config::load({"BRAID_DEVICE_PROTO=simple"}).value().deviceProto,
            Config::DeviceProto::kSimple);
  EXPECT_EQ(Config::load({"BRAID_DEVICE_PROTO=ll"}).value().deviceProto,
            Config::DeviceProto::kLowLatency);
  Result<Config> c = Config::load({"BRAID_DEVICE_PROTO=LL128"});
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(), "BRAID_DEVICE_PROTO: 'LL128' is not auto, simple or ll");
}

}  // namespace
}  // namespace braid
