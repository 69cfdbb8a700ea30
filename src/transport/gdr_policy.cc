#include "transport/gdr_policy.h"

namespace braid {

GdrMode gdrModeOf(int setting) {
  if (setting == 0) return GdrMode::kOff;
  return setting == 1 ? GdrMode::kRequired : GdrMode::kAuto;
}

Result<GdrDecision> decideGdr(const GdrInputs& inputs) {
  GdrDecision decision;
  if (inputs.mode == GdrMode::kOff || inputs.rdmaPeers.empty()) return decision;
  std::string why;
  for (const std::string* reason : {&inputs.gpuWhyNot, &inputs.nicWhyNot, &inputs.pathWhyNot}) {
    if (!reason->empty()) why += (why.empty() ? "" : "; ") + *reason;
  }
  if (why.empty()) {
    decision.use = true;
    decision.info = "GPUDirect RDMA: device buffers' FIFOs to " +
                    std::to_string(inputs.rdmaPeers.size()) + " RDMA peer(s) in device memory";
    return decision;
  }
  if (inputs.mode == GdrMode::kRequired) {
    return invalidUsage("BRAID_GDR=1, but GPUDirect RDMA cannot work here (" + why +
                        "); set BRAID_GDR=auto to stage device buffers through host memory");
  }
  decision.info = "GPUDirect RDMA not used (" + why +
                  "): device buffers to RDMA peers are staged through pinned host memory";
  return decision;
}

}  // namespace braid
