// Whether one copy per byte beats the FIFO's two where ranks outnumber cores: an all-to-all of
// 4 processes in which each reads its blocks straight from its peers' inputs - out of a shared
// mapping (what buffers registered in shared memory would allow) or with process_vm_readv (CMA,
// Open MPI's single copy) - timed by rank 0 between process-shared barriers. Nothing of the
// library runs here: compare busbw with braid-perf alltoall --np 4 (the FIFO path) at the same
// sizes, on the same machine.
//
// On a 2-vCPU VM, two runs (busbw GB/s at 1 / 4 / 16 MB per rank): shared mapping 4.2-4.3 /
// 3.4-5.0 / 2.1-3.0, process_vm_readv 2.9-3.0 / 3.1-3.2 / 1.7-1.9; in the same minutes braid-perf
// (FIFO, two copies) 2.0-2.5 / 2.1-2.5 / 1.3 and Open MPI's all-to-all with CMA 2.5 / 3.4 / 1.7.
// With four ranks on two cores the cores' total copy work sets the pace, so one copy pays.
//
// BM_SingleCopyAllToAll/<bytes per rank>/<0: shared mapping, 1: process_vm_readv>
//   braid_benchmarks --benchmark_filter=BM_SingleCopyAllToAll
#include <benchmark/benchmark.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <vector>

namespace braid {
namespace {

constexpr int kRanks = 4;

struct Shared {
  pthread_barrier_t barrier;
  pid_t pids[kRanks];
  int failed;
};

/// One all-to-all of rank `rank`: its output block p is peer p's input block `rank`.
bool allToAll(int rank, bool cma, const Shared& shared, char* const* inputs, char* output,
              size_t block) {
  for (int step = 0; step < kRanks; ++step) {
    const int peer = (rank + step) % kRanks;  // spread the readers over the sources
    char* to = output + size_t(peer) * block;
    const char* from = inputs[peer] + size_t(rank) * block;
    if (!cma || peer == rank) {
      std::memcpy(to, from, block);
      continue;
    }
    iovec local{to, block};
    iovec remote{const_cast<char*>(from), block};
    if (process_vm_readv(shared.pids[peer], &local, 1, &remote, 1, 0) !=
        static_cast<ssize_t>(block)) {
      return false;
    }
  }
  return true;
}

void BM_SingleCopyAllToAll(benchmark::State& state) {
  const auto bytes = static_cast<size_t>(state.range(0));
  const bool cma = state.range(1) == 1;
  const size_t block = bytes / kRanks;
  auto* shared = static_cast<Shared*>(
      mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  // Inputs: one shared mapping all ranks read, or each rank's private copy (the same address in
  // every process after the fork) that peers read with process_vm_readv.
  char* inputMemory =
      static_cast<char*>(mmap(nullptr, bytes * kRanks, PROT_READ | PROT_WRITE,
                              (cma ? MAP_PRIVATE : MAP_SHARED) | MAP_ANONYMOUS, -1, 0));
  if (shared == MAP_FAILED || inputMemory == MAP_FAILED) {
    state.SkipWithError("mmap failed");
    return;
  }
  pthread_barrierattr_t attr;
  pthread_barrierattr_init(&attr);
  pthread_barrierattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
  pthread_barrier_init(&shared->barrier, &attr, kRanks);
  shared->failed = 0;
  char* inputs[kRanks];
  for (int r = 0; r < kRanks; ++r) inputs[r] = inputMemory + size_t(r) * bytes;
  const int64_t rounds = state.max_iterations + 1;  // one warm-up
  auto run = [&](int rank) {
    std::vector<char> output(bytes, 0);
    std::memset(inputs[rank], rank + 1, bytes);  // a private copy is this process's own
    shared->pids[rank] = getpid();
    pthread_barrier_wait(&shared->barrier);
    for (int64_t i = 0; i < rounds; ++i) {
      pthread_barrier_wait(&shared->barrier);
      if (!allToAll(rank, cma, *shared, inputs, output.data(), block)) shared->failed = 1;
      pthread_barrier_wait(&shared->barrier);
    }
  };
  std::vector<pid_t> children;
  for (int r = 1; r < kRanks; ++r) {
    const pid_t child = fork();
    if (child == 0) {
      run(r);
      _exit(0);
    }
    children.push_back(child);
  }
  // Rank 0 is this process: the same rounds, the timed ones reported.
  std::vector<char> output(bytes, 0);
  std::memset(inputs[0], 1, bytes);
  shared->pids[0] = getpid();
  pthread_barrier_wait(&shared->barrier);
  pthread_barrier_wait(&shared->barrier);
  if (!allToAll(0, cma, *shared, inputs, output.data(), block)) shared->failed = 1;
  pthread_barrier_wait(&shared->barrier);
  for (auto _ : state) {
    pthread_barrier_wait(&shared->barrier);
    const auto start = std::chrono::steady_clock::now();
    if (!allToAll(0, cma, *shared, inputs, output.data(), block)) shared->failed = 1;
    pthread_barrier_wait(&shared->barrier);
    state.SetIterationTime(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  for (pid_t child : children) waitpid(child, nullptr, 0);
  if (shared->failed != 0) state.SkipWithError("process_vm_readv failed (ptrace permission?)");
  // nccl-tests' busbw of an all-to-all: bytes per rank x (n - 1) / n per second.
  state.counters["busbw"] = benchmark::Counter(double(bytes) * (kRanks - 1) / kRanks,
                                               benchmark::Counter::kIsIterationInvariantRate);
  pthread_barrier_destroy(&shared->barrier);
  munmap(inputMemory, bytes * kRanks);
  munmap(shared, sizeof(Shared));
}
BENCHMARK(BM_SingleCopyAllToAll)
    ->ArgsProduct({{1 << 20, 4 << 20, 16 << 20}, {0, 1}})
    ->Iterations(20)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace braid
