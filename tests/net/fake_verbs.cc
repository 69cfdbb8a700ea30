#include "tests/net/fake_verbs.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>

namespace braid::testing {
namespace {

struct DeviceRec {
  ibv_device device{};
  FakeDevice spec;
};
struct ContextRec {
  DeviceRec* device = nullptr;
};
struct MrRec {
  ibv_mr* mr = nullptr;
  int access = 0;
};
struct ChannelRec {
  std::deque<ibv_cq*> events;
};
struct CqRec {
  std::deque<ibv_wc> wcs;
  bool armed = false;
  uint32_t eventsGot = 0;
  uint32_t eventsAcked = 0;
};
struct QpRec {
  ibv_qp* qp = nullptr;
  ibv_qp_state state = IBV_QPS_RESET;
  uint8_t port = 0;
  int access = 0;
  uint32_t destQpn = 0;
  uint32_t rqPsn = 0;
  uint32_t sqPsn = 0;
  ibv_ah_attr ah{};
  ibv_gid localGid{};
  uint32_t maxRecv = 0;
  std::deque<uint64_t> recvs;
  bool unplugged = false;
};

struct Fabric {
  std::mutex mu;
  std::vector<std::unique_ptr<DeviceRec>> devices;
  std::map<ibv_context*, ContextRec> contexts;
  std::map<ibv_pd*, ibv_context*> pds;
  std::map<uint32_t, MrRec> mrs;  // by key (lkey == rkey)
  std::map<ibv_comp_channel*, ChannelRec> channels;
  std::map<ibv_cq*, CqRec> cqs;
  std::map<uint32_t, QpRec> qps;  // by number
  uint32_t nextQpn = 0x100;
  uint32_t nextKey = 0x1000;
  FakeStats stats;
};

Fabric& fabric() {
  static auto* f = new Fabric();
  return *f;
}

const FakePort* portOf(ibv_context* ctx, uint8_t port) {
  auto it = fabric().contexts.find(ctx);
  if (it == fabric().contexts.end()) return nullptr;
  const auto& ports = it->second.device->spec.ports;
  if (port < 1 || port > ports.size()) return nullptr;
  return &ports[port - 1];
}

int fail(int error, const std::string& why) {
  fabric().stats.lastError = why;
  errno = error;
  return error;
}

void pushCompletion(ibv_cq* cq, const ibv_wc& wc) {
  Fabric& f = fabric();
  CqRec& rec = f.cqs.at(cq);
  rec.wcs.push_back(wc);
  if (rec.armed && cq->channel != nullptr) {
    rec.armed = false;
    f.channels.at(cq->channel).events.push_back(cq);
    const uint64_t one = 1;
    (void)!::write(cq->channel->fd, &one, sizeof(one));
  }
}

/// Moves a queue pair to the error state: its posted receives complete as flushed.
void toError(QpRec& q) {
  q.state = IBV_QPS_ERR;
  while (!q.recvs.empty()) {
    ibv_wc wc{};
    wc.wr_id = q.recvs.front();
    wc.status = IBV_WC_WR_FLUSH_ERR;
    wc.opcode = IBV_WC_RECV;
    wc.qp_num = q.qp->qp_num;
    q.recvs.pop_front();
    pushCompletion(q.qp->recv_cq, wc);
  }
}

// ---- The table -------------------------------------------------------------------------------

ibv_device** getDeviceList(int* count) {
  std::lock_guard<std::mutex> lock(fabric().mu);
  auto& devices = fabric().devices;
  auto** list = new ibv_device*[devices.size() + 1];
  for (size_t i = 0; i < devices.size(); ++i) list[i] = &devices[i]->device;
  list[devices.size()] = nullptr;
  *count = static_cast<int>(devices.size());
  return list;
}

void freeDeviceList(ibv_device** list) { delete[] list; }

const char* getDeviceName(ibv_device* device) { return device->name; }

ibv_context* openDevice(ibv_device* device) {
  std::lock_guard<std::mutex> lock(fabric().mu);
  for (auto& d : fabric().devices) {
    if (&d->device != device) continue;
    auto* ctx = new ibv_context();
    ctx->device = device;
    ctx->num_comp_vectors = 1;
    fabric().contexts[ctx] = ContextRec{d.get()};
    ++fabric().stats.contexts;
    return ctx;
  }
  errno = ENODEV;
  return nullptr;
}

int closeDevice(ibv_context* ctx) {
  std::lock_guard<std::mutex> lock(fabric().mu);
  Fabric& f = fabric();
  for (const auto& [pd, owner] : f.pds) {
    if (owner == ctx) return fail(EBUSY, "closing a device that still has a protection domain");
  }
  if (f.contexts.erase(ctx) == 0) return fail(EINVAL, "closing an unknown device context");
  delete ctx;
  --f.stats.contexts;
  return 0;
}

int queryDevice(ibv_context* ctx, ibv_device_attr* attr) {
  std::lock_guard<std::mutex> lock(fabric().mu);
  auto it = fabric().contexts.find(ctx);
  if (it == fabric().contexts.end()) return EINVAL;
  *attr = ibv_device_attr{};
  attr->phys_port_cnt = static_cast<uint8_t>(it->second.device->spec.ports.size());
  attr->max_qp_wr = 16384;
  attr->max_cqe = 1 << 20;
  attr->max_qp = 1 << 16;
  attr->max_sge = 30;
  return 0;
}

int queryPort(ibv_context* ctx, uint8_t port, ibv_port_attr* attr) {
  std::lock_guard<std::mutex> lock(fabric().mu);
  const FakePort* p = portOf(ctx, port);
  if (p == nullptr) return EINVAL;
  *attr = ibv_port_attr{};
  attr->state = p->active ? IBV_PORT_ACTIVE : IBV_PORT_DOWN;
  attr->link_layer = p->ethernet ? IBV_LINK_LAYER_ETHERNET : IBV_LINK_LAYER_INFINIBAND;
  attr->lid = p->ethernet ? 0 : p->lid;
  attr->active_mtu = IBV_MTU_4096;
  attr->max_mtu = IBV_MTU_4096;
  attr->gid_tbl_len = static_cast<int>(p->gids.size());
  return 0;
}

int queryGid(ibv_context* ctx, uint8_t port, int index, ibv_gid* gid) {
  std::lock_guard<std::mutex> lock(fabric().mu);
  const FakePort* p = portOf(ctx, port);
  if (p == nullptr || index < 0 || index >= static_cast<int>(p->gids.size())) return EINVAL;
  *gid = p->gids[index];
  return 0;
}

int queryGidType(ibv_context* ctx, uint8_t port, int index, int* type) {
  std::lock_guard<std::mutex> lock(fabric().mu);
  const FakePort* p = portOf(ctx, port);
  if (p == nullptr || index < 0 || index >= static_cast<int>(p->gidTypes.size())) return EINVAL;
  *type = p->gidTypes[index];
  return 0;
}

ibv_pd* allocPd(ibv_context* ctx) {
  std::lock_guard<std::mutex> lock(fabric().mu);
  auto* pd = new ibv_pd();
  pd->context = ctx;
  fabric().pds[pd] = ctx;
  ++fabric().stats.pds;
  return pd;
}

int deallocPd(ibv_pd* pd) {
  std::lock_guard<std::mutex> lock(fabric().mu);
  Fabric& f = fabric();
  for (const auto& [key, mr] : f.mrs) {
    if (mr.mr->pd == pd) return fail(EBUSY, "deallocating a protection domain with memory regions");
  }
  for (const auto& [qpn, q] : f.qps) {
    if (q.qp->pd == pd) return fail(EBUSY, "deallocating a protection domain with queue pairs");
  }
  f.pds.erase(pd);
  delete pd;
  --f.stats.pds;
  return 0;
}

ibv_mr* regMr(ibv_pd* pd, void* addr, size_t length, int access) {
  std::lock_guard<std::mutex> lock(fabric().mu);
  Fabric& f = fabric();
  if (f.pds.count(pd) == 0 || addr == nullptr || length == 0) {
    fail(EINVAL, "ibv_reg_mr with a bad argument");
    return nullptr;
  }
  auto* mr = new ibv_mr();
  mr->context = pd->context;
  mr->pd = pd;
  mr->addr = addr;
  mr->length = length;
  mr->lkey = mr->rkey = f.nextKey++;
  f.mrs[mr->lkey] = MrRec{mr, access};
  ++f.stats.mrs;
  return mr;
}

int deregMr(ibv_mr* mr) {
  std::lock_guard<std::mutex> lock(fabric().mu);
  if (fabric().mrs.erase(mr->lkey) == 0) return fail(EINVAL, "deregistering an unknown region");
  delete mr;
  --fabric().stats.mrs;
  return 0;
}

ibv_comp_channel* createCompChannel(ibv_context* ctx) {
  std::lock_guard<std::mutex> lock(fabric().mu);
  auto* ch = new ibv_comp_channel();
  ch->context = ctx;
  ch->fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  fabric().channels[ch] = ChannelRec{};
  ++fabric().stats.channels;
  return ch;
}

int destroyCompChannel(ibv_comp_channel* ch) {
  std::lock_guard<std::mutex> lock(fabric().mu);
  for (const auto& [cq, rec] : fabric().cqs) {
    if (cq->channel == ch) return fail(EBUSY, "destroying a channel that a CQ still uses");
  }
  ::close(ch->fd);
  fabric().channels.erase(ch);
  delete ch;
  --fabric().stats.channels;
  return 0;
}

ibv_cq* createCq(ibv_context* ctx, int cqe, void* cqContext, ibv_comp_channel* channel, int) {
  std::lock_guard<std::mutex> lock(fabric().mu);
  auto* cq = new ibv_cq();
  cq->context = ctx;
  cq->channel = channel;
  cq->cq_context = cqContext;
  cq->cqe = cqe;
  fabric().cqs[cq] = CqRec{};
  ++fabric().stats.cqs;
  return cq;
}

int destroyCq(ibv_cq* cq) {
  std::lock_guard<std::mutex> lock(fabric().mu);
  Fabric& f = fabric();
  for (const auto& [qpn, q] : f.qps) {
    if (q.qp->send_cq == cq || q.qp->recv_cq == cq) return fail(EBUSY, "destroying a CQ in use");
  }
  const CqRec& rec = f.cqs.at(cq);
  if (rec.eventsGot != rec.eventsAcked) return fail(EBUSY, "destroying a CQ with unacked events");
  f.cqs.erase(cq);
  delete cq;
  --f.stats.cqs;
  return 0;
}

int reqNotifyCq(ibv_cq* cq, int) {
  std::lock_guard<std::mutex> lock(fabric().mu);
  fabric().cqs.at(cq).armed = true;
  return 0;
}

int getCqEvent(ibv_comp_channel* ch, ibv_cq** cq, void** cqContext) {
  std::lock_guard<std::mutex> lock(fabric().mu);
  ChannelRec& rec = fabric().channels.at(ch);
  if (rec.events.empty()) {
    uint64_t drained = 0;
    (void)!::read(ch->fd, &drained, sizeof(drained));
    errno = EAGAIN;
    return -1;
  }
  *cq = rec.events.front();
  rec.events.pop_front();
  *cqContext = (*cq)->cq_context;
  ++fabric().cqs.at(*cq).eventsGot;
  return 0;
}

void ackCqEvents(ibv_cq* cq, unsigned int events) {
  std::lock_guard<std::mutex> lock(fabric().mu);
  fabric().cqs.at(cq).eventsAcked += events;
}

int pollCq(ibv_cq* cq, int entries, ibv_wc* wc) {
  std::lock_guard<std::mutex> lock(fabric().mu);
  CqRec& rec = fabric().cqs.at(cq);
  int n = 0;
  while (n < entries && !rec.wcs.empty()) {
    wc[n++] = rec.wcs.front();
    rec.wcs.pop_front();
  }
  return n;
}

ibv_qp* createQp(ibv_pd* pd, ibv_qp_init_attr* attr) {
  std::lock_guard<std::mutex> lock(fabric().mu);
  Fabric& f = fabric();
  if (attr->qp_type != IBV_QPT_RC || f.cqs.count(attr->send_cq) == 0 ||
      f.cqs.count(attr->recv_cq) == 0 || attr->cap.max_send_wr == 0) {
    fail(EINVAL, "ibv_create_qp with a bad attribute");
    return nullptr;
  }
  auto* qp = new ibv_qp();
  qp->context = pd->context;
  qp->pd = pd;
  qp->send_cq = attr->send_cq;
  qp->recv_cq = attr->recv_cq;
  qp->qp_num = f.nextQpn++;
  qp->qp_type = IBV_QPT_RC;
  qp->state = IBV_QPS_RESET;
  QpRec rec;
  rec.qp = qp;
  rec.maxRecv = attr->cap.max_recv_wr;
  f.qps[qp->qp_num] = rec;
  ++f.stats.qps;
  return qp;
}

int modifyQp(ibv_qp* qp, ibv_qp_attr* attr, int mask) {
  std::lock_guard<std::mutex> lock(fabric().mu);
  Fabric& f = fabric();
  QpRec& q = f.qps.at(qp->qp_num);
  if (!(mask & IBV_QP_STATE)) return fail(EINVAL, "modify without a state");
  auto needs = [&](int bits, const char* what) {
    if ((mask & bits) == bits) return true;
    fail(EINVAL, std::string("transition to ") + what + " lacks required attributes");
    return false;
  };
  switch (attr->qp_state) {
    case IBV_QPS_INIT: {
      if (q.state != IBV_QPS_RESET) return fail(EINVAL, "INIT from a state other than RESET");
      if (!needs(IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS, "INIT")) return EINVAL;
      const FakePort* p = portOf(qp->context, attr->port_num);
      if (p == nullptr || !p->active) return fail(EINVAL, "INIT on a port that is not active");
      q.port = attr->port_num;
      q.access = attr->qp_access_flags;
      break;
    }
    case IBV_QPS_RTR: {
      if (q.state != IBV_QPS_INIT) return fail(EINVAL, "RTR from a state other than INIT");
      if (!needs(IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                     IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER,
                 "RTR")) {
        return EINVAL;
      }
      const FakePort* p = portOf(qp->context, q.port);
      if (p->ethernet) {
        if (!attr->ah_attr.is_global || attr->ah_attr.grh.sgid_index >= p->gids.size()) {
          return fail(EINVAL, "RoCE RTR without a global route or with a bad GID index");
        }
        q.localGid = p->gids[attr->ah_attr.grh.sgid_index];
      } else if (attr->ah_attr.dlid == 0) {
        return fail(EINVAL, "InfiniBand RTR without a destination LID");
      }
      q.destQpn = attr->dest_qp_num;
      q.rqPsn = attr->rq_psn;
      q.ah = attr->ah_attr;
      break;
    }
    case IBV_QPS_RTS: {
      if (q.state != IBV_QPS_RTR) return fail(EINVAL, "RTS from a state other than RTR");
      if (!needs(IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                     IBV_QP_MAX_QP_RD_ATOMIC,
                 "RTS")) {
        return EINVAL;
      }
      q.sqPsn = attr->sq_psn;
      ++f.stats.qpsEverConnected;
      f.stats.lastQpTimeout = attr->timeout;
      f.stats.lastQpRetryCount = attr->retry_cnt;
      break;
    }
    case IBV_QPS_ERR: toError(q); break;
    default: return fail(EINVAL, "unsupported transition");
  }
  q.state = attr->qp_state;
  qp->state = attr->qp_state;
  return 0;
}

int destroyQp(ibv_qp* qp) {
  std::lock_guard<std::mutex> lock(fabric().mu);
  if (fabric().qps.erase(qp->qp_num) == 0) return fail(EINVAL, "destroying an unknown QP");
  delete qp;
  --fabric().stats.qps;
  return 0;
}

int postRecv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  std::lock_guard<std::mutex> lock(fabric().mu);
  QpRec& q = fabric().qps.at(qp->qp_num);
  for (; wr != nullptr; wr = wr->next) {
    if (q.state == IBV_QPS_RESET || q.recvs.size() >= q.maxRecv) {
      *bad = wr;
      return fail(EINVAL, "receive posted in RESET or beyond the queue's depth");
    }
    q.recvs.push_back(wr->wr_id);
    if (q.state == IBV_QPS_ERR) toError(q);
  }
  return 0;
}

/// Executes one write; returns the completion status for the sender.
ibv_wc_status execute(QpRec& src, const ibv_send_wr& wr) {
  Fabric& f = fabric();
  auto local = [&](const ibv_sge& sge) -> const MrRec* {
    auto it = f.mrs.find(sge.lkey);
    if (it == f.mrs.end() || it->second.mr->pd != src.qp->pd) return nullptr;
    const auto begin = reinterpret_cast<uintptr_t>(it->second.mr->addr);
    if (sge.addr < begin || sge.addr + sge.length > begin + it->second.mr->length) return nullptr;
    return &it->second;
  };
  size_t length = 0;
  for (int i = 0; i < wr.num_sge; ++i) {
    if (local(wr.sg_list[i]) == nullptr) {
      f.stats.lastError = "local SGE outside its memory region (bad lkey)";
      return IBV_WC_LOC_PROT_ERR;
    }
    length += wr.sg_list[i].length;
  }
  auto dst = f.qps.find(src.destQpn);
  if (dst == f.qps.end() || dst->second.unplugged ||
      (dst->second.state != IBV_QPS_RTR && dst->second.state != IBV_QPS_RTS)) {
    f.stats.lastError = "destination queue pair gone";
    return IBV_WC_RETRY_EXC_ERR;
  }
  QpRec& d = dst->second;
  const FakePort* dport = portOf(d.qp->context, d.port);
  const bool routed = dport->ethernet ? std::memcmp(src.ah.grh.dgid.raw, d.localGid.raw, 16) == 0
                                      : src.ah.dlid == dport->lid;
  if (!routed || d.destQpn != src.qp->qp_num || d.rqPsn != src.sqPsn) {
    f.stats.lastError = "destination LID/GID, QPN or PSN do not match the connected peer";
    return IBV_WC_RETRY_EXC_ERR;
  }
  if (length > 0) {
    auto it = f.mrs.find(wr.wr.rdma.rkey);
    if (it == f.mrs.end() || it->second.mr->pd != d.qp->pd ||
        !(it->second.access & IBV_ACCESS_REMOTE_WRITE) || !(d.access & IBV_ACCESS_REMOTE_WRITE)) {
      f.stats.lastError = "remote key unknown or without remote write access";
      return IBV_WC_REM_ACCESS_ERR;
    }
    const auto begin = reinterpret_cast<uintptr_t>(it->second.mr->addr);
    if (wr.wr.rdma.remote_addr < begin ||
        wr.wr.rdma.remote_addr + length > begin + it->second.mr->length) {
      f.stats.lastError = "remote range outside the memory region";
      return IBV_WC_REM_ACCESS_ERR;
    }
    char* out = reinterpret_cast<char*>(wr.wr.rdma.remote_addr);
    for (int i = 0; i < wr.num_sge; ++i) {
      std::memcpy(out, reinterpret_cast<const void*>(wr.sg_list[i].addr), wr.sg_list[i].length);
      out += wr.sg_list[i].length;
    }
  }
  if (wr.opcode == IBV_WR_RDMA_WRITE_WITH_IMM) {
    if (d.recvs.empty()) {
      f.stats.lastError = "write with immediate but no receive posted";
      return IBV_WC_RNR_RETRY_EXC_ERR;
    }
    ibv_wc wc{};
    wc.wr_id = d.recvs.front();
    d.recvs.pop_front();
    wc.status = IBV_WC_SUCCESS;
    wc.opcode = IBV_WC_RECV_RDMA_WITH_IMM;
    wc.byte_len = static_cast<uint32_t>(length);
    wc.imm_data = wr.imm_data;
    wc.qp_num = d.qp->qp_num;
    wc.src_qp = src.qp->qp_num;
    wc.wc_flags = IBV_WC_WITH_IMM;
    pushCompletion(d.qp->recv_cq, wc);
    ++f.stats.writesWithImm;
  }
  ++f.stats.writes;
  f.stats.bytes += length;
  return IBV_WC_SUCCESS;
}

int postSend(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad) {
  std::lock_guard<std::mutex> lock(fabric().mu);
  Fabric& f = fabric();
  QpRec& q = f.qps.at(qp->qp_num);
  for (; wr != nullptr; wr = wr->next) {
    if (q.state != IBV_QPS_RTS && q.state != IBV_QPS_ERR) {
      *bad = wr;
      return fail(EINVAL, "post_send on a queue pair that is not RTS");
    }
    if (wr->opcode != IBV_WR_RDMA_WRITE && wr->opcode != IBV_WR_RDMA_WRITE_WITH_IMM) {
      *bad = wr;
      return fail(EINVAL, "unsupported opcode");
    }
    ibv_wc wc{};
    wc.wr_id = wr->wr_id;
    wc.opcode = IBV_WC_RDMA_WRITE;
    wc.qp_num = qp->qp_num;
    wc.status = q.state == IBV_QPS_ERR ? IBV_WC_WR_FLUSH_ERR : execute(q, *wr);
    if (wc.status != IBV_WC_SUCCESS) {
      if (wc.status != IBV_WC_WR_FLUSH_ERR) ++f.stats.failedWrites;
      pushCompletion(qp->send_cq, wc);  // errors complete whether signalled or not
      if (q.state != IBV_QPS_ERR) toError(q);
    } else if (wr->send_flags & IBV_SEND_SIGNALED) {
      pushCompletion(qp->send_cq, wc);
    }
  }
  return 0;
}

const VerbsApi kApi = {
    .getDeviceList = getDeviceList,
    .freeDeviceList = freeDeviceList,
    .getDeviceName = getDeviceName,
    .openDevice = openDevice,
    .closeDevice = closeDevice,
    .queryDevice = queryDevice,
    .queryPort = queryPort,
    .queryGid = queryGid,
    .queryGidType = queryGidType,
    .allocPd = allocPd,
    .deallocPd = deallocPd,
    .regMr = regMr,
    .regDmabufMr = nullptr,
    .deregMr = deregMr,
    .createCompChannel = createCompChannel,
    .destroyCompChannel = destroyCompChannel,
    .createCq = createCq,
    .destroyCq = destroyCq,
    .reqNotifyCq = reqNotifyCq,
    .getCqEvent = getCqEvent,
    .ackCqEvents = ackCqEvents,
    .pollCq = pollCq,
    .createQp = createQp,
    .modifyQp = modifyQp,
    .destroyQp = destroyQp,
    .postSend = postSend,
    .postRecv = postRecv,
};

}  // namespace

