// braid-peer-gloo: braid-perf's sweep over Gloo's collectives on its TCP transport. It forks
// --np local rank processes (default 4) that meet through a gloo FileStore in a fresh temporary
// directory and connect a full mesh over 127.0.0.1.
//
// Allreduce runs Gloo's default entry point (gloo::allreduce) or one of its algorithm classes
// (--algo ring, ring_chunked, halving_doubling, bcube). The classes reduce in place: out of place
// they first copy sendbuff to recvbuff, as a caller of them has to.
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/allreduce_bcube.h>
#include <gloo/allreduce_halving_doubling.h>
#include <gloo/allreduce_ring.h>
#include <gloo/allreduce_ring_chunked.h>
#include <gloo/alltoall.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/config.h>
#include <gloo/math.h>
#include <gloo/reduce.h>
#include <gloo/reduce_scatter.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>
#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "perf/peers/peer_bench.h"
#include "perf/perf_launch.h"
#include "perf/perf_types.h"

namespace braid::perf::peers {
namespace {

constexpr int kDefaultProcesses = 4;
/// Gloo's own timeout per operation when -T is not given: long enough for 256 MB on a busy host.
constexpr std::chrono::seconds kDefaultTimeout{600};
constexpr std::chrono::milliseconds kFailureGrace{15000};
/// Tags of the helper operations, apart from the measured ones (tag 0).
constexpr uint32_t kAllGatherTag = 1;
constexpr uint32_t kBarrierTag = 2;

/// The --algo values for allreduce; "" and "default" mean gloo::allreduce.
constexpr const char* kAllReduceAlgorithms[] = {"default", "ring", "ring_chunked",
                                                "halving_doubling", "bcube"};

/// Runs a gloo call, turning its exceptions into a Outcome (Gloo reports every error by throwing).
template <typename F>
Outcome guarded(const char* what, F&& body) {
  try {
    body();
    return Outcome();
  } catch (const std::exception& e) {
    return failure(std::string(what) + ": " + e.what());
  }
}

/// Page-aligned scratch memory for the copies some placements need.
struct Scratch {
  struct Free {
    void operator()(unsigned char* p) const { std::free(p); }
  };
  std::unique_ptr<unsigned char, Free> data;
  static Expected<std::shared_ptr<Scratch>> allocate(size_t bytes) {
    auto s = std::make_shared<Scratch>();
    constexpr size_t kAlign = 4096;
    const size_t rounded = std::max<size_t>((bytes + kAlign - 1) / kAlign * kAlign, kAlign);
    s->data.reset(static_cast<unsigned char*>(std::aligned_alloc(kAlign, rounded)));
    if (!s->data) return failure("cannot allocate " + std::to_string(bytes) + " bytes");
    std::memset(s->data.get(), 0, rounded);
    return s;
  }
};

template <typename T>
Expected<gloo::AllreduceOptions::Func> reduceFunction(braidRedOp_t op) {
  using Fn = void (*)(void*, const void*, const void*, size_t);
  switch (op) {
    case braidSum: return gloo::AllreduceOptions::Func(static_cast<Fn>(&gloo::sum<T>));
    case braidProd: return gloo::AllreduceOptions::Func(static_cast<Fn>(&gloo::product<T>));
    case braidMax: return gloo::AllreduceOptions::Func(static_cast<Fn>(&gloo::max<T>));
    case braidMin: return gloo::AllreduceOptions::Func(static_cast<Fn>(&gloo::min<T>));
    default: break;
  }
  return failure("Gloo has no " + std::string(opName(op)) + " reduction");
}

template <typename T>
Expected<const gloo::ReductionFunction<T>*> reductionClass(braidRedOp_t op) {
  switch (op) {
    case braidSum: return gloo::ReductionFunction<T>::sum;
    case braidProd: return gloo::ReductionFunction<T>::product;
    case braidMax: return gloo::ReductionFunction<T>::max;
    case braidMin: return gloo::ReductionFunction<T>::min;
    default: break;
  }
  return failure("Gloo has no " + std::string(opName(op)) + " reduction");
}

class GlooComm final : public PeerComm {
 public:
  GlooComm(std::shared_ptr<gloo::Context> context, std::string algo)
      : context_(std::move(context)), algo_(std::move(algo)) {}

  int rank() const override { return context_->rank; }
  int size() const override { return context_->size; }

