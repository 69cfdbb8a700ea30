// Socket transport latency and bandwidth between two ranks of this process, through the real
// proxy threads and TCP: a ping-pong of one slot (half the round trip is the one-way latency)
// and a one-way stream of slots. Over loopback by default; with
// BRAID_BENCH_NETNS=<ns0>,<ns1> (root, namespaces made with `ip netns add`, each with a
// non-loopback interface) the two ranks live in those network namespaces, e.g. joined by veth.
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>

#include "base/config.h"
#include "base/log.h"
#include "bootstrap/bootstrap.h"
#include "transport/socket/socket_transport.h"

namespace braid {
namespace {

std::string namespaceOf(int rank) {
  const char* spec = std::getenv("BRAID_BENCH_NETNS");
  if (spec == nullptr) return "";
  std::string s(spec);
  const size_t comma = s.find(',');
  if (comma == std::string::npos) return "";
  return rank == 0 ? s.substr(0, comma) : s.substr(comma + 1);
}

bool enterNamespace(int rank) {
  const std::string ns = namespaceOf(rank);
  if (ns.empty()) return true;
  const int fd = ::open(("/run/netns/" + ns).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = ::setns(fd, CLONE_NEWNET) == 0;
  ::close(fd);
  return ok;
}

/// One rank: its bootstrap and socket transport to the other.
struct Rank {
  Config config;
  Logger logger{LogLevel::kWarn, kAllSubsys, ""};
  std::vector<PeerInfo> peers = std::vector<PeerInfo>(2);
  Waker waker;
  std::atomic<bool> abort{false};
  std::unique_ptr<Bootstrap> bootstrap;
  std::unique_ptr<SocketTransport> transport;
  SendConnector send;
  RecvConnector recv;
};

/// Two connected ranks, rank 1 served by a thread running `peer` until the benchmark ends.
class Pair {
 public:
  explicit Pair(int nstreams) {
    const bool netns = !namespaceOf(0).empty();
    for (Rank& r : ranks_) {
      r.config.slotBytes = 4 << 20;
      r.config.nslots = 4;
      r.config.socketNstreams = nstreams;
      r.config.socketIfname = netns ? "" : "lo";
    }
    std::atomic<int> stage{0};
    braidUniqueId id{};
    auto setUp = [&](int me) {
      if (!enterNamespace(me)) return;
      if (me == 0) {
        Result<braidUniqueId> made = startBootstrapRoot(netns ? "" : "lo", 30);
        if (!made.ok()) return;
        id = made.value();
        stage.store(1);
      }
      while (stage.load() == 0) std::this_thread::yield();
      Rank& r = ranks_[me];
      WaitPolicy wait;
      wait.timeoutSeconds = 30;
      Result<std::unique_ptr<Bootstrap>> b = Bootstrap::join(id, me, 2, netns ? "" : "lo", wait);
      if (!b.ok()) return;
      r.bootstrap = std::move(b).value();
      TransportContext ctx;
      ctx.bootstrap = r.bootstrap.get();
      ctx.config = &r.config;
      ctx.logger = &r.logger;
      ctx.rank = me;
      ctx.nranks = 2;
      ctx.peers = &r.peers;
      ctx.rankWaker = &r.waker;
      ctx.abort = &r.abort;
      Result<std::unique_ptr<SocketTransport>> t = SocketTransport::create(ctx, {true, true});
      if (!t.ok()) return;
      r.transport = std::move(t).value();
      r.send = r.transport->sendConnector(1 - me, 0).value();
      r.recv = r.transport->recvConnector(1 - me, 0).value();
    };
    std::thread other(setUp, 1);
    setUp(0);
    other.join();
    ok_ = ranks_[0].transport && ranks_[1].transport;
  }
  ~Pair() {
    // Whatever is still in flight is nobody's business: close without flushing.
    for (Rank& r : ranks_) r.abort.store(true);
    stop_.store(true);
    if (peer_.joinable()) peer_.join();
  }
  bool ok() const { return ok_; }
  Rank& rank(int r) { return ranks_[r]; }
  /// Runs f(rank 1) on a thread until the pair is destroyed; f returns false to stop.
  template <typename F>
  void serve(F f) {
    peer_ = std::thread([this, f]() mutable {
      while (!stop_.load(std::memory_order_relaxed) && f(ranks_[1], stop_)) {
      }
    });
  }

 private:
  Rank ranks_[2];
  bool ok_ = false;
  std::atomic<bool> stop_{false};
  std::thread peer_;
};

void postWait(SendConnector& s, uint32_t bytes, const std::atomic<bool>* stop = nullptr) {
  char* slot;
  while ((slot = s.trySlot()) == nullptr) {
    if (stop != nullptr && stop->load(std::memory_order_relaxed)) return;
    sched_yield();  // the proxies may share this core
  }
  s.post(bytes, CallDescriptor{});
}

bool takeWait(RecvConnector& r, const std::atomic<bool>* stop = nullptr) {
  while (r.tryPeek() == nullptr) {
    if (stop != nullptr && stop->load(std::memory_order_relaxed)) return false;
    sched_yield();
  }
  r.release();
  return true;
}

void BM_SocketPingPong(benchmark::State& state) {
  const auto bytes = static_cast<uint32_t>(state.range(0));
  Pair pair(1);
  if (!pair.ok()) return state.SkipWithError("cannot connect the ranks");
  pair.serve([bytes](Rank& r, const std::atomic<bool>& stop) {
    if (!takeWait(r.recv, &stop)) return false;
    postWait(r.send, bytes, &stop);
    return true;
  });
  Rank& me = pair.rank(0);
  for (auto _ : state) {
    postWait(me.send, bytes);
    takeWait(me.recv);
  }
  // Seconds per one-way trip: half a round trip.
  state.counters["one_way"] =
      benchmark::Counter(2.0 * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_SocketPingPong)->Arg(8)->Arg(4096)->Arg(65536)->UseRealTime();

void BM_SocketStream(benchmark::State& state) {
  const auto bytes = static_cast<uint32_t>(state.range(0));
  const auto streams = static_cast<int>(state.range(1));
  Pair pair(streams);
  if (!pair.ok()) return state.SkipWithError("cannot connect the ranks");
  pair.serve([](Rank& r, const std::atomic<bool>& stop) { return takeWait(r.recv, &stop); });
  Rank& me = pair.rank(0);
  for (auto _ : state) postWait(me.send, bytes);
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * bytes);
}
BENCHMARK(BM_SocketStream)
    ->Args({64 << 10, 1})
    ->Args({512 << 10, 1})
    ->Args({512 << 10, 2})
    ->Args({4 << 20, 4})
    ->UseRealTime();

}  // namespace
}  // namespace braid
