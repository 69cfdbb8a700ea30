#include "tuner/link_probe.h"

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <unordered_set>

#include "base/file.h"
#include "base/little_endian.h"
#include "bootstrap/bootstrap.h"

namespace braid {
namespace {

// Bootstrap tags of the probe's messages ("LNKC", "LNKD", "LNKR").
constexpr uint32_t kControlTag = 0x4C4E4B43;
constexpr uint32_t kDataTag = 0x4C4E4B44;
constexpr uint32_t kReplyTag = 0x4C4E4B52;

// Every message from the prober starts with a control record (the responder cannot wait on
// "any tag"): what comes, a sequence number the reply echoes, and the data bytes that follow.
enum class Kind : uint32_t { kPing = 1, kData = 2, kDone = 3, kSkip = 4 };
constexpr size_t kControlBytes = 16;
// A responder never accepts more than this, whatever a confused prober says.
constexpr uint64_t kMaxChunkBytes = 16u << 20;
constexpr int kMaxMessages = 1 << 16;

struct Control {
  Kind kind = Kind::kDone;
  uint32_t seq = 0;
  uint64_t bytes = 0;
};

void encode(const Control& c, uint8_t* out) {
  putLe32(out, static_cast<uint32_t>(c.kind));
  putLe32(out + 4, c.seq);
  putLe64(out + 8, c.bytes);
}

Control decode(const uint8_t* in) {
  return {static_cast<Kind>(getLe32(in)), getLe32(in + 4), getLe64(in + 8)};
}

Status sendControl(Bootstrap& b, int peer, uint32_t tag, const Control& c) {
  uint8_t wire[kControlBytes];
  encode(c, wire);
  return b.send(peer, tag, wire, sizeof(wire));
}

using Clock = std::chrono::steady_clock;

double microsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::micro>(Clock::now() - start).count();
}

/// The prober's half of a session, short of ending it.
class Prober {
 public:
  Prober(Bootstrap& b, int peer) : b_(b), peer_(peer) {}

  Status send(Kind kind, uint64_t bytes) {
    expected_.push_back(seq_);
    return sendControl(b_, peer_, kControlTag, {kind, seq_++, bytes});
  }

  /// The reply to the oldest message not yet answered.
  Status awaitReply() {
    uint8_t wire[kControlBytes];
    RETURN_IF_ERROR(b_.recv(peer_, kReplyTag, wire, sizeof(wire)));
    const Control reply = decode(wire);
    if (expected_.empty() || reply.seq != expected_[answered_]) {
      return remoteError("link probe: rank " + std::to_string(peer_) +
                         " answered out of order (sequence " + std::to_string(reply.seq) + ")");
    }
    ++answered_;
    return okStatus();
  }

  Result<double> roundTripUs() {
    const Clock::time_point start = Clock::now();
    RETURN_IF_ERROR(send(Kind::kPing, 0));
    RETURN_IF_ERROR(awaitReply());
    return microsSince(start);
  }

  Status sendData(const std::vector<uint8_t>& chunk) {
    RETURN_IF_ERROR(send(Kind::kData, chunk.size()));
    return b_.send(peer_, kDataTag, chunk.data(), chunk.size());
  }

  size_t unanswered() const { return expected_.size() - answered_; }

 private:
  Bootstrap& b_;
  int peer_;
  uint32_t seq_ = 0;
  std::vector<uint32_t> expected_;
  size_t answered_ = 0;
};

Result<LinkFigures> measure(Prober& p, int peer, const LinkProbeOptions& o) {
  LinkFigures f;
  f.peer = peer;
  // The warm-up opens the connections both ways (and their handshakes): not timed.
  RETURN_IF_ERROR(p.roundTripUs().status());
  std::vector<double> trips;
  const Clock::time_point pingStart = Clock::now();
  while (static_cast<int>(trips.size()) < std::max(o.pings, 1) &&
         (trips.size() < 3 || microsSince(pingStart) < o.pingBudgetUs)) {
    ASSIGN_OR_RETURN(double us, p.roundTripUs());
    trips.push_back(us);
  }
  f.minRoundTripUs = *std::min_element(trips.begin(), trips.end());
  f.latencyUs = oneWayLatencyUs(trips);

  const std::vector<uint8_t> chunk(std::max<uint32_t>(o.chunkBytes, 1), 0x5a);
  const size_t window = static_cast<size_t>(std::max(o.window, 1));
  const Clock::time_point streamStart = Clock::now();
  do {
    RETURN_IF_ERROR(p.sendData(chunk));
    f.streamBytes += chunk.size();
    if (p.unanswered() >= window) RETURN_IF_ERROR(p.awaitReply());
  } while (f.streamBytes + chunk.size() <= o.maxStreamBytes &&
           microsSince(streamStart) < o.streamBudgetUs);
  while (p.unanswered() > 0) RETURN_IF_ERROR(p.awaitReply());
  f.streamUs = microsSince(streamStart);
  f.gbps = streamGBps(f.streamBytes, f.streamUs, f.minRoundTripUs);
  if (!(f.gbps > 0) || !std::isfinite(f.gbps) || !(f.latencyUs > 0)) {
    return internalError("link probe: implausible figures from rank " + std::to_string(peer));
  }
  return f;
}

// Figures an earlier job on the same hosts measured stand unless today's latency or bandwidth
// differs from them by more than this factor (the calibration's hand-off is measured again past
// the same factor): the cost model's inputs, and so the tuner's grid, which a later process reads
// from its file when they repeat, stay the same from run to run while the network does
// (docs/tuning.md#what-the-tuner-costs-at-creation).
constexpr double kKeptLinkFactor = 2.0;
// Link files a cache folder keeps: one per set of hosts.
constexpr int kLinkFilesKept = 64;

}  // namespace

