#include "topology/topology.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <queue>
#include <tuple>

namespace braid {

namespace {

constexpr double kInfinite = std::numeric_limits<double>::infinity();

// ---- Link defaults, for links whose figures discovery does not report. Bandwidths are per
// direction, GB/s = 1e9 bytes/s; each figure's source: docs/performance-notes.md#link-defaults.

// Containment inside a package (caches, cores, the on-die root complex) is never what limits a
// transfer between the devices modelled here: the memory, PCIe or socket link beside it is.
constexpr LinkModel kInternalLink{kInfinite, 0.0};

// Memory: four DDR4-3200 channels per NUMA node; idle local DRAM latency.
constexpr LinkModel kMemoryLink{4 * 25.6, 0.09};

// PCIe when hwloc gives no link speed: Gen3 x16 (hwloc's formula for its link speed); a switch's
// port-to-port latency.
constexpr LinkModel kPcieLink{8.0 * 16 * 128.0 / 130.0 / 8.0, 0.15};

// NVLink when its bandwidth is not reported: one NVLink 4 link. The latency is an estimate (about
// twice a PCIe hop) until measured tables replace it.
constexpr LinkModel kNvlinkLink{25.0, 0.3};

// Socket to socket: two UPI links, as 2-socket boards commonly wire them. Each package links to
// the machine node, so a crossing (remote memory's extra latency over local) is two links of half
// its latency.
constexpr double kSocketCrossingUs = 0.06;
constexpr LinkModel kInterSocketLink{2 * 20.8, kSocketCrossingUs / 2};

// Network when the NIC's port speed is unknown: 100 Gbit/s. A host-to-host path crosses two
// NIC-fabric links, each half of InfiniBand's small-message latency.
constexpr LinkModel kNetworkLink{100.0 / 8.0, 0.5};

bool isCpuSide(NodeKind k) {
  return k == NodeKind::kMachine || k == NodeKind::kPackage || k == NodeKind::kCache ||
         k == NodeKind::kCore || k == NodeKind::kPu;
}

bool isPciSide(NodeKind k) {
  return k == NodeKind::kPciHostBridge || k == NodeKind::kPciBridge || k == NodeKind::kPciSwitch ||
         k == NodeKind::kGpu || k == NodeKind::kNic || k == NodeKind::kPciDevice;
}

int64_t toNs(double us) { return std::llround(us * 1000.0); }

// Links within a relative 1e-9 of the bottleneck count as wide enough.
bool wideEnough(double bw, double minBw) { return bw >= minBw * (1.0 - 1e-9); }

std::string formatGBps(double v) {
  if (std::isinf(v)) return "inf";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f", v);
  return buf;
}

}  // namespace

const char* nodeKindName(NodeKind kind) {
  switch (kind) {
    case NodeKind::kMachine: return "Machine";
    case NodeKind::kPackage: return "Package";
    case NodeKind::kNuma: return "NUMANode";
    case NodeKind::kCache: return "Cache";
    case NodeKind::kCore: return "Core";
    case NodeKind::kPu: return "PU";
    case NodeKind::kPciHostBridge: return "HostBridge";
    case NodeKind::kPciBridge: return "PCIBridge";
    case NodeKind::kPciSwitch: return "PCISwitch";
    case NodeKind::kGpu: return "GPU";
    case NodeKind::kNic: return "NIC";
    case NodeKind::kPciDevice: return "PCIDevice";
    case NodeKind::kFabric: return "Fabric";
  }
  return "?";
}

const char* linkKindName(LinkKind kind) {
  switch (kind) {
    case LinkKind::kInternal: return "internal";
    case LinkKind::kMemory: return "memory";
    case LinkKind::kPcie: return "PCIe";
    case LinkKind::kNvlink: return "NVLink";
    case LinkKind::kInterSocket: return "inter-socket";
    case LinkKind::kNetwork: return "network";
  }
  return "?";
}

LinkModel defaultLinkModel(LinkKind kind) {
  switch (kind) {
    case LinkKind::kInternal: return kInternalLink;
    case LinkKind::kMemory: return kMemoryLink;
    case LinkKind::kPcie: return kPcieLink;
    case LinkKind::kNvlink: return kNvlinkLink;
    case LinkKind::kInterSocket: return kInterSocketLink;
    case LinkKind::kNetwork: return kNetworkLink;
  }
  return kInternalLink;
}

int64_t packPciBusId(int domain, int bus, int device, int function) {
  return (static_cast<int64_t>(domain & 0xffffffff) << 16) | ((bus & 0xff) << 8) |
         ((device & 0x1f) << 3) | (function & 0x7);
}

std::string formatPciBusId(int64_t busId) {
  if (busId < 0) return "none";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%04llx:%02x:%02x.%x",
                static_cast<unsigned long long>(busId >> 16),
                static_cast<unsigned>((busId >> 8) & 0xff),
                static_cast<unsigned>((busId >> 3) & 0x1f), static_cast<unsigned>(busId & 0x7));
  return buf;
}

