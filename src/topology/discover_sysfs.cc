// The discovery fallback for builds without hwloc: Linux sysfs gives the online CPUs, each CPU's
// package and core, and each NUMA node's CPUs. Nothing about PCI: no GPUs, NICs or switches.
#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "topology/discover_internal.h"

namespace braid {

namespace {

std::optional<int> readInt(const std::filesystem::path& path) {
  std::optional<std::string> text = readTextFile(path);
  if (!text) return std::nullopt;
  int value = 0;
  const char* end = text->data() + text->size();
  const auto [ptr, ec] = std::from_chars(text->data(), end, value);
  if (ec != std::errc() || ptr == text->data()) return std::nullopt;
  return value;
}

// Numbers N of entries named `prefix`N in `dir`, sorted.
std::vector<int> numberedEntries(const std::filesystem::path& dir, const std::string& prefix) {
  std::vector<int> out;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) continue;
    const std::string digits = name.substr(prefix.size());
    if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
      continue;
    int value = 0;
    const auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
    if (ec == std::errc() && ptr == digits.data() + digits.size()) out.push_back(value);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

Result<Topology> discoverFromSysfs(const TopologyOptions& options) {
  const std::filesystem::path system = std::filesystem::path(options.sysfsRoot) / "devices/system";
  const std::filesystem::path cpuDir = system / "cpu";

  CpuSet online;
  if (std::optional<std::string> text = readTextFile(cpuDir / "online")) {
    Result<CpuSet> parsed = CpuSet::parseList(*text);
    if (!parsed.ok())
      return parsed.status().withContext("topology: " + (cpuDir / "online").string());
    online = parsed.value();
  } else {
    online = CpuSet::of(numberedEntries(cpuDir, "cpu"));
  }
  if (online.empty()) return systemError("topology: no online CPUs under " + cpuDir.string());

  // package id -> (core id -> PUs)
  std::map<int, std::map<int, CpuSet>> packages;
  for (int cpu : online.toVector()) {
    const std::filesystem::path topo = cpuDir / ("cpu" + std::to_string(cpu)) / "topology";
    int package = readInt(topo / "physical_package_id").value_or(0);
    if (package < 0) package = 0;  // some hypervisors report -1
    const int core = readInt(topo / "core_id").value_or(cpu);
    packages[package][core].set(cpu);
  }

  struct Numa {
    int os;
    CpuSet cpus;
  };
  std::vector<Numa> numas;
  const std::filesystem::path nodeDir = system / "node";
  for (int n : numberedEntries(nodeDir, "node")) {
    CpuSet cpus;
    if (std::optional<std::string> text =
            readTextFile(nodeDir / ("node" + std::to_string(n)) / "cpulist")) {
      Result<CpuSet> parsed = CpuSet::parseList(*text);
      if (!parsed.ok())
        return parsed.status().withContext("topology: NUMA node " + std::to_string(n));
      cpus = parsed.value() & online;
    }
    numas.push_back({n, cpus});
  }
  if (numas.empty()) numas.push_back({0, online});  // kernels built without NUMA

  Topology topo;
  const int machine = topo.addNode(NodeKind::kMachine, -1);
  topo.mutableNode(machine).osIndex = 0;
  topo.mutableNode(machine).cpuset = online;
  std::vector<bool> placed(numas.size(), false);
  for (const auto& [packageId, cores] : packages) {
    CpuSet packageCpus;
    for (const auto& [coreId, pus] : cores) packageCpus |= pus;
    const int package = topo.addNode(NodeKind::kPackage, machine);
    topo.mutableNode(package).osIndex = packageId;
    topo.mutableNode(package).cpuset = packageCpus;
    for (size_t i = 0; i < numas.size(); ++i) {
      if (placed[i] || numas[i].cpus.empty() || !numas[i].cpus.isSubsetOf(packageCpus)) continue;
      const int numa = topo.addNode(NodeKind::kNuma, package);
      topo.mutableNode(numa).osIndex = numas[i].os;
      topo.mutableNode(numa).cpuset = numas[i].cpus;
      placed[i] = true;
    }
    // Cores in the order of their first PU, as hwloc lists them.
    std::vector<std::pair<int, const CpuSet*>> ordered;
    for (const auto& [coreId, pus] : cores) ordered.emplace_back(coreId, &pus);
    std::sort(ordered.begin(), ordered.end(),
              [](const auto& x, const auto& y) { return x.second->first() < y.second->first(); });
    for (const auto& [coreId, pus] : ordered) {
      const int core = topo.addNode(NodeKind::kCore, package);
      topo.mutableNode(core).osIndex = coreId;
      topo.mutableNode(core).cpuset = *pus;
      for (int cpu : pus->toVector()) {
        const int pu = topo.addNode(NodeKind::kPu, core);
        topo.mutableNode(pu).osIndex = cpu;
        topo.mutableNode(pu).cpuset = CpuSet::of({cpu});
      }
    }
  }
  // NUMA nodes without CPUs (memory expanders) or spanning packages hang off the machine.
  for (size_t i = 0; i < numas.size(); ++i) {
    if (placed[i]) continue;
    const int numa = topo.addNode(NodeKind::kNuma, machine);
    topo.mutableNode(numa).osIndex = numas[i].os;
    topo.mutableNode(numa).cpuset = numas[i].cpus;
  }
  RETURN_IF_ERROR(topo.finalize());

  const CpuSet bound = processAffinity() & online;
  topo.setProcessBinding(bound.empty() ? online : bound);
  return topo;
}

std::optional<std::string> readTextFile(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace braid
