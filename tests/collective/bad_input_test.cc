// Every braidInvalidArgument / braidInvalidUsage case of the API contract returns that code with
// a reason naming the problem, and crashes or writes nothing.
#include <gtest/gtest.h>

#include <atomic>
#include <climits>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "braid.h"
#include "tests/support/multiprocess.h"

namespace braid::testing {
namespace {

/// Expects `rc` and a last error (of comm, or of the thread) that mentions `needle`.
void expectError(braidResult_t rc, braidResult_t expected, braidComm_t comm,
                 const std::string& needle) {
  EXPECT_EQ(rc, expected) << braidGetErrorString(rc);
  const std::string message = braidGetLastError(comm);
  EXPECT_NE(message.find(needle), std::string::npos)
      << "last error '" << message << "' does not mention '" << needle << "'";
}

class BadInputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Settings settings{"BRAID_TIMEOUT=10"};
    comms_.assign(2, nullptr);
    ASSERT_EQ(braidCommInitAllConfig(comms_.data(), 2, nullptr, settings.config()), braidSuccess);
    buf_.assign(64, 0x11);
    out_.assign(64, 0x22);
  }
  void TearDown() override {
    for (braidComm_t c : comms_) braidCommDestroy(c);
    // Nothing was written by any rejected call.
    for (char c : out_) ASSERT_EQ(c, 0x22);
  }
  braidComm_t comm() const { return comms_[0]; }

  std::vector<braidComm_t> comms_;
  std::vector<char> buf_, out_;
};

TEST_F(BadInputTest, NullCommunicator) {
  expectError(braidAllReduce(buf_.data(), out_.data(), 1, braidFloat32, braidSum, nullptr, nullptr),
              braidInvalidArgument, nullptr, "comm is NULL");
  expectError(braidBroadcast(buf_.data(), out_.data(), 1, braidFloat32, 0, nullptr, nullptr),
              braidInvalidArgument, nullptr, "comm is NULL");
  expectError(braidSend(buf_.data(), 1, braidFloat32, 0, nullptr, nullptr), braidInvalidArgument,
              nullptr, "comm is NULL");
  int v = 0;
  expectError(braidCommCount(nullptr, &v), braidInvalidArgument, nullptr, "comm is NULL");
  expectError(braidCommDestroy(nullptr), braidInvalidArgument, nullptr, "comm is NULL");
  expectError(braidCommAbort(nullptr), braidInvalidArgument, nullptr, "comm is NULL");
}

TEST_F(BadInputTest, SharedMemoryAllocation) {
  expectError(braidMemAlloc(nullptr, 64), braidInvalidArgument, nullptr, "ptr is NULL");
  void* p = &p;
  expectError(braidMemAlloc(&p, 0), braidInvalidArgument, nullptr, "size is 0");
  EXPECT_EQ(p, nullptr);  // never left pointing at anything
  expectError(braidMemAlloc(&p, SIZE_MAX), braidInvalidArgument, nullptr, "size overflows");
  int onStack = 0;
  expectError(braidMemFree(&onStack), braidInvalidArgument, nullptr,
              "not returned by braidMemAlloc");
  ASSERT_EQ(braidMemAlloc(&p, 100), braidSuccess);
  ASSERT_NE(p, nullptr);
  static_cast<char*>(p)[99] = 1;
  EXPECT_EQ(braidMemFree(p), braidSuccess);
  expectError(braidMemFree(p), braidInvalidArgument, nullptr, "not returned by braidMemAlloc");
  EXPECT_EQ(braidMemFree(nullptr), braidSuccess);
}

TEST_F(BadInputTest, NullBuffers) {
  expectError(braidAllReduce(nullptr, out_.data(), 4, braidFloat32, braidSum, comm(), nullptr),
              braidInvalidArgument, comm(), "sendbuff is NULL");
  expectError(braidAllReduce(buf_.data(), nullptr, 4, braidFloat32, braidSum, comm(), nullptr),
              braidInvalidArgument, comm(), "recvbuff is NULL");
  expectError(braidAllGather(buf_.data(), nullptr, 4, braidFloat32, comm(), nullptr),
              braidInvalidArgument, comm(), "recvbuff is NULL");
  expectError(braidReduceScatter(nullptr, out_.data(), 4, braidFloat32, braidSum, comm(), nullptr),
              braidInvalidArgument, comm(), "sendbuff is NULL");
  expectError(braidAllToAll(buf_.data(), nullptr, 4, braidFloat32, comm(), nullptr),
              braidInvalidArgument, comm(), "recvbuff is NULL");
  expectError(braidSend(nullptr, 4, braidFloat32, 1, comm(), nullptr), braidInvalidArgument, comm(),
              "sendbuff is NULL");
  expectError(braidRecv(nullptr, 4, braidFloat32, 1, comm(), nullptr), braidInvalidArgument, comm(),
              "recvbuff is NULL");
  // The root of a broadcast needs sendbuff; every rank needs recvbuff.
  expectError(braidBroadcast(nullptr, out_.data(), 4, braidFloat32, 0, comm(), nullptr),
              braidInvalidArgument, comm(), "sendbuff is NULL");
  // The root of a reduce needs recvbuff.
  expectError(braidReduce(buf_.data(), nullptr, 4, braidFloat32, braidSum, 0, comm(), nullptr),
              braidInvalidArgument, comm(), "recvbuff is NULL");
}

