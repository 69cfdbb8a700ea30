#include "tuner/plan_cost.h"

#include <algorithm>
#include <array>
#include <bit>
#include <functional>
#include <limits>
#include <string>
#include <unordered_map>

namespace braid {
namespace {

constexpr double kNever = std::numeric_limits<double>::infinity();
// Steps past the current one whose sends a lane may post early (PlanRun::kMaxSendAheadSteps).
constexpr uint32_t kMaxSendAheadSteps = 16;

// Which part of a step a task is: all of a dependent step, or one half of a SendRecv.
enum class Part : uint8_t { kWhole, kSendHalf, kRecvHalf };

struct Fifo {
  int sender = 0;    ///< the rank whose plan posts to it (its period's representative)
  int receiver = 0;  ///< the rank whose plan takes from it (its period's representative)
  int linkFrom = 0;  ///< the real ranks it joins, for the links between them
  int linkTo = 0;
  size_t posted = 0;
  size_t released = 0;
  size_t maxMessages = 0;          ///< items in flight at most
  uint64_t ringBytes = 0;          ///< ring bytes in flight at most (0: unbounded)
  std::vector<double> arrival;     ///< item k is visible to the receiver from arrival[k]
  std::vector<double> freed;       ///< item k's slot is visible to the sender as free from freed[k]
  std::vector<uint64_t> ringUsed;  ///< ring bytes taken by items 0..k-1 (ringUsed[0] = 0)

  /// The oldest item that must be freed before one taking `need` ring bytes may be posted, or
  /// posted (none must).
  size_t mustFreeBefore(uint64_t need) const {
    size_t first = maxMessages <= posted ? posted - maxMessages + 1 : 0;
    if (ringBytes != 0 && need != 0 && ringUsed[posted] + need > ringBytes) {
      // Items k..posted-1 stay in flight: the first k with ringUsed[posted] - ringUsed[k] + need
      // <= ringBytes.
      const uint64_t target = ringUsed[posted] + need - ringBytes;
      const size_t k = static_cast<size_t>(
          std::lower_bound(ringUsed.begin(), ringUsed.begin() + static_cast<long>(posted) + 1,
                           target) -
          ringUsed.begin());
      first = std::max(first, k);
    }
    return first;
  }
};

// What the simulation needs of one step, worked out once: its FIFOs, shape and CPU cost.
struct StepFifos {
  std::array<int32_t, kMaxStepPeers> recv{-1, -1, -1};
  std::array<int32_t, kMaxStepPeers> send{-1, -1, -1};
  StepShape shape{};
  double cpuUs[3] = {0, 0, 0};    ///< per Part
  double bytesUs[3] = {0, 0, 0};  ///< per Part: the share of cpuUs that moves bytes
};

// Ranks by when their next task could start (ties: lower rank), one entry each: a binary heap
// that moves a rank's entry when its time changes (one that kept stale entries would grow with
// every refresh, and sifting them cost half the simulation's time).
class RankQueue {
 public:
  void reset(size_t n) {
    heap_.clear();
    pos_.assign(n, kAbsent);
    at_.assign(n, kNever);
  }
  bool empty() const { return heap_.empty(); }
  int top() const { return heap_.front(); }
  double topAt() const { return at_[size_t(heap_.front())]; }

  /// Puts rank r in the queue at `at`, or moves it there.
  void set(int r, double at) {
    at_[size_t(r)] = at;
    if (pos_[size_t(r)] == kAbsent) {
      pos_[size_t(r)] = heap_.size();
      heap_.push_back(r);
    }
    siftDown(siftUp(pos_[size_t(r)]));
  }
  void remove(int r) {
    const size_t i = pos_[size_t(r)];
    if (i == kAbsent) return;
    pos_[size_t(r)] = kAbsent;
    const int last = heap_.back();
    heap_.pop_back();
    if (i == heap_.size()) return;
    heap_[i] = last;
    pos_[size_t(last)] = i;
    siftDown(siftUp(i));
  }

 private:
  static constexpr size_t kAbsent = ~size_t{0};

  bool before(int a, int b) const {
    const double ta = at_[size_t(a)], tb = at_[size_t(b)];
    return ta != tb ? ta < tb : a < b;
  }
  void place(size_t i, int r) {
    heap_[i] = r;
    pos_[size_t(r)] = i;
  }
  size_t siftUp(size_t i) {
    const int r = heap_[i];
    while (i > 0 && before(r, heap_[(i - 1) / 2])) {
      place(i, heap_[(i - 1) / 2]);
      i = (i - 1) / 2;
    }
    place(i, r);
    return i;
  }
  void siftDown(size_t i) {
    const int r = heap_[i];
    for (;;) {
      size_t child = 2 * i + 1;
      if (child >= heap_.size()) break;
      if (child + 1 < heap_.size() && before(heap_[child + 1], heap_[child])) ++child;
      if (!before(heap_[child], r)) break;
      place(i, heap_[child]);
      i = child;
    }
    place(i, r);
  }

