/*
 * What the conformance programs (nccl_conformance.c, nccl_conformance_device.c) share around
 * their ranks: the datatypes and operators every reduction check covers, and waiting for the
 * forked rank processes with a deadline, so that a stuck rank fails the program instead of
 * hanging it. Knows only nccl.h and POSIX.
 */
#ifndef BRAID_NCCL_CONFORMANCE_RANKS_H
#define BRAID_NCCL_CONFORMANCE_RANKS_H

#include <nccl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "conformance_values.h"

static const ncclDataType_t kTypes[] = {ncclInt8,    ncclUint8,   ncclInt32,   ncclUint32,
                                        ncclInt64,   ncclUint64,  ncclFloat16, ncclFloat32,
                                        ncclFloat64, ncclBfloat16};
static const ncclRedOp_t kOps[] = {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg};
enum { kNumTypes = sizeof(kTypes) / sizeof(kTypes[0]), kNumOps = sizeof(kOps) / sizeof(kOps[0]) };

static inline double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Waits for the n rank processes `pids`, counting each that failed in gFailures. Returns 0, or 1
 * when some were still running after `seconds` (then all are killed and reaped). */
static inline int waitForRanks(const pid_t* pids, int n, double seconds) {
  const double deadline = now() + seconds;
  int running = n;
  while (running > 0 && now() < deadline) {
    int status = 0;
    pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid > 0) {
      --running;
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "a rank failed (status %d)\n", status);
        ++gFailures;
      }
    } else {
      usleep(10000);
    }
  }
  if (running == 0) return 0;
  fprintf(stderr, "deadline passed with %d ranks running\n", running);
  for (int r = 0; r < n; ++r) kill(pids[r], SIGKILL);
  while (waitpid(-1, NULL, 0) > 0) {
  }
  return 1;
}

#endif /* BRAID_NCCL_CONFORMANCE_RANKS_H */
