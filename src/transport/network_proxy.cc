#include "transport/network_proxy.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>

#include "base/config.h"

namespace braid {
namespace {

size_t roundUp(size_t v, size_t to) { return (v + to - 1) / to * to; }

}  // namespace

ProxyOptions proxyOptions(const TransportContext& ctx) {
  ProxyOptions options;
  options.rank = ctx.rank;
  options.nranks = ctx.nranks;
  options.maxChannels = ctx.maxChannels;
  options.nslots = static_cast<uint32_t>(ctx.config->nslots);
  options.slotBytes = static_cast<uint32_t>(roundUp(ctx.config->slotBytes, 64));
  options.rankWaker = ctx.rankWaker;
  options.logger = ctx.logger;
  options.peerTimeoutSeconds = ctx.config->peerTimeoutSeconds;
  for (int r = 0; r < ctx.nranks; ++r) {
    std::string name = "rank " + std::to_string(r);
    if (ctx.peers != nullptr && r < static_cast<int>(ctx.peers->size())) {
      name += std::string(" (") + (*ctx.peers)[r].hostName + ")";
    }
    options.peerNames.push_back(std::move(name));
  }
  return options;
}

OwnedFd::~OwnedFd() { reset(-1); }

void OwnedFd::reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

NetworkProxy::NetworkProxy(ProxyOptions options, std::string_view label)
    : options_(std::move(options)), label_(label), notices_(options_.nranks) {}

NetworkProxy::~NetworkProxy() = default;

Status NetworkProxy::setUpFifos(const std::vector<int>& links) {
  std::vector<bool> linked(options_.nranks, false);
  for (size_t r = 0; r < linked.size() && r < links.size(); ++r) linked[r] = links[r] > 0;
  return setUpFifos(links, linked);
}

Status NetworkProxy::setUpFifos(const std::vector<int>& links, const std::vector<bool>& linked) {
  const int n = options_.nranks;
  liveLinks_ = std::make_unique<std::atomic<int>[]>(n);
  everLinked_ = std::make_unique<std::atomic<bool>[]>(n);
  for (int r = 0; r < n; ++r) {
    const int count = r < static_cast<int>(links.size()) ? links[r] : 0;
    liveLinks_[r].store(count);
    everLinked_[r].store(count > 0);
  }
  armedPosts_ = std::make_unique<std::atomic<uint64_t>[]>(size_t(n) * options_.maxChannels);
  armedReleases_ = std::make_unique<std::atomic<uint64_t>[]>(size_t(n) * options_.maxChannels);
  sendCredits_.resize(size_t(n) * options_.maxChannels);
  recvCredits_.resize(size_t(n) * options_.maxChannels);
  return fifos_.allocate(linked, options_.maxChannels, options_.nslots, options_.slotBytes, label_);
}

Status NetworkProxy::openWakeup(uint64_t eventTag) {
  // errno is read before the message is built: building it may allocate.
  auto failed = [this](const char* what) {
    const int error = errno;
    return errnoError(label_ + ": " + what, error);
  };
  eventFd_.reset(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!eventFd_.valid()) return failed("eventfd");
  waker_.eventFd = eventFd_.fd();
  epoll_.reset(::epoll_create1(EPOLL_CLOEXEC));
  if (!epoll_.valid()) return failed("epoll_create1");
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = eventTag;
  if (::epoll_ctl(epoll_.fd(), EPOLL_CTL_ADD, eventFd_.fd(), &ev) != 0) {
    return failed("epoll_ctl");
  }
  return okStatus();
}

Status NetworkProxy::startThread() {
  try {
    thread_ = std::thread([this] { run(); });
  } catch (const std::system_error& e) {
    return systemError(label_ + ": proxy thread: " + e.what());
  }
  return okStatus();
}

void NetworkProxy::close(bool flush, double flushSeconds) {
  if (closed_) return;
  closed_ = true;
  // Peers are failing too: nobody waits for the rest.
  if (hasFailure_.load() || notices_.any()) flush = false;
  flushSeconds_ = flushSeconds;
  mode_.store(flush ? Mode::kFlush : Mode::kStop, std::memory_order_release);
  wakeProxy();
  if (thread_.joinable()) thread_.join();
  stopped();
}

FifoView NetworkProxy::sendFifo(int peer, int channel) {
  const size_t f = fifos_.index(peer, channel);
  fifos_.openSend(f);
  return fifos_.view(f, true);
}

FifoView NetworkProxy::recvFifo(int peer, int channel) {
  const size_t f = fifos_.index(peer, channel);
  if (fifos_.openRecv(f)) recvOpened();
  return fifos_.view(f, false);
}

bool NetworkProxy::peerAlive(int peer) {
  // A peer no link of which came up yet is not known to be gone: its first link comes when
  // either side first sends.
  return !linked(peer) || !everLinked_[peer].load(std::memory_order_acquire) ||
         linkUp(peer, std::memory_order_acquire);
}

std::optional<Status> NetworkProxy::failure() const {
  if (!hasFailure_.load(std::memory_order_acquire)) return std::nullopt;
  std::lock_guard<std::mutex> lock(mu_);
  return failure_;
}

void NetworkProxy::notifyFailure(int failedRank, const PeerFailure& failure) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (noticeQueued_) return;
    noticeQueued_ = true;
    notice_.origin = failedRank;
    notice_.failure = failure;
  }
  noticePending_.store(true, std::memory_order_release);
  wakeProxy();
}

