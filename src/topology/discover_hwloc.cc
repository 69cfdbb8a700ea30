// hwloc discovery: turns an hwloc topology (probed, or loaded from XML) into a Topology graph.
//
// The hwloc tree maps onto the graph almost object for object. What changes: Groups, Dies,
// memory-side caches and instruction caches are left out (their children move up to the nearest
// kept ancestor); a PCI-to-PCI bridge directly below a host bridge starts a "PCI group" into which
// every bridge below it is merged, so a PCIe switch (upstream port + downstream ports) becomes one
// node, a kPciSwitch when it holds several bridges or device slots, else a kPciBridge (a root port
// above one device); OS devices fold into their PCI device (naming it, and making it a NIC when
// one of them is a network or OpenFabrics device).
#include "base/file.h"
#include "braid_build_config.h"
#include "topology/discover_internal.h"
#include "topology/topology_cache.h"

#if BRAID_HAVE_HWLOC

#include <hwloc.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#if HWLOC_API_VERSION < 0x00020100 || HWLOC_API_VERSION >= 0x00030000
#error "discover_hwloc.cc is written for the hwloc 2.x API (2.1 or later)"
#endif

namespace braid {

namespace {

// The NIC port speed (Gbit/s) we attach to network OS devices when probing, so a dump keeps it.
constexpr const char* kNetSpeedInfo = "BraidNetSpeedGbps";
// hwloc's NVML back end names its GPU-to-GPU NVLink matrix so; values are MB/s.
constexpr const char* kNvlinkMatrix = "NVLinkBandwidth";
constexpr uint16_t kNvidiaVendor = 0x10de;
constexpr uint16_t kDisplayClassBase = 0x03;

struct TopologyCloser {
  void operator()(hwloc_topology_t t) const { hwloc_topology_destroy(t); }
};
using HwlocTopology = std::unique_ptr<hwloc_topology, TopologyCloser>;
struct BitmapCloser {
  void operator()(hwloc_bitmap_t b) const { hwloc_bitmap_free(b); }
};
using HwlocBitmap = std::unique_ptr<hwloc_bitmap_s, BitmapCloser>;

CpuSet toCpuSet(hwloc_const_bitmap_t bitmap) {
  CpuSet out;
  if (bitmap == nullptr || hwloc_bitmap_weight(bitmap) < 0) return out;  // < 0: infinite set
  for (int i = hwloc_bitmap_first(bitmap); i >= 0; i = hwloc_bitmap_next(bitmap, i)) out.set(i);
  return out;
}

int osIndexOf(hwloc_obj_t obj) {
  return obj->os_index == HWLOC_UNKNOWN_INDEX ? -1 : static_cast<int>(obj->os_index);
}

bool isNetworkOsDevice(hwloc_obj_t obj) {
  return obj->type == HWLOC_OBJ_OS_DEVICE && (obj->attr->osdev.type == HWLOC_OBJ_OSDEV_NETWORK ||
                                              obj->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS);
}

double netSpeedOf(hwloc_obj_t osdev) {
  const char* value = hwloc_obj_get_info_by_name(osdev, kNetSpeedInfo);
  return value == nullptr ? 0.0 : std::strtod(value, nullptr);
}

void setPciAttributes(TopoNode& node, const hwloc_obj_attr_u::hwloc_pcidev_attr_s& pci) {
  node.pciBusId = packPciBusId(pci.domain, pci.bus, pci.dev, pci.func);
  node.vendorId = pci.vendor_id;
  node.deviceId = pci.device_id;
  node.classId = pci.class_id;
  node.pcieLinkGBps = pci.linkspeed;
}

// Leading number of a file ("25000\n", "200 Gb/sec (4X HDR)"), or 0.
double readLeadingNumber(const std::filesystem::path& path) {
  std::ifstream in(path);
  double value = 0;
  if (!(in >> value) || value < 0) return 0;
  return value;
}

// Records each network OS device's port speed as an info attribute: Linux reports Ethernet speed
// in Mbit/s under class/net, InfiniBand rate in Gbit/s under class/infiniband.
void annotateNetSpeeds(hwloc_topology_t topo, const std::string& sysfsRoot) {
  const std::filesystem::path root(sysfsRoot);
  for (hwloc_obj_t o = hwloc_get_next_osdev(topo, nullptr); o != nullptr;
       o = hwloc_get_next_osdev(topo, o)) {
    if (o->name == nullptr || hwloc_obj_get_info_by_name(o, kNetSpeedInfo) != nullptr) continue;
    double gbps = 0;
    if (o->attr->osdev.type == HWLOC_OBJ_OSDEV_NETWORK) {
      gbps = readLeadingNumber(root / "class/net" / o->name / "speed") / 1000.0;
    } else if (o->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS) {
      gbps = readLeadingNumber(root / "class/infiniband" / o->name / "ports/1/rate");
    }
    if (gbps > 0) hwloc_obj_add_info(o, kNetSpeedInfo, std::to_string(gbps).c_str());
  }
}

class Converter {
 public:
  explicit Converter(hwloc_topology_t topo) : topo_(topo) {}

