// Host identity: ranks with the same identity share memory and use the shared-memory transport.
#pragma once

#include <cstdint>
#include <string>

namespace braid {

/// BRAID_HOSTID when given, else host name + kernel boot id (so two containers or VMs with the
/// same host name but different kernels are different hosts).
std::string hostIdentity(const std::string& override);
/// A 64-bit hash of hostIdentity(), stable across processes.
uint64_t hostHash(const std::string& identity);
/// Inode of /proc/self/ns/pid: two processes can compare pids only when these match.
uint64_t pidNamespaceId();

}  // namespace braid
