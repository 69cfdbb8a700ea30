// The connectors of one communicator: a dense (peer, channel) table of FIFO ends, each made by the
// peer's transport the first time a plan uses it and kept for the communicator's life.
#pragma once

#include <vector>

#include "base/status.h"
#include "transport/transport.h"

namespace braid {

/// One communicator's connectors, by (peer, channel), made on first use.
class ConnectorTable {
 public:
  ConnectorTable() = default;
  /// transports[peer] links this rank with peer (nullptr for itself or unreachable peers).
  ConnectorTable(int rank, int maxChannels, std::vector<Transport*> transports);

  int maxChannels() const { return maxChannels_; }

  Result<SendConnector*> send(int peer, int channel) {
    SendConnector& c = send_[index(peer, channel)];
    if (!c.valid()) RETURN_IF_ERROR(makeSend(peer, channel));
    return &c;
  }
  Result<RecvConnector*> recv(int peer, int channel) {
    RecvConnector& c = recv_[index(peer, channel)];
    if (!c.valid()) RETURN_IF_ERROR(makeRecv(peer, channel));
    return &c;
  }

  /// The receiving end from `peer` on `channel` if a plan has made it, else nullptr.
  RecvConnector* existingRecv(int peer, int channel) {
    if (peer < 0 || channel < 0 || channel >= maxChannels_ ||
        index(peer, channel) >= recv_.size()) {
      return nullptr;
    }
    RecvConnector& c = recv_[index(peer, channel)];
    return c.valid() ? &c : nullptr;
  }

 private:
  size_t index(int peer, int channel) const { return size_t(peer) * maxChannels_ + channel; }
  Status check(int peer, int channel) const;
  Status makeSend(int peer, int channel);
  Status makeRecv(int peer, int channel);

  int rank_ = 0;
  int maxChannels_ = 1;
  std::vector<Transport*> transports_;
  std::vector<SendConnector> send_;
  std::vector<RecvConnector> recv_;
};

}  // namespace braid