  Result<Topology> run() {
    visit(hwloc_get_root_obj(topo_), -1);
    addNvlinks();
    RETURN_IF_ERROR(out_.finalize());
    return std::move(out_);
  }

 private:
  void visit(hwloc_obj_t obj, int parent) {
    int self = parent;
    bool openedGroup = false;
    switch (obj->type) {
      case HWLOC_OBJ_MACHINE:
        if (parent < 0) self = addCpuNode(NodeKind::kMachine, obj, parent);
        break;
      case HWLOC_OBJ_PACKAGE: self = addCpuNode(NodeKind::kPackage, obj, parent); break;
      case HWLOC_OBJ_NUMANODE: self = addCpuNode(NodeKind::kNuma, obj, parent); break;
      case HWLOC_OBJ_CORE: self = addCpuNode(NodeKind::kCore, obj, parent); break;
      case HWLOC_OBJ_PU: self = addCpuNode(NodeKind::kPu, obj, parent); break;
      case HWLOC_OBJ_L1CACHE:
      case HWLOC_OBJ_L2CACHE:
      case HWLOC_OBJ_L3CACHE:
      case HWLOC_OBJ_L4CACHE:
      case HWLOC_OBJ_L5CACHE: {
        self = addCpuNode(NodeKind::kCache, obj, parent);
        out_.mutableNode(self).cacheLevel = static_cast<int>(obj->attr->cache.depth);
        out_.mutableNode(self).cacheBytes = obj->attr->cache.size;
        break;
      }
      case HWLOC_OBJ_BRIDGE: self = addBridge(obj, parent, &openedGroup); break;
      case HWLOC_OBJ_PCI_DEVICE: addPciDevice(obj, parent); return;
      case HWLOC_OBJ_OS_DEVICE: addLoneOsDevice(obj, parent); return;
      default: break;  // Group, Die, MemCache, instruction caches, Misc: transparent
    }
    for (hwloc_obj_t c = obj->memory_first_child; c != nullptr; c = c->next_sibling) visit(c, self);
    for (hwloc_obj_t c = obj->first_child; c != nullptr; c = c->next_sibling) visit(c, self);
    for (hwloc_obj_t c = obj->io_first_child; c != nullptr; c = c->next_sibling) visit(c, self);
    if (openedGroup) classifyGroup(self);
  }

  int addCpuNode(NodeKind kind, hwloc_obj_t obj, int parent) {
    const int id = out_.addNode(kind, parent);
    TopoNode& n = out_.mutableNode(id);
    n.osIndex = osIndexOf(obj);
    n.cpuset = toCpuSet(obj->cpuset);
    return id;
  }

  int addBridge(hwloc_obj_t obj, int parent, bool* openedGroup) {
    const hwloc_obj_attr_u::hwloc_bridge_attr_s& br = obj->attr->bridge;
    if (br.upstream_type == HWLOC_OBJ_BRIDGE_HOST) {
      const int id = out_.addNode(NodeKind::kPciHostBridge, parent);
      TopoNode& n = out_.mutableNode(id);
      char range[32];
      std::snprintf(range, sizeof(range), "%04x:[%02x-%02x]",
                    static_cast<unsigned>(br.downstream.pci.domain),
                    br.downstream.pci.secondary_bus, br.downstream.pci.subordinate_bus);
      n.name = range;
      n.numaNode = localNuma(obj);
      return id;
    }
    const NodeKind parentKind = out_.node(parent).kind;
    if (parentKind == NodeKind::kPciBridge || parentKind == NodeKind::kPciSwitch) {
      out_.mutableNode(parent).bridgeCount++;
      return parent;
    }
    const int id = out_.addNode(NodeKind::kPciBridge, parent);
    TopoNode& n = out_.mutableNode(id);
    setPciAttributes(n, br.upstream.pci);
    n.bridgeCount = 1;
    *openedGroup = true;
    return id;
  }