Result<int64_t> parsePciBusId(const std::string& text) {
  auto bad = [&] { return invalidArgument("bad PCI bus id '" + text + "'"); };
  auto hexField = [](const std::string& s, size_t maxDigits, long* out) {
    if (s.empty() || s.size() > maxDigits) return false;
    long v = 0;
    for (char c : s) {
      int d;
      if (c >= '0' && c <= '9')
        d = c - '0';
      else if (c >= 'a' && c <= 'f')
        d = c - 'a' + 10;
      else if (c >= 'A' && c <= 'F')
        d = c - 'A' + 10;
      else
        return false;
      v = v * 16 + d;
    }
    *out = v;
    return true;
  };
  const size_t dot = text.rfind('.');
  if (dot == std::string::npos) return bad();
  const std::string head = text.substr(0, dot);
  const size_t lastColon = head.rfind(':');
  if (lastColon == std::string::npos) return bad();
  const size_t firstColon = head.find(':');
  long domain = 0, bus = 0, dev = 0, fn = 0;
  if (firstColon != lastColon && !hexField(head.substr(0, firstColon), 8, &domain)) return bad();
  const size_t busStart = firstColon == lastColon ? 0 : firstColon + 1;
  if (!hexField(head.substr(busStart, lastColon - busStart), 2, &bus) ||
      !hexField(head.substr(lastColon + 1), 2, &dev) || !hexField(text.substr(dot + 1), 1, &fn) ||
      dev > 0x1f || fn > 7) {
    return bad();
  }
  return packPciBusId(static_cast<int>(domain), static_cast<int>(bus), static_cast<int>(dev),
                      static_cast<int>(fn));
}

int TopoPath::count(LinkKind kind) const {
  return static_cast<int>(std::count(linkKinds.begin(), linkKinds.end(), kind));
}

// ---------------------------------------------------------------------------------------------
// Building

int Topology::addNode(NodeKind kind, int parent) {
  const int id = static_cast<int>(nodes_.size());
  TopoNode n;
  n.id = id;
  n.kind = kind;
  n.parent = parent;
  nodes_.push_back(std::move(n));
  if (parent >= 0 && parent < id) nodes_[parent].children.push_back(id);
  return id;
}

int Topology::addLink(LinkKind kind, int a, int b, double bandwidthGBps, double latencyUs) {
  TopoLink l;
  l.id = static_cast<int>(links_.size());
  l.kind = kind;
  l.a = a;
  l.b = b;
  l.bandwidthGBps = bandwidthGBps;
  l.latencyUs = latencyUs;
  links_.push_back(l);
  return l.id;
}

