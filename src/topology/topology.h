// The machine as a typed graph: a containment tree (machine > packages > caches > cores > PUs,
// NUMA nodes beside them, PCI host bridges > switches > GPUs/NICs) plus links that carry a kind,
// a bandwidth and a latency, including links that leave the tree (NVLink between GPUs, every NIC
// to the network fabric). Built by discover.h (hwloc or sysfs) or by hand in tests; read by the
// tuner's cost model, the transport choice and the ring/tree ordering.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "topology/cpu_set.h"

namespace braid {

/// What a node of the topology graph is.
enum class NodeKind : uint8_t {
  kMachine,  ///< the root: one host
  kPackage,  ///< a CPU socket
  kNuma,     ///< a NUMA memory node
  kCache,    ///< a data or unified CPU cache (instruction caches are left out)
  kCore,
  kPu,             ///< a hardware thread
  kPciHostBridge,  ///< a PCI root complex (hwloc "HostBridge"): where PCIe meets the CPU
  kPciBridge,      ///< a lone PCI-to-PCI bridge (typically a CPU root port) above one device slot
  kPciSwitch,      ///< a PCIe switch: its upstream and downstream port bridges merged into one node
  kGpu,            ///< an NVIDIA GPU (PCI vendor 0x10de, display/3D class)
  kNic,            ///< a network adapter: a PCI device with a network or OpenFabrics OS device
  kPciDevice,      ///< any other PCI device hwloc keeps (storage, ...)
  kFabric,         ///< the network outside this host; every NIC links to it
};

/// What a link of the topology graph joins.
enum class LinkKind : uint8_t {
  kInternal,     ///< containment inside a package (package > cache > core > PU, root complex)
  kMemory,       ///< a NUMA node to the CPUs that own it
  kPcie,         ///< one PCIe link (device to switch, switch to root complex, ...)
  kNvlink,       ///< GPU to GPU
  kInterSocket,  ///< half of a socket-to-socket crossing (each package links to the machine)
  kNetwork,      ///< a NIC to the fabric
};

/// The names the topology's XML and logs use ("Package", "PCIe", ...).
const char* nodeKindName(NodeKind kind);
const char* linkKindName(LinkKind kind);

/// Default bandwidth (GB/s, 1e9 bytes per second, one direction) and latency (microseconds) of a
/// link kind; where a link's own speed is known (hwloc's PCIe link speed, NVLink matrix, NIC port
/// speed) that replaces the bandwidth. Where each default comes from:
/// docs/performance-notes.md#link-defaults.
struct LinkModel {
  double bandwidthGBps;
  double latencyUs;
};
/// The default model of `kind` (topology.cc).
LinkModel defaultLinkModel(LinkKind kind);

/// PCI bus ids packed into one integer, domain << 16 | bus << 8 | device << 3 | function, so they
/// fit fixed-size wire structures; -1 means "none".
int64_t packPciBusId(int domain, int bus, int device, int function);
/// "dddd:bb:dd.f" (lower-case hex), or "none" for -1.
std::string formatPciBusId(int64_t busId);
/// Accepts "dddd:bb:dd.f" with a 1-8 digit domain (as CUDA prints it) or "bb:dd.f", any case.
Result<int64_t> parsePciBusId(const std::string& text);

/// One node of the topology graph: a part of the machine, or the fabric outside it.
struct TopoNode {
  int id = -1;
  NodeKind kind = NodeKind::kMachine;
  int parent = -1;  ///< tree parent; -1 for the machine and the fabric
  std::vector<int> children;
  std::vector<int> links;  ///< ids of every link touching this node
  int osIndex = -1;        ///< the OS's number (PU, core, NUMA node, package), -1 when none
  int logicalIndex = -1;   ///< position among nodes of its kind, in tree order
  /// OS index of the NUMA node it belongs or is local to; -1 unknown/several.
  int numaNode = -1;
  int package = -1;       ///< OS index of the package it is in or attached to; -1 unknown/several
  int64_t pciBusId = -1;  ///< PCI devices, bridges and switches (the switch's upstream port)
  uint16_t vendorId = 0;
  uint16_t deviceId = 0;
  uint16_t classId = 0;  ///< PCI class and subclass, e.g. 0x0302 for a 3D controller
  /// Speed of the PCIe link above this node as hwloc reports it; 0 unknown.
  double pcieLinkGBps = 0;
  double netSpeedGbps = 0;  ///< NIC port speed in Gbit/s; 0 unknown
  int cacheLevel = 0;
  uint64_t cacheBytes = 0;
  int bridgeCount = 0;                 ///< hwloc bridges merged into a kPciBridge / kPciSwitch node
  std::string name;                    ///< OS device name (GPU "nvml0", NIC "mlx5_0") or bus range
  std::vector<std::string> osDevices;  ///< every OS device name hwloc listed under it
  CpuSet cpuset;                       ///< PUs below or local to it (empty for I/O nodes)

  bool operator==(const TopoNode& other) const = default;
};

/// One link of the topology graph, between nodes `a` and `b`, with its bandwidth and latency.
struct TopoLink {
  int id = -1;
  LinkKind kind = LinkKind::kInternal;
  int a = -1;
  int b = -1;
  double bandwidthGBps = 0;
  double latencyUs = 0;

  bool operator==(const TopoLink& other) const = default;
};

/// A route between two nodes.
struct TopoPath {
  std::vector<int> nodes;  ///< from .. to
  std::vector<int> links;  ///< links[i] joins nodes[i] and nodes[i + 1]
  std::vector<LinkKind> linkKinds;
  double bandwidthGBps = 0;  ///< the narrowest link (infinite when only kInternal links)
  double latencyUs = 0;      ///< sum over the links