  void addPciDevice(hwloc_obj_t obj, int parent) {
    const hwloc_obj_attr_u::hwloc_pcidev_attr_s& pci = obj->attr->pcidev;
    std::vector<std::string> osDevices;
    std::string fabricName, netName;
    bool network = false;
    double speed = 0;
    for (hwloc_obj_t c = obj->io_first_child; c != nullptr; c = c->next_sibling) {
      if (c->type != HWLOC_OBJ_OS_DEVICE) continue;
      const std::string name = c->name != nullptr ? c->name : "";
      osDevices.push_back(name);
      if (!isNetworkOsDevice(c)) continue;
      network = true;
      speed = std::max(speed, netSpeedOf(c));
      if (c->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS && fabricName.empty())
        fabricName = name;
      if (c->attr->osdev.type == HWLOC_OBJ_OSDEV_NETWORK && netName.empty()) netName = name;
    }
    const bool gpu = pci.vendor_id == kNvidiaVendor && (pci.class_id >> 8) == kDisplayClassBase;
    const NodeKind kind = gpu ? NodeKind::kGpu : network ? NodeKind::kNic : NodeKind::kPciDevice;
    const int id = out_.addNode(kind, parent);
    TopoNode& n = out_.mutableNode(id);
    setPciAttributes(n, pci);
    n.osDevices = osDevices;
    if (kind == NodeKind::kNic) {
      n.name = fabricName.empty() ? netName : fabricName;
      n.netSpeedGbps = speed;
    } else if (!osDevices.empty()) {
      n.name = osDevices.front();
    }
    devices_[obj] = id;
    for (hwloc_obj_t c = obj->io_first_child; c != nullptr; c = c->next_sibling) devices_[c] = id;
  }

  // An OS device with no PCI device above it: only network ones matter (virtual NICs).
  void addLoneOsDevice(hwloc_obj_t obj, int parent) {
    if (!isNetworkOsDevice(obj)) return;
    const int id = out_.addNode(NodeKind::kNic, parent);
    TopoNode& n = out_.mutableNode(id);
    n.name = obj->name != nullptr ? obj->name : "";
    n.osDevices = {n.name};
    n.netSpeedGbps = netSpeedOf(obj);
    devices_[obj] = id;
  }

  void classifyGroup(int id) {
    std::set<int64_t> slots;  // domain:bus:device, so functions of one card count once
    for (int c : out_.node(id).children) {
      const TopoNode& child = out_.node(c);
      if (child.pciBusId >= 0) slots.insert(child.pciBusId >> 3);
    }
    const bool fansOut = out_.node(id).bridgeCount >= 2 || slots.size() >= 2;
    out_.mutableNode(id).kind = fansOut ? NodeKind::kPciSwitch : NodeKind::kPciBridge;
  }

  // The NUMA node (among those with CPUs) an I/O object is local to, or -1 when several.
  int localNuma(hwloc_obj_t obj) {
    hwloc_obj_t anchor = hwloc_get_non_io_ancestor_obj(topo_, obj);
    if (anchor == nullptr || anchor->nodeset == nullptr) return -1;
    int found = -1;
    for (int i = hwloc_bitmap_first(anchor->nodeset); i >= 0;
         i = hwloc_bitmap_next(anchor->nodeset, i)) {
      hwloc_obj_t numa = hwloc_get_numanode_obj_by_os_index(topo_, static_cast<unsigned>(i));
      if (numa == nullptr || numa->cpuset == nullptr || hwloc_bitmap_iszero(numa->cpuset)) continue;
      if (found >= 0) return -1;
      found = i;
    }
    return found;
  }