  std::vector<int> heap_;
  std::vector<size_t> pos_;  ///< per rank: its index in heap_, or kAbsent
  std::vector<double> at_;   ///< per rank: its time in the queue
};

// A task a lane could run next, and when its FIFOs let it start.
struct LaneTask {
  double fifoReadyAt = kNever;
  Part part = Part::kWhole;
  size_t step = 0;
};
struct LaneTasks {
  std::array<LaneTask, 3> tasks{};  ///< an early send, then the step or its halves
  int count = 0;
};

// The earliest FIFO-ready time of each lane of a rank, in a binary tree of minima: a rank with
// a lane per peer (all-to-all at hundreds of ranks) finds its next task in O(log lanes) rather
// than scanning every lane at every event.
class LaneMinima {
 public:
  void reset(size_t lanes) {
    leaves_ = std::bit_ceil(std::max<size_t>(lanes, 1));
    tree_.assign(2 * leaves_, kNever);
  }
  void set(size_t lane, double at) {
    size_t i = leaves_ + lane;
    tree_[i] = at;
    for (i /= 2; i >= 1; i /= 2) tree_[i] = std::min(tree_[2 * i], tree_[2 * i + 1]);
  }
  double min() const { return tree_[1]; }
  /// The first lane whose time is at most `at` (one exists: min() <= at).
  size_t firstAtMost(double at) const {
    size_t i = 1;
    while (i < leaves_) i = tree_[2 * i] <= at ? 2 * i : 2 * i + 1;
    return i - leaves_;
  }

 private:
  size_t leaves_ = 1;
  std::vector<double> tree_;  ///< tree_[1] the root; lane l at tree_[leaves_ + l]
};

struct RankState {
  std::vector<size_t> next;  ///< per lane
  std::vector<uint8_t> sendDone;
  std::vector<uint8_t> recvDone;
  std::vector<uint32_t> ahead;     ///< per lane: steps past next whose sends went early
  std::vector<int64_t> aheadStep;  ///< per lane: the step whose send may go early, or -1
  size_t lanesLeft = 0;
  double freeAt = 0;
  bool dirty = true;
  double readyAt = kNever;  ///< earliest task of this rank, valid when !dirty
  int readyLane = -1;
  Part readyPart = Part::kWhole;
  size_t readyStep = 0;  ///< the ready task's step: next[readyLane], or an early send's
};

// Whether `bytes` at `ref` lie inside what `previous` (the lane's step before) wrote: they are
// still in this core's cache (a fold that keeps its running sum in Output reads back the chunk
// it wrote), so they cost no memory traffic.
bool justWritten(const Step* previous, const BufferRef& ref, uint32_t bytes) {
  if (previous == nullptr || previous->bytes == 0 || !stepShape(previous->op).writesDst) {
    return false;
  }
  const BufferRef& w = previous->dst;
  return bytes > 0 && ref.buffer == w.buffer && ref.offset >= w.offset &&
         ref.offset + bytes <= w.offset + previous->bytes;
}

// The executor's work for a step (executor.cc): (operands - 1) reductions into the first output,
// then copies of it to the other outputs; without reduction one copy per output. Every operand
// in a caller's buffer or scratch adds `user`, unless `previous` has just written it.
double bytesCost(const Step& s, const StepShape& shape, Part part, const ByteCosts& c,
                 const Step* previous = nullptr) {
  auto user = [&](bool touches, const BufferRef& ref, uint32_t bytes) {
    return touches && !justWritten(previous, ref, bytes) ? 1 : 0;
  };
  if (shape.independent) {
    // Send half: own buffer to a slot. Receive half: a slot (+ own operand) to own buffer.
    if (part == Part::kSendHalf) {
      return s.sendBytes * (c.copy + user(true, s.src, s.sendBytes) * c.user);
    }
    const int users = user(true, s.dst, s.bytes) + user(shape.reduces, s.src2, s.bytes);
    return s.bytes * (c.transfer + (shape.reduces ? c.reduce : c.copy) + users * c.user);
  }
  const int recvs = shape.recvs ? s.nrecv : 0;
  const int operands = int(shape.readsSrc) + int(shape.readsSrc2) + recvs;
  const int outputs = int(shape.writesDst) + (shape.sends ? s.nsend : 0);
  const int users = user(shape.readsSrc, s.src, s.bytes) + user(shape.readsSrc2, s.src2, s.bytes) +
                    user(shape.writesDst, s.dst, s.bytes);
  double perByte = recvs * c.transfer + users * c.user;
  if (shape.reduces) {
    perByte += std::max(0, operands - 1) * c.reduce + std::max(0, outputs - 1) * c.copy;
  } else {
    perByte += outputs * c.copy;
  }
  return s.bytes * perByte;
}

class Simulation {
 public:
  Simulation(const std::vector<Plan>& plans, const SimMachine& m, bool periodic,
             RankSymmetry symmetry = RankSymmetry::kShift)
      : plans_(plans), m_(m), periodic_(periodic), symmetry_(symmetry) {
    steps_.swap(spareSteps());
  }
  ~Simulation() {
    steps_.clear();
    steps_.swap(spareSteps());
    if (!denseFifos_.empty()) {
      for (uint64_t key : fifoKeys_) denseFifos_[key] = -1;
      denseFifos_.swap(spareFifoTable());
    }
  }
  Simulation(const Simulation&) = delete;
  Simulation& operator=(const Simulation&) = delete;

  static void releaseSpares() {
    std::vector<StepFifos>().swap(spareSteps());
    std::vector<int32_t>().swap(spareFifoTable());
  }

