#include "tests/net/virtual_hosts.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>

namespace braid::testing {

int runCommand(const std::string& command, std::string* out) {
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return -1;
  char buffer[4096];
  size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) {
    if (out != nullptr) out->append(buffer, n);
  }
  const int status = ::pclose(pipe);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

namespace {

Status run(const std::string& command) {
  std::string out;
  const int rc = runCommand(command, &out);
  if (rc != 0) return systemError("'" + command + "' failed (" + std::to_string(rc) + "): " + out);
  return okStatus();
}

}  // namespace

Result<std::unique_ptr<VirtualHosts>> VirtualHosts::create(int hosts) {
  if (::geteuid() != 0) return invalidUsage("network namespaces need root");
  std::unique_ptr<VirtualHosts> v(new VirtualHosts());
  const int id = static_cast<int>(::getpid() % 10000);
  // Several sets in one process (the suite's 3 hosts, a test's 8) need names of their own.
  static std::atomic<int> sets{0};
  const int set = sets.fetch_add(1);
  v->prefix_ = "braid" + std::to_string(id) + (set > 0 ? "s" + std::to_string(set) : "");
  v->subnet_ = "10.201." + std::to_string(id % 250);
  v->switch_ = v->prefix_ + "sw";
  v->originalNs_ = ::open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
  if (v->originalNs_ < 0) return errnoError("open /proc/self/ns/net", errno);
  // Names left by an earlier run of the same pid would make `add` fail.
  runCommand("ip netns del " + v->switch_);
  RETURN_IF_ERROR(run("ip netns add " + v->switch_));
  RETURN_IF_ERROR(run("ip -n " + v->switch_ + " link add br0 type bridge"));
  RETURN_IF_ERROR(run("ip -n " + v->switch_ + " link set br0 up"));
  for (int h = 0; h < hosts; ++h) {
    const std::string ns = v->prefix_ + "h" + std::to_string(h);
    runCommand("ip netns del " + ns);
    RETURN_IF_ERROR(run("ip netns add " + ns));
    v->names_.push_back(ns);
    const std::string port = "p" + std::to_string(h);
    RETURN_IF_ERROR(
        run("ip -n " + v->switch_ + " link add " + port + " type veth peer name eth0 netns " + ns));
    RETURN_IF_ERROR(run("ip -n " + v->switch_ + " link set " + port + " master br0 up"));
    RETURN_IF_ERROR(run("ip -n " + ns + " addr add " + v->address(h) + "/24 dev eth0"));
    RETURN_IF_ERROR(run("ip -n " + ns + " link set eth0 up"));
    RETURN_IF_ERROR(run("ip -n " + ns + " link set lo up"));
  }
  return v;
}

VirtualHosts::~VirtualHosts() {
  if (originalNs_ >= 0) {
    (void)leave();
    ::close(originalNs_);
  }
  for (const std::string& ns : names_) runCommand("ip netns del " + ns);
  if (!switch_.empty()) runCommand("ip netns del " + switch_);
}

std::string VirtualHosts::address(int host) const {
  return subnet_ + "." + std::to_string(host + 1);
}

Status VirtualHosts::enter(int host) const {
  const std::string path = "/run/netns/" + names_[host];
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errnoError("open " + path, errno);
  const int rc = ::setns(fd, CLONE_NEWNET);
  const int error = errno;
  ::close(fd);
  if (rc != 0) return errnoError("setns " + names_[host], error);
  return okStatus();
}

Status VirtualHosts::leave() const {
  if (::setns(originalNs_, CLONE_NEWNET) != 0) return errnoError("setns back", errno);
  return okStatus();
}

Result<std::string> VirtualHosts::shape(int host, const std::string& rate, int delayMs) {
  const std::string inHost = "ip netns exec " + names_[host] + " tc qdisc replace dev eth0 root ";
  const std::string inSwitch =
      "ip netns exec " + switch_ + " tc qdisc replace dev p" + std::to_string(host) + " root ";
  const std::string netem =
      "netem delay " + std::to_string(delayMs) + "ms rate " + rate + " limit 10000";
  if (runCommand(inHost + netem) == 0 && runCommand(inSwitch + netem) == 0)
    return std::string("netem");
  // Without sch_netem: token bucket, rate only.
  const std::string tbf = "tbf rate " + rate + " burst 256kb latency 100ms";
  RETURN_IF_ERROR(run(inHost + tbf));
  RETURN_IF_ERROR(run(inSwitch + tbf));
  return std::string("tbf");
}

Status VirtualHosts::setLink(int host, bool up) {
  return run("ip -n " + switch_ + " link set p" + std::to_string(host) + (up ? " up" : " down"));
}

void VirtualHosts::unshape(int host) {
  // `del` fails when only the default qdisc is there: nothing to undo then.
  runCommand("ip netns exec " + names_[host] + " tc qdisc del dev eth0 root");
  runCommand("ip netns exec " + switch_ + " tc qdisc del dev p" + std::to_string(host) + " root");
}

}  // namespace braid::testing
