/*
 * A program written against NCCL's API only (it includes nccl.h and nothing of Braid) and linked
 * to Braid's libnccl.so.2. It forks NRANKS processes that run every collective, point-to-point
 * and management call with checks on the results, then drives several ranks from one thread
 * (ncclCommInitAll, grouped ncclCommInitRank). Exit status 0 when every check passed.
 *
 * Usage: nccl_conformance [nranks]   (2 to 4, default 4: products of inputs up to 3 must fit
 * an int8)
 */
#include <math.h>
#include <nccl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "conformance_ranks.h"
#include "conformance_values.h"

/* ---- the multi-process part ---- */

static void checkReductions(ncclComm_t comm, int rank, int n) {
  const size_t count = 273; /* not a multiple of nranks */
  for (int ti = 0; ti < kNumTypes; ++ti) {
    ncclDataType_t t = kTypes[ti];
    for (int oi = 0; oi < kNumOps; ++oi) {
      ncclRedOp_t op = kOps[oi];
      void* send = xmalloc(count * typeSize(t));
      void* recv = xmalloc(count * typeSize(t));
      for (size_t i = 0; i < count; ++i) put(send, i, t, input(rank, i));
      NCCL_OK(ncclAllReduce(send, recv, count, t, op, comm, NULL));
      for (size_t i = 0; i < count; ++i) {
        double want = expected(op, t, n, i);
        if (!closeEnough(t, get(recv, i, t), want)) {
          CHECK(0, "allreduce type %d op %d element %zu: got %g want %g", (int)t, (int)op, i,
                get(recv, i, t), want);
          break;
        }
      }
      /* In place. */
      NCCL_OK(ncclAllReduce(send, send, count, t, op, comm, NULL));
      for (size_t i = 0; i < count; ++i) {
        if (!closeEnough(t, get(send, i, t), expected(op, t, n, i))) {
          CHECK(0, "in-place allreduce type %d op %d element %zu", (int)t, (int)op, i);
          break;
        }
      }
      /* Reduce to root 1, the same op. */
      for (size_t i = 0; i < count; ++i) put(send, i, t, input(rank, i));
      memset(recv, 0, count * typeSize(t));
      const int root = 1 % n;
      NCCL_OK(ncclReduce(send, rank == root ? recv : NULL, count, t, op, root, comm, NULL));
      if (rank == root) {
        for (size_t i = 0; i < count; ++i) {
          if (!closeEnough(t, get(recv, i, t), expected(op, t, n, i))) {
            CHECK(0, "reduce type %d op %d element %zu", (int)t, (int)op, i);
            break;
          }
        }
      }
      free(send);
      free(recv);
    }
  }
}

static void checkReduceScatter(ncclComm_t comm, int rank, int n) {
  const size_t recvcount = 37;
  float* send = xmalloc(recvcount * n * sizeof(float));
  float* recv = xmalloc(recvcount * sizeof(float));
  for (size_t i = 0; i < recvcount * n; ++i) send[i] = (float)input(rank, i);
  NCCL_OK(ncclReduceScatter(send, recv, recvcount, ncclFloat32, ncclSum, comm, NULL));
  for (size_t i = 0; i < recvcount; ++i) {
    double want = expected(ncclSum, ncclFloat32, n, rank * recvcount + i);
    if (recv[i] != want) {
      CHECK(0, "reducescatter element %zu: got %g want %g", i, recv[i], want);
      break;
    }
  }
  /* In place: this rank's block of sendbuff is recvbuff. */
  NCCL_OK(ncclReduceScatter(send, send + rank * recvcount, recvcount, ncclFloat32, ncclMax, comm,
                            NULL));
  for (size_t i = 0; i < recvcount; ++i) {
    double want = expected(ncclMax, ncclFloat32, n, rank * recvcount + i);
    if (send[rank * recvcount + i] != want) {
      CHECK(0, "in-place reducescatter element %zu", i);
      break;
    }
  }
  free(send);
  free(recv);
}