TEST_F(BadInputTest, UnknownDatatypeAndOp) {
  for (int type : {-1, 10, 1000}) {
    expectError(braidAllReduce(buf_.data(), out_.data(), 1, static_cast<braidDataType_t>(type),
                               braidSum, comm(), nullptr),
                braidInvalidArgument, comm(), "datatype");
    expectError(braidAllGather(buf_.data(), out_.data(), 1, static_cast<braidDataType_t>(type),
                               comm(), nullptr),
                braidInvalidArgument, comm(), "datatype");
  }
  for (int op : {-1, 5, 99}) {
    expectError(braidAllReduce(buf_.data(), out_.data(), 1, braidFloat32,
                               static_cast<braidRedOp_t>(op), comm(), nullptr),
                braidInvalidArgument, comm(), "reduction op");
    expectError(braidReduceScatter(buf_.data(), out_.data(), 1, braidFloat32,
                                   static_cast<braidRedOp_t>(op), comm(), nullptr),
                braidInvalidArgument, comm(), "reduction op");
  }
}

TEST_F(BadInputTest, RootAndPeerOutOfRange) {
  for (int root : {-1, 2, INT_MAX}) {
    expectError(braidBroadcast(buf_.data(), out_.data(), 1, braidFloat32, root, comm(), nullptr),
                braidInvalidArgument, comm(), "root");
    expectError(
        braidReduce(buf_.data(), out_.data(), 1, braidFloat32, braidSum, root, comm(), nullptr),
        braidInvalidArgument, comm(), "root");
    expectError(braidSend(buf_.data(), 1, braidFloat32, root, comm(), nullptr),
                braidInvalidArgument, comm(), "peer");
    expectError(braidRecv(out_.data(), 1, braidFloat32, root, comm(), nullptr),
                braidInvalidArgument, comm(), "peer");
  }
}

TEST_F(BadInputTest, CountOverflowingTheByteSize) {
  expectError(braidAllReduce(buf_.data(), out_.data(), SIZE_MAX / 2, braidFloat32, braidSum, comm(),
                             nullptr),
              braidInvalidArgument, comm(), "overflows");
  expectError(braidAllGather(buf_.data(), out_.data(), SIZE_MAX / 4, braidInt8, comm(), nullptr),
              braidInvalidArgument, comm(), "overflows");
}

TEST_F(BadInputTest, OverlapThatIsNotInPlace) {
  expectError(
      braidAllReduce(out_.data(), out_.data() + 4, 4, braidFloat32, braidSum, comm(), nullptr),
      braidInvalidArgument, comm(), "overlap");
}

TEST_F(BadInputTest, NullOutputsOfQueries) {
  expectError(braidCommCount(comm(), nullptr), braidInvalidArgument, nullptr, "count is NULL");
  expectError(braidCommUserRank(comm(), nullptr), braidInvalidArgument, nullptr, "rank is NULL");
  expectError(braidCommCuDevice(comm(), nullptr), braidInvalidArgument, nullptr, "device is NULL");
  expectError(braidCommGetAsyncError(comm(), nullptr), braidInvalidArgument, nullptr,
              "asyncError is NULL");
  expectError(braidCommSplit(comm(), 0, 0, nullptr), braidInvalidArgument, nullptr,
              "newcomm is NULL");
  expectError(braidGetUniqueId(nullptr), braidInvalidArgument, nullptr, "uniqueId is NULL");
  expectError(braidGetVersion(nullptr), braidInvalidArgument, nullptr, "version is NULL");
}

