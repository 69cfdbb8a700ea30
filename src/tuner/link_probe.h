// The link probe: what the network between hosts really does, measured at init so that the cost
// model's host-to-host constants (HostShape::networkLatencyUs, networkGBps) follow the link the
// job actually runs on (a slow or shaped link, a congested fabric) rather than a port speed.
//
// Only jobs whose ranks span two or more hosts pay for it. Each host's leader is its lowest rank;
// rank 0 (always its host's leader) probes the leaders of up to kMaxProbedHosts other hosts in
// turn over the bootstrap's authenticated point-to-point messages: a warm-up round trip, a few
// timed ones (latency = half the median round trip), then a short windowed stream (at most
// maxStreamBytes, and no new chunk after streamBudgetUs, so a slow link costs little; bandwidth =
// bytes / (time to the last acknowledgement - one round trip)). The slowest link measured stands
// for all, since a collective runs at the pace of its slowest hop. The figures include the TCP
// stack at both ends, which the socket transport pays too.
//
// Rank 0 alone decides (its BRAID_NET_PROBE, and whether it reaches other hosts over RDMA, whose
// links the bootstrap's TCP would misreport): the other leaders just answer what it sends, so no
// rank waits for a probe that never comes. Rank 0's figures then reach every rank inside the
// tuner's shared constants (tuner_setup.h), so every rank builds the same tuner; figures within 2x
// of those kept from an earlier job on the same hosts leave those standing (keptLinkFigures).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "topology/ordering.h"

namespace braid {

class Bootstrap;

/// Other hosts rank 0 probes at most (one link of identical servers usually tells the story).
constexpr int kMaxProbedHosts = 3;

/// How long and how hard a probe of one link may run.
struct LinkProbeOptions {
  int pings = 8;                      ///< timed round trips (after one warm-up)
  double pingBudgetUs = 20000;        ///< no new round trip after this (at least 3 are timed)
  uint32_t chunkBytes = 128 << 10;    ///< stream message size
  int window = 2;                     ///< stream messages in flight before an acknowledgement
  uint64_t maxStreamBytes = 4 << 20;  ///< the stream stops here...
  double streamBudgetUs = 30000;      ///< ...or when no chunk may start after this long
};

/// What one probe of one link found.
struct LinkFigures {
  double latencyUs = 0;  ///< one way: half the median round trip
  double minRoundTripUs = 0;
  double gbps = 0;  ///< one direction
  uint64_t streamBytes = 0;
  double streamUs = 0;
  int peer = -1;  ///< the leader at the other end
};

/// The lowest rank of every host, hosts in order of their lowest rank.
std::vector<int> hostLeaders(const std::vector<RankPlacement>& placements);
/// The leaders rank 0 probes: the next kMaxProbedHosts hosts' leaders (empty on one host).
std::vector<int> probeTargets(const std::vector<RankPlacement>& placements);

/// Half the median of round-trip samples (microseconds); 0 when there are none.
double oneWayLatencyUs(std::vector<double> roundTripsUs);
/// GB/s of a windowed stream of `bytes` whose last acknowledgement came `elapsedUs` after the
/// first send: one round trip of the elapsed time is propagation, not transfer (at most half of
/// it is discounted, so noise cannot make it explode). 0 when nothing was timed.
double streamGBps(uint64_t bytes, double elapsedUs, double roundTripUs);
/// The link that limits collectives: highest latency, lowest bandwidth (peer of the slower
/// bandwidth). Requires a non-empty list.
LinkFigures slowestLink(const std::vector<LinkFigures>& links);

/// Prober side: measures the link to `peer`, which must be in answerLinkProbe. Whatever happens,
/// tries to end the peer's session so that it does not wait for more.
Result<LinkFigures> probeLink(Bootstrap& bootstrap, int peer, const LinkProbeOptions& options);
/// Prober side: tells `peer` (in answerLinkProbe) that no probe comes.
Status skipLinkProbe(Bootstrap& bootstrap, int peer);
/// Responder side: answers `prober` until it ends the session.
Status answerLinkProbe(Bootstrap& bootstrap, int prober);

/// What the whole probe gave rank 0.
struct NetworkProbe {
  /// Set on rank 0 when a probe ran and succeeded: the figures to use.
  std::optional<LinkFigures> figures;
  /// Rank 0: why the figures are (or are not) there, for the log. Others: what happened here.
  std::string note;
  double elapsedMs = 0;
  bool ran = false;  ///< this rank took part (a probe, a skip or an answer)
};

/// The figures the cost model takes from a probe that measured `measured`: those an earlier job on
/// the same hosts (every rank's hostHash) kept under `dir`, while today's latency and bandwidth
/// are both within a factor of 2 of them, so that the model's inputs (and the tuner's grid, kept
/// in a file for them) repeat from run to run; else `measured`, which is then kept. `why` gets a
/// note for the log. An empty `dir` keeps nothing: `measured`.
LinkFigures keptLinkFigures(const std::string& dir, const std::vector<RankPlacement>& placements,
                            const LinkFigures& measured, std::string& why);

/// Collective in effect: every rank calls it at the same point of init (single-host jobs and
/// ranks that are not probed return at once, without a message). `enabled` and `rdma` matter
/// on rank 0 only. Never fails: a failed probe is a note, and rank 0 keeps its old constants.
NetworkProbe runNetworkProbe(Bootstrap& bootstrap, int rank,
                             const std::vector<RankPlacement>& placements, bool enabled, bool rdma,
                             const LinkProbeOptions& options = {});

}  // namespace braid