void Topology::linkTreeEdge(const TopoNode& child) {
  const TopoNode& parent = nodes_[child.parent];
  LinkKind kind = LinkKind::kInternal;
  LinkModel model = kInternalLink;
  switch (child.kind) {
    case NodeKind::kNuma:
      kind = LinkKind::kMemory;
      model = kMemoryLink;
      break;
    case NodeKind::kPackage:
      if (parent.kind == NodeKind::kMachine && numPackages() >= 2) {
        kind = LinkKind::kInterSocket;
        model = kInterSocketLink;
      }
      break;
    case NodeKind::kPciBridge:
    case NodeKind::kPciSwitch:
    case NodeKind::kGpu:
    case NodeKind::kNic:
    case NodeKind::kPciDevice:
      // A NIC the OS reports without a PCI device (a virtual interface) hangs off the CPUs.
      if (child.pciBusId >= 0 || isPciSide(parent.kind)) {
        kind = LinkKind::kPcie;
        model = kPcieLink;
        if (child.pcieLinkGBps > 0) model.bandwidthGBps = child.pcieLinkGBps;
      }
      break;
    default: break;
  }
  addLink(kind, child.parent, child.id, model.bandwidthGBps, model.latencyUs);
}

Status Topology::finalize() {
  if (finalized_) return invalidUsage("topology finalized twice");
  if (nodes_.empty() || nodes_[0].kind != NodeKind::kMachine || nodes_[0].parent != -1) {
    return internalError("topology: node 0 must be the machine");
  }
  for (const TopoNode& n : nodes_) {
    if (n.id != 0 && (n.parent < 0 || n.parent >= n.id)) {
      return internalError("topology: node " + std::to_string(n.id) + " has no valid parent");
    }
    if (n.kind == NodeKind::kFabric) return internalError("topology: the fabric node is implicit");
  }
  for (const TopoLink& l : links_) {
    const int n = static_cast<int>(nodes_.size());
    if (l.a < 0 || l.a >= n || l.b < 0 || l.b >= n || l.a == l.b) {
      return internalError("topology: link " + std::to_string(l.id) + " has bad ends");
    }
  }

  // CPU sets that discovery left empty (hand-built topologies): a PU is itself, a container the
  // union of its children.
  for (int id = static_cast<int>(nodes_.size()) - 1; id >= 0; --id) {
    TopoNode& n = nodes_[id];
    if (!isCpuSide(n.kind) || !n.cpuset.empty()) continue;
    if (n.kind == NodeKind::kPu) {
      n.cpuset.set(n.osIndex);
      continue;
    }
    for (int c : n.children) {
      if (isCpuSide(nodes_[c].kind)) n.cpuset |= nodes_[c].cpuset;
    }
  }

  std::vector<int> nicIds;
  for (const TopoNode& n : nodes_) {
    if (n.id != 0) linkTreeEdge(n);
    if (n.kind == NodeKind::kNic) nicIds.push_back(n.id);
  }
  if (!nicIds.empty()) {
    fabric_ = addNode(NodeKind::kFabric, -1);
    for (int nic : nicIds) {
      LinkModel model = kNetworkLink;
      if (nodes_[nic].netSpeedGbps > 0) model.bandwidthGBps = nodes_[nic].netSpeedGbps / 8.0;
      addLink(LinkKind::kNetwork, nic, fabric_, model.bandwidthGBps, model.latencyUs);
    }
  }
  for (const TopoLink& l : links_) {
    nodes_[l.a].links.push_back(l.id);
    nodes_[l.b].links.push_back(l.id);
  }

  std::vector<int> perKind(static_cast<size_t>(NodeKind::kFabric) + 1, 0);
  for (TopoNode& n : nodes_) n.logicalIndex = perKind[static_cast<size_t>(n.kind)]++;

  // NUMA node and package: from CPU sets on the CPU side, inherited from the attach point on the
  // I/O side (the tree order puts every parent first).
  auto uniqueCover = [&](NodeKind kind, const CpuSet& cpus) {
    int found = -1;
    for (const TopoNode& m : nodes_) {
      if (m.kind != kind || !m.cpuset.intersects(cpus)) continue;
      if (found >= 0) return -1;
      found = m.osIndex;
    }
    return found;
  };
  for (TopoNode& n : nodes_) {
    const int parentNuma = n.parent >= 0 ? nodes_[n.parent].numaNode : -1;
    const int parentPackage = n.parent >= 0 ? nodes_[n.parent].package : -1;
    if (n.kind == NodeKind::kNuma) {
      n.numaNode = n.osIndex;
    } else if (n.numaNode < 0) {
      n.numaNode = isCpuSide(n.kind) ? uniqueCover(NodeKind::kNuma, n.cpuset) : parentNuma;
    }
    if (n.kind == NodeKind::kPackage) {
      n.package = n.osIndex;
    } else if (n.package < 0) {
      const bool byCpus = isCpuSide(n.kind) || (n.kind == NodeKind::kNuma && !n.cpuset.empty());
      n.package = byCpus ? uniqueCover(NodeKind::kPackage, n.cpuset) : parentPackage;
    }
  }
  binding_ = bindingOf(allPus());
  finalized_ = true;
  return okStatus();
}

