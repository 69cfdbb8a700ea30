// braid-scale-init: how init time and each rank's memory grow with the rank count.
//
// For each (ranks, hosts) pair it makes that many network namespaces as hosts (root and iproute2
// needed; tests/net/virtual_hosts.h), forks the ranks into them in contiguous blocks, and has
// every rank init a communicator through the public API, then run one of each collective (checked)
// and a send/recv round to both ring neighbours. Each rank records its init time and its peak
// resident set (VmHWM) after init and at the end in a table shared with this process, which prints
// one line per configuration. Nothing is asserted: it measures. With --repeat K each rank then
// times K more calls of all-reduce, all-gather, reduce-scatter and all-to-all each (warm, after a
// one-element all-reduce lines the ranks up), and a line under the row gives the slowest rank's
// mean per call. --calls 0 stops each rank after init: init time, its CPU and memory alone.
//
// Usage: braid-scale-init [--ranks 16,64,256] [--hosts 4,8,16] [--count 1024] [--timeout 600]
//                         [--repeat K] [--calls 0|1] [--setting BRAID_X=y]...
// (--hosts pairs with --ranks by position; ranks must divide by hosts.)
#include <sys/mman.h>
#include <time.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "braid.h"
#include "tests/net/virtual_hosts.h"
#include "tests/support/multiprocess.h"

namespace braid::testing {
namespace {

double nowSeconds() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/// One rank's figures, written by the rank into memory shared with the launcher.
struct RankFigures {
  double initSeconds = 0;
  double initCpuSeconds = 0;  ///< the rank process's CPU (every thread) over init
  double callsSeconds = 0;
  long peakKbAfterInit = 0;
  long peakKbAtEnd = 0;
  int done = 0;                     ///< 1 once every call passed
  double warmUs[4] = {0, 0, 0, 0};  ///< --repeat: mean per call, in kWarmCalls' order
};

constexpr const char* kWarmCalls[] = {"all-reduce", "all-gather", "reduce-scatter", "all-to-all"};

/// A "VmHWM:" style field of /proc/self/status, in kB (0 when absent).
long statusKb(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  const size_t len = std::strlen(field);
  while (std::getline(in, line)) {
    if (line.compare(0, len, field) == 0) return std::atol(line.c_str() + len);
  }
  return 0;
}

std::vector<int> parseList(const char* text) {
  std::vector<int> out;
  for (const char* p = text; *p != '\0';) {
    char* end = nullptr;
    out.push_back(static_cast<int>(std::strtol(p, &end, 10)));
    if (end == p) return {};
    p = *end == ',' ? end + 1 : end;
  }
  return out;
}

std::string describe(braidResult_t rc, braidComm_t comm, const char* what) {
  return std::string(what) + ": " + braidGetErrorString(rc) + ": " + braidGetLastError(comm);
}

/// One of each collective on `count` floats per rank, checked, and a ring exchange.
std::string runCalls(braidComm_t comm, int rank, int n, size_t count) {
  std::vector<float> send(count * size_t(n)), recv(count * size_t(n));
  auto expectAll = [&](size_t elems, float want, const char* what) -> std::string {
    for (size_t i = 0; i < elems; ++i) {
      if (recv[i] != want) {
        return std::string(what) + ": element " + std::to_string(i) + " is " +
               std::to_string(recv[i]) + ", not " + std::to_string(want);
      }
    }
    return "";
  };
  const float sumOfRanks = float(n) * float(n - 1) / 2;
  std::fill(send.begin(), send.begin() + count, float(rank));
  braidResult_t rc =
      braidAllReduce(send.data(), recv.data(), count, braidFloat32, braidSum, comm, nullptr);
  if (rc != braidSuccess) return describe(rc, comm, "all-reduce");
  if (std::string e = expectAll(count, sumOfRanks, "all-reduce"); !e.empty()) return e;

  rc = braidAllGather(send.data(), recv.data(), count, braidFloat32, comm, nullptr);
  if (rc != braidSuccess) return describe(rc, comm, "all-gather");
  for (int r = 0; r < n; ++r) {
    if (recv[size_t(r) * count] != float(r) || recv[size_t(r + 1) * count - 1] != float(r)) {
      return "all-gather: block " + std::to_string(r) + " wrong";
    }
  }

  std::fill(send.begin(), send.end(), 1.0f);
  rc = braidReduceScatter(send.data(), recv.data(), count, braidFloat32, braidSum, comm, nullptr);
  if (rc != braidSuccess) return describe(rc, comm, "reduce-scatter");
  if (std::string e = expectAll(count, float(n), "reduce-scatter"); !e.empty()) return e;

  std::fill(send.begin(), send.begin() + count, rank == n - 1 ? 7.0f : 0.0f);
  rc = braidBroadcast(send.data(), recv.data(), count, braidFloat32, n - 1, comm, nullptr);
  if (rc != braidSuccess) return describe(rc, comm, "broadcast");
  if (std::string e = expectAll(count, 7.0f, "broadcast"); !e.empty()) return e;

  // Block p to rank p holds p * n + this rank: each rank receives its own row of the table.
  for (int p = 0; p < n; ++p) {
    std::fill(send.begin() + size_t(p) * count, send.begin() + size_t(p + 1) * count,
              float(p * n + rank));
  }
  rc = braidAllToAll(send.data(), recv.data(), count, braidFloat32, comm, nullptr);
  if (rc != braidSuccess) return describe(rc, comm, "all-to-all");
  for (int p = 0; p < n; ++p) {
    if (recv[size_t(p) * count] != float(rank * n + p)) {
      return "all-to-all: block from rank " + std::to_string(p) + " wrong";
    }
  }

  // Each rank sends to both ring neighbours and receives from both.
  const int next = (rank + 1) % n, prev = (rank + n - 1) % n;
  std::fill(send.begin(), send.begin() + count, float(rank));
  braidGroupStart();
  braidSend(send.data(), count, braidFloat32, next, comm, nullptr);
  braidSend(send.data(), count, braidFloat32, prev, comm, nullptr);
  braidRecv(recv.data(), count, braidFloat32, prev, comm, nullptr);
  braidRecv(recv.data() + count, count, braidFloat32, next, comm, nullptr);
  rc = braidGroupEnd();
  if (rc != braidSuccess) return describe(rc, comm, "send/recv");
  if (recv[0] != float(prev) || recv[count] != float(next)) return "send/recv: wrong data";
  return "";
}

// --repeat: times `reps` calls of each of kWarmCalls into `us`.
std::string timeWarmCalls(braidComm_t comm, int n, size_t count, int reps, double* us) {
  std::vector<float> send(size_t(n) * count, 1.0f), recv(size_t(n) * count, 0.0f);
  for (int k = 0; k < 4; ++k) {
    float one = 0;
    braidResult_t rc = braidAllReduce(&one, &one, 1, braidFloat32, braidSum, comm, nullptr);
    const double t0 = nowSeconds();
    for (int i = 0; i < reps && rc == braidSuccess; ++i) {
      switch (k) {
        case 0:
          rc = braidAllReduce(send.data(), recv.data(), count, braidFloat32, braidSum, comm,
                              nullptr);
          break;
        case 1:
          rc = braidAllGather(send.data(), recv.data(), count, braidFloat32, comm, nullptr);
          break;
        case 2:
          rc = braidReduceScatter(send.data(), recv.data(), count, braidFloat32, braidSum, comm,
                                  nullptr);
          break;
        default: rc = braidAllToAll(send.data(), recv.data(), count, braidFloat32, comm, nullptr);
      }
    }
    if (rc != braidSuccess) return describe(rc, comm, kWarmCalls[k]);
    us[k] = (nowSeconds() - t0) / reps * 1e6;
  }
  return "";
}

struct Options {
  std::vector<int> ranks = {16, 64, 256};
  std::vector<int> hosts = {4, 8, 16};
  size_t count = 1024;
  int repeat = 0;
  bool calls = true;
  double timeoutSeconds = 600;
  std::vector<std::string> settings;
};

double processCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * double(v.size() - 1) + 0.5))];
}

