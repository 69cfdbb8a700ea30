// The cost of one FIFO hop through shared memory, without the plan executor around it.
//
// BM_FifoPingPong: one side posts a slot of `bytes`, the other receives it (reading the payload)
// and posts one back. Time is per round trip; the `hop` counter is half of it: what one post +
// receive costs when the receiver is already polling. `lines` 1 publishes slots through their
// SlotLine as the shm transport does, 0 through the head counter as the proxies' FIFOs do. Both
// ends run in this process on two threads, or (BM_FifoPingPongProcess) in two processes sharing a
// /dev/shm segment as ranks do. BM_FifoStream: one-way throughput of a sender copying `bytes`
// into slots of `chunk` and a receiver copying them out, with `nslots` slots of pipelining
// (bytes_per_second counts the payload once). `writer` is how the sender fills a slot: 0 as a
// Send step (kernels::copy), 2 as a CopySend (kernels::copy2, a private copy beside the slot),
// 4 as a RecvReduceSend (kernels::reduceToAll, float sum of two inputs); 1 and 3 are the ways
// the last two once did it, for comparison: one pass of vector stores to both destinations
// (the copy2Cached kernel), and the reduce kernel storing into the slot itself.
//
// The echo side spins and yields after a while, so the numbers mean something only with a core
// per side: run it on a quiet machine, e.g.
//   braid_benchmarks --benchmark_filter='BM_Fifo' --benchmark_repetitions=5
#include <benchmark/benchmark.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "fifo/fifo.h"
#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/reduce.h"
#include "transport/shm/shm_segment.h"

namespace braid {
namespace {

constexpr uint32_t kSlotBytes = 1u << 20;
constexpr uint32_t kMetaBytes = 8192;

/// Two FIFOs (a->b, b->a) and both parties' Wakers in one shared-memory segment.
struct FifoPair {
  ShmSegment segment;
  uint32_t nslots = 0;
  bool lines = false;
  Waker* wakers = nullptr;  // [0] side a, [1] side b
  std::atomic<uint32_t>* stop = nullptr;