// ---------------------------------------------------------------------------------------------
// Reading

std::vector<int> Topology::nodesOf(NodeKind kind) const {
  std::vector<int> out;
  for (const TopoNode& n : nodes_) {
    if (n.kind == kind) out.push_back(n.id);
  }
  return out;
}

int Topology::count(NodeKind kind) const {
  return static_cast<int>(std::count_if(nodes_.begin(), nodes_.end(),
                                        [kind](const TopoNode& n) { return n.kind == kind; }));
}

int Topology::findByPciBusId(int64_t busId) const {
  if (busId < 0) return -1;
  for (const TopoNode& n : nodes_) {
    if (n.pciBusId == busId) return n.id;
  }
  return -1;
}

int Topology::findNuma(int osIndex) const {
  for (const TopoNode& n : nodes_) {
    if (n.kind == NodeKind::kNuma && n.osIndex == osIndex) return n.id;
  }
  return -1;
}

int Topology::findPackage(int osIndex) const {
  for (const TopoNode& n : nodes_) {
    if (n.kind == NodeKind::kPackage && n.osIndex == osIndex) return n.id;
  }
  return -1;
}

int Topology::numaNodeOf(const CpuSet& cpus) const {
  const CpuSet s = cpus & allPus();
  if (s.empty()) return -1;
  int found = -1;
  for (const TopoNode& n : nodes_) {
    if (n.kind != NodeKind::kNuma || !n.cpuset.intersects(s)) continue;
    if (found >= 0 || !s.isSubsetOf(n.cpuset)) return -1;
    found = n.osIndex;
  }
  return found;
}

int Topology::packageOf(const CpuSet& cpus) const {
  const CpuSet s = cpus & allPus();
  if (s.empty()) return -1;
  for (const TopoNode& n : nodes_) {
    if (n.kind == NodeKind::kPackage && s.isSubsetOf(n.cpuset)) return n.osIndex;
  }
  return -1;
}

CpuBinding Topology::bindingOf(const CpuSet& cpus) const {
  CpuBinding b;
  b.pus = cpus & allPus();
  for (const TopoNode& n : nodes_) {
    if (!n.cpuset.intersects(b.pus)) continue;
    if (n.kind == NodeKind::kCore) b.cores.push_back(n.logicalIndex);
    if (n.kind == NodeKind::kNuma) b.numaNodes.push_back(n.osIndex);
    if (n.kind == NodeKind::kPackage) b.packages.push_back(n.osIndex);
  }
  return b;
}

int Topology::anchorOf(const CpuSet& cpus) const {
  const CpuSet s = cpus & allPus();
  int current = 0;
  if (s.empty()) return current;
  for (bool descended = true; descended;) {
    descended = false;
    for (int c : nodes_[current].children) {
      const TopoNode& child = nodes_[c];
      if (child.kind != NodeKind::kMachine && isCpuSide(child.kind) && s.isSubsetOf(child.cpuset)) {
        current = c;
        descended = true;
        break;
      }
    }
  }
  return current;
}

// Routes compare by socket crossings first (like hwloc and NCCL, anything that leaves the
// socket counts as farther than any path inside it), then latency, then hops.
struct Topology::Distance {
  int crossings = std::numeric_limits<int>::max();
  int64_t latencyNs = std::numeric_limits<int64_t>::max();
  int hops = 0;
  int viaLink = -1;
  bool done = false;

