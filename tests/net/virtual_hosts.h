// Several "hosts" on one machine: network namespaces, each with its own loopback and an eth0
// joined through a veth pair to a bridge in a switch namespace. Ranks that enter a host's
// namespace see only that host's interfaces, and ranks on different hosts talk over TCP through
// the bridge, as across machines. Needs root (CAP_SYS_ADMIN) and iproute2; every namespace is
// removed when the object goes.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/status.h"

namespace braid::testing {

class VirtualHosts {
 public:
  /// Makes `hosts` namespaces; an error (the caller skips) when not root or `ip netns` fails.
  static Result<std::unique_ptr<VirtualHosts>> create(int hosts);
  ~VirtualHosts();
  VirtualHosts(const VirtualHosts&) = delete;
  VirtualHosts& operator=(const VirtualHosts&) = delete;

  int hosts() const { return static_cast<int>(names_.size()); }
  /// The namespace name of a host, for `ip netns exec`.
  const std::string& name(int host) const { return names_[host]; }
  /// The host's IPv4 address on the bridge.
  std::string address(int host) const;
  /// Moves the calling thread into the host's network namespace.
  Status enter(int host) const;
  /// Moves the calling thread back to the namespace it started in.
  Status leave() const;
  /// Shapes both directions of a host's link: `rate` (tc syntax, e.g. "200mbit") and, where the
  /// kernel has netem, `delayMs` of added latency. Returns the qdisc used ("netem" or "tbf").
  Result<std::string> shape(int host, const std::string& rate, int delayMs);
  /// Removes the shaping of a host's link (both directions); a link never shaped is fine.
  void unshape(int host);
  /// Takes a host's link down at the switch (up = false) or back up: a cut cable, which drops
  /// every packet without a reset, so its peers only notice that it stops answering.
  Status setLink(int host, bool up);

 private:
  VirtualHosts() = default;

  std::string prefix_;
  std::string subnet_;  ///< "10.201.N"
  std::string switch_;
  std::vector<std::string> names_;
  int originalNs_ = -1;
};

/// Runs a shell command; its exit status (or -1) and, when out is given, its output.
int runCommand(const std::string& command, std::string* out = nullptr);

}  // namespace braid::testing