  Result<double> run() {
    RETURN_IF_ERROR(setUp());
    queue_.reset(plans_.size());
    for (int r = 0; r < n(); ++r) touched_.push_back(r);
    double finish = 0;
    for (;;) {
      for (int r : touched_) {
        RankState& rs = ranks_[r];
        if (rs.lanesLeft == 0) continue;
        refresh(r);
        queue_.set(r, rs.readyAt);
      }
      touched_.clear();
      if (queue_.empty()) break;
      if (queue_.topAt() == kNever) return deadlock();
      int r = queue_.top();
      queue_.remove(r);
      if (const int holder = coreHolder(r); holder >= 0) {
        touch(r);
        queue_.remove(holder);  // its turn is taken now
        r = holder;
      }
      finish = std::max(finish, execute(r));
    }
    return finish;
  }

 private:
  /// The ranks whose plans run: all of them, or one period.
  int n() const { return static_cast<int>(plans_.size()); }

  static std::vector<StepFifos>& spareSteps() {
    thread_local std::vector<StepFifos> spare;
    return spare;
  }
  static std::vector<int32_t>& spareFifoTable() {
    thread_local std::vector<int32_t> spare;
    return spare;
  }
  // Keys of one period's senders to every rank up to which the FIFOs are found in a table rather
  // than a hash map (4 MiB of it).
  static constexpr uint64_t kDenseFifoKeys = uint64_t{1} << 20;
  // Sizes the FIFO index to the plans' channels; a table where it is small enough.
  void setUpFifoIndex() {
    int highest = 0;
    for (const Plan& plan : plans_) {
      for (const Lane& lane : plan.lanes) highest = std::max(highest, lane.channel);
    }
    channels_ = uint64_t(highest) + 1;
    const uint64_t keys = uint64_t(n()) * uint64_t(world()) * channels_;
    if (keys > kDenseFifoKeys) return;
    denseFifos_.swap(spareFifoTable());
    if (denseFifos_.size() < keys) denseFifos_.resize(keys, -1);
  }
  StepFifos& stepAt(int r, size_t l, size_t s) {
    return steps_[firstStep_[firstLane_[size_t(r)] + l] + s];
  }
  const StepFifos& stepAt(int r, size_t l, size_t s) const {
    return steps_[firstStep_[firstLane_[size_t(r)] + l] + s];
  }
  int world() const { return m_.nranks; }

