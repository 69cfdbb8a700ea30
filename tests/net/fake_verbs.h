// A verbs test double: an in-process RDMA fabric behind a VerbsApi table, for testing the RDMA
// transport's logic where there is no RDMA hardware.
//
// Devices, ports (InfiniBand with a LID or Ethernet with a GID table), protection domains,
// memory regions, completion queues with completion channels, and RC queue pairs with the
// RESET -> INIT -> RTR -> RTS state machine. An RDMA write is a memcpy done inside post_send from
// a registered local range to a registered remote range, after the checks a real HCA makes:
// queue pair state, lkey/rkey, bounds and access rights, the destination's LID (IB) or GID
// (RoCE) and QPN, and matching packet sequence numbers. A write with immediate consumes a posted
// receive of the destination and completes there; a write to a queue pair that is gone fails with
// a retry-exceeded completion and moves the sender to the error state, as a dead peer would.
// Counters let tests check what moved and that nothing leaked.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "transport/ib/verbs_api.h"

namespace braid::testing {

struct FakePort {
  bool active = true;
  bool ethernet = false;
  uint16_t lid = 1;
  std::vector<ibv_gid> gids;  ///< the GID table (RoCE)
  std::vector<int> gidTypes;  ///< IBV_GID_TYPE_* per entry
};

struct FakeDevice {
  std::string name;
  std::vector<FakePort> ports;
};

struct FakeStats {
  uint64_t writes = 0;  ///< RDMA writes executed
  uint64_t writesWithImm = 0;
  uint64_t bytes = 0;
  uint64_t failedWrites = 0;  ///< writes that completed with an error
  int contexts = 0;           ///< open now
  int pds = 0;
  int mrs = 0;
  int cqs = 0;
  int channels = 0;
  int qps = 0;
  int qpsEverConnected = 0;   ///< reached RTS
  int lastQpTimeout = -1;     ///< ibv_qp_attr timeout (ack wait exponent) of the last RTS
  int lastQpRetryCount = -1;  ///< and its retry_cnt
  std::string lastError;      ///< why the last write failed
};

/// Replaces the fabric's devices (nothing may be open) and returns the table to hand to the
/// transport (or to setVerbsApiForTesting).
const VerbsApi* fakeVerbs(std::vector<FakeDevice> devices);
FakeStats fakeStats();
/// Takes a device off the fabric, as a pulled cable would: its queue pairs go to the error state
/// and writes to them fail with retry-exceeded.
void fakeUnplug(const std::string& device);
/// "::ffff:a.b.c.d" as a GID.
ibv_gid ipv4Gid(uint8_t a, uint8_t b, uint8_t c, uint8_t d);
/// A link-local fe80:: GID.
ibv_gid linkLocalGid(uint8_t tail);

}  // namespace braid::testing
