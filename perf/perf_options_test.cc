#include "perf/perf_options.h"

#include <gtest/gtest.h>

namespace braid::perf {
namespace {

PerfOptions parseOk(const std::vector<std::string>& args) {
  Expected<PerfOptions> r = parsePerfOptions(args);
  EXPECT_TRUE(r.ok()) << r.outcome().message();
  return r.ok() ? r.value() : PerfOptions{};
}

std::string parseError(const std::vector<std::string>& args) {
  Expected<PerfOptions> r = parsePerfOptions(args);
  EXPECT_FALSE(r.ok());
  return r.ok() ? "" : r.outcome().message();
}

TEST(PerfOptions, DefaultsAreNcclTests) {
  const PerfOptions o = parseOk({});
  EXPECT_EQ(o.collective, PerfCollective::kAllReduce);
  EXPECT_EQ(o.minBytes, 32u << 20);
  EXPECT_EQ(o.maxBytes, 32u << 20);
  EXPECT_EQ(o.stepBytes, 1u << 20);
  EXPECT_EQ(o.stepFactor, 1u);
  EXPECT_EQ(o.iters, 20);
  EXPECT_EQ(o.warmupIters, 5);
  EXPECT_EQ(o.check, 1);
  EXPECT_EQ(o.average, AverageMode::kAverage);
  EXPECT_EQ(o.dataTypes, std::vector<braidDataType_t>{braidFloat32});
  EXPECT_EQ(o.ops, std::vector<braidRedOp_t>{braidSum});
  EXPECT_EQ(o.root, 0);
  EXPECT_EQ(o.threads, 1);
  EXPECT_EQ(o.nprocs, 0);
}

TEST(PerfOptions, ShortLongAndAttachedForms) {
  const PerfOptions o = parseOk(
      {"allgather", "-b", "8",    "-e64M", "--stepfactor", "2", "--iters=7", "-w", "0",  "-c", "3",
       "-t",        "2",  "--np", "3",     "-a",           "3", "-r",        "1",  "-m", "4",  "-N",
       "2"});
  EXPECT_EQ(o.collective, PerfCollective::kAllGather);
  EXPECT_EQ(o.minBytes, 8u);
  EXPECT_EQ(o.maxBytes, 64u << 20);
  EXPECT_EQ(o.stepFactor, 2u);
  EXPECT_EQ(o.iters, 7);
  EXPECT_EQ(o.warmupIters, 0);
  EXPECT_EQ(o.check, 3);
  EXPECT_EQ(o.threads, 2);
  EXPECT_EQ(o.nprocs, 3);
  EXPECT_EQ(o.average, AverageMode::kMax);
  EXPECT_EQ(o.root, 1);
  EXPECT_EQ(o.aggIters, 4);
  EXPECT_EQ(o.cycles, 2);
}

TEST(PerfOptions, BindPlacesRankProcessesOnCores) {
  EXPECT_TRUE(bindsCores(parseOk({})));  // auto: host buffers, one rank per process
  EXPECT_FALSE(bindsCores(parseOk({"-t", "2"})));
  EXPECT_FALSE(bindsCores(parseOk({"--device"})));
  EXPECT_TRUE(bindsCores(parseOk({"--bind", "core", "-t", "2"})));
  EXPECT_FALSE(bindsCores(parseOk({"--bind=core", "--bind", "none"})));
  EXPECT_TRUE(bindsCores(parseOk({"--bind", "none", "--bind", "auto"})));
  EXPECT_NE(parseError({"--bind", "socket"}).find("'socket' is not auto, none or core"),
            std::string::npos);
}

TEST(PerfOptions, SizeSuffixes) {
  const PerfOptions o = parseOk({"-b", "1K", "-e", "2G", "-i", "3M"});
  EXPECT_EQ(o.minBytes, 1024u);
  EXPECT_EQ(o.maxBytes, 2ull << 30);
  EXPECT_EQ(o.stepBytes, 3u << 20);
}

TEST(PerfOptions, DatatypesAndOps) {
  PerfOptions o = parseOk({"-d", "all", "-o", "all"});
  EXPECT_EQ(o.dataTypes.size(), 10u);
  EXPECT_EQ(o.ops.size(), 5u);
  o = parseOk({"-d", "bfloat16", "-o", "avg"});
  EXPECT_EQ(o.dataTypes, std::vector<braidDataType_t>{braidBfloat16});
  EXPECT_EQ(o.ops, std::vector<braidRedOp_t>{braidAvg});
  o = parseOk({"--datatype=half", "--op", "min"});
  EXPECT_EQ(o.dataTypes, std::vector<braidDataType_t>{braidFloat16});
  EXPECT_EQ(o.ops, std::vector<braidRedOp_t>{braidMin});
}

TEST(PerfOptions, CollectiveNames) {
  EXPECT_EQ(parseOk({"reduce_scatter"}).collective, PerfCollective::kReduceScatter);
  EXPECT_EQ(parseOk({"alltoall"}).collective, PerfCollective::kAllToAll);
  EXPECT_EQ(parseOk({"sendrecv"}).collective, PerfCollective::kSendRecv);
  EXPECT_EQ(parseOk({"broadcast"}).collective, PerfCollective::kBroadcast);
  EXPECT_EQ(collectiveFromProgramName("/opt/bin/all_gather_perf"), PerfCollective::kAllGather);
  EXPECT_EQ(collectiveFromProgramName("all_reduce_perf"), PerfCollective::kAllReduce);
  EXPECT_EQ(collectiveFromProgramName("./braid-perf"), std::nullopt);
  EXPECT_EQ(collectiveFromProgramName("_perf"), std::nullopt);
  // The program name sets the default; a positional name overrides it.
  Expected<PerfOptions> r = parsePerfOptions({}, PerfCollective::kReduce);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.value().collective, PerfCollective::kReduce);
  r = parsePerfOptions({"broadcast"}, PerfCollective::kReduce);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.value().collective, PerfCollective::kBroadcast);
  for (PerfCollective c :
       {PerfCollective::kAllReduce, PerfCollective::kBroadcast, PerfCollective::kReduce,
        PerfCollective::kAllGather, PerfCollective::kReduceScatter, PerfCollective::kAllToAll,
        PerfCollective::kSendRecv}) {
    EXPECT_EQ(parsePerfCollective(perfCollectiveName(c)), c);
  }
}