  std::string description() const override {
    return "Gloo " + std::to_string(GLOO_VERSION_MAJOR) + "." + std::to_string(GLOO_VERSION_MINOR) +
           "." + std::to_string(GLOO_VERSION_PATCH) + ", tcp transport over 127.0.0.1, algorithm " +
           (algo_.empty() ? "default" : algo_);
  }

  Outcome allGather(const void* mine, void* all, size_t bytes) override {
    return guarded("gloo::allgather", [&] {
      gloo::AllgatherOptions opts(context_);
      opts.setInput(static_cast<char*>(const_cast<void*>(mine)), bytes);
      opts.setOutput(static_cast<char*>(all), bytes * static_cast<size_t>(size()));
      opts.setTag(kAllGatherTag);
      gloo::allgather(opts);
    });
  }

  Outcome barrier() override {
    return guarded("gloo::barrier", [&] {
      gloo::BarrierOptions opts(context_);
      opts.setTag(kBarrierTag);
      gloo::barrier(opts);
    });
  }

  uint64_t inPlaceRecvOffset(const CheckSpec& spec) const override {
    // Gloo's reduce-scatter leaves this rank's block at the start of the buffer.
    if (spec.coll == PerfCollective::kReduceScatter) return 0;
    return PeerComm::inPlaceRecvOffset(spec);
  }

  Expected<PeerRunner> prepare(const PeerOp& op) override {
    // An empty message moves nothing; gloo::allgather divides by its element count.
    if (op.spec.shape.sendCount == 0 && op.spec.shape.recvCount == 0) {
      return PeerRunner([] { return Outcome(); });
    }
    switch (op.spec.type) {
      case braidFloat32: return prepareTyped<float>(op);
      case braidFloat64: return prepareTyped<double>(op);
      default: break;
    }
    return failure("the Gloo program measures float and double only");
  }

 private:
  template <typename T>
  Expected<PeerRunner> prepareTyped(const PeerOp& op) {
    const CheckSpec& c = op.spec;
    T* send = reinterpret_cast<T*>(op.send);
    T* recv = reinterpret_cast<T*>(op.recv);
    const size_t count = c.shape.paramCount;
    const bool inPlace = op.inPlace;
    const bool isRoot = c.rank == c.root;
    switch (c.coll) {
      case PerfCollective::kAllReduce: return prepareAllReduce<T>(op);
      case PerfCollective::kBroadcast: {
        auto opts = std::make_shared<gloo::BroadcastOptions>(context_);
        if (!inPlace && isRoot) opts->setInput(send, count);
        opts->setOutput(recv, count);
        opts->setRoot(c.root);
        return PeerRunner(
            [opts] { return guarded("gloo::broadcast", [&] { gloo::broadcast(*opts); }); });
      }
      case PerfCollective::kReduce: {
        PERF_ASSIGN(gloo::ReduceOptions::Func fn, reduceFunction<T>(c.op));
        auto opts = std::make_shared<gloo::ReduceOptions>(context_);
        if (!inPlace) opts->setInput(send, count);
        opts->setOutput(recv, count);
        opts->setRoot(c.root);
        opts->setReduceFunction(fn);
        return PeerRunner([opts] { return guarded("gloo::reduce", [&] { gloo::reduce(*opts); }); });
      }
      case PerfCollective::kAllGather: {
        // In place, gloo::allgather takes this rank's block from its slot of the output.
        auto opts = std::make_shared<gloo::AllgatherOptions>(context_);
        if (!inPlace) opts->setInput(send, count);
        opts->setOutput(recv, count * static_cast<size_t>(size()));
        return PeerRunner(
            [opts] { return guarded("gloo::allgather", [&] { gloo::allgather(*opts); }); });
      }
      case PerfCollective::kAllToAll: {
        // gloo::alltoall needs distinct buffers: in place, the input is first copied aside.
        const size_t total = count * static_cast<size_t>(size());
        std::shared_ptr<Scratch> scratch;
        T* input = send;
        if (inPlace) {
          PERF_ASSIGN(scratch, Scratch::allocate(total * sizeof(T)));
          input = reinterpret_cast<T*>(scratch->data.get());
        }
        auto opts = std::make_shared<gloo::AlltoallOptions>(context_);
        opts->setInput(input, total);
        opts->setOutput(recv, total);
        return PeerRunner([opts, scratch, input, recv, total] {
          if (scratch) std::memcpy(input, recv, total * sizeof(T));
          return guarded("gloo::alltoall", [&] { gloo::alltoall(*opts); });
        });
      }
      case PerfCollective::kReduceScatter: return prepareReduceScatter<T>(op);
      case PerfCollective::kSendRecv: break;
    }
    return failure("collective not measured over Gloo");
  }