static void checkDataMovement(ncclComm_t comm, int rank, int n) {
  const size_t count = 101;
  int32_t* a = xmalloc(count * n * sizeof(int32_t));
  int32_t* b = xmalloc(count * n * sizeof(int32_t));

  /* Broadcast from the last rank, out of place and in place (ncclBcast). */
  for (size_t i = 0; i < count; ++i) a[i] = rank == n - 1 ? (int32_t)(7 * i + 1) : -1;
  NCCL_OK(ncclBroadcast(a, b, count, ncclInt32, n - 1, comm, NULL));
  for (size_t i = 0; i < count; ++i) CHECK(b[i] == (int32_t)(7 * i + 1), "broadcast %zu", i);
  for (size_t i = 0; i < count; ++i) a[i] = rank == 0 ? (int32_t)(3 * i) : 0;
  NCCL_OK(ncclBcast(a, count, ncclInt32, 0, comm, NULL));
  for (size_t i = 0; i < count; ++i) CHECK(a[i] == (int32_t)(3 * i), "bcast %zu", i);

  /* AllGather: out of place, then in place (this rank's block already in recvbuff). */
  for (size_t i = 0; i < count; ++i) a[i] = rank * 1000 + (int32_t)i;
  NCCL_OK(ncclAllGather(a, b, count, ncclInt32, comm, NULL));
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < count; ++i)
      CHECK(b[r * count + i] == r * 1000 + (int32_t)i, "allgather block %d element %zu", r, i);
  memset(b, 0, count * n * sizeof(int32_t));
  for (size_t i = 0; i < count; ++i) b[rank * count + i] = rank * 1000 + (int32_t)i;
  NCCL_OK(ncclAllGather(b + rank * count, b, count, ncclInt32, comm, NULL));
  for (int r = 0; r < n; ++r)
    CHECK(b[r * count + count - 1] == r * 1000 + (int32_t)(count - 1), "in-place allgather %d", r);

  /* AlltoAll: block p of rank r carries r*100 + p. */
  for (int p = 0; p < n; ++p)
    for (size_t i = 0; i < count; ++i) a[p * count + i] = rank * 100 + p;
  NCCL_OK(ncclAlltoAll(a, b, count, ncclInt32, comm, NULL));
  for (int p = 0; p < n; ++p)
    for (size_t i = 0; i < count; ++i)
      CHECK(b[p * count + i] == p * 100 + rank, "alltoall block %d", p);

  /* Gather to root 2 % n, then Scatter back from it; then in-place variants. */
  const int root = 2 % n;
  for (size_t i = 0; i < count; ++i) a[i] = rank * 10 + (int32_t)(i % 10);
  memset(b, 0, count * n * sizeof(int32_t));
  NCCL_OK(ncclGather(a, b, count, ncclInt32, root, comm, NULL));
  if (rank == root)
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < count; ++i)
        CHECK(b[r * count + i] == r * 10 + (int32_t)(i % 10), "gather block %d", r);
  if (rank == root)
    for (size_t i = 0; i < count * n; ++i) b[i] = (int32_t)(i * 2);
  memset(a, 0, count * sizeof(int32_t));
  NCCL_OK(ncclScatter(b, a, count, ncclInt32, root, comm, NULL));
  for (size_t i = 0; i < count; ++i)
    CHECK(a[i] == (int32_t)((rank * count + i) * 2), "scatter element %zu", i);
  if (rank == root) {
    for (size_t i = 0; i < count * n; ++i) b[i] = -1;
    for (size_t i = 0; i < count; ++i) b[root * count + i] = 555;
    NCCL_OK(ncclGather(b + root * count, b, count, ncclInt32, root, comm, NULL));
    for (int r = 0; r < n; ++r)
      CHECK(b[r * count] == (r == root ? 555 : r * 10), "in-place gather block %d", r);
  } else {
    for (size_t i = 0; i < count; ++i) a[i] = rank * 10 + (int32_t)(i % 10);
    NCCL_OK(ncclGather(a, NULL, count, ncclInt32, root, comm, NULL));
  }

  /* Send/Recv around a ring inside a group, both directions at once. */
  for (size_t i = 0; i < count; ++i) a[i] = rank * 7 + (int32_t)i;
  int32_t* fromLeft = b;
  int32_t* fromRight = b + count;
  const int right = (rank + 1) % n;
  const int left = (rank + n - 1) % n;
  NCCL_OK(ncclGroupStart());
  NCCL_OK(ncclSend(a, count, ncclInt32, right, comm, NULL));
  NCCL_OK(ncclSend(a, count, ncclInt32, left, comm, NULL));
  NCCL_OK(ncclRecv(fromLeft, count, ncclInt32, left, comm, NULL));
  NCCL_OK(ncclRecv(fromRight, count, ncclInt32, right, comm, NULL));
  NCCL_OK(ncclGroupEnd());
  for (size_t i = 0; i < count; ++i) {
    CHECK(fromLeft[i] == left * 7 + (int32_t)i, "recv from left %zu", i);
    CHECK(fromRight[i] == right * 7 + (int32_t)i, "recv from right %zu", i);
  }

  /* count 0 is valid everywhere. */
  NCCL_OK(ncclAllReduce(a, b, 0, ncclInt32, ncclSum, comm, NULL));
  NCCL_OK(ncclAllGather(a, b, 0, ncclInt32, comm, NULL));
  free(a);
  free(b);
}