LinkFigures keptLinkFigures(const std::string& dir, const std::vector<RankPlacement>& placements,
                            const LinkFigures& measured, std::string& why) {
  if (dir.empty()) return measured;
  std::vector<uint64_t> hosts;
  for (const RankPlacement& p : placements) hosts.push_back(p.hostHash);
  std::sort(hosts.begin(), hosts.end());
  hosts.erase(std::unique(hosts.begin(), hosts.end()), hosts.end());
  std::string key = "link figures 1";
  for (uint64_t h : hosts) key.append(reinterpret_cast<const char*>(&h), sizeof(h));
  if (std::optional<std::string> kept = loadKeyedFile(dir, "link", key);
      kept && kept->size() == 16) {
    const auto* bytes = reinterpret_cast<const uint8_t*>(kept->data());
    const double latencyUs = std::bit_cast<double>(getLe64(bytes));
    const double gbps = std::bit_cast<double>(getLe64(bytes + 8));
    auto near = [](double a, double b) {
      return a > 0 && b > 0 && std::max(a, b) <= kKeptLinkFactor * std::min(a, b);
    };
    if (near(latencyUs, measured.latencyUs) && near(gbps, measured.gbps)) {
      char text[160];
      std::snprintf(text, sizeof(text),
                    "; the figures kept for these hosts, %.1f us and %.3f GB/s, are within %.1fx "
                    "and stand",
                    latencyUs, gbps, kKeptLinkFactor);
      why = text;
      LinkFigures used = measured;
      used.latencyUs = latencyUs;
      used.gbps = gbps;
      return used;
    }
  }
  uint8_t bytes[16];
  putLe64(bytes, std::bit_cast<uint64_t>(measured.latencyUs));
  putLe64(bytes + 8, std::bit_cast<uint64_t>(measured.gbps));
  const Status saved = saveKeyedFile(
      dir, "link", key, std::string(reinterpret_cast<const char*>(bytes), 16), kLinkFilesKept);
  why = saved.ok() ? "; kept for these hosts" : "; not kept: " + saved.message();
  return measured;
}

std::vector<int> hostLeaders(const std::vector<RankPlacement>& placements) {
  std::vector<int> leaders;
  std::unordered_set<uint64_t> seen;
  for (size_t r = 0; r < placements.size(); ++r) {
    if (seen.insert(placements[r].hostHash).second) leaders.push_back(static_cast<int>(r));
  }
  return leaders;
}

std::vector<int> probeTargets(const std::vector<RankPlacement>& placements) {
  std::vector<int> leaders = hostLeaders(placements);
  if (leaders.size() < 2) return {};
  leaders.erase(leaders.begin());  // rank 0 itself
  if (leaders.size() > size_t(kMaxProbedHosts)) leaders.resize(size_t(kMaxProbedHosts));
  return leaders;
}

double oneWayLatencyUs(std::vector<double> roundTripsUs) {
  if (roundTripsUs.empty()) return 0;
  std::sort(roundTripsUs.begin(), roundTripsUs.end());
  const size_t n = roundTripsUs.size();
  const double median =
      n % 2 == 1 ? roundTripsUs[n / 2] : (roundTripsUs[n / 2 - 1] + roundTripsUs[n / 2]) / 2;
  return median / 2;
}

