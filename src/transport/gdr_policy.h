// BRAID_GDR: whether the device path's FIFOs to peers reached over RDMA may lie in device memory
// registered with the NIC (GPUDirect RDMA) rather than in pinned host memory. It needs a GPU and
// driver that export device memory as a dma-buf, a libibverbs with ibv_reg_dmabuf_mr, and a
// staged path that places its FIFOs in device memory; the last is not written yet, so today
// auto always stages through host memory (saying why, once) and 1 fails naming what is missing.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"

namespace braid {

enum class GdrMode { kAuto, kOff, kRequired };

/// Config::gdr (-1 auto, 0, 1) as a mode.
GdrMode gdrModeOf(int setting);

/// What decides whether GPUDirect RDMA can carry the staged FIFOs of this rank.
struct GdrInputs {
  GdrMode mode = GdrMode::kAuto;
  std::vector<int> rdmaPeers;  ///< peers whose staged FIFOs go over RDMA
  std::string gpuWhyNot;       ///< why the GPU or driver cannot export its memory ("" if it can)
  std::string nicWhyNot;       ///< why the RDMA stack cannot register a dma-buf ("" if it can)
  std::string pathWhyNot;      ///< why the staged path cannot use device memory ("" if it can)
};

struct GdrDecision {
  bool use = false;  ///< FIFOs to rdmaPeers in device memory
  std::string info;  ///< one INFO line for the log ("" when there is nothing to say)
};

/// The decision, or for BRAID_GDR=1 where it cannot work an error naming every reason. With no
/// peer over RDMA there is nothing to decide (GPUDirect RDMA is not used, even when required).
Result<GdrDecision> decideGdr(const GdrInputs& inputs);

}  // namespace braid
