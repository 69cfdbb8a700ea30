// The peer sweep over single-rank stand-in libraries: one that moves the data as the collectives
// define it for one rank, one that moves nothing, one whose prepare fails.
#include "perf/peers/peer_bench.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

namespace braid::perf::peers {
namespace {

/// One rank of one: every collective copies its input to its output.
class SelfComm : public PeerComm {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string description() const override { return "self"; }
  Outcome allGather(const void* mine, void* all, size_t bytes) override {
    std::memcpy(all, mine, bytes);
    return Outcome();
  }
  Outcome barrier() override { return Outcome(); }
  Expected<PeerRunner> prepare(const PeerOp& op) override {
    ++prepared;
    const size_t bytes = op.spec.shape.recvBytes();
    return PeerRunner([this, op, bytes] {
      ++runs;
      if (moves) std::memmove(op.recv, op.send, bytes);
      return Outcome();
    });
  }
  bool moves = true;
  int prepared = 0;
  int runs = 0;
};

class FailingComm : public SelfComm {
 public:
  Expected<PeerRunner> prepare(const PeerOp&) override { return failure("not here"); }
};

PerfOptions smallSweep(PerfCollective coll) {
  PerfOptions o;
  o.collective = coll;
  o.minBytes = 8;
  o.maxBytes = 4096;
  o.stepFactor = 8;  // 8, 64, 512, 4096
  o.iters = 3;
  o.warmupIters = 2;
  return o;
}

TEST(PeerBenchTest, CorrectLibraryPassesEveryCollective) {
  for (PerfCollective coll :
       {PerfCollective::kAllReduce, PerfCollective::kBroadcast, PerfCollective::kReduce,
        PerfCollective::kAllGather, PerfCollective::kReduceScatter, PerfCollective::kAllToAll}) {
    SelfComm comm;
    Expected<int> rc = runPeerSweep(comm, smallSweep(coll), "peer-test");
    ASSERT_TRUE(rc.ok()) << rc.outcome().message();
    EXPECT_EQ(rc.value(), 0) << perfCollectiveName(coll);
    // Two placements of four sizes, each warmed up, timed and verified once.
    EXPECT_EQ(comm.prepared, 8);
    EXPECT_EQ(comm.runs, 8 * (2 + 3 + 1));
  }
}

TEST(PeerBenchTest, LibraryThatWritesNothingIsCaught) {
  SelfComm comm;
  comm.moves = false;
  Expected<int> rc = runPeerSweep(comm, smallSweep(PerfCollective::kAllReduce), "peer-test");
  ASSERT_TRUE(rc.ok()) << rc.outcome().message();
  EXPECT_EQ(rc.value(), 1);
}

TEST(PeerBenchTest, PrepareFailureStopsTheSweep) {
  FailingComm comm;
  Expected<int> rc = runPeerSweep(comm, smallSweep(PerfCollective::kAllReduce), "peer-test");
  ASSERT_FALSE(rc.ok());
  EXPECT_NE(rc.outcome().message().find("not here"), std::string::npos);
}

TEST(PeerBenchTest, JsonNamesTheProgramAndHoldsBothPlacements) {
  char path[] = "/tmp/peer_bench_test.XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  PerfOptions options = smallSweep(PerfCollective::kAllGather);
  options.jsonFile = path;
  SelfComm comm;
  Expected<int> rc = runPeerSweep(comm, options, "braid-peer-test");
  ASSERT_TRUE(rc.ok()) << rc.outcome().message();
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  std::remove(path);
  const std::string doc = text.str();
  EXPECT_NE(doc.find("\"tool\": \"braid-peer-test\""), std::string::npos) << doc;
  EXPECT_EQ(doc.find("braid-perf"), std::string::npos);
  size_t inPlace = 0;
  size_t outOfPlace = 0;
  for (size_t at = 0; (at = doc.find("\"in_place\": ", at)) != std::string::npos; ++at) {
    (doc.compare(at + 12, 4, "true") == 0 ? inPlace : outOfPlace) += 1;
  }
  EXPECT_EQ(inPlace, 4u);
  EXPECT_EQ(outOfPlace, 4u);
}

TEST(PeerBenchTest, ThreadsAndSendRecvAreRejected) {
  PerfOptions options;
  options.threads = 2;
  EXPECT_FALSE(checkCommonOptions(options).ok());
  options.threads = 1;
  options.collective = PerfCollective::kSendRecv;
  EXPECT_FALSE(checkCommonOptions(options).ok());
  options.collective = PerfCollective::kAllToAll;
  EXPECT_TRUE(checkCommonOptions(options).ok());
}

}  // namespace
}  // namespace braid::perf::peers