TEST(PerfOptions, DeviceCallsAreTimedOnAStreamUnlessToldOtherwise) {
  EXPECT_EQ(parseOk({"--device"}).deviceTiming, DeviceTiming::kStream);
  EXPECT_EQ(parseOk({"--device", "-G", "0"}).deviceTiming, DeviceTiming::kStream);
  EXPECT_EQ(parseOk({"--device", "-G", "10"}).deviceTiming, DeviceTiming::kGraph);
  EXPECT_EQ(parseOk({"--device", "--cudagraph", "1"}).deviceTiming, DeviceTiming::kGraph);
  EXPECT_EQ(parseOk({"--device", "--graph"}).deviceTiming, DeviceTiming::kGraph);
  EXPECT_EQ(parseOk({"--device", "--sync-each-call"}).deviceTiming, DeviceTiming::kEachCall);
  EXPECT_STREQ(deviceTimingName(DeviceTiming::kGraph), "graph");
}

TEST(PerfOptions, ExtensionsAndHelp) {
  PerfOptions o = parseOk({"--algo", "all", "--json", "out.json", "-T", "30", "-z", "1", "-p", "1",
                           "-g", "1", "-G", "0"});
  EXPECT_EQ(o.algo, "all");
  EXPECT_EQ(o.jsonFile, "out.json");
  EXPECT_DOUBLE_EQ(o.timeoutSeconds, 30.0);
  EXPECT_TRUE(o.blocking);
  EXPECT_TRUE(o.parallelInit);
  EXPECT_TRUE(parseOk({"--help"}).help);
  EXPECT_TRUE(parseOk({"-h"}).help);
  EXPECT_TRUE(parseOk({"--help-env"}).helpEnv);
  EXPECT_EQ(parseOk({"--algo=ring"}).algo, "ring");
  EXPECT_EQ(parseOk({"-r", "-1"}).root, -1);
  EXPECT_FALSE(parseOk({}).sharedBuffers);
  EXPECT_FALSE(parseOk({"-R", "0"}).sharedBuffers);
  EXPECT_TRUE(parseOk({"-R", "1"}).sharedBuffers);
  EXPECT_TRUE(parseOk({"--local_register=2"}).sharedBuffers);
  EXPECT_FALSE(parsePerfOptions({"-R", "3"}).ok());
}

