// The libibverbs functions the RDMA transport calls, as a table of pointers filled at run time.
//
// loadVerbs() dlopens libibverbs.so.1 once per process and resolves each exported symbol, so the
// library links and runs where rdma-core is absent (the table is then unavailable, with the
// reason). The few verbs that libibverbs defines inline in its header (post, poll, notify) go
// through the provider's ops table; the real table wraps those inlines. Tests substitute a table
// of their own (a verbs test double) with setVerbsApiForTesting().
//
// Built only with the libibverbs headers (the `ibverbs` Meson feature): without them
// BRAID_HAVE_IBVERBS is 0, VerbsApi stays incomplete and loadVerbs() says so.
#pragma once

#include <string>

#include "base/status.h"
#include "braid_build_config.h"

#if BRAID_HAVE_IBVERBS
#include <infiniband/verbs.h>
#endif

namespace braid {

#if BRAID_HAVE_IBVERBS
struct VerbsApi {
  ibv_device** (*getDeviceList)(int* count);
  void (*freeDeviceList)(ibv_device** list);
  const char* (*getDeviceName)(ibv_device* device);
  ibv_context* (*openDevice)(ibv_device* device);
  int (*closeDevice)(ibv_context* context);
  int (*queryDevice)(ibv_context* context, ibv_device_attr* attr);
  int (*queryPort)(ibv_context* context, uint8_t port, ibv_port_attr* attr);
  int (*queryGid)(ibv_context* context, uint8_t port, int index, ibv_gid* gid);
  /// IBV_GID_TYPE_* of a GID table entry; may be null (older libibverbs), then the type is
  /// unknown and the transport prefers IPv4-mapped GIDs.
  int (*queryGidType)(ibv_context* context, uint8_t port, int index, int* type);
  ibv_pd* (*allocPd)(ibv_context* context);
  int (*deallocPd)(ibv_pd* pd);
  ibv_mr* (*regMr)(ibv_pd* pd, void* addr, size_t length, int access);
  /// GPUDirect RDMA on a dma-buf (CUDA memory); may be null (libibverbs older than rdma-core 34).
  ibv_mr* (*regDmabufMr)(ibv_pd* pd, uint64_t offset, size_t length, uint64_t iova, int fd,
                         int access);
  int (*deregMr)(ibv_mr* mr);
  ibv_comp_channel* (*createCompChannel)(ibv_context* context);
  int (*destroyCompChannel)(ibv_comp_channel* channel);
  ibv_cq* (*createCq)(ibv_context* context, int cqe, void* cqContext, ibv_comp_channel* channel,
                      int vector);
  int (*destroyCq)(ibv_cq* cq);
  int (*reqNotifyCq)(ibv_cq* cq, int solicitedOnly);
  int (*getCqEvent)(ibv_comp_channel* channel, ibv_cq** cq, void** cqContext);
  void (*ackCqEvents)(ibv_cq* cq, unsigned int events);
  int (*pollCq)(ibv_cq* cq, int entries, ibv_wc* wc);
  ibv_qp* (*createQp)(ibv_pd* pd, ibv_qp_init_attr* attr);
  int (*modifyQp)(ibv_qp* qp, ibv_qp_attr* attr, int mask);
  int (*destroyQp)(ibv_qp* qp);
  int (*postSend)(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad);
  int (*postRecv)(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad);
};
#else
struct VerbsApi;
#endif

/// The process's libibverbs, loaded on first use (or the table set for testing); an error saying
/// why when it cannot be used.
Result<const VerbsApi*> loadVerbs();

/// Makes loadVerbs() return `api` instead of libibverbs (nullptr: back to the real library).
/// For tests only; call while no communicator is being created.
void setVerbsApiForTesting(const VerbsApi* api);

}  // namespace braid