int runOne(const Options& o, int n, int hostCount) {
  Result<std::unique_ptr<VirtualHosts>> made = VirtualHosts::create(hostCount);
  if (!made.ok()) {
    std::fprintf(stderr, "cannot make %d virtual hosts: %s\n", hostCount,
                 made.status().message().c_str());
    return 1;
  }
  const VirtualHosts& v = **made;
  const size_t tableBytes = sizeof(RankFigures) * size_t(n);
  void* shared =
      mmap(nullptr, tableBytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (shared == MAP_FAILED) {
    std::perror("mmap");
    return 1;
  }
  auto* figures = new (shared) RankFigures[n];
  RootProcess root(o.timeoutSeconds, [&]() -> std::string {
    Status entered = v.enter(0);
    return entered.ok() ? "" : entered.message();
  });
  if (!root.ok()) {
    std::fprintf(stderr, "root: %s\n", root.error().c_str());
    return 1;
  }
  const int perHost = n / hostCount;
  const double started = nowSeconds();
  std::vector<RankOutcome> outcomes = runRanks(
      n, root.id(),
      [&](int rank, const braidUniqueId& id) -> std::string {
        if (Status s = v.enter(rank / perHost); !s.ok()) return s.message();
        Settings config;
        for (const std::string& s : o.settings) config.add(s);
        config.add("BRAID_HOSTID=virtual-host-" + std::to_string(rank / perHost));
        config.add("BRAID_TIMEOUT=" + std::to_string(static_cast<int>(o.timeoutSeconds)));
        RankFigures& mine = figures[rank];
        const double t0 = nowSeconds();
        const double cpu0 = processCpuSeconds();
        braidComm_t comm = nullptr;
        braidResult_t rc = braidCommInitRankConfig(&comm, n, id, rank, config.config());
        if (rc != braidSuccess) return describe(rc, nullptr, "init");
        mine.initSeconds = nowSeconds() - t0;
        mine.initCpuSeconds = processCpuSeconds() - cpu0;
        mine.peakKbAfterInit = statusKb("VmHWM:");
        const double t1 = nowSeconds();
        std::string error = o.calls ? runCalls(comm, rank, n, o.count) : "";
        mine.callsSeconds = nowSeconds() - t1;
        if (error.empty() && o.repeat > 0) {
          error = timeWarmCalls(comm, n, o.count, o.repeat, mine.warmUs);
        }
        mine.peakKbAtEnd = statusKb("VmHWM:");
        braidCommDestroy(comm);
        if (error.empty()) mine.done = 1;
        return error;
      },
      o.timeoutSeconds);
  const double wall = nowSeconds() - started;
  std::vector<double> init, calls, peakInit, peakEnd;
  double initCpuMs = 0;
  int passed = 0;
  int largest = 0;
  for (int r = 0; r < n; ++r) {
    if (figures[r].peakKbAtEnd > figures[largest].peakKbAtEnd) largest = r;
    if (figures[r].done == 0) continue;
    ++passed;
    init.push_back(figures[r].initSeconds);
    initCpuMs += figures[r].initCpuSeconds * 1e3;
    calls.push_back(figures[r].callsSeconds);
    peakInit.push_back(figures[r].peakKbAfterInit / 1024.0);
    peakEnd.push_back(figures[r].peakKbAtEnd / 1024.0);
  }
  std::printf(
      "| %d | %d x %d | %d/%d | %.2f | %.2f | %.1f | %.2f | %.1f | %.1f | %.1f | %.1f (rank %d) | "
      "%.0f |\n",
      n, hostCount, perHost, passed, n, percentile(init, 0.5), percentile(init, 1.0),
      passed > 0 ? initCpuMs / passed : 0.0, percentile(calls, 1.0), percentile(peakInit, 0.5),
      percentile(peakInit, 1.0), percentile(peakEnd, 0.5), percentile(peakEnd, 1.0), largest, wall);
  if (o.repeat > 0) {
    std::printf("warm, %d calls of %zu floats a rank, slowest rank's mean:", o.repeat, o.count);
    for (int k = 0; k < 4; ++k) {
      std::vector<double> us;
      for (int r = 0; r < n; ++r) {
        if (figures[r].done != 0) us.push_back(figures[r].warmUs[k]);
      }
      std::printf("%s %s %.0f us", k == 0 ? "" : ",", kWarmCalls[k], percentile(us, 1.0));
    }
    std::printf("\n");
  }
  std::fflush(stdout);
  const std::string failed = failures(outcomes);
  if (!failed.empty()) std::fprintf(stderr, "%s\n", failed.substr(0, 4000).c_str());
  munmap(shared, tableBytes);
  return passed == n ? 0 : 1;
}

}  // namespace
}  // namespace braid::testing