double streamGBps(uint64_t bytes, double elapsedUs, double roundTripUs) {
  if (bytes == 0 || !(elapsedUs > 0)) return 0;
  const double transferUs = std::max(elapsedUs - std::max(roundTripUs, 0.0), elapsedUs / 2);
  return double(bytes) / transferUs / 1e3;  // bytes per microsecond / 1000 = GB/s
}

LinkFigures slowestLink(const std::vector<LinkFigures>& links) {
  LinkFigures worst = links.front();
  for (const LinkFigures& l : links) {
    if (l.gbps < worst.gbps) {
      const double latency = worst.latencyUs;
      worst = l;
      worst.latencyUs = std::max(latency, l.latencyUs);
    } else {
      worst.latencyUs = std::max(worst.latencyUs, l.latencyUs);
    }
  }
  return worst;
}

Result<LinkFigures> probeLink(Bootstrap& bootstrap, int peer, const LinkProbeOptions& options) {
  Prober prober(bootstrap, peer);
  Result<LinkFigures> figures = measure(prober, peer, options);
  // End the session whatever happened; if the link broke, the peer's own wait fails too.
  Status ended = prober.send(Kind::kDone, 0);
  if (!figures.ok())
    return figures.status().withContext("link probe of rank " + std::to_string(peer));
  RETURN_IF_ERROR(ended);
  return figures;
}

Status skipLinkProbe(Bootstrap& bootstrap, int peer) {
  return sendControl(bootstrap, peer, kControlTag, {Kind::kSkip, 0, 0});
}

Status answerLinkProbe(Bootstrap& bootstrap, int prober) {
  std::vector<uint8_t> data;
  for (int i = 0; i < kMaxMessages; ++i) {
    uint8_t wire[kControlBytes];
    RETURN_IF_ERROR(bootstrap.recv(prober, kControlTag, wire, sizeof(wire)));
    const Control c = decode(wire);
    switch (c.kind) {
      case Kind::kDone:
      case Kind::kSkip: return okStatus();
      case Kind::kData:
        if (c.bytes > kMaxChunkBytes) {
          return remoteError("link probe: rank " + std::to_string(prober) + " announced " +
                             std::to_string(c.bytes) + " bytes");
        }
        data.resize(c.bytes);
        RETURN_IF_ERROR(bootstrap.recv(prober, kDataTag, data.data(), data.size()));
        [[fallthrough]];
      case Kind::kPing: RETURN_IF_ERROR(sendControl(bootstrap, prober, kReplyTag, c)); break;
      default:
        return remoteError("link probe: rank " + std::to_string(prober) +
                           " sent an unknown message kind " +
                           std::to_string(static_cast<uint32_t>(c.kind)));
    }
  }
  return remoteError("link probe: rank " + std::to_string(prober) + " never ended its probe");
}

NetworkProbe runNetworkProbe(Bootstrap& bootstrap, int rank,
                             const std::vector<RankPlacement>& placements, bool enabled, bool rdma,
                             const LinkProbeOptions& options) {
  NetworkProbe out;
  const std::vector<int> targets = probeTargets(placements);
  if (targets.empty()) return out;  // one host: nothing to measure, nothing sent
  const Clock::time_point start = Clock::now();
  if (rank != 0) {
    if (std::find(targets.begin(), targets.end(), rank) == targets.end()) return out;
    out.ran = true;
    Status answered = answerLinkProbe(bootstrap, 0);
    if (!answered.ok()) out.note = "answering rank 0's link probe failed: " + answered.message();
    out.elapsedMs = microsSince(start) / 1e3;
    return out;
  }
  out.ran = true;
  std::vector<LinkFigures> links;
  std::string failure;
  for (int peer : targets) {
    // After a failure the remaining leaders are only released.
    if (!enabled || rdma || !failure.empty()) {
      Status skipped = skipLinkProbe(bootstrap, peer);
      if (!skipped.ok() && failure.empty()) failure = skipped.message();
      continue;
    }
    Result<LinkFigures> link = probeLink(bootstrap, peer, options);
    if (link.ok()) {
      links.push_back(link.value());
    } else {
      failure = link.status().message();
    }
  }
  out.elapsedMs = microsSince(start) / 1e3;
  if (!enabled) {
    out.note = "BRAID_NET_PROBE=0";
  } else if (rdma) {
    out.note = "RDMA between hosts (the bootstrap's TCP would misreport it)";
  } else if (!failure.empty() || links.empty()) {
    out.note = "the link probe failed: " + (failure.empty() ? std::string("no link") : failure);
  } else {
    out.figures = slowestLink(links);
    out.note = "probed " + std::to_string(links.size()) + " link" +
               (links.size() > 1 ? "s, the slowest kept" : "");
  }
  return out;
}

}  // namespace braid