  template <typename T>
  Expected<PeerRunner> prepareAllReduce(const PeerOp& op) {
    const CheckSpec& c = op.spec;
    T* send = reinterpret_cast<T*>(op.send);
    T* recv = reinterpret_cast<T*>(op.recv);
    const size_t count = c.shape.paramCount;
    if (algo_.empty() || algo_ == "default") {
      PERF_ASSIGN(gloo::AllreduceOptions::Func fn, reduceFunction<T>(c.op));
      auto opts = std::make_shared<gloo::AllreduceOptions>(context_);
      if (!op.inPlace) opts->setInput(send, count);
      opts->setOutput(recv, count);
      opts->setReduceFunction(fn);
      return PeerRunner(
          [opts] { return guarded("gloo::allreduce", [&] { gloo::allreduce(*opts); }); });
    }
    if (count > static_cast<size_t>(INT32_MAX)) return failure("count above INT_MAX");
    PERF_ASSIGN(const gloo::ReductionFunction<T>* fn, reductionClass<T>(c.op));
    const std::vector<T*> ptrs = {recv};
    const int n = static_cast<int>(count);
    std::shared_ptr<gloo::Algorithm> algorithm;
    Outcome built = guarded("constructing the allreduce", [&] {
      if (algo_ == "ring") {
        algorithm = std::make_shared<gloo::AllreduceRing<T>>(context_, ptrs, n, fn);
      } else if (algo_ == "ring_chunked") {
        algorithm = std::make_shared<gloo::AllreduceRingChunked<T>>(context_, ptrs, n, fn);
      } else if (algo_ == "halving_doubling") {
        algorithm = std::make_shared<gloo::AllreduceHalvingDoubling<T>>(context_, ptrs, n, fn);
      } else if (algo_ == "bcube") {
        algorithm = std::make_shared<gloo::AllreduceBcube<T>>(context_, ptrs, n, fn);
      }
    });
    PERF_TRY(built);
    if (!algorithm) return failure("unknown Gloo allreduce algorithm '" + algo_ + "'");
    const bool copy = !op.inPlace;
    const size_t bytes = count * sizeof(T);
    return PeerRunner([algorithm, copy, send, recv, bytes] {
      if (copy) std::memcpy(recv, send, bytes);
      return guarded("allreduce", [&] { algorithm->run(); });
    });
  }

  template <typename T>
  Expected<PeerRunner> prepareReduceScatter(const PeerOp& op) {
    // Gloo's reduce-scatter class reduces the whole input in place and leaves this rank's block
    // at the start of the buffer; out of place it works on a copy of sendbuff.
    const CheckSpec& c = op.spec;
    const size_t block = c.shape.paramCount;
    const size_t total = c.shape.sendCount;
    if (total > static_cast<size_t>(INT32_MAX)) return failure("count above INT_MAX");
    PERF_ASSIGN(const gloo::ReductionFunction<T>* fn, reductionClass<T>(c.op));
    T* send = reinterpret_cast<T*>(op.send);
    T* recv = reinterpret_cast<T*>(op.recv);
    std::shared_ptr<Scratch> scratch;
    T* work = send;  // in place, sendbuff is the whole buffer
    if (!op.inPlace) {
      PERF_ASSIGN(scratch, Scratch::allocate(total * sizeof(T)));
      work = reinterpret_cast<T*>(scratch->data.get());
    }
    const std::vector<int> recvElems(static_cast<size_t>(size()), static_cast<int>(block));
    std::shared_ptr<gloo::Algorithm> algorithm;
    PERF_TRY(guarded("constructing the reduce-scatter", [&] {
      algorithm = std::make_shared<gloo::ReduceScatterHalvingDoubling<T>>(
          context_, std::vector<T*>{work}, static_cast<int>(total), recvElems, fn);
    }));
    return PeerRunner([algorithm, scratch, send, recv, work, block, total] {
      if (scratch) std::memcpy(work, send, total * sizeof(T));
      Outcome status = guarded("reduce-scatter", [&] { algorithm->run(); });
      if (scratch && status.ok()) std::memcpy(recv, work, block * sizeof(T));
      return status;
    });
  }