  Status setUp() {
    const bool fits = periodic_ ? !plans_.empty() && world() % n() == 0 : n() == world();
    if (!fits) {
      return internalError("simulatePlans: " + std::to_string(plans_.size()) + " plans for " +
                           std::to_string(world()) + " ranks");
    }
    if (periodic_ && symmetry_ == RankSymmetry::kXor &&
        !(std::has_single_bit(unsigned(n())) && std::has_single_bit(unsigned(world())))) {
      return internalError("simulatePlans: XOR symmetry over " + std::to_string(world()) +
                           " ranks in periods of " + std::to_string(n()));
    }
    if (m_.hostOf.size() != size_t(world())) {
      return internalError("simulatePlans: machine without a host for every rank");
    }
    std::vector<int> ranksOn(m_.hopUs.size(), 0);
    for (int h : m_.hostOf) {
      if (h < 0 || size_t(h) >= m_.cores.size() || size_t(h) >= m_.hopUs.size() ||
          (!m_.postUs.empty() && size_t(h) >= m_.postUs.size())) {
        return internalError("simulatePlans: host " + std::to_string(h) + " not described");
      }
      ++ranksOn[size_t(h)];
    }
    // Hosts with fewer cores than ranks schedule steps on cores; the others need not.
    coreFree_.resize(m_.cores.size());
    for (size_t h = 0; h < m_.cores.size(); ++h) {
      if (m_.cores[h] > 0 && m_.cores[h] < ranksOn[h])
        coreFree_[h].assign(size_t(m_.cores[h]), 0.0);
    }
    // A crowded host's ranks keep their cores: the one they are bound to, else (the scheduler
    // rarely moves a task that keeps running) its k-th rank runs on core k mod cores.
    if (!m_.coreOf.empty() && m_.coreOf.size() != size_t(world())) {
      return internalError("simulatePlans: machine without a core entry for every rank");
    }
    coreOf_.assign(plans_.size(), -1);
    coreRank_.resize(coreFree_.size());
    for (size_t h = 0; h < coreFree_.size(); ++h) coreRank_[h].assign(coreFree_[h].size(), -1);
    std::vector<int> placed(m_.cores.size(), 0);
    for (size_t r = 0; r < plans_.size(); ++r) {
      const size_t h = size_t(m_.hostOf[r]);
      if (coreFree_[h].empty()) continue;
      const int cores = int(coreFree_[h].size());
      const int given = m_.coreOf.empty() ? -1 : m_.coreOf[r];
      coreOf_[r] = given >= 0 ? given % cores : placed[h]++ % cores;
    }
    // Only where every core has as many ranks does a slot from a core-mate come out of the
    // core's caches (replayed sweeps of bound ranks: at 4 ranks on 2 cores the shared cache
    // shows, at 3 it does not).
    pairsStay_.assign(m_.cores.size(), false);
    for (size_t h = 0; h < m_.cores.size(); ++h) {
      pairsStay_[h] = !coreFree_[h].empty() && ranksOn[h] % int(coreFree_[h].size()) == 0;
    }
    setUpFifoIndex();
    windows_.assign(plans_.size(), 0);
    for (size_t r = 0; m_.shmBudgetBytes != 0 && r < plans_.size(); ++r) {
      windows_[r] = sendWindowFor(plans_[r], m_.shmBudgetBytes);
    }
    wireFree_.assign(static_cast<size_t>(std::max(0, m_.wires)), 0.0);
    ranks_.resize(plans_.size());
    // One table of every rank's steps, lane after lane.
    firstLane_.assign(plans_.size() + 1, 0);
    for (size_t r = 0; r < plans_.size(); ++r) {
      firstLane_[r + 1] = firstLane_[r] + plans_[r].lanes.size();
    }
    firstStep_.assign(firstLane_.back() + 1, 0);
    for (size_t r = 0, lane = 0; r < plans_.size(); ++r) {
      for (const Lane& l : plans_[r].lanes) {
        firstStep_[lane + 1] = firstStep_[lane] + l.steps.size();
        ++lane;
      }
    }
    steps_.resize(firstStep_.back());
    laneTasks_.resize(plans_.size());
    laneDirty_.resize(plans_.size());
    dirtyLanes_.resize(plans_.size());
    laneMinima_.resize(plans_.size());
    for (int r = 0; r < n(); ++r) {
      const Plan& plan = plans_[r];
      RankState& rs = ranks_[r];
      rs.next.assign(plan.lanes.size(), 0);
      rs.sendDone.assign(plan.lanes.size(), 0);
      rs.recvDone.assign(plan.lanes.size(), 0);
      rs.ahead.assign(plan.lanes.size(), 0);
      rs.aheadStep.assign(plan.lanes.size(), -1);
      laneTasks_[r].resize(plan.lanes.size());
      laneDirty_[r].assign(plan.lanes.size(), 1);
      dirtyLanes_[r].resize(plan.lanes.size());
      for (size_t l = 0; l < plan.lanes.size(); ++l) dirtyLanes_[r][l] = int32_t(l);
      laneMinima_[r].reset(plan.lanes.size());
      for (size_t l = 0; l < plan.lanes.size(); ++l) {
        const Lane& lane = plan.lanes[l];
        StepFifos* fifos = steps_.data() + firstStep_[firstLane_[size_t(r)] + l];
        for (size_t s = 0; s < lane.steps.size(); ++s) {
          const Step& step = lane.steps[s];
          const StepShape shape = stepShape(step.op);
          fifos[s].shape = shape;
          const double post = m_.postUs.empty() ? 0.0 : m_.postUs[size_t(m_.hostOf[r])];
          for (Part part : {Part::kWhole, Part::kSendHalf, Part::kRecvHalf}) {
            const int posts = part == Part::kRecvHalf || !shape.sends ? 0
                              : part == Part::kSendHalf               ? 1
                                                                      : step.nsend;
            const bool receives = part == Part::kRecvHalf || (part == Part::kWhole && shape.recvs);
            const double bytesUs =
                bytesCost(step, shape, part, m_.bytes, s > 0 ? &lane.steps[s - 1] : nullptr) -
                (receives ? sameCoreSenders(r, step) : 0) * step.bytes * m_.bytes.transfer;
            fifos[s].bytesUs[static_cast<int>(part)] = bytesUs;
            fifos[s].cpuUs[static_cast<int>(part)] = m_.stepUs + bytesUs + posts * post;
          }
          for (int i = 0; shape.recvs && i < step.nrecv; ++i) {
            ASSIGN_OR_RETURN(fifos[s].recv[i], fifoOf(step.recvPeers[i], r, lane.channel));
            noteLane(recvLaneOf_, fifos[s].recv[i], l);
          }
          for (int i = 0; shape.sends && i < step.nsend; ++i) {
            ASSIGN_OR_RETURN(fifos[s].send[i], fifoOf(r, step.sendPeers[i], lane.channel));
            noteLane(sendLaneOf_, fifos[s].send[i], l);
          }
        }
        skipEmpty(r, l);
        if (rs.next[l] < lane.steps.size()) ++rs.lanesLeft;
        findEarlySend(r, l);
      }
    }
    recvLaneOf_.resize(fifos_.size(), kNoLane);
    sendLaneOf_.resize(fifos_.size(), kNoLane);
    return okStatus();
  }

  // The rank that keeps rank r's core, or -1: on a crowded host a rank runs on until it has
  // nothing to do (it waits, then yields), so the core's last rank goes on while its next task
  // is ready by the time its current one ends.
  int coreHolder(int r) {
    if (coreOf_[size_t(r)] < 0) return -1;
    const size_t h = size_t(m_.hostOf[size_t(r)]);
    const size_t c = size_t(coreOf_[size_t(r)]);
    const int o = coreRank_[h][c];
    if (o < 0 || o == r || ranks_[size_t(o)].lanesLeft == 0) return -1;
    if (ranks_[size_t(o)].dirty) refresh(o);
    return ranks_[size_t(o)].readyAt <= coreFree_[h][c] ? o : -1;
  }

  // How many of the step's senders share rank r's core on a crowded host where ranks stay paired:
  // what they posted is in this core's caches already, so receiving it costs no cross-core
  // transfer.
  int sameCoreSenders(int r, const Step& step) const {
    if (coreOf_[size_t(r)] < 0 || !pairsStay_[size_t(m_.hostOf[size_t(r)])]) return 0;
    int same = 0;
    for (int i = 0; i < step.nrecv && i < kMaxStepPeers; ++i) {
      const int peer = step.recvPeers[i];
      if (peer < 0 || peer >= world()) continue;  // fifoOf reports it
      same += m_.hostOf[size_t(peer)] == m_.hostOf[size_t(r)] &&
              coreOf_[size_t(peer % n())] == coreOf_[size_t(r)];
    }
    return same;
  }