static void checkPreMulSum(ncclComm_t comm, int rank, int n) {
  const size_t count = 50;
  const double triangle = n * (n + 1) / 2.0; /* sum over ranks of (rank + 1) */
  float* x = xmalloc(count * n * sizeof(float));
  float* y = xmalloc(count * n * sizeof(float));
  for (size_t i = 0; i < count * n; ++i) x[i] = (float)(i % count);

  /* Host-immediate scalar: read now, so changing it afterwards has no effect. */
  float scalar = (float)(rank + 1);
  ncclRedOp_t op;
  NCCL_OK(ncclRedOpCreatePreMulSum(&op, &scalar, ncclFloat32, ncclScalarHostImmediate, comm));
  CHECK((int)op >= (int)ncclNumOps, "a PreMulSum op is not a built-in op (got %d)", (int)op);
  scalar = 1000.0f;
  NCCL_OK(ncclAllReduce(x, y, count, ncclFloat32, op, comm, NULL));
  for (size_t i = 0; i < count; ++i) CHECK(y[i] == (float)(i * triangle), "premulsum %zu", i);
  CHECK(x[1] == 1.0f, "premulsum must not scale sendbuff in place");
  NCCL_OK(ncclReduceScatter(x, y, count, ncclFloat32, op, comm, NULL));
  for (size_t i = 0; i < count; ++i)
    CHECK(y[i] == (float)(((rank * count + i) % count) * triangle), "premulsum rs %zu", i);
  NCCL_OK(ncclReduce(x, y, count, ncclFloat32, op, 0, comm, NULL));
  if (rank == 0)
    for (size_t i = 0; i < count; ++i) CHECK(y[i] == (float)(i * triangle), "premulsum red %zu", i);

  /* Inside a group with another collective: the scaled copy must outlive the queued call. */
  int32_t ones[4] = {1, 1, 1, 1}, total[4] = {0};
  NCCL_OK(ncclGroupStart());
  NCCL_OK(ncclAllReduce(x, y, count, ncclFloat32, op, comm, NULL));
  NCCL_OK(ncclAllReduce(ones, total, 4, ncclInt32, ncclSum, comm, NULL));
  NCCL_OK(ncclGroupEnd());
  for (size_t i = 0; i < count; ++i) CHECK(y[i] == (float)(i * triangle), "grouped premulsum");
  CHECK(total[3] == n, "grouped allreduce beside premulsum");

  /* Wrong datatype, a CUDA stream, a destroyed op. */
  CHECK(ncclAllReduce(x, y, count, ncclFloat64, op, comm, NULL) == ncclInvalidArgument,
        "premulsum datatype mismatch");
  CHECK(strlen(ncclGetLastError(comm)) > 0, "an error message is recorded");
  CHECK(ncclAllReduce(x, y, count, ncclFloat32, op, comm, (cudaStream_t)0x1) == ncclInvalidUsage,
        "premulsum with a stream");
  NCCL_OK(ncclRedOpDestroy(op, comm));
  CHECK(ncclAllReduce(x, y, count, ncclFloat32, op, comm, NULL) == ncclInvalidArgument,
        "destroyed op");
  CHECK(ncclRedOpDestroy(op, comm) == ncclInvalidArgument, "double destroy");

  /* Device residence (a host-readable pointer here): read at each collective. */
  int32_t factor = 2;
  int32_t ix[3] = {1, 2, 3}, iy[3] = {0};
  NCCL_OK(ncclRedOpCreatePreMulSum(&op, &factor, ncclInt32, ncclScalarDevice, comm));
  factor = 3;
  NCCL_OK(ncclAllReduce(ix, iy, 3, ncclInt32, op, comm, NULL));
  CHECK(iy[0] == 3 * n && iy[2] == 9 * n, "device-residence scalar read at the call");
  NCCL_OK(ncclRedOpDestroy(op, comm));
  free(x);
  free(y);
}

