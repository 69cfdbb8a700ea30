/*
 * An NCCL program, unchanged, on Braid: it includes nccl.h and links libnccl.so.2, which here is
 * Braid's NCCL-compatible library (compat/nccl). Two processes all-reduce a vector of floats on
 * host memory (stream NULL) and check the sum.
 *
 *   ./build/examples/nccl_allreduce
 * or, built by hand against the shim:
 *   cc examples/nccl_allreduce.c -Icompat/nccl -Lbuild/compat/nccl -lnccl \
 *      -Wl,-rpath,build/compat/nccl -o nccl_allreduce
 */
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#define NRANKS 2
#define COUNT 1024

#define NCCL_CHECK(call)                                                     \
  do {                                                                       \
    ncclResult_t r_ = (call);                                                \
    if (r_ != ncclSuccess) {                                                 \
      fprintf(stderr, "%s failed: %s (%s)\n", #call, ncclGetErrorString(r_), \
              ncclGetLastError(NULL));                                       \
      exit(1);                                                               \
    }                                                                        \
  } while (0)

static int runRank(int rank, ncclUniqueId id) {
  ncclComm_t comm;
  NCCL_CHECK(ncclCommInitRank(&comm, NRANKS, id, rank));
  float* data = malloc(COUNT * sizeof(float));
  for (int i = 0; i < COUNT; ++i) data[i] = (float)(rank + 1) * i;
  NCCL_CHECK(ncclAllReduce(data, data, COUNT, ncclFloat, ncclSum, comm, NULL));
  int bad = 0;
  for (int i = 0; i < COUNT; ++i) bad += data[i] != 3.0f * i; /* (1 + 2) * i */
  if (rank == 0) {
    printf("rank 0: data[%d] = %g, %d wrong elements\n", COUNT - 1, data[COUNT - 1], bad);
    fflush(stdout); /* the child leaves with _exit, which does not flush */
  }
  free(data);
  NCCL_CHECK(ncclCommDestroy(comm));
  return bad == 0 ? 0 : 1;
}

int main(void) {
  int version;
  NCCL_CHECK(ncclGetVersion(&version));
  printf("NCCL API %d (library: libnccl.so.2 from Braid)\n", version);
  ncclUniqueId id;
  NCCL_CHECK(ncclGetUniqueId(&id)); /* this process hosts the rendezvous */
  fflush(stdout);                   /* or the children would inherit the buffered line */
  for (int rank = 0; rank < NRANKS; ++rank) {
    if (fork() == 0) _exit(runRank(rank, id));
  }
  int failed = 0, status;
  while (wait(&status) > 0) failed += !WIFEXITED(status) || WEXITSTATUS(status) != 0;
  printf("%s\n", failed ? "FAILED" : "all-reduce over libnccl.so.2 correct");
  return failed ? 1 : 0;
}
