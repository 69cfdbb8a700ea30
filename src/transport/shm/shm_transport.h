// Shared-memory transport between processes (or threads) of one host.
//
// Every rank creates one segment, its inbox: a header holding its Waker and its own failure notice,
// then one FIFO per (sending rank, channel). A sender writes its slots straight into the
// receiver's inbox; the receiver reads them in place. All ranks of the host map every inbox at
// init (pages are committed per FIFO on first use), then the names are unlinked. Large payloads
// from a peer's shared buffers (or, between threads of one process, from anywhere) are lent
// rather than copied (shared_buffers.h).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/process_watch.h"
#include "transport/shm/shared_buffers.h"
#include "transport/shm/shm_segment.h"
#include "transport/transport.h"

namespace braid {

struct InboxHeader;

class ShmTransport final : public Transport {
 public:
  /// Set-up in two steps around the communicator's exchange of PeerInfo. makeInbox creates this
  /// rank's inbox and fills in what peers need to open it (self.shmInbox, self.shmProbeFd); it
  /// exchanges nothing.
  static Result<std::unique_ptr<ShmTransport>> makeInbox(const TransportContext& ctx,
                                                         PeerInfo& self);
  /// Then, once ctx.peers holds every rank's PeerInfo, maps the inboxes of the peers on this host,
  /// runs `barrier` and only then lets its inbox's name go and sets up what peers lend each other
  /// (both need every rank to have mapped what it maps). `barrier` is any collective every rank
  /// runs (the communicator's next exchange, which canConnect() may already inform); what it
  /// returns, connect returns. Every rank of the communicator must call it.
  Status connect(const TransportContext& ctx, const std::function<Status()>& barrier);
  ~ShmTransport() override;

  std::string_view name() const override { return "shm"; }
  bool canConnect(int peer) const override;
  Result<SendConnector> sendConnector(int peer, int channel) override;
  Result<RecvConnector> recvConnector(int peer, int channel) override;

  /// The Waker this rank sleeps on; peers on this host wake it.
  Waker* waker() const;
  /// Records in this rank's inbox that `failedRank` (this rank) failed (the first notice wins),
  /// and wakes every peer on this host so it can look.
  void notifyFailure(int failedRank, const PeerFailure& failure) override;
  /// The failure `peer` recorded, if any; with kAnyPeer, the one of the peer that got least far.
  std::optional<PeerFailure> peerFailure(int peer) const override;
  /// False once a peer process on this host (in this pid namespace) has exited, zombie or not.
  bool peerAlive(int peer) const override;

 private:
  ShmTransport() = default;
  InboxHeader* header(int rank) const;
  FifoView fifo(int receiver, int sender, int channel) const;
  Status reserveFifo(int receiver, int sender, int channel);
  /// The bits in `rank`'s inbox: which ranks' shared buffers it can map.
  uint8_t* readableMap(int rank) const;
  /// Whether `reader` can map `owner`'s shared buffers (both on this host).
  bool canRead(int reader, int owner) const;
  void setUpLending();

  int rank_ = 0;
  int nranks_ = 0;
  int maxChannels_ = 1;
  uint32_t slotBytes_ = 0;
  uint64_t ringBytes_ = 0;  ///< payload bytes in flight per FIFO (FifoView::dataBytes)
  size_t fifoStride_ = 0;
  size_t headerBytes_ = 0;           ///< the header's page and the readable map
  std::vector<ShmSegment> inboxes_;  ///< by rank; unmapped (size 0) for peers not on this host
  int probeFd_ = -1;       ///< openProbeFd(), until connect: whether peers may open its descriptors
  std::vector<int> pids_;  ///< pid per rank when comparable, else 0
  std::vector<ProcessWatch> watches_;        ///< by rank: peer processes of this pid namespace
  std::vector<std::vector<bool>> reserved_;  ///< [peer][channel]: FIFO pages committed
  std::vector<Lending> lending_;             ///< by peer: what this rank may lend it
  std::vector<std::unique_ptr<PeerBufferReader>> readers_;  ///< by peer: what it lends this rank
};

}  // namespace braid