static void checkErrors(ncclComm_t comm, int rank, int n) {
  float a[4] = {0}, b[4] = {0};
  CHECK(ncclAllReduce(a, b, 4, (ncclDataType_t)ncclNumTypes, ncclSum, comm, NULL) ==
            ncclInvalidArgument,
        "unknown datatype");
  CHECK(strstr(ncclGetLastError(NULL), "datatype") != NULL, "message names the datatype: %s",
        ncclGetLastError(NULL));
  CHECK(ncclAllReduce(a, b, 4, ncclFloat32, (ncclRedOp_t)77, comm, NULL) == ncclInvalidArgument,
        "unknown op");
  CHECK(ncclBroadcast(a, b, 4, ncclFloat32, n, comm, NULL) == ncclInvalidArgument, "root = n");
  CHECK(ncclSend(a, 4, ncclFloat32, -1, comm, NULL) == ncclInvalidArgument, "peer -1");
  CHECK(ncclAllReduce(a, b, 4, ncclFloat32, ncclSum, NULL, NULL) == ncclInvalidArgument,
        "NULL comm");
  CHECK(ncclCommCount(comm, NULL) == ncclInvalidArgument, "NULL count");
  (void)rank;
}

static void checkSplit(ncclComm_t comm, int rank, int n) {
  /* Two halves by parity, ordered in reverse by key; the last rank opts out. */
  const int color = rank == n - 1 ? NCCL_SPLIT_NOCOLOR : rank % 2;
  ncclComm_t sub = NULL;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  NCCL_OK(ncclCommSplit(comm, color, -rank, &sub, &config));
  if (color == NCCL_SPLIT_NOCOLOR) {
    CHECK(sub == NULL, "NOCOLOR gives a NULL communicator");
    return;
  }
  int members = 0, expectRank = 0;
  for (int r = 0; r < n - 1; ++r) {
    if (r % 2 != color) continue;
    ++members;
    if (r > rank) ++expectRank; /* larger old ranks have smaller keys */
  }
  int subCount = 0, subRank = -1;
  NCCL_OK(ncclCommCount(sub, &subCount));
  NCCL_OK(ncclCommUserRank(sub, &subRank));
  CHECK(subCount == members, "split size %d, want %d", subCount, members);
  CHECK(subRank == expectRank, "split rank %d, want %d", subRank, expectRank);
  int64_t mine = rank, sum = 0, want = 0;
  for (int r = 0; r < n - 1; ++r) want += r % 2 == color ? r : 0;
  NCCL_OK(ncclAllReduce(&mine, &sum, 1, ncclInt64, ncclSum, sub, NULL));
  CHECK(sum == want, "allreduce on the split communicator: %lld want %lld", (long long)sum,
        (long long)want);
  NCCL_OK(ncclCommDestroy(sub));
}

