#include "executor/connectors.h"

#include <string>

namespace braid {

ConnectorTable::ConnectorTable(int rank, int maxChannels, std::vector<Transport*> transports)
    : rank_(rank),
      maxChannels_(maxChannels),
      transports_(std::move(transports)),
      send_(transports_.size() * maxChannels),
      recv_(transports_.size() * maxChannels) {}

Status ConnectorTable::check(int peer, int channel) const {
  if (peer < 0 || static_cast<size_t>(peer) >= transports_.size() || peer == rank_) {
    return internalError("no connector to rank " + std::to_string(peer));
  }
  if (channel < 0 || channel >= maxChannels_) {
    return internalError("channel " + std::to_string(channel) + " beyond the " +
                         std::to_string(maxChannels_) + " set up");
  }
  if (transports_[peer] == nullptr) {
    return invalidUsage("no transport reaches rank " + std::to_string(peer) +
                        " (check BRAID_TRANSPORT)");
  }
  return okStatus();
}

Status ConnectorTable::makeSend(int peer, int channel) {
  RETURN_IF_ERROR(check(peer, channel));
  ASSIGN_OR_RETURN(send_[index(peer, channel)], transports_[peer]->sendConnector(peer, channel));
  return okStatus();
}

Status ConnectorTable::makeRecv(int peer, int channel) {
  RETURN_IF_ERROR(check(peer, channel));
  ASSIGN_OR_RETURN(recv_[index(peer, channel)], transports_[peer]->recvConnector(peer, channel));
  return okStatus();
}

}  // namespace braid
