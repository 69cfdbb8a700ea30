#include "core/group.h"

#include <algorithm>
#include <cstring>
#include <deque>
#include <map>
#include <thread>

#include "base/dtype.h"
#include "device/device_dispatch.h"

namespace braid {
namespace {

struct GroupState {
  int depth = 0;
  std::vector<std::pair<Communicator*, CallArgs>> calls;
  std::vector<std::function<Status()>> inits;
};

thread_local GroupState tGroup;

bool isP2p(const CallArgs& a) { return a.coll == Collective::kSend || a.coll == Collective::kRecv; }

// Point-to-point calls may overlap unless they use the same FIFO (same peer, same direction).
bool mustFollow(const CallArgs& later, const CallArgs& earlier) {
  if (!isP2p(later) || !isP2p(earlier)) return true;
  return later.coll == earlier.coll && later.root == earlier.root;
}

// A send to oneself is a copy into the matching receive of the same batch.
Status pairSelfTransfers(const std::vector<std::pair<Communicator*, CallArgs>>& calls,
                         std::vector<bool>& handled) {
  std::map<Communicator*, std::pair<std::vector<size_t>, std::vector<size_t>>> self;
  for (size_t i = 0; i < calls.size(); ++i) {
    const auto& [comm, a] = calls[i];
    if (isP2p(a) && a.root == comm->rank()) {
      (a.coll == Collective::kSend ? self[comm].first : self[comm].second).push_back(i);
    }
  }
  for (auto& [comm, lists] : self) {
    auto& [sends, recvs] = lists;
    if (sends.size() != recvs.size()) {
      return invalidUsage("rank " + std::to_string(comm->rank()) + " has " +
                          std::to_string(sends.size()) + " sends to itself but " +
                          std::to_string(recvs.size()) +
                          " receives from itself in this group; they must pair up");
    }
    for (size_t k = 0; k < sends.size(); ++k) {
      const CallArgs& s = calls[sends[k]].second;
      const CallArgs& r = calls[recvs[k]].second;
      const size_t bytes = s.count * dataTypeSize(s.dtype);
      if (bytes != r.count * dataTypeSize(r.dtype)) {
        return invalidUsage("send to self of " + std::to_string(bytes) +
                            " bytes paired with a receive of " +
                            std::to_string(r.count * dataTypeSize(r.dtype)) + " bytes");
      }
      if (bytes > 0 && s.sendbuff != r.recvbuff) std::memmove(r.recvbuff, s.sendbuff, bytes);
      handled[sends[k]] = handled[recvs[k]] = true;
    }
  }
  return okStatus();
}

Status runInits(std::vector<std::function<Status()>>& inits) {
  if (inits.size() == 1) return inits[0]();
  std::vector<Status> results(inits.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < inits.size(); ++i) {
    threads.emplace_back([&, i] { results[i] = inits[i](); });
  }
  for (std::thread& t : threads) t.join();
  for (const Status& s : results) RETURN_IF_ERROR(s);
  return okStatus();
}

}  // namespace

void groupStart() { ++tGroup.depth; }

bool inGroup() { return tGroup.depth > 0; }

Status groupEnd() {
  if (tGroup.depth == 0) return invalidUsage("braidGroupEnd without braidGroupStart");
  if (--tGroup.depth > 0) return okStatus();
  std::vector<std::function<Status()>> inits = std::move(tGroup.inits);
  std::vector<std::pair<Communicator*, CallArgs>> calls = std::move(tGroup.calls);
  tGroup = GroupState{};
  DeviceGroup device = DeviceGroup::take();  // the group's calls on device buffers
  if (!inits.empty()) RETURN_IF_ERROR(runInits(inits));
  // Device calls are enqueued first, the host calls run, then NULL-stream device work is awaited.
  return device.run([&] { return calls.empty() ? okStatus() : runBatch(calls); });
}

void deferInit(std::function<Status()> init) { tGroup.inits.push_back(std::move(init)); }

namespace {

/// Whether a call's outputs larger than the cache are written with non-temporal stores: only
/// where ranks share cores. With a core per rank, streaming the output while the peer reads the
/// slots cost up to half the bandwidth (docs/performance-notes.md#non-temporal-output-stores).
bool streamsLargeOutputs(Communicator* comm) { return coresShared(comm->waker()); }

// One collective outside a group: what runBatch does for it, without its containers (the
// per-call cost of small messages).
Status runOne(Communicator* comm, const CallArgs& args) {
  Result<PreparedCall> p = comm->prepare(args, /*share=*/false);
  if (!p.ok()) {
    comm->fail(p.status());  // its sequence numbers no longer match its peers'
    return p.status();
  }
  if (p->plan->scratchBytes > 0) {
    ASSIGN_OR_RETURN(p->buffers.scratch, comm->scratch(p->plan->scratchBytes));
  }
  PlanRun run(*p->plan, p->buffers, p->reducer, p->call, &comm->connectors(),
              streamsLargeOutputs(comm), comm->callChecks());
  thread_local std::vector<ProgressTask> tasks(1);
  tasks.assign(1, ProgressTask{&run, comm, {}, false, false});
  Status status = runTasks(tasks);
  if (!status.ok()) {
    if (!tasks[0].finished) comm->fail(status);
    return status;
  }
  comm->collectivesFinished();
  return status;
}

}  // namespace

Status submit(Communicator* comm, const CallArgs& args) {
  if (tGroup.depth > 0) {
    tGroup.calls.emplace_back(comm, args);
    return okStatus();
  }
  if (!isP2p(args)) return runOne(comm, args);
  return runBatch({{comm, args}});
}

Status runBatch(const std::vector<std::pair<Communicator*, CallArgs>>& calls) {
  std::vector<bool> handled(calls.size(), false);
  RETURN_IF_ERROR(pairSelfTransfers(calls, handled));

  std::vector<size_t> callOf;  // task index -> call index
  std::vector<PreparedCall> prepared;
  std::map<Communicator*, size_t> scratchNeed;
  for (size_t i = 0; i < calls.size(); ++i) {
    if (handled[i]) continue;
    auto& [comm, args] = calls[i];
    Result<PreparedCall> p = comm->prepare(args);
    if (!p.ok()) {
      comm->fail(p.status());  // its sequence numbers no longer match its peers'
      return p.status();
    }
    size_t& need = scratchNeed[comm];
    need = std::max<size_t>(need, p->plan->scratchBytes);
    prepared.push_back(std::move(p).value());
    callOf.push_back(i);
  }
  for (auto& [comm, need] : scratchNeed) {
    if (need == 0) continue;
    ASSIGN_OR_RETURN(char* scratch, comm->scratch(need));
    for (size_t t = 0; t < prepared.size(); ++t) {
      if (calls[callOf[t]].first == comm) prepared[t].buffers.scratch = scratch;
    }
  }

  std::deque<PlanRun> runs;  // runs stay where they are made: tasks point at them
  std::vector<ProgressTask> tasks(prepared.size());
  for (size_t t = 0; t < prepared.size(); ++t) {
    Communicator* comm = calls[callOf[t]].first;
    runs.emplace_back(*prepared[t].plan, prepared[t].buffers, prepared[t].reducer, prepared[t].call,
                      &comm->connectors(), streamsLargeOutputs(comm), comm->callChecks());
    tasks[t].run = &runs.back();
    tasks[t].client = comm;
    for (size_t e = 0; e < t; ++e) {
      if (calls[callOf[e]].first == comm &&
          mustFollow(calls[callOf[t]].second, calls[callOf[e]].second)) {
        tasks[t].after.push_back(e);
      }
    }
  }
  Status status = runTasks(tasks);
  if (!status.ok()) {
    // A call that did not finish leaves its communicator out of step with the peers (their
    // FIFOs, its sequence numbers): that communicator is done for.
    for (size_t t = 0; t < tasks.size(); ++t) {
      if (!tasks[t].finished) calls[callOf[t]].first->fail(status);
    }
  }
  if (status.ok()) {
    for (auto& [comm, need] : scratchNeed) comm->collectivesFinished();
  }
  return status;
}

}  // namespace braid
