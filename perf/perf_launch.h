// braid-perf process and thread spawning: finding a launcher's world in the environment, forking
// local rank processes, running ranks as threads.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>

#include "perf/perf_error.h"

namespace braid::perf {

/// This process's place in a world a launcher (torchrun, mpirun, srun, ...) started.
struct LauncherWorld {
  int rank = 0;
  int size = 1;
  std::string source;  ///< the variable the rank came from, e.g. "OMPI_COMM_WORLD_RANK"
};

/// Looks a variable up; nullptr when unset. The default reads the process environment.
using EnvLookup = std::function<const char*(const char*)>;

/// The launcher's world from BRAID_RANK/BRAID_WORLD_SIZE, RANK/WORLD_SIZE (torchrun),
/// OMPI_COMM_WORLD_RANK/SIZE, PMI_RANK/PMI_SIZE or SLURM_PROCID/SLURM_NTASKS, in that order;
/// nullopt when none of them is set. A malformed or inconsistent value is an error.
Expected<std::optional<LauncherWorld>> detectLauncher(const EnvLookup& env);
Expected<std::optional<LauncherWorld>> detectLauncher();

/// Runs in the parent once every child exists; what it returns is handed to each child.
using ParentTask = std::function<Expected<std::string>()>;
/// A child's work: its index and the parent's payload; the return value is its exit status.
using ChildBody = std::function<int(int index, const std::string& payload)>;

/// Forks n child processes, then runs makePayload in the parent and sends its result to every
/// child through a pipe; child i then runs body(i, payload) and exits with its return value.
/// Forking first means the children start from a parent that has no other threads yet, whatever
/// makePayload starts (a library rendezvous listener, say) cannot hold a lock a child needs.
/// If makePayload fails, the children exit quietly and its error is returned. Otherwise waits for
/// every child; once one fails, the others get `grace` to finish (their communicators report the
/// lost peer), then are killed. Children die with the parent. A child killed by a signal is
/// described on stderr (one that exits reports its own trouble). Returns the highest exit status
/// of the children, 128 + the signal number for one killed: 0 when all succeeded.
Expected<int> runProcesses(int n, const ParentTask& makePayload, const ChildBody& body,
                           std::chrono::milliseconds grace);

/// Runs body(t) for t in [0, n), each on its own thread, and joins them. Returns 0 when every
/// body returned 0, else the first non-zero value in thread order.
int runThreads(int n, const std::function<int(int)>& body);

/// Confines this process to the index-th CPU of its affinity (modulo their number), as mpirun's
/// --bind-to core: ranks the scheduler would otherwise stack on one CPU (it wakes a sleeper next
/// to its waker) keep a core each, or share them evenly when they outnumber the cores.
Outcome bindToCpu(int index);

}  // namespace braid::perf