  Result<int32_t> fifoOf(int from, int to, int channel) {
    if (from < 0 || from >= world() || to < 0 || to >= world() || from == to) {
      return internalError(
          "simulatePlans: step names peer " +
          std::to_string(from == to ? to : (from < 0 || from >= world() ? from : to)));
    }
    // One period: the connector from a rank outside it is its image mapped back into it.
    const int offset = from - from % n();
    if (symmetry_ == RankSymmetry::kXor) {
      from ^= offset;
      to ^= offset;
    } else {
      from -= offset;
      to = (to - offset + world()) % world();
    }
    const uint64_t key =
        (uint64_t(from) * uint64_t(world()) + uint64_t(to)) * channels_ + uint64_t(channel);
    int32_t* slot = nullptr;
    if (!denseFifos_.empty()) {
      slot = &denseFifos_[key];
    } else {
      slot = &fifoIndex_.try_emplace(key, -1).first->second;
    }
    if (*slot < 0) {
      *slot = static_cast<int32_t>(fifos_.size());
      fifoKeys_.push_back(key);
      Fifo f;
      f.sender = from;
      f.receiver = to % n();
      f.linkFrom = from;
      f.linkTo = to;
      const bool withinHost =
          m_.shmBudgetBytes != 0 && m_.hostOf[size_t(from)] == m_.hostOf[size_t(to)];
      f.maxMessages = static_cast<size_t>(withinHost ? kHostFifoMessages : std::max(1, m_.nslots));
      f.ringBytes = withinHost ? windows_[size_t(from)] : 0;
      f.ringUsed.push_back(0);
      fifos_.push_back(std::move(f));
    }
    return *slot;
  }

  /// The link from one rank to another; false where the machine has none (all local).
  bool link(int from, int to, PairLink& out) const {
    if (!m_.links.empty()) {
      out = m_.links[size_t(from) * size_t(world()) + size_t(to)];
      return true;
    }
    if (!m_.linkOf) return false;
    out = m_.linkOf(from, to);
    return true;
  }

  // A dependent step of no bytes moves nothing (the executor completes it at once).
  void skipEmpty(int r, size_t l) {
    const std::vector<Step>& steps = plans_[r].lanes[l].steps;
    RankState& rs = ranks_[r];
    while (rs.next[l] < steps.size()) {
      const Step& s = steps[rs.next[l]];
      const StepShape shape = stepShape(s.op);
      const bool empty = shape.independent ? (s.bytes == 0 && s.sendBytes == 0) : s.bytes == 0;
      if (!empty) break;
      ++rs.next[l];
    }
  }

  // Like the executor's sendAhead: the first step past lane l's current one whose send may go
  // before the current step completes (a Send, or an independent step's send half, reading
  // nothing that the steps from the current one on still write), walking past steps that send
  // nothing; -1 when there is none.
  void findEarlySend(int r, size_t l) {
    RankState& rs = ranks_[r];
    rs.aheadStep[l] = -1;
    const std::vector<Step>& steps = plans_[r].lanes[l].steps;
    if (rs.next[l] >= steps.size()) return;
    const Step& current = steps[rs.next[l]];
    const StepShape& currentShape = stepAt(r, l, rs.next[l]).shape;
    if (currentShape.sends && !(currentShape.independent && rs.sendDone[l])) return;
    auto writes = [&](const Step& s, const StepShape& shape, const BufferRef& from,
                      uint32_t bytes) {
      return shape.writesDst && s.bytes > 0 && s.dst.buffer == from.buffer &&
             s.dst.offset < from.offset + bytes && from.offset < s.dst.offset + s.bytes;
    };
    auto readsPending = [&](size_t j, const BufferRef& from, uint32_t bytes) {
      if (!(currentShape.independent && rs.recvDone[l]) &&
          writes(current, currentShape, from, bytes)) {
        return true;
      }
      for (size_t k = rs.next[l] + 1; k < j; ++k) {
        if (writes(steps[k], stepAt(r, l, k).shape, from, bytes)) return true;
      }
      return false;
    };
    for (size_t j = rs.next[l] + 1 + rs.ahead[l];
         j < steps.size() && rs.ahead[l] < kMaxSendAheadSteps; ++j) {
      const Step& s = steps[j];
      const StepShape& shape = stepAt(r, l, j).shape;
      if (shape.sends) {
        if (!shape.independent && s.op != StepOp::kSend) return;
        const uint32_t bytes = shape.independent ? s.sendBytes : s.bytes;
        if (bytes == 0 || readsPending(j, s.src, bytes)) return;
        rs.aheadStep[l] = static_cast<int64_t>(j);
        return;
      }
      if (s.bytes == 0) return;
      ++rs.ahead[l];
    }
  }