TEST_F(BadInputTest, CudaStreamOnAHostOnlyBuild) {
  int fakeStream = 0;
  braidResult_t rc =
      braidAllReduce(buf_.data(), out_.data(), 1, braidFloat32, braidSum, comm(), &fakeStream);
  EXPECT_NE(rc, braidSuccess);
  EXPECT_FALSE(std::string(braidGetLastError(comm())).empty());
}

TEST(BadInit, InvalidInitArguments) {
  braidUniqueId id;
  std::memset(&id, 0, sizeof(id));
  braidComm_t comm = nullptr;
  expectError(braidCommInitRank(nullptr, 2, id, 0), braidInvalidArgument, nullptr, "comm is NULL");
  expectError(braidCommInitRank(&comm, 0, id, 0), braidInvalidArgument, nullptr, "nranks");
  expectError(braidCommInitRank(&comm, 2, id, 2), braidInvalidArgument, nullptr, "rank 2");
  expectError(braidCommInitRank(&comm, 2, id, -1), braidInvalidArgument, nullptr, "rank -1");
  EXPECT_EQ(comm, nullptr);
  // An id that braidGetUniqueId did not make.
  std::memset(&id, 0x37, sizeof(id));
  EXPECT_EQ(braidCommInitRank(&comm, 1, id, 0), braidInvalidArgument);
  EXPECT_FALSE(std::string(braidGetLastError(nullptr)).empty());
  expectError(braidCommInitAll(nullptr, 2, nullptr), braidInvalidArgument, nullptr, "comms");
  braidComm_t comms[2];
  expectError(braidCommInitAll(comms, 0, nullptr), braidInvalidArgument, nullptr, "ndev");
}

TEST(BadInit, UseAfterDestroyIsDetected) {
  braidComm_t comm = nullptr;
  ASSERT_EQ(braidCommInitAll(&comm, 1, nullptr), braidSuccess);
  ASSERT_EQ(braidCommDestroy(comm), braidSuccess);
  float x = 0;
  expectError(braidAllReduce(&x, &x, 1, braidFloat32, braidSum, comm, nullptr), braidInvalidUsage,
              nullptr, "not a live communicator");
  expectError(braidCommDestroy(comm), braidInvalidUsage, nullptr, "not a live communicator");
}

TEST(BadInit, UseAfterDestroyIsDetectedRightAfterASuccessfulCall) {
  // A thread's next call on the communicator of its last call skips the registry lookup: the
  // handle must still tell that it was destroyed meanwhile, by this thread or another.
  for (bool destroyElsewhere : {false, true}) {
    braidComm_t comm = nullptr;
    ASSERT_EQ(braidCommInitAll(&comm, 1, nullptr), braidSuccess);
    float x = 1;
    ASSERT_EQ(braidAllReduce(&x, &x, 1, braidFloat32, braidSum, comm, nullptr), braidSuccess);
    if (destroyElsewhere) {
      braidResult_t rc = braidInternalError;
      std::thread([&] { rc = braidCommDestroy(comm); }).join();
      ASSERT_EQ(rc, braidSuccess);
    } else {
      ASSERT_EQ(braidCommDestroy(comm), braidSuccess);
    }
    expectError(braidAllReduce(&x, &x, 1, braidFloat32, braidSum, comm, nullptr), braidInvalidUsage,
                nullptr, "not a live communicator");
    EXPECT_EQ(x, 1.0f);
  }
}

TEST(BadInit, DestroyWaitsForACallInProgressOnAnotherThread) {
  // Destroy must wait for the call in progress on the other thread (which skips the registry
  // lookup: it is that thread's last communicator), and every later call must fail cleanly.
  // ASan and TSan builds catch a communicator freed under a running call.
  for (int round = 0; round < 20; ++round) {
    braidComm_t comm = nullptr;
    ASSERT_EQ(braidCommInitAll(&comm, 1, nullptr), braidSuccess);
    std::atomic<int> calls{0};
    braidResult_t last = braidSuccess;
    std::thread caller([&] {
      std::vector<float> x(4096, 1.0f);
      while ((last = braidAllReduce(x.data(), x.data(), x.size(), braidFloat32, braidSum, comm,
                                    nullptr)) == braidSuccess) {
        calls.fetch_add(1);
      }
    });
    while (calls.load() < 100 + round * 50) std::this_thread::yield();
    EXPECT_EQ(braidCommDestroy(comm), braidSuccess);
    caller.join();
    EXPECT_EQ(last, braidInvalidUsage) << braidGetErrorString(last);
  }
}

TEST(BadInit, GroupEndWithoutStart) {
  expectError(braidGroupEnd(), braidInvalidUsage, nullptr, "braidGroupStart");
}

}  // namespace
}  // namespace braid::testing
