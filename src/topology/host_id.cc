#include "topology/host_id.h"

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "base/hash.h"

namespace braid {

std::string hostIdentity(const std::string& override) {
  if (!override.empty()) return override;
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  std::string bootId;
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::getline(in, bootId);
  return std::string(host) + "/" + bootId;
}

uint64_t hostHash(const std::string& identity) { return fnv1a(identity); }

uint64_t pidNamespaceId() {
  struct stat st {};
  if (stat("/proc/self/ns/pid", &st) != 0) return 0;
  return static_cast<uint64_t>(st.st_ino);
}

}  // namespace braid
