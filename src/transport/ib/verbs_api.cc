#include "transport/ib/verbs_api.h"

#include <dirent.h>
#include <dlfcn.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace braid {
namespace {

std::atomic<const VerbsApi*> gOverride{nullptr};

#if BRAID_HAVE_IBVERBS

// The inline verbs, wrapped so that the table holds plain function pointers.
int wrapReqNotifyCq(ibv_cq* cq, int solicitedOnly) { return ibv_req_notify_cq(cq, solicitedOnly); }
int wrapPollCq(ibv_cq* cq, int entries, ibv_wc* wc) { return ibv_poll_cq(cq, entries, wc); }
int wrapPostSend(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad) {
  return ibv_post_send(qp, wr, bad);
}
int wrapPostRecv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  return ibv_post_recv(qp, wr, bad);
}

using QueryGidEx = int (*)(ibv_context*, uint32_t, uint32_t, ibv_gid_entry*, uint32_t, size_t);
QueryGidEx gQueryGidEx = nullptr;

int queryGidTypeEx(ibv_context* context, uint8_t port, int index, int* type) {
  ibv_gid_entry entry{};
  const int rc = gQueryGidEx(context, port, static_cast<uint32_t>(index), &entry, 0, sizeof(entry));
  if (rc == 0) *type = static_cast<int>(entry.gid_type);
  return rc;
}

struct Loaded {
  VerbsApi api{};
  Status status;
};

template <typename T>
bool bind(void* lib, const char* name, T& slot, std::string* missing) {
  slot = reinterpret_cast<T>(::dlsym(lib, name));
  if (slot == nullptr) *missing += std::string(missing->empty() ? "" : ", ") + name;
  return slot != nullptr;
}

// Whether sysfs lists a verbs device, where rdma-core looks for them (it reads SYSFS_PATH instead
// of /sys when set: then it decides). With none, loading libibverbs and its providers costs a
// process 0.3-0.45 ms of CPU to find nothing.
bool verbsDevicesListed() {
  if (std::getenv("SYSFS_PATH") != nullptr) return true;
  DIR* dir = ::opendir("/sys/class/infiniband_verbs");
  if (dir == nullptr) return false;
  bool found = false;
  while (const dirent* entry = ::readdir(dir)) {
    if (std::strncmp(entry->d_name, "uverbs", 6) == 0) {
      found = true;
      break;
    }
  }
  ::closedir(dir);
  return found;
}

Loaded load() {
  Loaded out;
  if (!verbsDevicesListed()) {
    out.status = systemError("no RDMA device (none in /sys/class/infiniband_verbs)");
    return out;
  }
  // RTLD_NODELETE: providers keep pointers into it for the life of the process.
  void* lib = ::dlopen("libibverbs.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (lib == nullptr) {
    const char* why = ::dlerror();
    out.status = systemError(std::string("libibverbs.so.1 not loadable (rdma-core absent?): ") +
                             (why != nullptr ? why : "unknown"));
    return out;
  }
  VerbsApi& a = out.api;
  std::string missing;
  bind(lib, "ibv_get_device_list", a.getDeviceList, &missing);
  bind(lib, "ibv_free_device_list", a.freeDeviceList, &missing);
  bind(lib, "ibv_get_device_name", a.getDeviceName, &missing);
  bind(lib, "ibv_open_device", a.openDevice, &missing);
  bind(lib, "ibv_close_device", a.closeDevice, &missing);
  bind(lib, "ibv_query_device", a.queryDevice, &missing);
  bind(lib, "ibv_query_port", a.queryPort, &missing);
  bind(lib, "ibv_query_gid", a.queryGid, &missing);
  bind(lib, "ibv_alloc_pd", a.allocPd, &missing);
  bind(lib, "ibv_dealloc_pd", a.deallocPd, &missing);
  bind(lib, "ibv_reg_mr", a.regMr, &missing);
  bind(lib, "ibv_dereg_mr", a.deregMr, &missing);
  bind(lib, "ibv_create_comp_channel", a.createCompChannel, &missing);
  bind(lib, "ibv_destroy_comp_channel", a.destroyCompChannel, &missing);
  bind(lib, "ibv_create_cq", a.createCq, &missing);
  bind(lib, "ibv_destroy_cq", a.destroyCq, &missing);
  bind(lib, "ibv_get_cq_event", a.getCqEvent, &missing);
  bind(lib, "ibv_ack_cq_events", a.ackCqEvents, &missing);
  bind(lib, "ibv_create_qp", a.createQp, &missing);
  bind(lib, "ibv_modify_qp", a.modifyQp, &missing);
  bind(lib, "ibv_destroy_qp", a.destroyQp, &missing);
  if (!missing.empty()) {
    out.status = systemError("libibverbs lacks " + missing);
    return out;
  }
  // Optional: newer than the oldest rdma-core the transport supports.
  a.regDmabufMr = reinterpret_cast<decltype(a.regDmabufMr)>(::dlsym(lib, "ibv_reg_dmabuf_mr"));
  gQueryGidEx = reinterpret_cast<QueryGidEx>(::dlsym(lib, "_ibv_query_gid_ex"));
  a.queryGidType = gQueryGidEx != nullptr ? queryGidTypeEx : nullptr;
  a.reqNotifyCq = wrapReqNotifyCq;
  a.pollCq = wrapPollCq;
  a.postSend = wrapPostSend;
  a.postRecv = wrapPostRecv;
  return out;
}

#endif  // BRAID_HAVE_IBVERBS

}  // namespace

Result<const VerbsApi*> loadVerbs() {
  if (const VerbsApi* api = gOverride.load(std::memory_order_acquire)) return api;
#if BRAID_HAVE_IBVERBS
  static const Loaded loaded = load();
  if (!loaded.status.ok()) return loaded.status;
  return &loaded.api;
#else
  return systemError("built without the libibverbs headers (Meson option ibverbs)");
#endif
}

void setVerbsApiForTesting(const VerbsApi* api) { gOverride.store(api, std::memory_order_release); }

}  // namespace braid
