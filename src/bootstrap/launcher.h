// braidCommInitFromEnv: a communicator from what a launcher put in the environment, with no id to
// pass around.
//
// Rank and size come from the first of these that is set (as braid-perf detects them):
//   BRAID_RANK / BRAID_WORLD_SIZE               (the BRAID_ entries of the config table)
//   RANK / WORLD_SIZE (+ LOCAL_WORLD_SIZE)      torchrun
//   OMPI_COMM_WORLD_RANK / _SIZE (+ _LOCAL_SIZE) Open MPI's mpirun
//   PMI_RANK / PMI_SIZE (+ MPI_LOCALNRANKS)     MPICH's mpiexec (Hydra) and other PMI launchers
//   SLURM_PROCID / SLURM_NTASKS (+ node list)   srun
//
// The rendezvous is agreed without talking: rank 0 serves it at a known address and everybody
// (rank 0 included) joins there, retrying until rank 0 is up or BRAID_TIMEOUT passes.
//   BRAID_ADDR=host:port                         wins when set
//   MASTER_ADDR : MASTER_PORT + 1                torchrun (its own store holds MASTER_PORT)
//   first host of SLURM_STEP_NODELIST : port     srun across nodes (rank 0 runs on the first node)
//   127.0.0.1 : port                             when the launcher says every rank is on one host
// where `port` is derived from the job id (20000-31999, below the ephemeral ports). Otherwise
// (mpirun or mpiexec across hosts without BRAID_ADDR) it is an error that asks for BRAID_ADDR.
//
// The secret that admits ranks is BRAID_SECRET when set, else derived from an id the launcher
// gives every rank of the job: Open MPI's per-job random transport key
// (OMPI_MCA_orte_precondition_transports), else its job id, PMIX_NAMESPACE, TORCHELASTIC_RUN_ID or
// SLURM_JOB_ID.SLURM_STEP_ID. Apart from Open MPI's random key these ids are guessable (small
// counters, user-chosen names): they keep ranks of different jobs apart, not attackers out. On a
// shared network set BRAID_SECRET to a random value distributed to the job's ranks.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "base/config.h"
#include "base/status.h"
#include "bootstrap/unique_id.h"
#include "braid.h"

namespace braid {

/// Looks a variable up; nullptr when unset.
using EnvLookup = std::function<const char*(const char*)>;

/// What every rank of the job works out on its own.
struct LaunchPlan {
  int rank = 0;
  int size = 1;
  std::string launcher;  ///< "torchrun", "Open MPI", "Slurm", "PMI", "BRAID_RANK"
  std::string host;      ///< where rank 0 serves the rendezvous
  uint16_t port = 0;
  std::string addressSource;  ///< how host and port were found, for messages
  Secret secret{};
  std::string secretSource;  ///< "BRAID_SECRET" or the job id variable
};

/// Reads rank, size, rendezvous and secret from `config` (BRAID_RANK, BRAID_WORLD_SIZE,
/// BRAID_ADDR, BRAID_SECRET) and the launcher's variables. Errors name the variable at fault.
Result<LaunchPlan> planLaunch(const Config& config, const EnvLookup& env);

/// The port derived from a job id: the same on every rank, in [20000, 32000).
uint16_t derivedPort(const std::string& jobId);

/// The first host of a Slurm node list ("node[07-09,12],gpu3" -> "node07").
std::string firstSlurmHost(const std::string& nodeList);

/// The id of the planned rendezvous; on rank 0 it first starts the rendezvous root there.
Result<braidUniqueId> launchRendezvous(const LaunchPlan& plan, double timeoutSeconds);

}  // namespace braid
