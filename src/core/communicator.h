// Communicator: one rank's membership in a group of ranks and everything it owns - bootstrap,
// transports, connectors, tuner, plan cache, scratch and error state. The C API (api.cc) and the
// group queue (group.cc) drive it; it never blocks except inside init/split and runTasks().
#pragma once

#include <atomic>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "algorithms/plan.h"
#include "base/config.h"
#include "base/log.h"
#include "base/phase_timer.h"
#include "bootstrap/bootstrap.h"
#include "device/device_client.h"
#include "executor/call.h"
#include "executor/call_check.h"
#include "executor/connectors.h"
#include "executor/executor.h"
#include "executor/progress.h"
#include "transport/transport.h"
#include "tuner/device_span_tuner.h"
#include "tuner/tuner.h"

namespace braid {

class Communicator final : public ProgressClient, public DeviceClient {
 public:
  /// Joins the rendezvous of `id` (blocking until all ranks arrive or the timeout).
  static Result<std::unique_ptr<Communicator>> create(const braidUniqueId& id, int nranks, int rank,
                                                      Config config);
  ~Communicator() override;

  /// Collective: the new communicator of this rank's color (nullptr for color < 0).
  Result<std::unique_ptr<Communicator>> split(int color, int key);
  /// Collective over the ranks not in `excluded`: a communicator of them, in their old order,
  /// with this one's settings. It meets through Bootstrap::shrink and builds new transports, so
  /// it works after this communicator failed; this one is left as it was.
  Result<std::unique_ptr<Communicator>> shrink(const std::vector<int>& excluded);

  int rank() const override { return rank_; }
  int nranks() const override { return nranks_; }
  /// Channels the device path's FIFOs carry for the algorithms (its call check's come after).
  int deviceMaxChannels() const override { return deviceMaxChannels_; }
  const Config& config() const override { return config_; }
  const Logger& logger() const override { return *logger_; }
  void setDeviceIslands(const std::vector<int>& islandOf) override;
  const Tuner& tuner() const { return tuner_; }

  /// Plans the call (from the cache when it has run before) and assigns its sequence number.
  /// `share`: the call's plan must outlive later prepares (batches); a call that runs before the
  /// next prepare skips the reference count.
  Result<PreparedCall> prepare(const CallArgs& args, bool share = true) override;
  /// Makes sure the scratch area holds at least `bytes` and returns it.
  Result<char*> scratch(size_t bytes);
  ConnectorTable& connectors() { return connectors_; }
  /// The call check's receiving half, or nullptr with BRAID_CALL_CHECK=0.
  CallCheckLedger* callChecks() { return config_.callCheck != 0 ? &callChecks_ : nullptr; }

  // ProgressClient.
  Status health() override;
  std::optional<PeerFailure> peerFailure(int peer) override;
  bool peerAlive(int peer) override;
  std::string describePeer(int peer) const override;
  std::string describeLoss(int peer) override;
  Status checkLinks() override;
  Waker* waker() override;
  double timeoutSeconds() const override { return config_.timeoutSeconds; }
  std::string who() const override;

  /// Makes every call in progress (from any thread) end with an error.
  void abort();
  bool aborted() const { return aborted_.load(std::memory_order_acquire); }
  /// health(), and also any peer's failure: whether the job as a whole is sound
  /// (braidCommGetAsyncError, waits on device work).
  Status jobHealth() override;
  /// Marks the communicator unusable and tells the peers why (first error wins).
  void fail(const Status& status) override;
  /// Every collective prepared so far has finished (a batch returned without error).
  void collectivesFinished() { collectivesDone_.store(collSeq_, std::memory_order_relaxed); }
  /// Device calls finish on their own schedule: after one, a failure claims no collective done.
  void deviceCallsUsed() override { deviceCallsUsed_.store(true, std::memory_order_relaxed); }
  bool usedDeviceCalls() const override { return deviceCallsUsed_.load(std::memory_order_relaxed); }
  /// The error that made it unusable (ok while healthy).
  Status asyncError() const;

 private:
  Communicator(Config config, std::unique_ptr<Logger> logger);
  /// `timer` has timed what came before (the bootstrap's join or split); set-up times its phases
  /// after it and logs them all.
  static Result<std::unique_ptr<Communicator>> fromBootstrap(std::unique_ptr<Bootstrap> bootstrap,
                                                             Config config,
                                                             std::unique_ptr<Logger> logger,
                                                             PhaseTimer timer);
  Status setUp(PhaseTimer& timer);
  Result<std::shared_ptr<const Plan>> plan(const PlanRequest& request, bool onDevice);
  /// The channels a device call of `bytes` runs on, from the tuner's choice.
  int deviceChannels(const Choice& choice, uint64_t bytes) const;