TEST(PerfOptions, Errors) {
  EXPECT_NE(parseError({"-q", "1"}).find("unknown option '-q'"), std::string::npos);
  EXPECT_NE(parseError({"--bogus"}).find("unknown option"), std::string::npos);
  EXPECT_NE(parseError({"-b"}).find("-b needs a value"), std::string::npos);
  EXPECT_NE(parseError({"-b", "64M", "-e", "8"}).find("above -e"), std::string::npos);
  EXPECT_NE(parseError({"-a", "4"}).find("-a"), std::string::npos);
  EXPECT_NE(parseError({"-d", "float128"}).find("float128"), std::string::npos);
  EXPECT_NE(parseError({"-o", "mulsum"}).find("mulsum"), std::string::npos);
  EXPECT_NE(parseError({"allreduce", "broadcast"}).find("more than one"), std::string::npos);
  EXPECT_NE(parseError({"allreduse"}).find("unknown collective"), std::string::npos);
  EXPECT_NE(parseError({"-g", "2"}).find("--np"), std::string::npos);
  EXPECT_NE(parseError({"-b", "1X"}).find("-b"), std::string::npos);
  EXPECT_NE(parseError({"-n", "0"}).find("-n"), std::string::npos);
  EXPECT_NE(parseError({"-t", "0"}).find("-t"), std::string::npos);
  EXPECT_NE(parseError({"--help-env=1"}).find("takes no value"), std::string::npos);
  EXPECT_NE(parseError({"-b", "8", "-e", "16", "-i", "0"}).find("-i"), std::string::npos);
  EXPECT_NE(parseError({"-T", "-1"}).find("-T"), std::string::npos);
}

TEST(PerfOptions, NumbersReadAsTheBraidVariablesRead) {
  // One parser for both: -n and BRAID_NSLOTS, -b and BRAID_CHUNK_BYTES.
  EXPECT_EQ(parseError({"-n", "1K"}), "-n: '1K' is not an integer in [1, 1073741824]");
  EXPECT_EQ(parseError({"-b", "1X"}), "-b: '1X' is not a size (digits, then K, M or G)");
  EXPECT_EQ(parseOk({"-b", "1M"}).minBytes, 1u << 20);
}

TEST(PerfOptions, Tune) {
  PerfOptions o = parseOk({"--tune", "/tmp/t.tuning", "-b", "8", "-e", "1M"});
  EXPECT_EQ(o.tuneFile, "/tmp/t.tuning");
  EXPECT_TRUE(o.algo.empty());
  EXPECT_EQ(parseOk({"broadcast", "--tune=x"}).tuneFile, "x");
  EXPECT_NE(parseError({"--tune", "x", "--algo", "all"}).find("drop --algo"), std::string::npos);
  EXPECT_NE(parseError({"sendrecv", "--tune", "x"}).find("nothing to tune"), std::string::npos);
  EXPECT_NE(parseError({"--tune", ""}).find("empty file name"), std::string::npos);
}

TEST(PerfOptions, SweepByFactor) {
  const std::vector<uint64_t> sizes = sweepSizes(parseOk({"-b", "8", "-e", "64M", "-f", "2"}));
  ASSERT_EQ(sizes.size(), 24u);
  EXPECT_EQ(sizes.front(), 8u);
  EXPECT_EQ(sizes[1], 16u);
  EXPECT_EQ(sizes.back(), 64u << 20);
  // A max that is not on the progression stops below it.
  const std::vector<uint64_t> odd = sweepSizes(parseOk({"-b", "3", "-e", "20", "-f", "3"}));
  EXPECT_EQ(odd, (std::vector<uint64_t>{3, 9}));
}

TEST(PerfOptions, SweepByStepAndSingleSize) {
  EXPECT_EQ(sweepSizes(parseOk({"-b", "100", "-e", "400", "-i", "150"})),
            (std::vector<uint64_t>{100, 250, 400}));
  EXPECT_EQ(sweepSizes(parseOk({"-b", "1M", "-e", "1M"})), (std::vector<uint64_t>{1u << 20}));
  EXPECT_EQ(sweepSizes(parseOk({})), (std::vector<uint64_t>{32u << 20}));
  // Zero grows to one byte and then by the factor.
  EXPECT_EQ(sweepSizes(parseOk({"-b", "0", "-e", "4", "-f", "2"})),
            (std::vector<uint64_t>{0, 1, 2, 4}));
}

TEST(PerfOptions, SweepStopsBeforeOverflow) {
  const std::vector<uint64_t> sizes =
      sweepSizes(parseOk({"-b", "1G", "-e", "18446744073709551615", "-f", "1024"}));
  EXPECT_EQ(sizes, (std::vector<uint64_t>{1ull << 30, 1ull << 40, 1ull << 50, 1ull << 60}));
}

TEST(PerfOptions, CollectiveTraits) {
  EXPECT_TRUE(collectiveReduces(PerfCollective::kAllReduce));
  EXPECT_TRUE(collectiveReduces(PerfCollective::kReduceScatter));
  EXPECT_FALSE(collectiveReduces(PerfCollective::kAllGather));
  EXPECT_TRUE(collectiveHasRoot(PerfCollective::kBroadcast));
  EXPECT_FALSE(collectiveHasRoot(PerfCollective::kSendRecv));
  EXPECT_NE(perfUsage("braid-perf").find("--help-env"), std::string::npos);
}

}  // namespace
}  // namespace braid::perf
