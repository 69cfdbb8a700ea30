#include "topology/topology_cache.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <vector>

#include "base/hash.h"
#include "topology/discover_internal.h"

extern char** environ;

namespace braid {

namespace {

std::string fileText(const std::filesystem::path& path) { return readTextFile(path).value_or(""); }

std::string sortedNames(const std::filesystem::path& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  std::string out;
  for (const std::string& n : names) out += n + ",";
  return out;
}

void mix(uint64_t& h, const std::string& part) {
  h = fnv1a("\xff", fnv1a(part, h));  // parts "ab","c" and "a","bc" differ
}

}  // namespace

std::string topologyCacheKey(const std::string& sysfsRoot, const std::string& discovery) {
  const std::filesystem::path sys(sysfsRoot);
  uint64_t h = kFnv1aOffset;
  mix(h, "braid-topology-1");
  mix(h, fileText("/proc/sys/kernel/random/boot_id"));
  mix(h, sysfsRoot);
  mix(h, sortedNames(sys / "bus/pci/devices"));
  mix(h, sortedNames(sys / "class/net"));
  mix(h, sortedNames(sys / "class/infiniband"));
  mix(h, fileText(sys / "devices/system/cpu/online"));
  mix(h, fileText(sys / "devices/system/node/online"));
  std::error_code ec;
  mix(h, std::filesystem::read_symlink("/proc/self/ns/net", ec).string());
  mix(h, fileText("/proc/self/cgroup"));
  mix(h, discovery);
  std::vector<std::string> hwlocSettings;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    if (std::string_view(*e).starts_with("HWLOC_")) hwlocSettings.emplace_back(*e);
  }
  std::sort(hwlocSettings.begin(), hwlocSettings.end());
  for (const std::string& s : hwlocSettings) mix(h, s);
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

TopologyCacheLock::TopologyCacheLock(const std::string& entryPath) {
  fd_ = ::open((entryPath + ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd_ < 0) return;
  while (::flock(fd_, LOCK_EX) != 0) {
    if (errno != EINTR) {
      ::close(fd_);
      fd_ = -1;
      return;
    }
  }
}

TopologyCacheLock::~TopologyCacheLock() {
  if (fd_ >= 0) ::close(fd_);  // closing drops the lock
}

}  // namespace braid
