#include "topology/locality.h"

#include "base/little_endian.h"

namespace braid {

void encodeLocality(const Locality& l, uint8_t* out) {
  putLe32(out + 0, static_cast<uint32_t>(l.package));
  putLe32(out + 4, static_cast<uint32_t>(l.numaNode));
  putLe32(out + 8, static_cast<uint32_t>(l.cores));
  putLe32(out + 12, static_cast<uint32_t>(l.pus));
  putLe64(out + 16, static_cast<uint64_t>(l.nearestGpu));
  putLe64(out + 24, static_cast<uint64_t>(l.nearestNic));
  putLe64(out + 32, static_cast<uint64_t>(l.pciSwitch));
  putLe32(out + 40, static_cast<uint32_t>(l.core));
}

Locality decodeLocality(const uint8_t* in) {
  Locality l;
  l.package = static_cast<int32_t>(getLe32(in + 0));
  l.numaNode = static_cast<int32_t>(getLe32(in + 4));
  l.cores = static_cast<int32_t>(getLe32(in + 8));
  l.pus = static_cast<int32_t>(getLe32(in + 12));
  l.nearestGpu = static_cast<int64_t>(getLe64(in + 16));
  l.nearestNic = static_cast<int64_t>(getLe64(in + 24));
  l.pciSwitch = static_cast<int64_t>(getLe64(in + 32));
  l.core = static_cast<int32_t>(getLe32(in + 40));
  return l;
}

Locality computeLocality(const Topology& topology, const CpuSet& cpus, int64_t gpuBusId) {
  CpuSet bound = cpus & topology.allPus();
  if (bound.empty()) bound = topology.allPus();
  const CpuBinding binding = topology.bindingOf(bound);

  Locality l;
  l.package = topology.packageOf(bound);
  l.numaNode = topology.numaNodeOf(bound);
  l.cores = static_cast<int32_t>(binding.cores.size());
  l.pus = binding.pus.count();
  if (binding.cores.size() == 1) l.core = binding.cores.front();

  int gpu = topology.findByPciBusId(gpuBusId);
  const bool ownGpu = gpu >= 0 && topology.node(gpu).kind == NodeKind::kGpu;
  if (!ownGpu) gpu = topology.nearestGpu(bound);
  const int nic = ownGpu ? topology.nearest(gpu, NodeKind::kNic) : topology.nearestNic(bound);

  if (ownGpu && l.package < 0) l.package = topology.node(gpu).package;
  if (ownGpu && l.numaNode < 0) l.numaNode = topology.node(gpu).numaNode;
  l.nearestGpu = gpu >= 0 ? topology.node(gpu).pciBusId : -1;
  l.nearestNic = nic >= 0 ? topology.node(nic).pciBusId : -1;
  const int group = topology.pciGroupOf(gpu >= 0 ? gpu : nic);
  l.pciSwitch = group >= 0 ? topology.node(group).pciBusId : -1;
  return l;
}

Locality localLocality(const Topology& topology, int64_t gpuBusId) {
  return computeLocality(topology, topology.processBinding().pus, gpuBusId);
}

}  // namespace braid