  /// lines: publish through SlotLines as the shm transport does; else through head.
  static std::unique_ptr<FifoPair> make(uint32_t nslots, bool lines) {
    auto p = std::make_unique<FifoPair>();
    p->nslots = nslots;
    p->lines = lines;
    const size_t fifoBytes = kMetaBytes + size_t{nslots} * kSlotBytes;
    Result<ShmSegment> seg = ShmSegment::create(makeSegmentName(), 4096 + 2 * fifoBytes);
    if (!seg.ok()) return nullptr;
    p->segment = std::move(seg).value();
    p->segment.unlink();
    if (!p->segment.reserve(0, p->segment.size()).ok()) return nullptr;
    p->wakers = new (p->segment.data()) Waker[2];
    p->stop = new (p->segment.data() + 2 * sizeof(Waker)) std::atomic<uint32_t>(0);
    for (int i = 0; i < 2; ++i) new (p->view(i).control) FifoControl();
    return p;
  }
  /// FIFO i: 0 carries a->b, 1 carries b->a.
  FifoView view(int i) const {
    char* base = segment.data() + 4096 + size_t(i) * (kMetaBytes + size_t{nslots} * kSlotBytes);
    FifoView v;
    v.control = reinterpret_cast<FifoControl*>(base);
    if (lines) {
      v.lines = reinterpret_cast<SlotLine*>(base + sizeof(FifoControl));
    } else {
      v.headers = reinterpret_cast<SlotHeader*>(base + sizeof(FifoControl));
    }
    v.data = base + kMetaBytes;
    v.nslots = nslots;
    v.slotBytes = kSlotBytes;
    return v;
  }
  /// Side 0 (a) sends on FIFO 0 and receives on FIFO 1; side 1 (b) the reverse.
  SendConnector sender(int side) { return SendConnector(view(side), &wakers[1 - side]); }
  RecvConnector receiver(int side) { return RecvConnector(view(1 - side), &wakers[1 - side]); }
};

/// Polls until something arrives; yields after a while so that a shared core does not stall.
template <class Poll>
auto waitFor(Poll poll, const std::atomic<uint32_t>* stop) -> decltype(poll()) {
  uint32_t spins = 0;
  for (;;) {
    if (auto r = poll()) return r;
    if (stop != nullptr && stop->load(std::memory_order_relaxed)) return {};
    if (++spins < 100) {  // ~5 us
      __builtin_ia32_pause();
    } else {
      sched_yield();
    }
  }
}

/// What every received slot is checked against.
CallDescriptor benchCall() {
  CallDescriptor call;
  call.count = 1;
  return call;
}

/// The echo side: returns every slot it gets, payload read and written like a copy step does.
void echo(FifoPair& pair, uint32_t bytes) {
  SendConnector send = pair.sender(1);
  RecvConnector recv = pair.receiver(1);
  std::vector<char> sink(bytes + 1);
  const CallDescriptor call = benchCall();
  for (;;) {
    const SlotHeader* h = waitFor([&] { return recv.tryPeek(); }, pair.stop);
    if (h == nullptr) return;
    const uint32_t n = h->bytes;
    kernels::copy(sink.data(), recv.slotData(), n);
    recv.release();
    char* slot = waitFor([&] { return send.trySlot(n); }, pair.stop);
    if (slot == nullptr) return;
    kernels::copy(slot, sink.data(), n);
    send.post(n, call);
  }
}

void pingPongLoop(benchmark::State& state, FifoPair& pair, uint32_t bytes) {
  SendConnector send = pair.sender(0);
  RecvConnector recv = pair.receiver(0);
  std::vector<char> payload(bytes + 1, 7), sink(bytes + 1);
  const CallDescriptor call = benchCall();
  for (auto _ : state) {
    char* slot = waitFor([&] { return send.trySlot(bytes); }, nullptr);
    kernels::copy(slot, payload.data(), bytes);
    send.post(bytes, call);
    const SlotHeader* h = waitFor([&] { return recv.tryPeek(); }, nullptr);
    if (h->bytes != bytes || !(h->call == call)) {
      state.SkipWithError("slot header corrupted");
      break;
    }
    kernels::copy(sink.data(), recv.slotData(), bytes);
    recv.release();
  }
  pair.stop->store(1);
  // Seconds per one-way hop (printed with an SI prefix: 70n = 70 ns).
  state.counters["hop"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * 2,
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * 2 * bytes);
}

void BM_FifoPingPong(benchmark::State& state) {
  const auto bytes = static_cast<uint32_t>(state.range(0));
  std::unique_ptr<FifoPair> pair = FifoPair::make(4, state.range(1) != 0);
  if (!pair) {
    state.SkipWithError("cannot create a shared-memory segment");
    return;
  }
  std::thread peer([&] { echo(*pair, bytes); });
  pingPongLoop(state, *pair, bytes);
  peer.join();
}
void pingPongArgs(benchmark::internal::Benchmark* b) {
  b->ArgNames({"bytes", "lines"})
      ->ArgsProduct({{8, 64, 512, 4 << 10, 32 << 10, 128 << 10}, {0, 1}})
      ->UseRealTime();
}
BENCHMARK(BM_FifoPingPong)->Apply(pingPongArgs);

void BM_FifoPingPongProcess(benchmark::State& state) {
  const auto bytes = static_cast<uint32_t>(state.range(0));
  std::unique_ptr<FifoPair> pair = FifoPair::make(4, state.range(1) != 0);
  if (!pair) {
    state.SkipWithError("cannot create a shared-memory segment");
    return;
  }
  const pid_t child = fork();
  if (child < 0) {
    state.SkipWithError("fork failed");
    return;
  }
  if (child == 0) {
    echo(*pair, bytes);
    _exit(0);
  }
  pingPongLoop(state, *pair, bytes);
  waitpid(child, nullptr, 0);
}
BENCHMARK(BM_FifoPingPongProcess)->Apply(pingPongArgs);

/// bytes moved one way in slots of `chunk` over `nslots`, copied in and out as ring steps do.
void BM_FifoStream(benchmark::State& state) {
  const auto total = static_cast<size_t>(state.range(0));
  const auto chunk = static_cast<uint32_t>(state.range(1));
  const auto nslots = static_cast<uint32_t>(state.range(2));
  const auto writer = state.range(3);
  std::unique_ptr<FifoPair> pair = FifoPair::make(nslots, true);
  if (!pair) {
    state.SkipWithError("cannot create a shared-memory segment");
    return;
  }
  std::vector<char> src(total, 3), dst(total), own(total);
  const kernels::Reducer sum(braidFloat32, braidSum, 2);
  const kernels::KernelTable& table = kernels::bestKernelTable();
  std::atomic<uint64_t> rounds{0}, finished{0};
  const CallDescriptor call = benchCall();
  // The receiver runs as many rounds as the benchmark loop; it learns of each through `rounds`.
  std::thread receiver([&] {
    RecvConnector recv = pair->receiver(1);
    uint64_t done = 0;
    for (;;) {
      while (rounds.load(std::memory_order_acquire) == done) {
        if (pair->stop->load(std::memory_order_relaxed)) return;
        __builtin_ia32_pause();
      }
      for (size_t off = 0; off < total; off += chunk) {
        if (waitFor([&] { return recv.tryPeek(); }, nullptr) == nullptr) return;
        kernels::copy(dst.data() + off, recv.slotData(), std::min<size_t>(chunk, total - off));
        recv.release();
      }
      finished.store(++done, std::memory_order_release);
    }
  });
  SendConnector send = pair->sender(0);
  for (auto _ : state) {
    rounds.fetch_add(1, std::memory_order_release);
    for (size_t off = 0; off < total; off += chunk) {
      const auto n = static_cast<uint32_t>(std::min<size_t>(chunk, total - off));
      char* slot = waitFor([&] { return send.trySlot(n); }, nullptr);
      const char* from = src.data() + off;
      char* mine = own.data() + off;
      const char* operands[2] = {from, mine};
      switch (writer) {
        case 0: kernels::copy(slot, from, n); break;
        case 1: table.copy2Cached(mine, slot, from, n); break;
        case 2: kernels::copy2(mine, slot, from, n); break;
        case 3: sum.reduce(slot, from, mine, n / sizeof(float)); break;
        default: kernels::reduceToAll(sum, &slot, 1, false, operands, 2, n, false); break;
      }
      send.post(n, call);
    }
  }
  // Let the receiver drain the last round before stopping it.
  while (finished.load(std::memory_order_acquire) < rounds.load()) sched_yield();
  pair->stop->store(1);
  receiver.join();
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(total));
}
BENCHMARK(BM_FifoStream)
    ->ArgNames({"bytes", "chunk", "nslots", "writer"})
    ->ArgsProduct(
        {{4 << 20}, {16 << 10, 64 << 10, 128 << 10, 512 << 10}, {2, 4, 8}, {0, 1, 2, 3, 4}})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace braid
