#include "bootstrap/launcher.h"

#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <array>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "base/log.h"
#include "bootstrap/auth.h"
#include "bootstrap/bootstrap.h"

namespace braid {
namespace {

struct LauncherVars {
  const char* name;
  const char* rank;
  const char* size;
  const char* localSize;  ///< ranks on this host, when the launcher says
};

constexpr std::array<LauncherVars, 4> kLaunchers = {{
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE"},
    {"Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE"},
    {"PMI", "PMI_RANK", "PMI_SIZE", "MPI_LOCALNRANKS"},
    {"Slurm", "SLURM_PROCID", "SLURM_NTASKS", nullptr},
}};

// Ids that every rank of one job sees, best first: Open MPI's per-job random key, then ids that
// only tell jobs apart.
constexpr std::array<const char*, 5> kJobIds = {"OMPI_MCA_orte_precondition_transports",
                                                "OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE",
                                                "TORCHELASTIC_RUN_ID", "SLURM_JOB_ID"};

// Below Linux's default ephemeral range (32768-60999): a port there may be held by a connection
// still in TIME_WAIT, or taken as the source port of a rank's own connect to it.
constexpr uint16_t kPortBase = 20000;
constexpr uint16_t kPortRange = 12000;

std::optional<std::string> get(const EnvLookup& env, const char* name) {
  const char* v = env(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

Result<long> parseNumber(const std::string& name, const std::string& text, long lo, long hi) {
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || errno != 0 || *end != '\0' || v < lo || v > hi) {
    return invalidArgument(name + "='" + text + "' is not an integer in [" + std::to_string(lo) +
                           ", " + std::to_string(hi) + "]");
  }
  return v;
}

/// "host:port" or "[v6 address]:port".
Status splitHostPort(const std::string& text, std::string* host, uint16_t* port) {
  std::string portText;
  if (!text.empty() && text.front() == '[') {
    const size_t close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      return invalidArgument("BRAID_ADDR='" + text + "' is not [address]:port");
    }
    *host = text.substr(1, close - 1);
    portText = text.substr(close + 2);
  } else {
    const size_t colon = text.rfind(':');
    if (colon == std::string::npos || colon == 0 || text.find(':') != colon) {
      return invalidArgument("BRAID_ADDR='" + text + "' is not host:port");
    }
    *host = text.substr(0, colon);
    portText = text.substr(colon + 1);
  }
  ASSIGN_OR_RETURN(const long p, parseNumber("BRAID_ADDR port", portText, 1, 65535));
  *port = static_cast<uint16_t>(p);
  return okStatus();
}

Result<Secret> keyOf(std::string_view label, const std::string& text) {
  return hmacSha256(reinterpret_cast<const uint8_t*>(label.data()), label.size(), text.data(),
                    text.size());
}

Result<SocketAddress> resolve(const std::string& host, uint16_t port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* list = nullptr;
  const int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &list);
  if (rc != 0) {
    return invalidArgument("cannot resolve rendezvous host '" + host + "': " + gai_strerror(rc));
  }
  std::optional<SocketAddress> v4, v6;
  for (const addrinfo* a = list; a != nullptr; a = a->ai_next) {
    if (a->ai_family == AF_INET && !v4) v4 = SocketAddress::fromSockaddr(a->ai_addr, a->ai_addrlen);
    if (a->ai_family == AF_INET6 && !v6)
      v6 = SocketAddress::fromSockaddr(a->ai_addr, a->ai_addrlen);
  }
  ::freeaddrinfo(list);
  if (v4) return *v4;
  if (v6) return *v6;
  return invalidArgument("rendezvous host '" + host + "' has no IPv4 or IPv6 address");
}

}  // namespace

uint16_t derivedPort(const std::string& jobId) {
  uint32_t h = 2166136261u;  // FNV-1a: the same on every host, unlike std::hash
  for (unsigned char c : jobId) h = (h ^ c) * 16777619u;
  return static_cast<uint16_t>(kPortBase + h % kPortRange);
}