  // Earliest time a part of step `at` of rank r's lane l (its current step, or an early send's)
  // could start as far as its FIFOs go, ignoring the rank and cores.
  double fifoReadyTime(int r, size_t l, Part part, size_t at) const {
    const StepFifos& f = stepAt(r, l, at);
    const StepShape& shape = f.shape;
    double t = 0;
    const bool recvs = part == Part::kRecvHalf || (part == Part::kWhole && shape.recvs);
    const bool sends = part == Part::kSendHalf || (part == Part::kWhole && shape.sends);
    for (int i = 0; recvs && i < kMaxStepPeers && f.recv[i] >= 0; ++i) {
      const Fifo& q = fifos_[f.recv[i]];
      if (q.released >= q.posted) return kNever;
      t = std::max(t, q.arrival[q.released]);
    }
    const Step& step = plans_[r].lanes[l].steps[at];
    const uint64_t need = ringPayloadBytes(part == Part::kSendHalf ? step.sendBytes : step.bytes);
    for (int i = 0; sends && i < kMaxStepPeers && f.send[i] >= 0; ++i) {
      const Fifo& q = fifos_[f.send[i]];
      const size_t first = q.mustFreeBefore(need);
      if (first > 0) {
        if (first > q.released) return kNever;
        t = std::max(t, q.freed[first - 1]);
      }
    }
    return t;
  }

  // Rank r's earliest task: its lanes' tasks (those whose lane changed costed anew), each no
  // earlier than the rank is free; the first in lane order, and within a lane in the order
  // laneTasks lists them, wins a tie.
  // Finds rank r's next task: of the tasks that could start at once (their FIFOs ready by the
  // time the rank is free) the first in lane order, else the one whose FIFOs are ready first.
  void refresh(int r) {
    RankState& rs = ranks_[r];
    std::vector<LaneTasks>& lanes = laneTasks_[r];
    LaneMinima& minima = laneMinima_[r];
    for (int32_t dirty : dirtyLanes_[r]) {
      const size_t l = size_t(dirty);
      laneTasks(r, l, lanes[l]);
      laneDirty_[r][l] = 0;
      double earliest = kNever;
      for (int i = 0; i < lanes[l].count; ++i) {
        earliest = std::min(earliest, lanes[l].tasks[i].fifoReadyAt);
      }
      minima.set(l, earliest);
    }
    dirtyLanes_[r].clear();
    rs.readyAt = kNever;
    rs.readyLane = -1;
    rs.dirty = false;
    if (minima.min() == kNever) return;
    const double at = std::max(rs.freeAt, minima.min());
    const size_t l = minima.firstAtMost(at);
    for (int i = 0; i < lanes[l].count; ++i) {
      const LaneTask& task = lanes[l].tasks[i];
      if (std::max(rs.freeAt, task.fifoReadyAt) == at) {
        rs.readyAt = at;
        rs.readyLane = static_cast<int>(l);
        rs.readyPart = task.part;
        rs.readyStep = task.step;
        return;
      }
    }
  }

  // The tasks lane l of rank r could run next: an early send first, then its current step (or
  // that step's halves), each with the time its FIFOs allow.
  void laneTasks(int r, size_t l, LaneTasks& out) const {
    const RankState& rs = ranks_[r];
    out.count = 0;
    if (rs.next[l] >= plans_[r].lanes[l].steps.size()) return;
    const Step& s = plans_[r].lanes[l].steps[rs.next[l]];
    const StepShape& shape = stepAt(r, l, rs.next[l]).shape;
    auto add = [&](Part part, size_t at) {
      out.tasks[out.count++] = LaneTask{fifoReadyTime(r, l, part, at), part, at};
    };
    if (rs.aheadStep[l] >= 0) {
      const size_t at = static_cast<size_t>(rs.aheadStep[l]);
      add(stepAt(r, l, at).shape.independent ? Part::kSendHalf : Part::kWhole, at);
    }
    if (!shape.independent) {
      add(Part::kWhole, rs.next[l]);
      return;
    }
    if (!rs.sendDone[l] && s.sendBytes > 0) add(Part::kSendHalf, rs.next[l]);
    if (!rs.recvDone[l] && s.bytes > 0) add(Part::kRecvHalf, rs.next[l]);
  }