const VerbsApi* fakeVerbs(std::vector<FakeDevice> devices) {
  std::lock_guard<std::mutex> lock(fabric().mu);
  Fabric& f = fabric();
  f.devices.clear();
  for (FakeDevice& d : devices) {
    auto rec = std::make_unique<DeviceRec>();
    std::snprintf(rec->device.name, sizeof(rec->device.name), "%s", d.name.c_str());
    rec->device.node_type = IBV_NODE_CA;
    rec->device.transport_type = IBV_TRANSPORT_IB;
    rec->spec = std::move(d);
    f.devices.push_back(std::move(rec));
  }
  const FakeStats old = f.stats;
  f.stats = FakeStats{};
  // Resources still open stay counted.
  f.stats.contexts = old.contexts;
  f.stats.pds = old.pds;
  f.stats.mrs = old.mrs;
  f.stats.cqs = old.cqs;
  f.stats.channels = old.channels;
  f.stats.qps = old.qps;
  return &kApi;
}

void fakeUnplug(const std::string& device) {
  std::lock_guard<std::mutex> lock(fabric().mu);
  for (auto& [qpn, q] : fabric().qps) {
    if (q.qp->context->device->name != device) continue;
    q.unplugged = true;
    if (q.state != IBV_QPS_ERR) toError(q);
  }
}

FakeStats fakeStats() {
  std::lock_guard<std::mutex> lock(fabric().mu);
  return fabric().stats;
}

ibv_gid ipv4Gid(uint8_t a, uint8_t b, uint8_t c, uint8_t d) {
  ibv_gid g{};
  g.raw[10] = 0xff;
  g.raw[11] = 0xff;
  g.raw[12] = a;
  g.raw[13] = b;
  g.raw[14] = c;
  g.raw[15] = d;
  return g;
}

ibv_gid linkLocalGid(uint8_t tail) {
  ibv_gid g{};
  g.raw[0] = 0xfe;
  g.raw[1] = 0x80;
  g.raw[15] = tail;
  return g;
}

}  // namespace braid::testing
