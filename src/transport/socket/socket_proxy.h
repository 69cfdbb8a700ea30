// The socket transport's proxy: one thread per communicator that moves FIFO slots between this
// rank's memory and its TCP streams, so the executor and the plans never see the network.
//
// For every linked (peer, channel) the proxy owns two FIFOs in local memory. The executor posts
// into the send FIFO; the proxy cuts each posted slot into pieces (one per stream, for slots big
// enough to be worth it), queues them on the peer's streams and frees the slot (advances tail)
// once every piece is in the kernel. Arriving pieces are read straight into the receive FIFO; a
// slot is posted (head advanced) once all its bytes are in, in sequence order. Credits
// (socket_wire.h) bound what a sender has in flight by the receiver's free slots. The FIFOs, the
// credit counts and their loops, the thread and the failure state are NetworkProxy's
// (network_proxy.h); this proxy says how slots, credits and notices travel as frames.
//
// Waiting: the proxy polls while work flows, then sleeps in epoll on its streams plus an eventfd
// that the rank's post()/release() rings through the proxy's Waker only while the proxy sleeps;
// the proxy rings the rank's Waker when it posts or frees a slot. A GPU kernel cannot ring, so
// while the device path's armed work is outstanding (NetworkProxy::arm) the proxy polls instead.
//
// Failure: a stream that closes marks its peer gone once all of the peer's streams have closed (a
// reset, or a close in the middle of a frame, at once); peerAlive() then says so and the progress
// engine fails the calls waiting on that peer. A malformed frame is kept as failure(), a peer's
// failure notice as peerFailure(peer). Closing with flush first sends everything posted, then
// half-closes each stream and reads until the peers close theirs, so the last slots of a
// collective are never lost.
#pragma once

#include <sys/uio.h>

#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "base/hand_off.h"
#include "base/status.h"
#include "fifo/fifo.h"
#include "transport/network_proxy.h"
#include "transport/socket/socket_connect.h"
#include "transport/socket/socket_wire.h"

namespace braid {

class SocketProxy final : public NetworkProxy {
 public:
  /// Lays out FIFOs for the peers with linked[peer] and starts the thread. Their streams come
  /// later, through adopt(), when either side first sends.
  static Result<std::unique_ptr<SocketProxy>> start(ProxyOptions options,
                                                    const std::vector<bool>& linked);
  /// Hands the proxy a stream of a linked peer (any thread); it carries traffic in both
  /// directions once the proxy thread has taken it in.
  void adopt(PeerStream stream);
  /// Whether the proxy thread has taken in a stream of `peer` that is still up.
  bool carries(int peer) const { return linkUp(peer); }
  /// Stops without flushing unless close() ran first.
  ~SocketProxy() override;

 private:
  struct OutItem {
    socketwire::FrameHeader header;
    const char* data = nullptr;
    int fifo = -1;  ///< data: the send FIFO whose slot the piece belongs to
    uint64_t seq = 0;
  };
  struct Stream {
    int peer = -1;
    Socket socket;
    bool readOpen = true;  ///< false once the peer closed its side
    bool wantOut = false;
    // Receiving: a staging buffer for headers and small payloads, then a frame's payload.
    std::unique_ptr<char[]> rx;
    size_t rxBegin = 0;
    size_t rxEnd = 0;
    bool inPayload = false;
    socketwire::FrameHeader frame{};
    char* payload = nullptr;
    size_t payloadLeft = 0;
    std::string notice;
    // Sending.
    std::deque<OutItem> out;
    size_t frontDone = 0;  ///< bytes of out.front() already written
  };
  struct SlotAssembly {
    uint64_t seq = UINT64_MAX;
    uint32_t total = 0;
    uint32_t got = 0;
    CallDescriptor call;
  };
  /// A send FIFO's slots in pieces (beside its credit counts).
  struct SendState {
    std::vector<uint32_t> piecesLeft;  ///< per slot: pieces not yet in the kernel
  };
  /// A receive FIFO's slots being assembled from pieces (beside its credit counts).
  struct RecvState {
    std::vector<SlotAssembly> slots;
  };

  explicit SocketProxy(ProxyOptions options);
  void allocate();
  /// Send FIFO f's pieces left per slot, and receive FIFO f's slots being assembled: made on
  /// first use (the proxy thread), since most linked peers of a large group never exchange data.
  std::vector<uint32_t>& piecesLeft(size_t f);
  std::vector<SlotAssembly>& assemblies(size_t f);
  /// Takes in the streams adopt() queued (the proxy thread).
  void takeAdopted();

  void run() override;
  void stopped() override;
  bool scanSends();
  /// Cuts slot `seq` of send FIFO `f` into pieces on the peer's streams.
  void queuePieces(size_t f, int peer, int channel, const FifoView& v, uint64_t seq);
  bool scanRecvs();
  bool takeNotices();
  bool flushAll();
  bool flushStream(Stream& s);
  void readStream(Stream& s);
  Status frameArrived(Stream& s);
  Status payloadDone(Stream& s);
  void pieceWritten(const OutItem& item);
  void queueControl(int peer, int channel, const socketwire::FrameHeader& header);
  void closeStream(Stream& s, bool reset, const std::string& why);
  void setWantOut(Stream& s, bool want);
  void protocolError(const Stream& s, const Status& status);
  bool flushed() const;
  bool allClosed() const;

  std::vector<std::vector<int>> peerStreams_;  ///< per peer: indices into streams_, by stream id
  std::vector<Stream> streams_;
  std::vector<SendState> send_;  ///< by FIFO index
  std::vector<RecvState> recv_;

  HandOff<PeerStream> adopted_;  ///< streams not yet taken in
};

}  // namespace braid