void NetworkProxy::arm(const std::vector<gpu::FifoSlotCount>& counts) {
  if (disarmed_.load(std::memory_order_acquire)) return;
  bool any = false;
  for (const gpu::FifoSlotCount& c : counts) {
    if (!linked(c.peer) || c.channel < 0 || c.channel >= options_.maxChannels) continue;
    if (c.posts == 0 && c.releases == 0) continue;
    const size_t f = fifos_.index(c.peer, c.channel);
    // Only the armed directions: a FIFO the device path maps is mapped before it opens.
    if (c.posts != 0) fifos_.openSend(f);
    if (c.releases != 0 && fifos_.openRecv(f)) recvOpened();
    armedPosts_[f].fetch_add(c.posts, std::memory_order_release);
    armedReleases_[f].fetch_add(c.releases, std::memory_order_release);
    any = true;
  }
  if (!any) return;
  armed_.store(true, std::memory_order_release);
  wakeProxy();
}

void NetworkProxy::disarm() {
  disarmed_.store(true, std::memory_order_release);
  if (!armedPosts_) return;
  for (size_t f = 0; f < fifos_.count(); ++f) {
    armedPosts_[f].store(0, std::memory_order_release);
    armedReleases_[f].store(0, std::memory_order_release);
  }
}

bool NetworkProxy::armedWorkOutstanding() const {
  if (!armed_.load(std::memory_order_acquire)) return false;
  for (int f : fifos_.openedSends()) {
    const uint64_t head = fifos_.view(f, true).control->head.load(std::memory_order_acquire);
    if (head < armedPosts_[f].load(std::memory_order_acquire)) return true;
  }
  for (int f : fifos_.openedRecvs()) {
    const uint64_t tail = fifos_.view(f, false).control->tail.load(std::memory_order_acquire);
    if (tail < recvCredits_[f].posted && tail < armedReleases_[f].load(std::memory_order_acquire)) {
      return true;
    }
  }
  return false;
}

void NetworkProxy::wakeProxy() {
  const uint64_t one = 1;
  if (eventFd_.valid()) (void)!::write(eventFd_.fd(), &one, sizeof(one));
}

void NetworkProxy::recordFailure(const std::string& message) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!failure_) failure_ = Status(braidRemoteError, label_ + ": " + message);
  }
  hasFailure_.store(true, std::memory_order_release);
}

void NetworkProxy::noticeArrived(int peer, int origin, int32_t code, uint32_t collectivesDone,
                                 std::string_view text) {
  const std::string who = origin >= 0 && origin < options_.nranks
                              ? options_.peerNames[origin]
                              : "rank " + std::to_string(origin);
  const auto result = static_cast<braidResult_t>(code);
  notices_.record(peer, PeerFailure{Status(result == braidSuccess ? braidRemoteError : result,
                                           who + " failed: " + std::string(text)),
                                    collectivesDone});
  wakeRank();
}

bool NetworkProxy::sendsFlushed() const {
  if (noticePending()) return false;
  for (int f : fifos_.openedSends()) {
    if (!linkUp(fifos_.peerOf(f))) continue;
    const uint64_t head = fifos_.view(f, true).control->head.load(std::memory_order_acquire);
    if (sendCredits_[f].released != head) return false;
  }
  return true;
}

}  // namespace braid