std::string firstSlurmHost(const std::string& nodeList) {
  std::string first;
  int depth = 0;
  for (char c : nodeList) {
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (c == ',' && depth == 0) break;
    first += c;
  }
  const size_t open = first.find('[');
  if (open == std::string::npos) return first;
  // "node[07-09,12]": the prefix and the first number of the range, keeping its zero padding.
  std::string range = first.substr(open + 1);
  const size_t cut = range.find_first_of("-,]");
  return first.substr(0, open) + range.substr(0, cut);
}

Result<LaunchPlan> planLaunch(const Config& config, const EnvLookup& env) {
  LaunchPlan plan;
  std::optional<long> localSize;
  const LauncherVars* launcher = nullptr;
  if (config.launchRank >= 0 || config.launchWorldSize > 0) {
    if (config.launchRank < 0 || config.launchWorldSize <= 0) {
      return invalidArgument("BRAID_RANK and BRAID_WORLD_SIZE must be set together");
    }
    plan.rank = config.launchRank;
    plan.size = config.launchWorldSize;
    plan.launcher = "BRAID_RANK";
  } else {
    for (const LauncherVars& l : kLaunchers) {
      const std::optional<std::string> rank = get(env, l.rank);
      if (!rank) continue;
      const std::optional<std::string> size = get(env, l.size);
      if (!size) return invalidArgument(std::string(l.rank) + " is set but " + l.size + " is not");
      ASSIGN_OR_RETURN(const long r, parseNumber(l.rank, *rank, 0, (1 << 24) - 1));
      ASSIGN_OR_RETURN(const long s, parseNumber(l.size, *size, 1, 1 << 24));
      plan.rank = static_cast<int>(r);
      plan.size = static_cast<int>(s);
      plan.launcher = l.name;
      launcher = &l;
      if (l.localSize != nullptr) {
        if (std::optional<std::string> ls = get(env, l.localSize)) {
          ASSIGN_OR_RETURN(localSize, parseNumber(l.localSize, *ls, 1, 1 << 24));
        }
      }
      break;
    }
    if (launcher == nullptr) {
      return invalidUsage(
          "no launcher environment found: set BRAID_RANK, BRAID_WORLD_SIZE and BRAID_ADDR, or "
          "start the program under torchrun, mpirun, mpiexec or srun");
    }
  }
  if (plan.rank >= plan.size) {
    return invalidArgument(plan.launcher + ": rank " + std::to_string(plan.rank) +
                           " is not below the world size " + std::to_string(plan.size));
  }
  // Slurm says "one node" rather than "n tasks here".
  if (launcher != nullptr && std::string(launcher->name) == "Slurm") {
    std::optional<std::string> nodes = get(env, "SLURM_STEP_NUM_NODES");
    if (!nodes) nodes = get(env, "SLURM_NNODES");
    if (nodes == std::optional<std::string>("1")) localSize = plan.size;
  }

  // The job id: the launcher's own first.
  std::optional<std::string> jobId;
  std::string jobIdVar;
  for (const char* var : kJobIds) {
    std::optional<std::string> v = get(env, var);
    if (!v || *v == "none") continue;  // torchrun's default run id is the same for every job
    if (std::string(var) == "SLURM_JOB_ID") {
      if (std::optional<std::string> step = get(env, "SLURM_STEP_ID")) *v += "." + *step;
    }
    jobId = v;
    jobIdVar = var;
    break;
  }
  if (!config.launchSecret.empty()) {
    ASSIGN_OR_RETURN(plan.secret, keyOf("braid launcher secret v1", config.launchSecret));
    plan.secretSource = "BRAID_SECRET";
  } else if (jobId) {
    ASSIGN_OR_RETURN(plan.secret, keyOf("braid launcher job id v1", jobIdVar + "=" + *jobId));
    plan.secretSource = jobIdVar;
  } else {
    return invalidUsage(plan.launcher +
                        " gives no job id to derive the ranks' shared secret from: set "
                        "BRAID_SECRET to the same random value on every rank");
  }
  // A port every rank derives alike: from the job id, else from the secret.
  const std::string portSeed =
      jobId ? *jobId : std::string(reinterpret_cast<const char*>(plan.secret.data()), 8);

  const std::optional<std::string> masterAddr = get(env, "MASTER_ADDR");
  const std::optional<std::string> masterPort = get(env, "MASTER_PORT");
  const std::optional<std::string> nodeList = get(env, "SLURM_STEP_NODELIST")
                                                  ? get(env, "SLURM_STEP_NODELIST")
                                                  : get(env, "SLURM_JOB_NODELIST");
  if (!config.launchAddr.empty()) {
    RETURN_IF_ERROR(splitHostPort(config.launchAddr, &plan.host, &plan.port));
    plan.addressSource = "BRAID_ADDR";
  } else if (masterAddr && masterPort) {
    ASSIGN_OR_RETURN(const long port, parseNumber("MASTER_PORT", *masterPort, 1, 65534));
    plan.host = *masterAddr;
    // torchrun's own store listens on MASTER_PORT itself.
    plan.port = static_cast<uint16_t>(port + 1);
    plan.addressSource = "MASTER_ADDR:MASTER_PORT+1";
  } else if (plan.size == 1 || (localSize && *localSize == plan.size)) {
    plan.host = "127.0.0.1";
    plan.port = derivedPort(portSeed);
    plan.addressSource = "one host, port from " + (jobId ? jobIdVar : std::string("BRAID_SECRET"));
  } else if (launcher != nullptr && std::string(launcher->name) == "Slurm" && nodeList) {
    plan.host = firstSlurmHost(*nodeList);
    plan.port = derivedPort(portSeed);
    plan.addressSource = "first node of the Slurm step, port from " + jobIdVar;
  } else {
    return invalidUsage(plan.launcher + " started " + std::to_string(plan.size) +
                        " ranks on several hosts and nothing names rank 0's: set "
                        "BRAID_ADDR=<rank 0's host>:<free port> on every rank");
  }
  return plan;
}