  void addNvlinks() {
    unsigned count = 0;
    if (hwloc_distances_get_by_name(topo_, kNvlinkMatrix, &count, nullptr, 0) != 0 || count == 0)
      return;
    std::vector<hwloc_distances_s*> matrices(count, nullptr);
    if (hwloc_distances_get_by_name(topo_, kNvlinkMatrix, &count, matrices.data(), 0) != 0) return;
    for (unsigned m = 0; m < count && m < matrices.size(); ++m) {
      const hwloc_distances_s* d = matrices[m];
      for (unsigned i = 0; i < d->nbobjs; ++i) {
        for (unsigned j = i + 1; j < d->nbobjs; ++j) {
          const hwloc_uint64_t mbps =
              std::max(d->values[i * d->nbobjs + j], d->values[j * d->nbobjs + i]);
          auto a = devices_.find(d->objs[i]);
          auto b = devices_.find(d->objs[j]);
          if (mbps == 0 || a == devices_.end() || b == devices_.end() || a->second == b->second)
            continue;
          out_.addLink(LinkKind::kNvlink, a->second, b->second, static_cast<double>(mbps) / 1000.0,
                       defaultLinkModel(LinkKind::kNvlink).latencyUs);
        }
      }
      hwloc_distances_release(topo_, matrices[m]);
    }
  }