  auto key() const { return std::tie(crossings, latencyNs, hops); }
};

std::vector<Topology::Distance> Topology::shortestFrom(int from, double minBandwidthGBps) const {
  std::vector<Distance> dist(nodes_.size());
  using Entry = std::tuple<int, int64_t, int, int>;  // crossings, latency, hops, node
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> queue;
  dist[from].crossings = 0;
  dist[from].latencyNs = 0;
  queue.emplace(0, 0, 0, from);
  while (!queue.empty()) {
    auto [crossings, lat, hops, id] = queue.top();
    queue.pop();
    if (dist[id].done) continue;
    dist[id].done = true;
    if (id == fabric_ && id != from) continue;  // an end, never a way through
    for (int lid : nodes_[id].links) {
      const TopoLink& l = links_[lid];
      if (!wideEnough(l.bandwidthGBps, minBandwidthGBps)) continue;
      const int other = l.a == id ? l.b : l.a;
      const int nc = crossings + (l.kind == LinkKind::kInterSocket ? 1 : 0);
      const int64_t nl = lat + toNs(l.latencyUs);
      const int nh = hops + 1;
      Distance& d = dist[other];
      if (!d.done && std::tie(nc, nl, nh) < d.key()) {
        d.crossings = nc;
        d.latencyNs = nl;
        d.hops = nh;
        d.viaLink = lid;
        queue.emplace(nc, nl, nh, other);
      }
    }
  }
  return dist;
}

double Topology::widestTo(int from, int to) const {
  std::vector<double> best(nodes_.size(), 0.0);
  std::vector<bool> done(nodes_.size(), false);
  std::priority_queue<std::pair<double, int>> queue;
  best[from] = kInfinite;
  queue.emplace(kInfinite, from);
  while (!queue.empty()) {
    auto [bw, id] = queue.top();
    queue.pop();
    if (done[id]) continue;
    done[id] = true;
    if (id == to) return bw;
    if (id == fabric_ && id != from) continue;
    for (int lid : nodes_[id].links) {
      const TopoLink& l = links_[lid];
      const int other = l.a == id ? l.b : l.a;
      const double nb = std::min(bw, l.bandwidthGBps);
      if (!done[other] && nb > best[other]) {
        best[other] = nb;
        queue.emplace(nb, other);
      }
    }
  }
  return 0.0;
}

std::optional<TopoPath> Topology::path(int from, int to) const {
  const int n = static_cast<int>(nodes_.size());
  if (from < 0 || from >= n || to < 0 || to >= n) return std::nullopt;
  TopoPath p;
  p.bandwidthGBps = kInfinite;
  if (from == to) {
    p.nodes.push_back(from);
    return p;
  }
  const double width = widestTo(from, to);
  if (width <= 0) return std::nullopt;
  const std::vector<Distance> dist = shortestFrom(from, width);
  if (!dist[to].done) return std::nullopt;
  for (int at = to; at != from;) {
    const TopoLink& l = links_[dist[at].viaLink];
    p.nodes.push_back(at);
    p.links.push_back(l.id);
    p.linkKinds.push_back(l.kind);
    p.bandwidthGBps = std::min(p.bandwidthGBps, l.bandwidthGBps);
    p.latencyUs += l.latencyUs;
    at = l.a == at ? l.b : l.a;
  }
  p.nodes.push_back(from);
  std::reverse(p.nodes.begin(), p.nodes.end());
  std::reverse(p.links.begin(), p.links.end());
  std::reverse(p.linkKinds.begin(), p.linkKinds.end());
  return p;
}

int Topology::nearest(int from, NodeKind kind) const {
  if (from < 0 || from >= static_cast<int>(nodes_.size())) return -1;
  const std::vector<Distance> dist = shortestFrom(from, 0.0);
  int best = -1;
  for (const TopoNode& n : nodes_) {
    if (n.kind != kind || !dist[n.id].done) continue;
    if (best < 0 || dist[n.id].key() < dist[best].key()) {
      best = n.id;
    }
  }
  return best;
}