Result<braidUniqueId> launchRendezvous(const LaunchPlan& plan, double timeoutSeconds) {
  ASSIGN_OR_RETURN(const SocketAddress advertised, resolve(plan.host, plan.port));
  if (plan.rank != 0) return encodeUniqueId(UniqueIdInfo{advertised, plan.secret});
  // Rank 0 listens on every interface at that port (the name may resolve to an address of
  // another interface here, e.g. 127.0.1.1), unless the rendezvous is host-local.
  SocketAddress bind = advertised;
  if (!advertised.isLoopback()) {
    sockaddr_storage any{};
    socklen_t length = 0;
    if (advertised.family() == AF_INET) {
      auto* in = reinterpret_cast<sockaddr_in*>(&any);
      in->sin_family = AF_INET;
      in->sin_addr.s_addr = htonl(INADDR_ANY);
      length = sizeof(sockaddr_in);
    } else {
      auto* in6 = reinterpret_cast<sockaddr_in6*>(&any);
      in6->sin6_family = AF_INET6;
      in6->sin6_addr = in6addr_any;
      length = sizeof(sockaddr_in6);
    }
    bind = SocketAddress::fromSockaddr(reinterpret_cast<sockaddr*>(&any), length);
    bind.setPort(plan.port);
  }
  Result<braidUniqueId> id = startBootstrapRootAt(bind, advertised, plan.secret, timeoutSeconds);
  if (!id.ok()) {
    return id.status().withContext("rank 0 cannot serve the rendezvous at " +
                                   advertised.toString() + " (" + plan.addressSource +
                                   "); is the port in use? BRAID_ADDR picks another");
  }
  BRAID_LOG(processLogger(), kInfo, kBoot,
            "%s: rank 0 serves the rendezvous at %s (%s; secret from %s)", plan.launcher.c_str(),
            advertised.toString().c_str(), plan.addressSource.c_str(), plan.secretSource.c_str());
  return id;
}

}  // namespace braid
