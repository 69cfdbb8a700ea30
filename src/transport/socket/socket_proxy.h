// The socket transport's proxy: one thread per communicator that moves FIFO slots between this
// rank's memory and its TCP streams, so the executor and the plans never see the network.
//
// For every linked (peer, channel) the proxy owns two FIFOs in local memory. The executor posts
// into the send FIFO; the proxy cuts each posted slot into pieces (one per stream, for slots big
// enough to be worth it), queues them on the peer's streams and frees the slot (advances tail)
// once every piece is in the kernel. Arriving pieces are read straight into the receive FIFO; a
// slot is posted (head advanced) once all its bytes are in, in sequence order. Credits
// (socket_wire.h) bound what a sender has in flight by the receiver's free slots.
//
// Waiting: the proxy polls while work flows, then sleeps in epoll on its streams plus an eventfd
// that the rank's post()/release() rings through the proxy's Waker only while the proxy sleeps;
// the proxy rings the rank's Waker when it posts or frees a slot.
//
// Failure: a stream that closes marks its peer gone once all of the peer's streams have closed (a
// reset, or a close in the middle of a frame, at once); peerAlive() then says so and the progress
// engine fails the calls waiting on that peer. A malformed frame is kept as failure(), a peer's
// failure notice as peerFailure(peer). Closing with flush first sends everything posted, then half-closes each
// stream and reads until the peers close theirs, so the last slots of a collective are never lost.
#pragma once

#include <sys/uio.h>

#include <atomic>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/log.h"
#include "base/status.h"
#include "fifo/fifo.h"
#include "transport/peer_failures.h"
#include "transport/socket/socket_connect.h"
#include "transport/socket/socket_wire.h"

namespace braid {

/// A file descriptor closed with the object (the proxy's epoll instance and eventfd).
class OwnedFd {
 public:
  OwnedFd() = default;
  explicit OwnedFd(int fd) : fd_(fd) {}
  ~OwnedFd();
  OwnedFd(const OwnedFd&) = delete;
  OwnedFd& operator=(const OwnedFd&) = delete;
  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  /// Takes `fd`, closing the one held before.
  void reset(int fd);

 private:
  int fd_ = -1;
};

class SocketProxy {
 public:
  struct Options {
    int rank = 0;
    int nranks = 1;
    int maxChannels = 1;
    uint32_t nslots = 2;
    uint32_t slotBytes = 0;
    Waker* rankWaker = nullptr;
    const Logger* logger = nullptr;
    std::vector<std::string> peerNames;  ///< "rank 3 (host)" per rank, for messages
  };

  /// Takes the streams of every linked peer and starts the thread.
  static Result<std::unique_ptr<SocketProxy>> start(Options options,
                                                    std::vector<PeerStream> streams);
  /// Stops without flushing unless close() ran first.
  ~SocketProxy();
  SocketProxy(const SocketProxy&) = delete;
  SocketProxy& operator=(const SocketProxy&) = delete;

  /// Stops the thread. flush: first puts every posted slot on the wire and waits for the peers to
  /// close their side, for at most flushSeconds. Idempotent.
  void close(bool flush, double flushSeconds);

  bool linked(int peer) const;
  /// The FIFOs of a linked peer's channel (the caller checked linked() and the channel).
  FifoView sendFifo(int peer, int channel);
  FifoView recvFifo(int peer, int channel);
  /// Rung by the rank's post() and release().
  Waker* waker() { return &waker_; }
  /// False once every stream of `peer` has closed (or one was reset).
  bool peerAlive(int peer) const;
  /// A malformed frame from a peer.
  std::optional<Status> failure() const;
  /// The failure notice `peer` sent, if any (kAnyPeer: any peer's).
  std::optional<PeerFailure> peerFailure(int peer) const { return notices_->get(peer); }
  /// Sends every live peer a notice that `failedRank` failed (at most once).
  void notifyFailure(int failedRank, const PeerFailure& failure);

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
  struct SendState {
    uint64_t queued = 0;      ///< slots cut into pieces
    uint64_t released = 0;    ///< slots freed (the FIFO's tail)
    uint64_t creditTail = 0;  ///< the receiver's tail as it last told us
    std::vector<uint32_t> piecesLeft;
  };
  struct RecvState {
    uint64_t posted = 0;
    uint64_t creditSent = 0;
    std::vector<SlotAssembly> slots;
  };

  SocketProxy() = default;
  Status allocate();
  size_t fifoIndex(int peer, int channel) const {
    return size_t(peer) * options_.maxChannels + channel;
  }
  FifoView view(size_t index, bool send) const;

  void run();
  bool scanSends();
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
  void wakeRank();
  bool flushed() const;
  bool allClosed() const;
  void refreshOpened();

  Options options_;
  size_t fifoBytes_ = 0;
  size_t metaBytes_ = 0;
  char* arena_ = nullptr;
  size_t arenaBytes_ = 0;
  std::vector<int> arenaSlot_;  ///< per peer: position in the arena, -1 when not linked
  std::vector<std::vector<int>> peerStreams_;  ///< per peer: indices into streams_, by stream id
  std::vector<Stream> streams_;
  std::vector<SendState> send_;  ///< by fifoIndex
  std::vector<RecvState> recv_;
  std::vector<int> openedSends_;
  std::vector<int> openedRecvs_;
  uint64_t openedSeen_ = 0;

  // Shared with the rank's threads.
  Waker waker_;
  OwnedFd eventFd_;
  OwnedFd epoll_;
  std::unique_ptr<std::atomic<bool>[]> sendOpened_;
  std::unique_ptr<std::atomic<bool>[]> recvOpened_;
  std::atomic<uint64_t> openedGeneration_{0};
  std::unique_ptr<std::atomic<int>[]> liveStreams_;  ///< per peer; 0: gone
  std::atomic<bool> hasFailure_{false};
  mutable std::mutex mu_;
  std::optional<Status> failure_;
  std::unique_ptr<PeerFailures> notices_;  ///< received, per peer
  std::atomic<bool> noticePending_{false};
  bool noticeQueued_ = false;  ///< under mu_: notifyFailure ran (once is enough)
  socketwire::FrameHeader notice_{};
  std::string noticeText_;

  enum class Mode : int { kRun, kFlush, kStop };
  std::atomic<Mode> mode_{Mode::kRun};
  double flushSeconds_ = 0;
  bool closed_ = false;
  std::thread thread_;
};

}  // namespace braid