  hwloc_topology_t topo_;
  Topology out_;
  std::unordered_map<hwloc_obj_t, int> devices_;  // PCI and OS devices -> node id
};

// hwloc plugins nothing here reads. hwloc opens every plugin in its folder (and the libraries
// each links: X11, an OpenCL loader, libxml2 with ICU) at a process's first topology, whatever
// components the topology then enables: 3 ms of CPU per rank (docs/scale.md). hwloc's built-in
// parser reads what hwloc wrote (probes and the cache); a user's file may come from elsewhere
// and keeps libxml2.
constexpr const char* kUnreadPlugins =
    "hwloc_gl,hwloc_opencl,hwloc_cuda,hwloc_rsmi,hwloc_levelzero,hwloc_xml_libxml";
constexpr const char* kUnreadPluginsButLibxml =
    "hwloc_gl,hwloc_opencl,hwloc_cuda,hwloc_rsmi,hwloc_levelzero";
constexpr const char* kPluginBlacklistVariable = "HWLOC_PLUGINS_BLACKLIST";

// hwloc_topology_init with the plugins in `unread` left closed, unless the user named plugins to
// leave out themselves. hwloc reads the variable only while it opens its plugins, in this call:
// it is unset again at once, so that later hwloc users in the process see their own environment.
int initLeavingUnread(hwloc_topology_t* raw, const char* unread) {
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  const bool userChose = std::getenv(kPluginBlacklistVariable) != nullptr;
  if (!userChose) setenv(kPluginBlacklistVariable, unread, 0);
  const int rc = hwloc_topology_init(raw);
  const int saved = errno;
  if (!userChose) unsetenv(kPluginBlacklistVariable);
  errno = saved;
  return rc;
}

// The hwloc topology probed from this machine, or loaded from `xml`; `thisSystem`: the XML is
// this machine's own (a cache entry), so binding queries still apply to it, and hwloc wrote it.
Result<HwlocTopology> loadHwloc(const std::string& xml, bool thisSystem) {
  hwloc_topology_t raw = nullptr;
  const bool hwlocWrote = xml.empty() || thisSystem;
  if (initLeavingUnread(&raw, hwlocWrote ? kUnreadPlugins : kUnreadPluginsButLibxml) != 0) {
    return errnoError("topology: hwloc_topology_init", errno);
  }
  HwlocTopology topo(raw);
  // PCI bridges, GPUs, NICs and their OS devices; hwloc drops I/O objects by default.
  hwloc_topology_set_io_types_filter(raw, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
  // Back ends whose OS devices nothing here reads: GPUs are found by their PCI IDs and NVLink in
  // NVML's matrix. Each costs every rank its discovery (gl tries X displays, cuda and opencl bring
  // up a GPU runtime in the caller's process). A name this hwloc lacks is refused, harmlessly.
  for (const char* unused : {"gl", "opencl", "cuda", "rsmi", "levelzero"}) {
    hwloc_topology_set_components(raw, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, unused);
  }
  if (!xml.empty() && hwloc_topology_set_xml(raw, xml.c_str()) != 0) {
    return errnoError("topology: hwloc cannot use '" + xml + "'", errno);
  }
  if (thisSystem) hwloc_topology_set_flags(raw, HWLOC_TOPOLOGY_FLAG_IS_THISSYSTEM);
  if (hwloc_topology_load(raw) != 0) {
    const std::string what = xml.empty() ? std::string("this machine") : "'" + xml + "'";
    return errnoError("topology: hwloc could not load " + what, errno);
  }
  return topo;
}

// Topology entries a cache folder keeps, the most recently used: the key changes with the boot and
// the network namespace (topology_cache.h), so a host whose jobs each get a namespace of their own
// (containers, the tests' namespace hosts) would otherwise leave a file a job.
constexpr int kTopologyEntriesKept = 64;

// This machine's topology from its cache entry when there is one, else probed and written there
// for the processes after this one (topology_cache.h). An entry that cannot be read or written
// costs only the probe.
Result<HwlocTopology> probeThroughCache(const TopologyOptions& options) {
  std::error_code ec;
  std::filesystem::create_directories(options.cacheDir, ec);
  const std::string discovery = "hwloc " + std::to_string(hwloc_get_api_version());
  const std::string entry =
      options.cacheDir + "/topology-" + topologyCacheKey(options.sysfsRoot, discovery) + ".xml";
  TopologyCacheLock lock(entry);
  if (std::filesystem::is_regular_file(entry, ec)) {
    Result<HwlocTopology> cached = loadHwloc(entry, true);
    if (cached.ok()) {
      // Marked as used, so that the entries removed are the least recently used.
      std::filesystem::last_write_time(entry, std::filesystem::file_time_type::clock::now(), ec);
      return cached;
    }
  }
  ASSIGN_OR_RETURN(HwlocTopology topo, loadHwloc("", false));
  annotateNetSpeeds(topo.get(), options.sysfsRoot);
  const std::string partial = entry + ".part" + std::to_string(::getpid());
  if (hwloc_topology_export_xml(topo.get(), partial.c_str(), 0) == 0) {
    std::filesystem::rename(partial, entry, ec);
    if (!ec) {
      removeOldestFiles(options.cacheDir, "topology", ".xml", entry, kTopologyEntriesKept,
                        {".lock"});
    }
  } else {
    ec = std::make_error_code(std::errc::io_error);
  }
  if (ec) std::filesystem::remove(partial, ec);
  return topo;
}

}  // namespace

Result<Topology> discoverWithHwloc(const TopologyOptions& options) {
  HwlocTopology topo;
  if (!options.xmlFile.empty()) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(options.xmlFile, ec)) {
      return invalidArgument("topology: BRAID_TOPO_FILE '" + options.xmlFile +
                             "' is not a readable file");
    }
    ASSIGN_OR_RETURN(topo, loadHwloc(options.xmlFile, false));
  } else if (!options.cacheDir.empty()) {
    ASSIGN_OR_RETURN(topo, probeThroughCache(options));
  } else {
    ASSIGN_OR_RETURN(topo, loadHwloc("", false));
    annotateNetSpeeds(topo.get(), options.sysfsRoot);
  }
  hwloc_topology_t raw = topo.get();
  const bool thisSystem = hwloc_topology_is_thissystem(raw) != 0;
  if (!options.dumpFile.empty() &&
      hwloc_topology_export_xml(raw, options.dumpFile.c_str(), 0) != 0) {
    return errnoError("topology: cannot write '" + options.dumpFile + "' (BRAID_TOPO_DUMP_FILE)",
                      errno);
  }

  Converter converter(raw);
  ASSIGN_OR_RETURN(Topology out, converter.run());

  CpuSet bound;
  if (thisSystem) {
    HwlocBitmap set(hwloc_bitmap_alloc());
    if (set && hwloc_get_cpubind(raw, set.get(), HWLOC_CPUBIND_PROCESS) == 0)
      bound = toCpuSet(set.get());
  }
  if (bound.empty()) bound = processAffinity();
  bound = bound & out.allPus();
  out.setProcessBinding(bound.empty() ? out.allPus() : bound);
  return out;
}

}  // namespace braid

#else  // !BRAID_HAVE_HWLOC

namespace braid {

Result<Topology> discoverWithHwloc(const TopologyOptions&) {
  return invalidUsage("topology: this build has no hwloc");
}

}  // namespace braid

#endif