  int count(LinkKind kind) const;
  int hops() const { return static_cast<int>(links.size()); }
};

/// A set of PUs seen through the topology (a process binding, typically).
struct CpuBinding {
  CpuSet pus;
  std::vector<int> cores;      ///< logical indexes of cores with at least one PU in the set
  std::vector<int> numaNodes;  ///< OS indexes of NUMA nodes whose CPUs meet the set
  std::vector<int> packages;   ///< OS indexes of packages whose CPUs meet the set
};

/// The machine as a graph (see above): nodes parent first, links, and this process's binding.
class Topology {
 public:
  // --- Building (discovery and tests): add nodes parent first, then finalize() once. ---

  /// Adds a node below `parent` (-1 only for the machine, which must be node 0, and the fabric).
  int addNode(NodeKind kind, int parent);
  TopoNode& mutableNode(int id) { return nodes_[id]; }
  /// A link that is not part of the tree (NVLink, ...); tree links come from finalize().
  int addLink(LinkKind kind, int a, int b, double bandwidthGBps, double latencyUs);
  /// Checks the tree, links every child to its parent with the kind its two ends imply, adds the
  /// fabric node when there are NICs, and derives logical indexes and the NUMA node and package
  /// of every node that discovery left unknown.
  Status finalize();
  bool finalized() const { return finalized_; }

  // --- Reading ---

  const std::vector<TopoNode>& nodes() const { return nodes_; }
  const TopoNode& node(int id) const { return nodes_[id]; }
  const std::vector<TopoLink>& links() const { return links_; }
  const TopoLink& link(int id) const { return links_[id]; }
  /// Node ids of one kind, in tree order.
  std::vector<int> nodesOf(NodeKind kind) const;
  int count(NodeKind kind) const;
  int numPackages() const { return count(NodeKind::kPackage); }
  int numNumaNodes() const { return count(NodeKind::kNuma); }
  int numCores() const { return count(NodeKind::kCore); }
  int numPus() const { return count(NodeKind::kPu); }
  std::vector<int> gpus() const { return nodesOf(NodeKind::kGpu); }
  std::vector<int> nics() const { return nodesOf(NodeKind::kNic); }
  std::vector<int> pciSwitches() const { return nodesOf(NodeKind::kPciSwitch); }
  /// The fabric node, or -1 when the host has no NIC.
  int fabric() const { return fabric_; }
  /// Every PU of the machine.
  const CpuSet& allPus() const { return nodes_[0].cpuset; }

  /// Node id of the device, bridge or switch with this PCI bus id, or -1.
  int findByPciBusId(int64_t busId) const;
  /// Node id of the NUMA node / package with this OS index, or -1.
  int findNuma(int osIndex) const;
  int findPackage(int osIndex) const;

  // --- Queries ---

  /// OS index of the one NUMA node holding every CPU of `cpus`, or -1 when they span several
  /// (or none).
  int numaNodeOf(const CpuSet& cpus) const;
  /// OS index of the one package holding every CPU of `cpus`, or -1.
  int packageOf(const CpuSet& cpus) const;
  /// The PUs, cores, NUMA nodes and packages a CPU set touches.
  CpuBinding bindingOf(const CpuSet& cpus) const;
  /// The deepest CPU-side node (machine, package, cache, core or PU) covering all of `cpus`.
  int anchorOf(const CpuSet& cpus) const;

  /// The best route for data from `from` to `to`: the widest (largest bottleneck bandwidth), and
  /// among the widest the one with fewest socket crossings, then least latency, then fewest hops.
  /// The fabric is only ever an end, never crossed.
  std::optional<TopoPath> path(int from, int to) const;
  /// The node of `kind` nearest to `from`: fewest socket crossings, then least latency, then
  /// fewest hops, then lowest id; `from` itself when it is of that kind; -1 if none.
  int nearest(int from, NodeKind kind) const;
  /// Nearest GPU / NIC to a set of CPUs (measured from anchorOf(cpus)) or to a NUMA node.
  int nearestGpu(const CpuSet& cpus) const { return nearest(anchorOf(cpus), NodeKind::kGpu); }
  int nearestNic(const CpuSet& cpus) const { return nearest(anchorOf(cpus), NodeKind::kNic); }
  int nearestGpuToNuma(int numaOs) const;
  int nearestNicToNuma(int numaOs) const;
  /// The PCI switch or lone bridge a device hangs off (nearest such ancestor), or -1.
  int pciGroupOf(int id) const;
  /// The PCI switches (kPciSwitch nodes) the best path from `a` to `b` passes through, in order.
  std::vector<int> switchesBetween(int a, int b) const;

  /// This process's CPU binding, as discovery found it (every PU when unknown).
  const CpuBinding& processBinding() const { return binding_; }
  void setProcessBinding(const CpuSet& pus) { binding_ = bindingOf(pus & allPus()); }

  /// "2 packages, 2 NUMA nodes, 32 cores, 64 PUs, 8 GPUs, 4 NICs, 4 PCI switches".
  std::string summary() const;
  /// One line per node, indented by depth, then one per non-tree link: for logs and debugging.
  std::string describe() const;

  /// Same nodes and links (the process binding is not compared).
  bool operator==(const Topology& other) const {
    return nodes_ == other.nodes_ && links_ == other.links_;
  }

 private:
  struct Distance;
  std::vector<Distance> shortestFrom(int from, double minBandwidthGBps) const;
  double widestTo(int from, int to) const;
  void linkTreeEdge(const TopoNode& child);

  std::vector<TopoNode> nodes_;
  std::vector<TopoLink> links_;
  CpuBinding binding_;
  int fabric_ = -1;
  bool finalized_ = false;
};

}  // namespace braid
