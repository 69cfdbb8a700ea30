#include "tests/support/plan_case.h"

#include <algorithm>
#include <thread>

#include "algorithms/algorithms.h"
#include "kernels/host_lane_runner.h"

namespace braid::testing {
namespace {

/// What rank `rank` contributes at element `index` of its input.
int32_t inputValue(int rank, uint64_t index) {
  return static_cast<int32_t>(uint32_t(rank + 1) * 1000003u + uint32_t(index) * 7919u);
}

bool reduces(Collective coll) {
  return coll == Collective::kAllReduce || coll == Collective::kReduce ||
         coll == Collective::kReduceScatter;
}

}  // namespace

std::string describeSpec(const PlanCaseSpec& spec) {
  std::string s = std::string(collectiveName(spec.coll)) + "/" +
                  std::string(algorithmName(spec.algo)) + " n=" + std::to_string(spec.nranks) +
                  " count=" + std::to_string(spec.count) + " ch=" + std::to_string(spec.nchannels) +
                  " chunk=" + std::to_string(spec.chunkBytes);
  if (spec.coll == Collective::kBroadcast || spec.coll == Collective::kReduce) {
    s += " root=" + std::to_string(spec.root);
  }
  if (spec.inPlace) s += " inplace";
  return s;
}

std::vector<PlanCaseSpec> everyCollectiveAndAlgorithm(int nranks, uint64_t count,
                                                      uint32_t chunkBytes, uint32_t firstSeq) {
  std::vector<PlanCaseSpec> specs;
  const Collective colls[] = {Collective::kAllReduce,     Collective::kBroadcast,
                              Collective::kReduce,        Collective::kAllGather,
                              Collective::kReduceScatter, Collective::kAllToAll,
                              Collective::kSend};
  uint32_t k = 0;
  for (Collective coll : colls) {
    for (Algorithm algo : algorithmsFor(coll)) {
      PlanCaseSpec s;
      s.coll = coll;
      s.algo = algo;
      s.nranks = nranks;
      s.count = count;
      s.root = static_cast<int>((k + 1) % nranks);
      s.inPlace = coll != Collective::kSend && k % 2 == 1;
      s.chunkBytes = chunkBytes;
      s.nchannels = 2;
      s.callCheckChannel = 2;
      s.seq = firstSeq + k;
      if (algo == Algorithm::kHier) {
        for (int r = 0; r < nranks; ++r) s.hosts.push_back(r < (nranks + 1) / 2 ? 0 : 1);
      }
      specs.push_back(s);
      ++k;
    }
  }
  return specs;
}

Result<std::unique_ptr<PlanCase>> PlanCase::make(const PlanCaseSpec& spec) {
  std::unique_ptr<PlanCase> pc(new PlanCase(spec));
  const int n = spec.nranks;
  const uint64_t c = spec.count;
  pc->ranks_.resize(n);
  for (int r = 0; r < n; ++r) {
    RankData& d = pc->ranks_[r];
    PlanRequest request;
    request.coll = spec.coll;
    request.algo = spec.algo;
    request.nranks = n;
    request.rank = r;
    request.root = spec.root;
    request.count = c;
    request.elemSize = sizeof(int32_t);
    request.inPlace = spec.inPlace;
    request.chunkBytes = spec.chunkBytes;
    request.nchannels = spec.nchannels;
    request.hosts = spec.hosts;
    CallDescriptor& call = d.descriptor;
    call.dtype = braidInt32;
    call.op = reduces(spec.coll) ? braidSum : 0;
    call.algo = static_cast<uint8_t>(spec.algo);
    call.count = c;
    call.seq = spec.seq;
    call.coll = static_cast<uint8_t>(spec.coll);
    call.root =
        spec.coll == Collective::kBroadcast || spec.coll == Collective::kReduce ? spec.root : -1;
    uint64_t in = c, out = c, inAt = 0, outAt = 0;
    switch (spec.coll) {
      case Collective::kSend:
      case Collective::kRecv:
        if (r != 0 && r != n - 1) continue;
        request.coll = r == 0 ? Collective::kSend : Collective::kRecv;
        request.peer = r == 0 ? n - 1 : 0;
        request.inPlace = false;
        call.coll = static_cast<uint8_t>(Collective::kSend);
        call.root = n - 1;
        break;
      case Collective::kAllGather:
        out = n * c;
        if (spec.inPlace) inAt = r * c;
        break;
      case Collective::kReduceScatter:
        in = n * c;
        if (spec.inPlace) outAt = r * c;
        break;
      case Collective::kAllToAll: in = out = n * c; break;
      default: break;
    }
    ASSIGN_OR_RETURN(d.plan, buildPlan(request));
    if (spec.callCheckChannel >= 0) addCallCheckLane(d.plan, request, spec.callCheckChannel);
    d.flat = gpu::flattenPlan(d.plan);
    const uint64_t word = sizeof(int32_t);
    const uint64_t outWords = std::max(out, (d.plan.outputBytes + word - 1) / word);
    const uint64_t inWords = std::max(in, (d.plan.inputBytes + word - 1) / word);
    d.scratch.assign(d.plan.scratchBytes, 0);
    if (spec.inPlace) {
      d.buffer.assign(std::max(inAt + inWords, outAt + outWords), -1);
      d.inputAt = d.buffer.data() + inAt;
      d.outputAt = d.buffer.data() + outAt;
      for (uint64_t i = 0; i < in; ++i) d.buffer[inAt + i] = inputValue(r, i);
    } else {
      d.buffer.assign(outWords, -1);
      d.input.resize(inWords);
      for (uint64_t i = 0; i < in; ++i) d.input[i] = inputValue(r, i);
      d.inputAt = d.input.data();
      d.outputAt = d.buffer.data();
    }
  }
  return pc;
}

gpu::DeviceCall PlanCase::call(int rank) {
  RankData& d = ranks_[rank];
  gpu::DeviceCall c;
  c.lanes = d.flat.lanes.data();
  c.steps = d.flat.steps.data();
  c.nlanes = static_cast<uint32_t>(d.flat.lanes.size());
  c.elemSize = sizeof(int32_t);
  c.input = reinterpret_cast<const char*>(d.inputAt);
  c.output = reinterpret_cast<char*>(d.outputAt);
  c.scratch = d.scratch.data();
  c.call = d.descriptor;
  c.dtype = braidInt32;
  c.op = braidSum;
  c.nranks = spec_.nranks;
  return c;
}

int32_t PlanCase::expected(int rank, uint64_t index) const {
  const int n = spec_.nranks;
  const uint64_t c = spec_.count;
  auto sum = [&](uint64_t at) {
    uint32_t s = 0;
    for (int r = 0; r < n; ++r) s += static_cast<uint32_t>(inputValue(r, at));
    return static_cast<int32_t>(s);
  };
  switch (spec_.coll) {
    case Collective::kAllReduce:
    case Collective::kReduce: return sum(index);
    case Collective::kBroadcast: return inputValue(spec_.root, index);
    case Collective::kAllGather: return inputValue(static_cast<int>(index / c), index % c);
    case Collective::kReduceScatter: return sum(rank * c + index);
    case Collective::kAllToAll:
      return inputValue(static_cast<int>(index / c), rank * c + index % c);
    case Collective::kSend:
    case Collective::kRecv: return inputValue(0, index);
  }
  return 0;
}

bool PlanCase::checksOutput(int rank) const {
  switch (spec_.coll) {
    case Collective::kReduce: return rank == spec_.root;
    case Collective::kSend:
    case Collective::kRecv: return rank == spec_.nranks - 1;
    default: return true;
  }
}

std::string PlanCase::check(int rank) const {
  if (!checksOutput(rank)) return "";
  const RankData& d = ranks_[rank];
  const uint64_t n = spec_.nranks;
  const uint64_t words = spec_.coll == Collective::kAllGather || spec_.coll == Collective::kAllToAll
                             ? n * spec_.count
                             : spec_.count;
  std::string errors;
  int shown = 0;
  for (uint64_t i = 0; i < words && shown < 3; ++i) {
    const int32_t want = expected(rank, i);
    if (d.outputAt[i] != want) {
      errors += "rank " + std::to_string(rank) + " element " + std::to_string(i) + ": got " +
                std::to_string(d.outputAt[i]) + ", want " + std::to_string(want) + "; ";
      ++shown;
    }
  }
  return errors;
}

HostFifoMesh::HostFifoMesh(int nranks, int maxChannels, uint32_t nslots, uint32_t slotBytes,
                           uint32_t nlines)
    : nranks_(nranks), maxChannels_(maxChannels) {
  const size_t perRank = size_t(nranks) * maxChannels;
  fifos_.resize(perRank * nranks);
  for (auto& f : fifos_) {
    f = std::make_unique<Fifo>();
    f->headers.resize(nslots);
    f->data.resize(size_t(nslots) * slotBytes);
    f->lines.resize(nlines, gpu::LlLine{0, 0});
  }
  tables_.resize(nranks);
  for (int r = 0; r < nranks; ++r) {
    controls_.push_back(std::make_unique<gpu::DeviceControl>());
    latches_.push_back(std::make_unique<uint32_t>(0));
    tables_[r].resize(2 * perRank);
    llTables_.emplace_back(2 * perRank);
    for (int p = 0; p < nranks; ++p) {
      for (int ch = 0; ch < maxChannels; ++ch) {
        auto end = [&](Fifo& f) {
          gpu::DeviceFifo d;
          d.head = &f.head;
          d.tail = &f.tail;
          d.headers = f.headers.data();
          d.data = f.data.data();
          d.nslots = nslots;
          d.slotBytes = slotBytes;
          return d;
        };
        tables_[r][size_t(p) * maxChannels + ch] = end(fifo(r, p, ch));
        tables_[r][perRank + size_t(p) * maxChannels + ch] = end(fifo(p, r, ch));
        auto ring = [&](Fifo& f) {
          gpu::LlFifo l;
          l.lines = f.lines.data();
          l.credits = &f.credits;
          l.nlines = nlines;
          return l;
        };
        llTables_[r][size_t(p) * maxChannels + ch] = ring(fifo(r, p, ch));
        llTables_[r][perRank + size_t(p) * maxChannels + ch] = ring(fifo(p, r, ch));
      }
    }
  }
}

gpu::ExecutorArgs HostFifoMesh::args(int rank) {
  gpu::ExecutorArgs a;
  a.sendFifos = tables_[rank].data();
  a.recvFifos = a.sendFifos + size_t(nranks_) * maxChannels_;
  a.maxChannels = maxChannels_;
  a.rank = rank;
  a.control = controls_[rank].get();
  a.errorLatch = latches_[rank].get();
  a.timeoutNs = 60'000'000'000ull;
  a.ncalls = 1;
  return a;
}

uint64_t HostFifoMesh::head(int sender, int receiver, int channel) const {
  return fifo(sender, receiver, channel).head;
}

uint64_t HostFifoMesh::tail(int sender, int receiver, int channel) const {
  return fifo(sender, receiver, channel).tail;
}

gpu::LlArgs HostFifoMesh::llArgs(int rank) {
  gpu::LlArgs a;
  a.sendFifos = llTables_[rank].data();
  a.recvFifos = a.sendFifos + size_t(nranks_) * maxChannels_;
  return a;
}

uint64_t HostFifoMesh::linesSent(int sender, int receiver, int channel) const {
  return llTables_[sender][size_t(receiver) * maxChannels_ + channel].count;
}

uint64_t HostFifoMesh::linesCredited(int sender, int receiver, int channel) const {
  return fifo(sender, receiver, channel).credits;
}

void runOnHostLanes(PlanCase& pc, HostFifoMesh& mesh, bool lines) {
  std::vector<std::thread> ranks;
  std::vector<gpu::DeviceCall> calls(pc.nranks());
  std::vector<gpu::ExecutorArgs> args(pc.nranks());
  std::vector<gpu::LlArgs> rings(pc.nranks());
  for (int r = 0; r < pc.nranks(); ++r) {
    if (!pc.runs(r)) continue;
    calls[r] = pc.call(r);
    args[r] = mesh.args(r);
    if (lines) rings[r] = mesh.llArgs(r);
    ranks.emplace_back([&, r] {
      if (lines) {
        gpu::runLanesOnHost(args[r], rings[r], &calls[r], 1);
      } else {
        gpu::runLanesOnHost(args[r], &calls[r], 1);
      }
    });
  }
  for (std::thread& t : ranks) t.join();
}

CallDescriptor allReduceCall(uint32_t seq, braidDataType_t dtype, uint64_t count) {
  CallDescriptor c;
  c.coll = static_cast<uint8_t>(Collective::kAllReduce);
  c.dtype = dtype;
  c.count = count;
  c.seq = seq;
  return c;
}

}  // namespace braid::testing