static void checkShrink(ncclComm_t comm, int rank, int n) {
  /* Rank 0 is left out; the others form a communicator ranked in their old order. */
  if (rank == 0) return;
  int excluded[] = {0};
  ncclComm_t small = NULL;
  NCCL_OK(ncclCommShrink(comm, excluded, 1, &small, NULL, NCCL_SHRINK_DEFAULT));
  int count = 0, me = -1;
  NCCL_OK(ncclCommCount(small, &count));
  NCCL_OK(ncclCommUserRank(small, &me));
  CHECK(count == n - 1 && me == rank - 1, "shrunk comm: %d ranks, rank %d", count, me);
  int64_t mine = rank, sum = 0;
  NCCL_OK(ncclAllReduce(&mine, &sum, 1, ncclInt64, ncclSum, small, NULL));
  CHECK(sum == (int64_t)n * (n - 1) / 2, "allreduce on the shrunk communicator: %lld",
        (long long)sum);
  NCCL_OK(ncclCommDestroy(small));
  ncclComm_t refused = NULL;
  int self[] = {rank};
  CHECK(ncclCommShrink(comm, self, 1, &refused, NULL, NCCL_SHRINK_DEFAULT) == ncclInvalidUsage &&
            refused == NULL,
        "a rank that excludes itself is refused");
  CHECK(ncclCommShrink(comm, excluded, 1, &refused, NULL, 0x40) == ncclInvalidArgument &&
            refused == NULL,
        "unknown shrinkFlags are refused");
  /* NCCL_SHRINK_ABORT (around failed ranks) serves a healthy communicator as well. */
  NCCL_OK(ncclCommShrink(comm, excluded, 1, &small, NULL, NCCL_SHRINK_ABORT));
  mine = rank;
  sum = 0;
  NCCL_OK(ncclAllReduce(&mine, &sum, 1, ncclInt64, ncclSum, small, NULL));
  CHECK(sum == (int64_t)n * (n - 1) / 2, "allreduce after NCCL_SHRINK_ABORT: %lld", (long long)sum);
  NCCL_OK(ncclCommDestroy(small));
}

static void checkUnsupportedCalls(ncclComm_t comm) {
  CHECK(ncclDevCommCreate(comm, NULL, NULL) == ncclInvalidUsage, "ncclDevCommCreate");
  CHECK(strstr(ncclGetLastError(NULL), "device-side API") != NULL, "ncclDevCommCreate's reason");
  ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
  NCCL_OK(ncclGroupStart());
  CHECK(ncclGroupSimulateEnd(&sim) == ncclInvalidUsage, "ncclGroupSimulateEnd is refused");
  NCCL_OK(ncclGroupEnd()); /* the group stayed open */
}

static void checkMemoryAndRegistration(ncclComm_t comm, int rank, int n) {
  double* buf = NULL;
  NCCL_OK(ncclMemAlloc((void**)&buf, 64 * sizeof(double)));
  CHECK(buf != NULL && ((uintptr_t)buf % 4096) == 0, "ncclMemAlloc gives aligned memory");
  void* handle = NULL;
  NCCL_OK(ncclCommRegister(comm, buf, 64 * sizeof(double), &handle));
  CHECK(handle != NULL, "registration handle");
  for (int i = 0; i < 64; ++i) buf[i] = rank + i;
  NCCL_OK(ncclAllReduce(buf, buf, 64, ncclFloat64, ncclMax, comm, NULL));
  CHECK(buf[5] == n - 1 + 5, "allreduce in ncclMemAlloc memory");
  NCCL_OK(ncclCommDeregister(comm, handle));
  CHECK(ncclCommDeregister(comm, handle) == ncclInvalidArgument, "double deregister");
  ncclWindow_t win = NULL;
  NCCL_OK(ncclCommWindowRegister(comm, buf, 64 * sizeof(double), &win, NCCL_WIN_COLL_SYMMETRIC));
  NCCL_OK(ncclAllReduce(buf, buf, 64, ncclFloat64, ncclSum, comm, NULL));
  CHECK(buf[0] == (double)n * (n - 1), "allreduce in a registered window: %g", buf[0]);
  NCCL_OK(ncclCommWindowDeregister(comm, win));
  CHECK(ncclCommWindowDeregister(comm, win) == ncclInvalidArgument, "double window deregister");
  NCCL_OK(ncclMemFree(buf));
  int local = 0;
  CHECK(ncclMemFree(&local) == ncclInvalidArgument, "freeing foreign memory");
}

