#include "transport/ib/ib_device.h"

#if BRAID_HAVE_IBVERBS

#include <cstdlib>
#include <cstring>
#include <map>

#include "bootstrap/socket.h"

namespace braid {
namespace {

bool zeroGid(const ibv_gid& g) {
  static const ibv_gid kZero{};
  return std::memcmp(&g, &kZero, sizeof(g)) == 0;
}

bool ipv4Mapped(const ibv_gid& g) {
  static const uint8_t kPrefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return std::memcmp(g.raw, kPrefix, sizeof(kPrefix)) == 0;
}

/// BRAID_IB_HCA: the name filter and, per listed name, the only port it allows (0: any).
struct HcaSpec {
  NameFilter filter;
  std::map<std::string, int> ports;
};

Result<HcaSpec> parseHcaSpec(const std::string& spec) {
  HcaSpec out;
  std::string names;
  size_t start = 0;
  std::string body = spec;
  std::string lead;
  while (!body.empty() && (body.front() == '^' || body.front() == '=')) {
    lead += body.front();
    body.erase(0, 1);
  }
  for (size_t i = 0; i <= body.size(); ++i) {
    if (i < body.size() && body[i] != ',') continue;
    std::string item = body.substr(start, i - start);
    start = i + 1;
    int port = 0;
    const size_t colon = item.find(':');
    if (colon != std::string::npos) {
      char* end = nullptr;
      const long p = std::strtol(item.c_str() + colon + 1, &end, 10);
      if (*end != '\0' || p < 1 || p > 255) {
        return invalidArgument("BRAID_IB_HCA: '" + item + "' has a bad port number");
      }
      port = static_cast<int>(p);
      item.resize(colon);
    }
    if (port != 0) out.ports[item] = port;
    names += (names.empty() ? "" : ",") + item;
  }
  Result<NameFilter> filter = parseNameFilter(lead + names);
  if (!filter.ok()) return filter.status().withContext("BRAID_IB_HCA");
  out.filter = filter.value();
  return out;
}

const char* stateName(ibv_port_state s) {
  switch (s) {
    case IBV_PORT_DOWN: return "down";
    case IBV_PORT_INIT: return "init";
    case IBV_PORT_ARMED: return "armed";
    case IBV_PORT_ACTIVE: return "active";
    default: return "not active";
  }
}

}  // namespace

int chooseGid(const std::vector<GidCandidate>& table) {
  int best = -1;
  int bestScore = -1;
  for (const GidCandidate& c : table) {
    if (zeroGid(c.gid)) continue;
    const bool v2 = c.type == IBV_GID_TYPE_ROCE_V2;
    const int score = v2 && ipv4Mapped(c.gid) ? 3 : v2 ? 2 : ipv4Mapped(c.gid) ? 1 : 0;
    if (score > bestScore) {
      best = c.index;
      bestScore = score;
    }
  }
  return best;
}

Result<std::unique_ptr<IbDevice>> IbDevice::open(const VerbsApi& api, const std::string& hcaSpec,
                                                 int gidIndex) {
  ASSIGN_OR_RETURN(const HcaSpec spec, parseHcaSpec(hcaSpec));
  int count = 0;
  ibv_device** list = api.getDeviceList(&count);
  if (list == nullptr || count == 0) {
    if (list != nullptr) api.freeDeviceList(list);
    return systemError("no RDMA device");
  }
  std::unique_ptr<IbDevice> dev(new IbDevice(api));
  std::string seen;
  for (int d = 0; d < count && dev->context_ == nullptr; ++d) {
    const std::string name = api.getDeviceName(list[d]);
    if (!spec.filter.matches(name)) {
      seen += (seen.empty() ? "" : "; ") + name + " excluded by BRAID_IB_HCA";
      continue;
    }
    ibv_context* ctx = api.openDevice(list[d]);
    if (ctx == nullptr) {
      seen += (seen.empty() ? "" : "; ") + name + " cannot be opened";
      continue;
    }
    ibv_device_attr attr{};
    if (api.queryDevice(ctx, &attr) != 0) {
      api.closeDevice(ctx);
      continue;
    }
    auto only = spec.ports.find(name);
    for (int p = 1; p <= attr.phys_port_cnt; ++p) {
      if (only != spec.ports.end() && only->second != p) continue;
      ibv_port_attr port{};
      if (api.queryPort(ctx, static_cast<uint8_t>(p), &port) != 0) continue;
      if (port.state != IBV_PORT_ACTIVE) {
        seen += (seen.empty() ? "" : "; ") + name + ":" + std::to_string(p) + " " +
                stateName(port.state);
        continue;
      }
      const bool ethernet = port.link_layer == IBV_LINK_LAYER_ETHERNET;
      int index = gidIndex;
      if (ethernet && index < 0) {
        std::vector<GidCandidate> table;
        for (int i = 0; i < port.gid_tbl_len; ++i) {
          GidCandidate c;
          c.index = i;
          if (api.queryGid(ctx, static_cast<uint8_t>(p), i, &c.gid) != 0) continue;
          if (api.queryGidType != nullptr &&
              api.queryGidType(ctx, static_cast<uint8_t>(p), i, &c.type) != 0) {
            c.type = -1;
          }
          table.push_back(c);
        }
        index = chooseGid(table);
        if (index < 0) {
          seen += (seen.empty() ? "" : "; ") + name + ":" + std::to_string(p) + " has no GID";
          continue;
        }
      }
      if (index >= 0 && api.queryGid(ctx, static_cast<uint8_t>(p), index, &dev->gid_) != 0) {
        seen += (seen.empty() ? "" : "; ") + name + ":" + std::to_string(p) + " GID " +
                std::to_string(index) + " unreadable";
        continue;
      }
      if (!ethernet && port.lid == 0) {
        seen += (seen.empty() ? "" : "; ") + name + ":" + std::to_string(p) + " has no LID";
        continue;
      }
      dev->context_ = ctx;
      dev->port_ = static_cast<uint8_t>(p);
      dev->lid_ = port.lid;
      dev->gidIndex_ = index;
      dev->ethernet_ = ethernet;
      dev->mtu_ = port.active_mtu;
      dev->maxQpWr_ = attr.max_qp_wr;
      dev->description_ = name + ":" + std::to_string(p) +
                          (ethernet ? " (RoCE, GID " + std::to_string(index) + ")"
                                    : " (IB, LID " + std::to_string(port.lid) + ")");
      break;
    }
    if (dev->context_ == nullptr) api.closeDevice(ctx);
  }
  api.freeDeviceList(list);
  if (dev->context_ == nullptr) {
    return systemError("no active RDMA port" + (seen.empty() ? std::string() : " (" + seen + ")"));
  }
  dev->pd_ = api.allocPd(dev->context_);
  if (dev->pd_ == nullptr) return systemError("ibv_alloc_pd failed on " + dev->description_);
  return dev;
}

IbDevice::~IbDevice() {
  if (pd_ != nullptr) api_.deallocPd(pd_);
  if (context_ != nullptr) api_.closeDevice(context_);
}

}  // namespace braid

#endif  // BRAID_HAVE_IBVERBS
