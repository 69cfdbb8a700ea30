// Strangers during init: connections to the bootstrap root and to a rank's listener that send
// garbage, fail the secret, claim an oversized frame, stall or hang up half way. The real ranks
// (separate processes) still join - quickly, since nothing waits for a stranger - and every
// stranger is dropped. An insider that holds the secret but lies about who it is gets refused
// with the reason. The ranks then all-reduce to prove the group works.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "braid.h"
#include "core/auth.h"
#include "core/bootstrap.h"
#include "core/bootstrap_wire.h"
#include "core/little_endian.h"
#include "core/unique_id.h"
#include "tests/fault/fault_harness.h"
#include "tests/support/multiprocess.h"

namespace braid::testing {
namespace {

constexpr int kRanks = 4;
constexpr double kTimeout = 20;
// A stalling stranger is dropped after the handshake limit (5 s by default). Ranks that joined
// within this did not wait for one.
constexpr double kJoinWithin = 4;
// The rank held inside its join while the strangers work on the root and on its listener.
constexpr int kHeld = 2;

Socket connectTo(const SocketAddress& where) {
  Result<Socket> s = Socket::connectTo(where, Deadline::after(5), "stranger", false);
  EXPECT_TRUE(s.ok()) << s.status().message();
  return s.ok() ? std::move(s.value()) : Socket();
}

// True when the other end closes within `seconds` (whatever it sent before).
bool droppedWithin(Socket& s, double seconds) {
  const Deadline deadline = Deadline::after(seconds);
  for (;;) {
    uint8_t byte;
    const Status st = s.readAll(&byte, 1, deadline, "stranger");
    if (st.ok()) continue;
    return st.code() == braidRemoteError;
  }
}

void send(Socket& s, const void* data, size_t bytes) {
  EXPECT_TRUE(s.writeAll(data, bytes, Deadline::after(5), "stranger").ok());
}

void sendHeader(Socket& s, FrameType type, uint32_t length) {
  uint8_t header[kFrameHeaderBytes];
  encodeFrameHeader({type, 0, 0, length}, header);
  send(s, header, sizeof(header));
}

/// What strangers do to one listener; the stalling connections stay open until the end.
void attack(const SocketAddress& where, const Secret& secret, FrameType firstFrame,
            std::vector<Socket>& stalling) {
  const std::string at = " at " + where.toString();
  Socket garbage = connectTo(where);
  const std::string junk(200, 'x');
  send(garbage, junk.data(), junk.size());
  EXPECT_TRUE(droppedWithin(garbage, 5)) << "garbage" << at;

  // A frame header claiming 4 GiB where the handshake belongs, padded to a hello's length (a
  // shorter one is a staller, dropped at the handshake limit).
  Socket huge = connectTo(where);
  sendHeader(huge, firstFrame, 0xffffffffu);
  const std::vector<uint8_t> pad(kClientHelloBytes - kFrameHeaderBytes, 0);
  send(huge, pad.data(), pad.size());
  EXPECT_TRUE(droppedWithin(huge, 5)) << "oversized frame" << at;

  // A wrong secret: the stranger cannot verify the listener, and its proof is refused.
  Socket wrong = connectTo(where);
  Secret other = secret;
  other[5] ^= 0x40;
  EXPECT_EQ(authenticateAsClient(wrong, other, Deadline::after(5), "wrong").code(),
            braidRemoteError);
  const std::vector<uint8_t> proof(kClientProofBytes, 0x17);
  (void)wrong.writeAll(proof.data(), proof.size(), Deadline::after(5), "wrong");
  EXPECT_TRUE(droppedWithin(wrong, 5)) << "wrong secret" << at;

  // An insider (right secret) whose first frame claims 1 GiB.
  Socket insider = connectTo(where);
  ASSERT_TRUE(authenticateAsClient(insider, secret, Deadline::after(5), "insider").ok());
  sendHeader(insider, firstFrame, 1u << 30);
  EXPECT_TRUE(droppedWithin(insider, 5)) << "insider's oversized frame" << at;

  // Silent, and half a hello then silence.
  stalling.push_back(connectTo(where));
  stalling.push_back(connectTo(where));
  send(stalling.back(), "BRHS\x01", 5);
}

std::string rankBody(int rank, const braidUniqueId& id) {
  Checks checks("rank " + std::to_string(rank));
  if (rank == kHeld) {
    // At the root, but before the address table: publish the listener and wait for the test.
    setBootstrapFaultHook([](const char* point, const std::string& listener) {
      if (std::string(point) != "join:root") return;
      std::snprintf(board().listener[kHeld], sizeof(board().listener[kHeld]), "%s",
                    listener.c_str());
      while (board().released.load() == 0) usleep(1000);
    });
  } else {
    // The others join once the strangers have done their worst.
    while (board().released.load() == 0) usleep(1000);
  }
  const double start = nowSeconds();
  Settings settings{"BRAID_TIMEOUT=" + std::to_string(kTimeout)};
  braidComm_t comm = nullptr;
  const braidResult_t rc = braidCommInitRankConfig(&comm, kRanks, id, rank, settings.config());
  if (!checks.expect(rc == braidSuccess,
                     std::string("init failed: ") + braidGetLastError(nullptr))) {
    return checks.text();
  }
  const double seconds = secondsSince(start);
  if (rank != kHeld) {
    checks.expect(seconds < kJoinWithin, "init took " + std::to_string(seconds) +
                                             " s: it waited for a stranger");
  }
  float x = float(rank + 1), y = 0;
  checks.expect(braidAllReduce(&x, &y, 1, braidFloat32, braidSum, comm, nullptr) == braidSuccess,
                std::string("allreduce failed: ") + braidGetLastError(comm));
  checks.expect(y == 10.0f, "allreduce gave " + std::to_string(y));
  checks.expect(braidCommDestroy(comm) == braidSuccess, "destroy failed");
  return checks.text();
}

TEST(Strangers, AtTheRootAndARankListenerDuringInit) {
  resetBoard();
  Result<braidUniqueId> id = uniqueIdWithRootTimeout(kTimeout + 5);
  ASSERT_TRUE(id.ok()) << id.status().message();
  const UniqueIdInfo info = decodeUniqueId(id.value()).value();
  std::vector<Socket> stalling;
  std::thread strangers([&] {
    const double start = nowSeconds();
    while (board().listener[kHeld][0] == 0 && secondsSince(start) < kTimeout) usleep(1000);
    // The root has one rank so far; the held rank's listener runs.
    attack(info.root, info.secret, FrameType::kJoin, stalling);
    Result<SocketAddress> listener = SocketAddress::parse(board().listener[kHeld]);
    EXPECT_TRUE(listener.ok()) << board().listener[kHeld];
    if (listener.ok()) {
      attack(listener.value(), info.secret, FrameType::kIdentify, stalling);
      // An insider that claims to be rank 99: refused with the reason, the group undisturbed.
      Socket liar = connectTo(listener.value());
      EXPECT_TRUE(authenticateAsClient(liar, info.secret, Deadline::after(5), "liar").ok());
      uint8_t identify[12];
      putLe32(identify, 2);  // point-to-point
      putLe32(identify + 4, 99);
      putLe32(identify + 8, kRanks);
      EXPECT_TRUE(writeFrame(liar, FrameType::kIdentify, 0, 0, identify, sizeof(identify),
                             Deadline::after(5), "liar")
                      .ok());
      std::vector<uint8_t> reply;
      Result<FrameHeader> answer =
          readFrame(liar, frameBit(FrameType::kError) | frameBit(FrameType::kAccept), 0, &reply,
                    Deadline::after(5), "liar");
      EXPECT_EQ(answer.status().code(), braidInvalidUsage) << answer.status().message();
      EXPECT_NE(answer.status().message().find("rank 99"), std::string::npos)
          << answer.status().message();
    }
    board().released = 1;
  });
  const std::vector<RankOutcome> outcomes = runRanks(
      kRanks, id.value(), [](int rank, const braidUniqueId& rid) { return rankBody(rank, rid); },
      kTimeout + 20);
  strangers.join();
  EXPECT_EQ(failures(outcomes), "");
  // The stalling strangers are dropped at their handshake limit, or when the listener closes.
  for (Socket& s : stalling) EXPECT_TRUE(droppedWithin(s, 10)) << "a staller was kept";
}

}  // namespace
}  // namespace braid::testing