static int rankMain(int rank, int n, ncclUniqueId id, ncclUniqueId ids[2]) {
  gRank = rank;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 1;
  config.commName = "conformance";
  ncclComm_t comm = NULL;
  NCCL_OK(ncclCommInitRankConfig(&comm, n, id, rank, &config));
  int count = 0, me = -1, dev = 0;
  NCCL_OK(ncclCommCount(comm, &count));
  NCCL_OK(ncclCommUserRank(comm, &me));
  NCCL_OK(ncclCommCuDevice(comm, &dev));
  CHECK(count == n && me == rank, "count %d rank %d", count, me);
  CHECK(dev == -1, "host communicator device %d", dev);

  checkReductions(comm, rank, n);
  checkReduceScatter(comm, rank, n);
  checkDataMovement(comm, rank, n);
  checkPreMulSum(comm, rank, n);
  checkErrors(comm, rank, n);
  checkSplit(comm, rank, n);
  checkShrink(comm, rank, n);
  checkUnsupportedCalls(comm);
  checkMemoryAndRegistration(comm, rank, n);

  ncclResult_t async = ncclInternalError;
  NCCL_OK(ncclCommGetAsyncError(comm, &async));
  CHECK(async == ncclSuccess, "async error %d on a healthy communicator", (int)async);

  /* A second communicator through the scalable entry point, ended by abort. */
  ncclComm_t scalable = NULL;
  NCCL_OK(ncclCommInitRankScalable(&scalable, n, rank, 2, ids, NULL));
  int one = 1, total = 0;
  NCCL_OK(ncclAllReduce(&one, &total, 1, ncclInt32, ncclSum, scalable, NULL));
  CHECK(total == n, "scalable communicator allreduce %d", total);
  NCCL_OK(ncclCommAbort(scalable));

  /* Finalize: communication is refused afterwards; destroy ends it; a dead handle is refused. */
  NCCL_OK(ncclCommFinalize(comm));
  CHECK(ncclAllReduce(&one, &total, 1, ncclInt32, ncclSum, comm, NULL) == ncclInvalidUsage,
        "collective after finalize");
  NCCL_OK(ncclCommDestroy(comm));
  CHECK(ncclCommCount(comm, &count) == ncclInvalidUsage, "query after destroy");
  return gFailures == 0 ? 0 : 1;
}

/* ---- the single-process part ---- */

