// Picking and opening the RDMA port a rank uses, and its protection domain.
//
// BRAID_IB_HCA is the NCCL grammar: comma-separated device-name prefixes, each optionally with
// ":port"; a leading '^' excludes, '=' makes names exact. Devices are tried in the order
// libibverbs lists them, ports in number order; the first ACTIVE port wins. On an InfiniBand link
// peers are addressed by LID; on Ethernet (RoCE) by a GID: BRAID_IB_GID_INDEX when set, else the
// port's first RoCE v2 GID holding an IPv4 address (then any RoCE v2 GID, then any IPv4-mapped
// one, then the first non-zero one).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "transport/ib/verbs_api.h"

namespace braid {

#if BRAID_HAVE_IBVERBS

/// One GID table entry as the chooser sees it.
struct GidCandidate {
  int index = 0;
  ibv_gid gid{};
  int type = -1;  ///< IBV_GID_TYPE_*, -1 when libibverbs cannot say
};
/// The index chooseGid() takes among `table` (-1 when every entry is zero).
int chooseGid(const std::vector<GidCandidate>& table);

/// An open device port with its protection domain (closed with the object).
class IbDevice {
 public:
  /// Opens the first allowed device with an active port; the error says what was found instead.
  static Result<std::unique_ptr<IbDevice>> open(const VerbsApi& api, const std::string& hcaSpec,
                                                int gidIndex);
  ~IbDevice();
  IbDevice(const IbDevice&) = delete;
  IbDevice& operator=(const IbDevice&) = delete;

  const VerbsApi& api() const { return api_; }
  ibv_context* context() const { return context_; }
  ibv_pd* pd() const { return pd_; }
  uint8_t port() const { return port_; }
  uint16_t lid() const { return lid_; }
  const ibv_gid& gid() const { return gid_; }
  int gidIndex() const { return gidIndex_; }
  bool ethernet() const { return ethernet_; }
  ibv_mtu mtu() const { return mtu_; }
  int maxQpWr() const { return maxQpWr_; }
  /// "mlx5_0:1 (RoCE, GID 3)" or "mlx5_0:1 (IB, LID 12)".
  const std::string& description() const { return description_; }

 private:
  explicit IbDevice(const VerbsApi& api) : api_(api) {}

  const VerbsApi& api_;
  ibv_context* context_ = nullptr;
  ibv_pd* pd_ = nullptr;
  uint8_t port_ = 0;
  uint16_t lid_ = 0;
  ibv_gid gid_{};
  int gidIndex_ = -1;
  bool ethernet_ = false;
  ibv_mtu mtu_ = IBV_MTU_1024;
  int maxQpWr_ = 0;
  std::string description_;
};

#endif  // BRAID_HAVE_IBVERBS

}  // namespace braid
