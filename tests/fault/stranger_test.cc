// Strangers during init: connections to the bootstrap root and to a rank's listener that send
// garbage, fail the secret, claim an oversized frame, stall or hang up half way. The real ranks
// (separate processes) still join - quickly, since nothing waits for a stranger - and every
// stranger is dropped. An insider that holds the secret but lies about who it is gets refused
// with the reason. The ranks then all-reduce to prove the group works.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "bootstrap/auth.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/bootstrap_wire.h"
#include "bootstrap/unique_id.h"
#include "braid.h"
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

Socket connectTo(const SocketAddress& where, Checks& checks) {
  Result<Socket> s = Socket::connectTo(where, Deadline::after(5), "stranger", false);
  checks.expect(s.ok(), "cannot connect to " + where.toString() + ": " + s.status().message());
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

void send(Socket& s, const void* data, size_t bytes, Checks& checks) {
  checks.expect(s.writeAll(data, bytes, Deadline::after(5), "stranger").ok(), "a write failed");
}

void sendHeader(Socket& s, FrameType type, uint32_t length, Checks& checks) {
  uint8_t header[kFrameHeaderBytes];
  encodeFrameHeader({type, 0, 0, length}, header);
  send(s, header, sizeof(header), checks);
}

/// What strangers do to one listener; the stalling connections stay open until the end.
void attack(const SocketAddress& where, const Secret& secret, FrameType firstFrame,
            std::vector<Socket>& stalling, Checks& checks) {
  const std::string at = " at " + where.toString();
  Socket garbage = connectTo(where, checks);
  const std::string junk(200, 'x');
  send(garbage, junk.data(), junk.size(), checks);
  checks.expect(droppedWithin(garbage, 5), "garbage was not dropped" + at);

  // A frame header claiming 4 GiB where the handshake belongs, padded to a hello's length (a
  // shorter one is a staller, dropped at the handshake limit).
  Socket huge = connectTo(where, checks);
  sendHeader(huge, firstFrame, 0xffffffffu, checks);
  const std::vector<uint8_t> pad(kClientHelloBytes - kFrameHeaderBytes, 0);
  send(huge, pad.data(), pad.size(), checks);
  checks.expect(droppedWithin(huge, 5), "an oversized frame was not dropped" + at);

  // A wrong secret: the stranger cannot verify the listener, and its proof is refused.
  Socket wrong = connectTo(where, checks);
  Secret other = secret;
  other[5] ^= 0x40;
  checks.expect(
      authenticateAsClient(wrong, other, Deadline::after(5), "wrong").code() == braidRemoteError,
      "a wrong secret verified the listener" + at);
  const std::vector<uint8_t> proof(kClientProofBytes, 0x17);
  (void)wrong.writeAll(proof.data(), proof.size(), Deadline::after(5), "wrong");
  checks.expect(droppedWithin(wrong, 5), "a wrong secret was not dropped" + at);

  // An insider (right secret) whose first frame claims 1 GiB.
  Socket insider = connectTo(where, checks);
  checks.expect(authenticateAsClient(insider, secret, Deadline::after(5), "insider").ok(),
                "the right secret was refused" + at);
  sendHeader(insider, firstFrame, 1u << 30, checks);
  checks.expect(droppedWithin(insider, 5), "an insider's oversized frame was not dropped" + at);

  // Silent, and half a hello then silence.
  stalling.push_back(connectTo(where, checks));
  stalling.push_back(connectTo(where, checks));
  send(stalling.back(), "BRHS\x01", 5, checks);
}

/// The stranger: a process of its own (no thread in the test process, which forks the ranks).
std::string strangerBody(const UniqueIdInfo& info) {
  Checks checks("stranger");
  std::vector<Socket> stalling;
  const double start = nowSeconds();
  while (board().listener[kHeld][0] == 0 && secondsSince(start) < kTimeout) usleep(1000);
  // The root has one rank so far; the held rank's listener runs.
  attack(info.root, info.secret, FrameType::kJoin, stalling, checks);
  Result<SocketAddress> listener = SocketAddress::parse(board().listener[kHeld]);
  if (checks.expect(listener.ok(),
                    std::string("no listener address: ") + board().listener[kHeld])) {
    attack(listener.value(), info.secret, FrameType::kIdentify, stalling, checks);
    // An insider that claims to be rank 99: refused with the reason, the group undisturbed.
    Socket liar = connectTo(listener.value(), checks);
    checks.expect(authenticateAsClient(liar, info.secret, Deadline::after(5), "liar").ok(),
                  "the liar could not authenticate");
    const std::vector<uint8_t> identify = encodeIdentify({2, 99, kRanks});  // point-to-point
    checks.expect(writeFrame(liar, FrameType::kIdentify, 0, 0, identify.data(), identify.size(),
                             Deadline::after(5), "liar")
                      .ok(),
                  "the liar could not write");
    std::vector<uint8_t> reply;
    Result<FrameHeader> answer =
        readFrame(liar, frameBit(FrameType::kError) | frameBit(FrameType::kAccept), 0, &reply,
                  Deadline::after(5), "liar");
    checks.expect(answer.status().code() == braidInvalidUsage &&
                      answer.status().message().find("rank 99") != std::string::npos,
                  "the liar was not refused with the reason: " + answer.status().message());
  }
  board().released = 1;
  // The stalling strangers are dropped at their handshake limit, or when the listener closes.
  for (Socket& s : stalling) checks.expect(droppedWithin(s, 10), "a staller was kept");
  return checks.text();
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
    checks.expect(seconds < kJoinWithin,
                  "init took " + std::to_string(seconds) + " s: it waited for a stranger");
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
  // The ranks' init is timed: rank 0 must not be measuring the host meanwhile.
  const std::string primed = primeCalibration();
  ASSERT_EQ(primed, "");
  RootProcess root(kTimeout + 5);
  ASSERT_TRUE(root.ok()) << root.error();
  const UniqueIdInfo info = decodeUniqueId(root.id()).value();
  // Processes 0..kRanks-1 are the ranks, process kRanks the stranger.
  const std::vector<RankOutcome> outcomes = runRanks(
      kRanks + 1, root.id(),
      [&](int rank, const braidUniqueId& rid) {
        return rank == kRanks ? strangerBody(info) : rankBody(rank, rid);
      },
      kTimeout + 20);
  EXPECT_EQ(failures(outcomes), "");
}

}  // namespace
}  // namespace braid::testing