static void checkOneThreadManyRanks(void) {
  enum { kRanks = 3 };
  gRank = 100;
  ncclComm_t comms[kRanks];
  NCCL_OK(ncclCommInitAll(comms, kRanks, NULL));
  float in[kRanks][8], out[kRanks][8];
  for (int r = 0; r < kRanks; ++r)
    for (int i = 0; i < 8; ++i) in[r][i] = (float)(r + 1);
  NCCL_OK(ncclGroupStart());
  for (int r = 0; r < kRanks; ++r)
    NCCL_OK(ncclAllReduce(in[r], out[r], 8, ncclFloat32, ncclSum, comms[r], NULL));
  NCCL_OK(ncclGroupEnd());
  for (int r = 0; r < kRanks; ++r) CHECK(out[r][7] == 6.0f, "InitAll rank %d got %g", r, out[r][7]);
  for (int r = 0; r < kRanks; ++r) NCCL_OK(ncclCommDestroy(comms[r]));

  /* Grouped ncclCommInitRank from one thread, as NCCL's multi-device examples do. */
  ncclUniqueId id;
  NCCL_OK(ncclGetUniqueId(&id));
  NCCL_OK(ncclGroupStart());
  for (int r = 0; r < kRanks; ++r) NCCL_OK(ncclCommInitRank(&comms[r], kRanks, id, r));
  NCCL_OK(ncclGroupEnd());
  NCCL_OK(ncclGroupStart());
  for (int r = 0; r < kRanks; ++r)
    NCCL_OK(ncclBroadcast(in[r], out[r], 8, ncclFloat32, 2, comms[r], NULL));
  NCCL_OK(ncclGroupEnd());
  for (int r = 0; r < kRanks; ++r) CHECK(out[r][0] == 3.0f, "grouped init broadcast rank %d", r);
  for (int r = 0; r < kRanks; ++r) NCCL_OK(ncclCommDestroy(comms[r]));

  /* A malformed translated NCCL variable is an error naming it. */
  NCCL_OK(ncclGetUniqueId(&id));
  setenv("NCCL_DEBUG", "LOUD", 1);
  ncclComm_t bad = NULL;
  CHECK(ncclCommInitRank(&bad, 1, id, 0) == ncclInvalidArgument, "NCCL_DEBUG=LOUD accepted");
  CHECK(strstr(ncclGetLastError(NULL), "NCCL_DEBUG") != NULL, "message: %s",
        ncclGetLastError(NULL));
  unsetenv("NCCL_DEBUG");
  /* A translated value Braid rejects: its message names the NCCL variable it came from. */
  NCCL_OK(ncclGetUniqueId(&id));
  setenv("NCCL_ALGO", "Ring,Warp", 1);
  CHECK(ncclCommInitRank(&bad, 1, id, 0) == ncclInvalidArgument, "NCCL_ALGO=Ring,Warp accepted");
  CHECK(strstr(ncclGetLastError(NULL), "NCCL_ALGO=Ring,Warp") != NULL, "message: %s",
        ncclGetLastError(NULL));
  unsetenv("NCCL_ALGO");
  ncclConfig_t badConfig = NCCL_CONFIG_INITIALIZER;
  badConfig.magic = 0;
  CHECK(ncclCommInitRankConfig(&bad, 1, id, 0, &badConfig) == ncclInvalidArgument,
        "config without the initializer's magic");
}

int main(int argc, char** argv) {
  const int n = argc > 1 ? atoi(argv[1]) : 4;
  if (n < 2 || n > 4) {
    fprintf(stderr, "usage: %s [nranks, 2 to 4]\n", argv[0]);
    return 2;
  }
  gRank = -1;
  int version = 0;
  NCCL_OK(ncclGetVersion(&version));
  CHECK(version == NCCL_VERSION_CODE, "version %d", version);
  CHECK(NCCL_VERSION_CODE == NCCL_MAJOR * 10000 + NCCL_MINOR * 100 + NCCL_PATCH,
        "version encoding");
  for (int r = 0; r < ncclNumResults; ++r)
    CHECK(strlen(ncclGetErrorString((ncclResult_t)r)) > 0, "error string %d", r);

  ncclUniqueId id, ids[2];
  NCCL_OK(ncclGetUniqueId(&id));
  NCCL_OK(ncclGetUniqueId(&ids[0]));
  NCCL_OK(ncclGetUniqueId(&ids[1]));
  pid_t pids[4];
  for (int r = 0; r < n; ++r) {
    pids[r] = fork();
    if (pids[r] == 0) _exit(rankMain(r, n, id, ids));
  }
  if (waitForRanks(pids, n, 240) != 0) return 1;
  checkOneThreadManyRanks();
  if (gFailures == 0) printf("nccl_conformance: %d ranks, all checks passed\n", n);
  return gFailures == 0 ? 0 : 1;
}