int main(int argc, char** argv) {
  braid::testing::Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const char* value = i + 1 < argc ? argv[i + 1] : nullptr;
    if (value == nullptr) {
      std::fprintf(stderr, "%s needs a value\n", a.c_str());
      return 2;
    }
    ++i;
    if (a == "--ranks") {
      o.ranks = braid::testing::parseList(value);
    } else if (a == "--hosts") {
      o.hosts = braid::testing::parseList(value);
    } else if (a == "--count") {
      o.count = std::strtoull(value, nullptr, 10);
    } else if (a == "--repeat") {
      o.repeat = std::atoi(value);
    } else if (a == "--calls") {
      o.calls = std::atoi(value) != 0;
    } else if (a == "--timeout") {
      o.timeoutSeconds = std::atof(value);
    } else if (a == "--setting") {
      o.settings.push_back(value);
    } else {
      std::fprintf(stderr, "unknown option %s (see the comment at the top of scale_init.cc)\n",
                   a.c_str());
      return 2;
    }
  }
  if (o.ranks.empty() || o.ranks.size() != o.hosts.size() || o.count == 0 ||
      o.timeoutSeconds <= 0 || o.repeat < 0 || (o.repeat > 0 && !o.calls)) {
    std::fprintf(stderr,
                 "--ranks and --hosts need lists of the same length, --count > 0, --repeat >= 0 "
                 "(and --calls 1 with --repeat)\n");
    return 2;
  }
  for (size_t i = 0; i < o.ranks.size(); ++i) {
    if (o.hosts[i] < 1 || o.ranks[i] < 2 || o.ranks[i] % o.hosts[i] != 0) {
      std::fprintf(stderr, "%d ranks do not divide over %d hosts\n", o.ranks[i], o.hosts[i]);
      return 2;
    }
  }
  std::printf(
      "| ranks | hosts x ranks | passed | init s (median) | init s (max) | init CPU ms a rank "
      "(mean) | calls s (max) | peak RSS after init MB (median) | (max) | peak RSS at the end MB "
      "(median) | (max) | wall s |\n");
  std::printf(
      "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
  std::fflush(stdout);
  int status = 0;
  for (size_t i = 0; i < o.ranks.size(); ++i) {
    status |= braid::testing::runOne(o, o.ranks[i], o.hosts[i]);
  }
  return status;
}