  // Runs rank r's ready task; returns when it ends.
  double execute(int r) {
    RankState& rs = ranks_[r];
    const size_t l = static_cast<size_t>(rs.readyLane);
    const Part part = rs.readyPart;
    const bool early = rs.readyStep != rs.next[l];
    const Step& s = plans_[r].lanes[l].steps[rs.readyStep];
    const StepFifos& f = stepAt(r, l, rs.readyStep);
    const StepShape& shape = f.shape;
    const double ready = rs.readyAt;

    const size_t host = static_cast<size_t>(m_.hostOf[r]);
    const double hop = m_.hopUs[host];
    double start = ready;
    double cpuUs = f.cpuUs[static_cast<int>(part)];
    if (std::vector<double>& cores = coreFree_[host]; !cores.empty()) {
      const size_t c = size_t(coreOf_[r]);
      start = std::max(ready, cores[c]);
      // After another rank's step the core's caches hold that rank's data rather than ours.
      int& previous = coreRank_[host][c];
      if (previous >= 0 && previous != r) {
        cpuUs += f.bytesUs[static_cast<int>(part)] * (m_.switchFactor - 1);
      }
      previous = r;
      cores[c] = start + cpuUs;
    }
    const double end = start + cpuUs;
    rs.freeAt = end;
    rs.dirty = false;
    touchLane(r, int(l));

    const bool recvs = part == Part::kRecvHalf || (part == Part::kWhole && shape.recvs);
    const bool sends = part == Part::kSendHalf || (part == Part::kWhole && shape.sends);
    const uint32_t sentBytes = part == Part::kSendHalf ? s.sendBytes : s.bytes;
    for (int i = 0; sends && i < kMaxStepPeers && f.send[i] >= 0; ++i) {
      Fifo& q = fifos_[f.send[i]];
      double arrive = end + hop;
      if (PairLink pl; link(q.linkFrom, q.linkTo, pl)) {
        double leaves = end;
        if (pl.stage >= 0 && size_t(pl.stage) < wireFree_.size()) {
          double& stage = wireFree_[static_cast<size_t>(pl.stage)];
          stage = std::max(stage, end) + sentBytes * pl.stageUsPerByte;
          leaves = stage;
          arrive = stage + hop;
        }
        if (pl.wire >= 0 && size_t(pl.wire) < wireFree_.size()) {
          double& wire = wireFree_[static_cast<size_t>(pl.wire)];
          wire = std::max(wire, leaves) + sentBytes * pl.wireUsPerByte;
          arrive = wire + hop;
        }
        arrive += pl.latencyUs;
      }
      q.arrival.push_back(arrive);
      q.ringUsed.push_back(q.ringUsed.back() + ringPayloadBytes(sentBytes));
      ++q.posted;
      touchLane(q.receiver, recvLaneOf_[size_t(f.send[i])]);
      touchLane(r, sendLaneOf_[size_t(f.send[i])]);  // lane l, unless lanes share the FIFO
    }
    for (int i = 0; recvs && i < kMaxStepPeers && f.recv[i] >= 0; ++i) {
      Fifo& q = fifos_[f.recv[i]];
      PairLink pl;
      q.freed.push_back(end + hop + (link(q.linkTo, q.linkFrom, pl) ? pl.latencyUs : 0));
      ++q.released;
      touchLane(q.sender, sendLaneOf_[size_t(f.recv[i])]);
      touchLane(r, recvLaneOf_[size_t(f.recv[i])]);
    }

    if (early) {
      ++rs.ahead[l];
      findEarlySend(r, l);
      return end;
    }
    bool stepDone = true;
    if (part == Part::kSendHalf) rs.sendDone[l] = 1;
    if (part == Part::kRecvHalf) rs.recvDone[l] = 1;
    if (part != Part::kWhole) {
      stepDone = (rs.sendDone[l] || s.sendBytes == 0) && (rs.recvDone[l] || s.bytes == 0);
    }
    const std::vector<Step>& steps = plans_[r].lanes[l].steps;
    while (stepDone) {
      rs.sendDone[l] = rs.recvDone[l] = 0;
      ++rs.next[l];
      skipEmpty(r, l);
      stepDone = false;
      if (rs.next[l] >= steps.size()) {
        --rs.lanesLeft;
      } else if (rs.ahead[l] > 0) {
        // A step whose sends went early: a Send is done, an independent step has its send half.
        --rs.ahead[l];
        const StepOp op = steps[rs.next[l]].op;
        stepDone = op == StepOp::kSend;
        rs.sendDone[l] = stepAt(r, l, rs.next[l]).shape.independent;
      }
    }
    findEarlySend(r, l);
    return end;
  }

  Status deadlock() const {
    std::string where;
    for (int r = 0; r < n(); ++r) {
      const RankState& rs = ranks_[r];
      for (size_t l = 0; l < rs.next.size(); ++l) {
        const std::vector<Step>& steps = plans_[r].lanes[l].steps;
        if (rs.next[l] >= steps.size()) continue;
        where += " rank " + std::to_string(r) + " lane " + std::to_string(l) + " step " +
                 std::to_string(rs.next[l]) + " (" + std::string(stepOpName(steps[rs.next[l]].op)) +
                 ");";
      }
    }
    return internalError("simulatePlans: the plans deadlock:" + where);
  }

  // Lane l of rank r changed (kSharedFifo: some lane sharing a FIFO, so every lane may have).
  void touchLane(int r, int l) {
    if (l >= 0) {
      markLane(r, size_t(l));
    } else {
      for (size_t each = 0; each < laneDirty_[r].size(); ++each) markLane(r, each);
    }
    touch(r);
  }
  void markLane(int r, size_t l) {
    if (laneDirty_[r][l]) return;
    laneDirty_[r][l] = 1;
    dirtyLanes_[r].push_back(int32_t(l));
  }

  // The lane of `rank` that uses FIFO `fifo` (one side of it), noted in `laneOf`.
  void noteLane(std::vector<int32_t>& laneOf, int32_t fifo, size_t lane) {
    if (laneOf.size() <= size_t(fifo)) laneOf.resize(size_t(fifo) + 1, kNoLane);
    int32_t& at = laneOf[size_t(fifo)];
    at = at == kNoLane || at == int32_t(lane) ? int32_t(lane) : kSharedFifo;
  }

  void touch(int r) {
    if (ranks_[r].dirty) return;
    ranks_[r].dirty = true;
    touched_.push_back(r);
  }

  const std::vector<Plan>& plans_;
  const SimMachine& m_;
  bool periodic_ = false;                         ///< plans_ is one period of the machine's ranks
  RankSymmetry symmetry_ = RankSymmetry::kShift;  ///< how the other periods map onto it
  static constexpr int32_t kNoLane = -1;
  static constexpr int32_t kSharedFifo = -2;