int Topology::nearestGpuToNuma(int numaOs) const {
  const int numa = findNuma(numaOs);
  return numa < 0 ? -1 : nearest(numa, NodeKind::kGpu);
}

int Topology::nearestNicToNuma(int numaOs) const {
  const int numa = findNuma(numaOs);
  return numa < 0 ? -1 : nearest(numa, NodeKind::kNic);
}

int Topology::pciGroupOf(int id) const {
  for (int at = id >= 0 ? nodes_[id].parent : -1; at >= 0; at = nodes_[at].parent) {
    if (nodes_[at].kind == NodeKind::kPciSwitch || nodes_[at].kind == NodeKind::kPciBridge)
      return at;
    if (!isPciSide(nodes_[at].kind)) break;
  }
  return -1;
}

std::vector<int> Topology::switchesBetween(int a, int b) const {
  std::vector<int> out;
  if (std::optional<TopoPath> p = path(a, b)) {
    for (int id : p->nodes) {
      if (nodes_[id].kind == NodeKind::kPciSwitch) out.push_back(id);
    }
  }
  return out;
}

std::string Topology::summary() const {
  return std::to_string(numPackages()) + " packages, " + std::to_string(numNumaNodes()) +
         " NUMA nodes, " + std::to_string(numCores()) + " cores, " + std::to_string(numPus()) +
         " PUs, " + std::to_string(count(NodeKind::kGpu)) + " GPUs, " +
         std::to_string(count(NodeKind::kNic)) + " NICs, " +
         std::to_string(count(NodeKind::kPciSwitch)) + " PCI switches";
}

std::string Topology::describe() const {
  std::string out;
  auto line = [&](const TopoNode& n, int depth) {
    out.append(static_cast<size_t>(depth) * 2, ' ');
    out += nodeKindName(n.kind);
    if (n.osIndex >= 0) out += " P#" + std::to_string(n.osIndex);
    if (n.kind == NodeKind::kCache) out += " L" + std::to_string(n.cacheLevel);
    if (n.pciBusId >= 0) out += " " + formatPciBusId(n.pciBusId);
    if (n.vendorId != 0 || n.deviceId != 0) {
      char ids[16];
      std::snprintf(ids, sizeof(ids), " [%04x:%04x]", n.vendorId, n.deviceId);
      out += ids;
    }
    if (!n.name.empty()) out += " \"" + n.name + "\"";
    if (!n.cpuset.empty() && n.kind != NodeKind::kPu) out += " cpus=" + n.cpuset.toList();
    if (n.parent >= 0) {
      for (int lid : n.links) {
        const TopoLink& l = links_[lid];
        if ((l.a == n.parent && l.b == n.id) || (l.b == n.parent && l.a == n.id)) {
          if (l.kind != LinkKind::kInternal) {
            out += std::string(" (") + linkKindName(l.kind) + " " + formatGBps(l.bandwidthGBps) +
                   " GB/s)";
          }
          break;
        }
      }
    }
    out += '\n';
  };
  std::vector<std::pair<int, int>> stack{{0, 0}};
  while (!stack.empty()) {
    auto [id, depth] = stack.back();
    stack.pop_back();
    line(nodes_[id], depth);
    const auto& ch = nodes_[id].children;
    for (auto it = ch.rbegin(); it != ch.rend(); ++it) stack.emplace_back(*it, depth + 1);
  }
  for (const TopoLink& l : links_) {
    const bool tree = nodes_[l.b].parent == l.a || nodes_[l.a].parent == l.b;
    if (tree) continue;
    auto label = [&](int id) {
      const TopoNode& n = nodes_[id];
      return std::string(nodeKindName(n.kind)) +
             (n.pciBusId >= 0 ? " " + formatPciBusId(n.pciBusId) : std::string());
    };
    out += std::string(linkKindName(l.kind)) + " " + label(l.a) + " <-> " + label(l.b) + " " +
           formatGBps(l.bandwidthGBps) + " GB/s\n";
  }
  return out;
}

}  // namespace braid
