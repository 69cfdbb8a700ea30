// Locality: where one rank sits inside its host, small and fixed-size so every rank can share it
// with the others at init (through the bootstrap all-gather) and the ring/tree ordering can group
// ranks that are close.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "topology/topology.h"

namespace braid {

/// Where one rank sits inside its host (computeLocality says how each field is found).
struct Locality {
  int32_t package = -1;     ///< OS index of the rank's package; -1 when unknown or several
  int32_t numaNode = -1;    ///< OS index of the rank's NUMA node; -1 when unknown or several
  int32_t cores = 0;        ///< cores the rank is bound to
  int32_t pus = 0;          ///< PUs the rank is bound to
  int64_t nearestGpu = -1;  ///< packed PCI bus id (packPciBusId) of the rank's GPU, or -1
  int64_t nearestNic = -1;  ///< packed PCI bus id of the NIC nearest the rank's GPU or CPUs, or -1
  /// Packed PCI bus id of the switch (or root port) above that GPU (else above that NIC), or -1.
  int64_t pciSwitch = -1;
  /// Logical index of the one core the rank is bound to; -1 when bound to several (or unbound).
  int32_t core = -1;

  bool operator==(const Locality& other) const = default;
};
static_assert(std::is_trivially_copyable_v<Locality>);

/// Bytes of a Locality on the wire (little-endian, fields in declaration order).
inline constexpr size_t kLocalityWireBytes = 44;
/// Writes kLocalityWireBytes bytes at `out`.
void encodeLocality(const Locality& locality, uint8_t* out);
/// Reads what encodeLocality wrote.
Locality decodeLocality(const uint8_t* in);

/// The locality of a rank bound to `cpus` (limited to the machine's PUs; every PU when that
/// leaves none) that drives the GPU with PCI bus id `gpuBusId` (-1: no GPU).
/// - package / NUMA node: those holding all of the rank's CPUs; when the CPUs span several and
///   the rank has a GPU, the GPU's.
/// - nearestGpu: the rank's GPU when it is in the topology, else the GPU nearest its CPUs.
/// - nearestNic: the NIC nearest the rank's GPU when it has one in the topology, else nearest
///   its CPUs.
/// - core: set only when the CPUs lie in a single core.
Locality computeLocality(const Topology& topology, const CpuSet& cpus, int64_t gpuBusId = -1);
/// computeLocality() for this process's binding as discovery recorded it.
Locality localLocality(const Topology& topology, int64_t gpuBusId = -1);

}  // namespace braid