  RankQueue queue_;
  std::vector<std::vector<double>> coreFree_;  ///< per crowded host: when each core frees
  std::vector<int> coreOf_;                    ///< per rank: its core on a crowded host, else -1
  std::vector<std::vector<int>> coreRank_;     ///< per crowded host and core: its last rank
  std::vector<bool> pairsStay_;                ///< per host: its ranks keep their core-mates
  std::vector<int> touched_;
  std::vector<RankState> ranks_;
  /// Every rank's steps (steps_[firstStep_[firstLane_[r] + l] + s]): one table, and on this
  /// thread the same one for every simulation, as a ring at hundreds of ranks has tens of
  /// thousands of steps that allocating afresh each time spent a tenth of the tuner's CPU on.
  std::vector<StepFifos> steps_;
  std::vector<size_t> firstLane_;
  std::vector<size_t> firstStep_;
  std::vector<std::vector<LaneTasks>> laneTasks_;  ///< per rank and lane, valid unless dirty
  std::vector<std::vector<uint8_t>> laneDirty_;    ///< per rank and lane: changed since costed
  std::vector<std::vector<int32_t>> dirtyLanes_;   ///< per rank: the lanes laneDirty_ marks
  std::vector<LaneMinima> laneMinima_;             ///< per rank: its lanes' earliest tasks
  std::vector<int32_t> recvLaneOf_;                ///< per FIFO: its receiver's lane using it
  std::vector<int32_t> sendLaneOf_;                ///< per FIFO: its sender's lane using it
  std::vector<Fifo> fifos_;
  /// FIFO by (sender, receiver, channel) key: a table where one period's senders to every rank
  /// fit kDenseFifoKeys (the thread's table, handed on: -1 but at fifoKeys_), else a map.
  std::vector<int32_t> denseFifos_;
  std::unordered_map<uint64_t, int32_t> fifoIndex_;
  std::vector<uint64_t> fifoKeys_;  ///< per FIFO: its key
  uint64_t channels_ = 1;           ///< one above the plans' highest channel
  std::vector<double> wireFree_;
  std::vector<uint64_t> windows_;  ///< per rank: its plan's send window within a host
};

}  // namespace

Result<double> simulatePlans(const std::vector<Plan>& plans, const SimMachine& machine) {
  return Simulation(plans, machine, false).run();
}

Result<double> simulatePeriodicPlans(const std::vector<Plan>& plans, const SimMachine& machine,
                                     RankSymmetry symmetry) {
  return Simulation(plans, machine, true, symmetry).run();
}

void releaseSimulationTables() { Simulation::releaseSpares(); }

uint64_t slotFootprint(const std::vector<Plan>& plans, const SimMachine& machine) {
  struct Use {
    uint64_t items = 0;
    uint64_t largest = 0;
    uint64_t bytes = 0;
    size_t sender = 0;
    bool withinHost = false;
  };
  std::unordered_map<uint64_t, Use> connectors;
  // Keys by (sender, receiver): receivers range over the machine (more than the plans when
  // they are one period of it).
  const uint64_t n = std::max<uint64_t>(plans.size(), uint64_t(std::max(1, machine.nranks)));
  for (size_t r = 0; r < plans.size(); ++r) {
    for (const Lane& lane : plans[r].lanes) {
      for (const Step& s : lane.steps) {
        const StepShape shape = stepShape(s.op);
        if (!shape.sends) continue;
        const uint32_t bytes = shape.independent ? s.sendBytes : s.bytes;
        if (bytes == 0) continue;
        for (int i = 0; i < s.nsend && i < kMaxStepPeers; ++i) {
          const int to = s.sendPeers[i];
          const uint64_t key =
              (uint64_t(r) * n + uint64_t(uint32_t(to))) * 4096u + uint64_t(lane.channel);
          Use& use = connectors[key];
          ++use.items;
          use.largest = std::max<uint64_t>(use.largest, bytes);
          use.bytes += ringPayloadBytes(bytes);
          use.sender = r;
          use.withinHost = machine.shmBudgetBytes != 0 && r < machine.hostOf.size() && to >= 0 &&
                           size_t(to) < machine.hostOf.size() &&
                           machine.hostOf[r] == machine.hostOf[size_t(to)];
        }
      }
    }
  }
  std::vector<uint64_t> windows(plans.size(), 0);
  for (size_t r = 0; machine.shmBudgetBytes != 0 && r < plans.size(); ++r) {
    windows[r] = sendWindowFor(plans[r], machine.shmBudgetBytes);
  }
  uint64_t total = 0;
  for (const auto& [key, use] : connectors) {
    if (!use.withinHost) {
      total += std::min<uint64_t>(use.items, uint64_t(std::max(1, machine.nslots))) * use.largest;
    } else if (use.largest <= kLinePayloadBytes) {
      total += std::min<uint64_t>(use.items, kHostFifoMessages) * use.largest;
    } else {
      total += std::min(use.bytes, windows[use.sender]);
    }
  }
  return total;
}

double stepCpuUs(const Step& step, const SimMachine& machine) {
  const StepShape shape = stepShape(step.op);
  if (!shape.independent)
    return machine.stepUs + bytesCost(step, shape, Part::kWhole, machine.bytes);
  return 2 * machine.stepUs + bytesCost(step, shape, Part::kSendHalf, machine.bytes) +
         bytesCost(step, shape, Part::kRecvHalf, machine.bytes);
}

}  // namespace braid
