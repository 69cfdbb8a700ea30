// The p2p transport: FIFOs in GPU memory for the device executor, between ranks of one host whose
// GPUs can reach each other - the same GPU (several processes sharing one device included), or
// GPUs with peer access.
//
// Every rank allocates one device inbox (p2p_layout.h) holding a FIFO per (sending rank, channel)
// and exports it with cudaIpcGetMemHandle; each sender opens the inboxes of the ranks it sends to
// with cudaIpcOpenMemHandle (ranks of the same process use the pointer as it is). A sender writes
// its slots, headers and the head counter straight into the receiver's inbox; the receiver reads
// them there and writes the tail counter, which the sender polls.
//
// create() is collective over the bootstrap and fails on every rank alike when any rank fails.
// CUDA builds only.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "kernels/cuda/device_abi.h"
#include "kernels/cuda/device_runtime.h"
#include "kernels/ll_protocol.h"
#include "transport/p2p/p2p_layout.h"
#include "transport/p2p/p2p_reach.h"

namespace braid {

class Bootstrap;

struct P2pOptions {
  int rank = 0;
  int nranks = 1;
  int maxChannels = 1;
  uint32_t nslots = 4;
  uint32_t slotBytes = 0;
  /// Lines of each FIFO's low-latency ring (0: none); every rank must ask for the same.
  uint32_t llLines = 0;
  uint64_t hostHash = 0;  ///< ranks with equal hashes share a host
  int device = 0;         ///< this rank's CUDA device (current while create() runs)
  bool allowed = true;    ///< false when BRAID_TRANSPORT excludes p2p: no rank is reachable
  cudaStream_t setupStream = nullptr;  ///< where the inbox is cleared
  /// Non-empty when this rank could not get ready: create() still joins every exchange (so that
  /// its peers fail at once rather than time out) and fails with this message everywhere.
  std::string localFailure;
};

class P2pTransport {
 public:
  static Result<std::unique_ptr<P2pTransport>> create(Bootstrap& bootstrap,
                                                      const P2pOptions& options);
  ~P2pTransport();
  P2pTransport(const P2pTransport&) = delete;
  P2pTransport& operator=(const P2pTransport&) = delete;

  /// Whether this rank's data reaches `peer` (and `peer`'s reaches this rank) through the device.
  bool canSend(int peer) const;
  bool canRecv(int peer) const;
  /// How this rank reaches `peer` ("same GPU", "peer GPU", ...) or why it does not.
  std::string describe(int peer) const;
  /// Whether rank `sender`'s data reaches rank `receiver` through the device (any pair: every
  /// rank knows the whole matrix, so decisions taken from it agree everywhere).
  bool links(int sender, int receiver) const;
  /// The whole matrix, kept host by host.
  const P2pReach& reach() const { return reach_; }

  /// The FIFO this rank fills for `peer` on `channel` (in the peer's inbox); requires canSend.
  gpu::DeviceFifo sendFifo(int peer, int channel) const;
  /// The FIFO `peer` fills for this rank on `channel` (in this rank's inbox); requires canRecv.
  gpu::DeviceFifo recvFifo(int peer, int channel) const;
  /// The low-latency rings of those FIFOs (no lines where P2pOptions::llLines is 0).
  gpu::LlFifo sendRing(int peer, int channel) const;
  gpu::LlFifo recvRing(int peer, int channel) const;

 private:
  P2pTransport() = default;
  static gpu::DeviceFifo fifoAt(char* base, const P2pInboxLayout& layout, int sender, int channel);
  gpu::LlFifo ringAt(char* base, const P2pInboxLayout& layout, int sender, int channel,
                     int peer) const;

  P2pOptions options_;
  P2pReach reach_;
  /// Of this rank's inbox and of those it sends to (the others' are left empty).
  std::vector<P2pInboxLayout> layouts_;
  std::vector<std::string> how_;          ///< per peer, for describe()
  std::vector<bool> sameGpu_;             ///< per peer: runs on this rank's GPU
  DeviceMemory inbox_;
  std::vector<char*> peerInbox_;  ///< each receiver's inbox as mapped here (nullptr: not sending)
  std::vector<bool> opened_;      ///< mapped with cudaIpcOpenMemHandle (closed at destruction)
};

}  // namespace braid