  Config config_;
  std::unique_ptr<Logger> logger_;
  int rank_ = 0;
  int nranks_ = 1;
  int maxChannels_ = 1;
  int deviceMaxChannels_ = 1;
  std::unique_ptr<Bootstrap> bootstrap_;
  std::vector<PeerInfo> peers_;
  Waker privateWaker_;
  /// The Waker this rank sleeps on: the shm transport's, which peers on this host ring, once it
  /// exists.
  Waker* rankWaker_ = &privateWaker_;
  ConnectorTable connectors_;
  CallCheckLedger callChecks_;
  Tuner tuner_;
  HostShape tunerHost_;  ///< the host shape the tuner's model used (network figures)
  /// Device calls over several GPU islands: their choices, with staged hops priced (none while
  /// every rank's GPU reaches every other's).
  std::unique_ptr<DeviceSpanTuner> deviceSpanTuner_;
  /// The choice for a call of `coll` moving `bytes`: the host tuner's, or for a device call over
  /// several GPU islands the device span tuner's.
  Choice choose(Collective coll, uint64_t bytes, bool onDevice) const;
  struct RecentChoice {
    uint64_t bytes = 0;
    Choice choice;
    bool valid = false;
    bool onDevice = false;
  };
  RecentChoice recentChoice_[kNumCollectives];
  /// What decides a call's plan and kernels besides its collective.
  struct CallKey {
    size_t count = 0;
    braidDataType_t dtype = braidFloat32;
    braidRedOp_t op = braidSum;  ///< sum for collectives that do not reduce
    int root = 0;
    bool inPlace = false;
    bool onDevice = false;
    bool operator==(const CallKey&) const = default;
  };
  struct RecentPlan {
    CallKey key;
    Algorithm algo = Algorithm::kRing;
    std::shared_ptr<const Plan> plan;
    kernels::Reducer reducer;  ///< of the last call's type and op (float32 sum at first)
  };
  RecentPlan recentPlan_[kNumCollectives];
  /// Plans a call unlike the last one of its collective into `recentPlan`.
  Status replan(const CallArgs& args, const CallKey& key, size_t elemSize, RecentPlan& recentPlan);
  std::vector<int> ring_;

  struct PlanKeyHash {
    size_t operator()(const PlanRequest& r) const;
  };
  /// Host and device plans apart: their call-check lanes sit on different channels.
  std::unordered_map<PlanRequest, std::shared_ptr<const Plan>, PlanKeyHash> planCache_;
  std::unordered_map<PlanRequest, std::shared_ptr<const Plan>, PlanKeyHash> devicePlanCache_;

  std::unique_ptr<char, void (*)(void*)> scratch_{nullptr, &std::free};
  size_t scratchBytes_ = 0;

  uint32_t collSeq_ = 0;
  std::vector<uint32_t> sendSeq_;  ///< per peer
  std::vector<uint32_t> recvSeq_;  ///< per peer

  std::atomic<bool> aborted_{false};
  std::atomic<uint32_t> collectivesDone_{0};  ///< told to peers when this rank fails
  std::atomic<bool> deviceCallsUsed_{false};
  mutable std::mutex errorMutex_;
  Status asyncError_;
  /// Set (after asyncError_) once the communicator failed: the per-call check takes no lock.
  std::atomic<bool> failed_{false};

  /// What setUpNetwork() found.
  struct NetworkLinks {
    std::string summary;            ///< for the init log line
    bool rdmaBetweenHosts = false;  ///< some peer on another host is reached over RDMA
  };
  /// Makes the network transports (ib, then socket), picks a transport per peer (shm, ib or
  /// socket) and builds the connector table.
  Result<NetworkLinks> setUpNetwork(TransportContext ctx, Transport& shm);
  std::vector<int> hostIndex_;  ///< dense host number per rank (hierarchical plans)

  /// Every transport made, in order: shm, ib, socket. The communicator asks each about failures
  /// and tells each of its own. Declared last and emptied from the back in the destructor, so the
  /// network transports go first: their proxy threads use the Waker (shm's) and the abort flag
  /// until they stop.
  std::vector<std::unique_ptr<Transport>> transports_;
};

}  // namespace braid