  std::shared_ptr<gloo::Context> context_;
  std::string algo_;
};

Outcome checkAlgorithm(const PerfOptions& options) {
  if (options.algo.empty() || options.algo == "default") return Outcome();
  if (options.collective != PerfCollective::kAllReduce) {
    return failure("--algo: only allreduce has a choice of Gloo algorithm");
  }
  for (const char* name : kAllReduceAlgorithms) {
    if (options.algo == name) return Outcome();
  }
  return failure("--algo: unknown Gloo allreduce algorithm '" + options.algo + "'");
}

/// One rank process: rendezvous through the store directory, connect, sweep.
int rankMain(const PerfOptions& options, int rank, int size, const std::string& storeDir,
             const std::string& program) {
  std::shared_ptr<gloo::rendezvous::Context> context;
  Outcome connected = guarded("connecting", [&] {
    gloo::transport::tcp::attr attr;
    attr.hostname = "127.0.0.1";
    std::shared_ptr<gloo::transport::Device> device = gloo::transport::tcp::CreateDevice(attr);
    gloo::rendezvous::FileStore store(storeDir);
    context = std::make_shared<gloo::rendezvous::Context>(rank, size);
    const auto timeout =
        options.timeoutSeconds >= 0
            ? std::chrono::milliseconds(static_cast<int64_t>(options.timeoutSeconds * 1000))
            : std::chrono::milliseconds(kDefaultTimeout);
    context->setTimeout(timeout);
    context->connectFullMesh(store, device);
  });
  if (!connected.ok()) {
    std::fprintf(stderr, "%s: rank %d: %s\n", program.c_str(), rank, connected.message().c_str());
    return 2;
  }
  GlooComm comm(context, options.algo);
  Expected<int> rc = runPeerSweep(comm, options, program);
  if (!rc.ok()) {
    std::fprintf(stderr, "%s: rank %d: %s\n", program.c_str(), rank,
                 rc.outcome().message().c_str());
    std::fflush(stderr);
    std::fflush(stdout);
    // The other ranks wait in a collective this one will not join: leave without unwinding.
    _exit(2);
  }
  return rc.value();
}

constexpr const char* kUsage =
    "\nGloo: --np N local rank processes (default 4) meet through a FileStore in a temporary\n"
    "directory and connect over TCP on 127.0.0.1. --algo picks the allreduce: default\n"
    "(gloo::allreduce), ring, ring_chunked, halving_doubling or bcube. Types: float, double.\n"
    "On loopback, run it in a network namespace whose lo route has quickack 1 (compare.py\n"
    "does): delayed ACKs otherwise stall small messages for tens of milliseconds.\n";

int glooMain(int argc, char** argv) {
  PerfOptions options;
  int exitStatus = 0;
  if (!parsePeerArgs(argc, argv, kUsage, &options, &exitStatus)) return exitStatus;
  const std::string program = std::filesystem::path(argc > 0 ? argv[0] : "gloo").filename();
  if (Outcome s = checkAlgorithm(options); !s.ok()) {
    std::fprintf(stderr, "%s: %s\n", program.c_str(), s.message().c_str());
    return 2;
  }
  const int nprocs = options.nprocs > 0 ? options.nprocs : kDefaultProcesses;
  if (collectiveHasRoot(options.collective) && options.root >= nprocs) {
    std::fprintf(stderr, "%s: -r %d is not a rank of %d\n", program.c_str(), options.root, nprocs);
    return 2;
  }
  std::string storeDir;
  auto makeStore = [&]() -> Expected<std::string> {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "braid-peer-gloo.XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) return errnoFailure("mkdtemp " + pattern, errno);
    storeDir = pattern;
    return pattern;
  };
  auto child = [&](int rank, const std::string& dir) {
    return rankMain(options, rank, nprocs, dir, program);
  };
  Expected<int> rc = runProcesses(nprocs, makeStore, child, kFailureGrace);
  if (!storeDir.empty()) {
    std::error_code ignored;
    std::filesystem::remove_all(storeDir, ignored);
  }
  if (!rc.ok()) {
    std::fprintf(stderr, "%s: %s\n", program.c_str(), rc.outcome().message().c_str());
    return 2;
  }
  return rc.value();
}

}  // namespace
}  // namespace braid::perf::peers

int main(int argc, char** argv) { return braid::perf::peers::glooMain(argc, argv); }
