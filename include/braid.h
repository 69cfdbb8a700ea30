/*
 * Braid: collective communication for host and CUDA memory.
 *
 * The public C API. Names, argument order and enum values are a contract: programs written
 * against this header compile and run unchanged across releases. Enum values follow NCCL's
 * numbering so that an NCCL-compatible layer is thin.
 *
 * Every function is thread-safe with respect to different communicators.
 */
#ifndef BRAID_H_
#define BRAID_H_

#include <stddef.h>

#if defined(__GNUC__)
#define BRAID_API __attribute__((visibility("default")))
#else
#define BRAID_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define BRAID_MAJOR 0
#define BRAID_MINOR 1
#define BRAID_PATCH 0
/** The version this header describes, encoded as braidGetVersion() reports it. */
#define BRAID_VERSION_CODE (BRAID_MAJOR * 10000 + BRAID_MINOR * 100 + BRAID_PATCH)

/** An opaque communicator: one rank's membership in a group of ranks. */
typedef struct braidComm* braidComm_t;
/** A cudaStream_t, or NULL for host execution (the call returns when the work is complete). */
typedef void* braidStream_t;

#define BRAID_UNIQUE_ID_BYTES 128
/** Rendezvous address and random secret of one communicator; made once, handed to every rank. */
typedef struct {
  char internal[BRAID_UNIQUE_ID_BYTES];
} braidUniqueId;

/* In C++ the enums take int as their fixed underlying type, as a C enum effectively has: then
 * every int a caller passes is a value of the type, and the library rejects the unknown ones with
 * braidInvalidArgument (C++ would otherwise give out-of-range values undefined behaviour). */
#ifdef __cplusplus
#define BRAID_ENUM_BASE : int
#else
#define BRAID_ENUM_BASE
#endif

typedef enum BRAID_ENUM_BASE {
  braidSuccess = 0,
  braidUnhandledCudaError = 1,
  braidSystemError = 2,
  braidInternalError = 3,
  braidInvalidArgument = 4,
  braidInvalidUsage = 5,
  braidRemoteError = 6,
  braidInProgress = 7,
  braidTimeout = 8
} braidResult_t;

typedef enum BRAID_ENUM_BASE {
  braidInt8 = 0,
  braidUint8 = 1,
  braidInt32 = 2,
  braidUint32 = 3,
  braidInt64 = 4,
  braidUint64 = 5,
  braidFloat16 = 6,
  braidFloat32 = 7,
  braidFloat64 = 8,
  braidBfloat16 = 9
} braidDataType_t;

/** Reductions. Avg is Sum divided by nranks (integers: truncating division). */
typedef enum BRAID_ENUM_BASE {
  braidSum = 0,
  braidProd = 1,
  braidMax = 2,
  braidMin = 3,
  braidAvg = 4
} braidRedOp_t;

/* ---------------------------------------------------------------------------------------------
 * Version and errors
 * ------------------------------------------------------------------------------------------- */

/** Writes MAJOR*10000 + MINOR*100 + PATCH of the loaded library. */
BRAID_API braidResult_t braidGetVersion(int* version);
/** A static, human-readable name for a result code. */
BRAID_API const char* braidGetErrorString(braidResult_t result);
/** Detail of the last failure on comm, or of the calling thread's last failure when comm is NULL.
 *  The string stays valid until the next call on the same comm (or thread). */
BRAID_API const char* braidGetLastError(braidComm_t comm);

/* ---------------------------------------------------------------------------------------------
 * Creation and destruction
 * ------------------------------------------------------------------------------------------- */

/** Makes a new id: starts a rendezvous listener in this process and draws a random secret.
 *  This process must stay alive until every rank has joined. */
BRAID_API braidResult_t braidGetUniqueId(braidUniqueId* uniqueId);
/** Joins communicator commId as rank of nranks; blocks until every rank has joined (or timeout). */
BRAID_API braidResult_t braidCommInitRank(braidComm_t* comm, int nranks, braidUniqueId commId,
                                          int rank);
/** Creates ndev ranks in this process, comms[i] being rank i. devlist may be NULL: ranks then use
 *  host memory, or devices 0..ndev-1 where CUDA buffers are passed. */
BRAID_API braidResult_t braidCommInitAll(braidComm_t* comms, int ndev, const int* devlist);
/** Rank, size and rendezvous from the launcher's environment (BRAID_RANK/BRAID_WORLD_SIZE/
 *  BRAID_ADDR, torchrun, Open MPI, Slurm or PMI variables). */
BRAID_API braidResult_t braidCommInitFromEnv(braidComm_t* comm);
/** Collective over comm: ranks with the same color form a new communicator ordered by key (ties by
 *  old rank). color < 0: this rank gets NULL. */
BRAID_API braidResult_t braidCommSplit(braidComm_t comm, int color, int key, braidComm_t* newcomm);
/** Waits for queued work, then frees every resource of comm. */
BRAID_API braidResult_t braidCommDestroy(braidComm_t comm);
/** Unblocks every call in progress on comm (they return an error), then frees it. */
BRAID_API braidResult_t braidCommAbort(braidComm_t comm);
/** The error that made comm unusable (braidSuccess while it is healthy). */
BRAID_API braidResult_t braidCommGetAsyncError(braidComm_t comm, braidResult_t* asyncError);
BRAID_API braidResult_t braidCommCount(const braidComm_t comm, int* count);
BRAID_API braidResult_t braidCommUserRank(const braidComm_t comm, int* rank);
/** The CUDA device of comm; -1 on host-only communicators. */
BRAID_API braidResult_t braidCommCuDevice(const braidComm_t comm, int* device);

/* ---------------------------------------------------------------------------------------------
 * Collectives
 *
 * Buffers may be host memory or CUDA device memory (detected per call).
 * stream == NULL: the call returns when the operation is complete.
 * stream != NULL: the operation is enqueued on that CUDA stream; the call returns at once.
 * In-place where sendbuff == recvbuff (AllGather: sendbuff == recvbuff + rank*count*size;
 * ReduceScatter: sendbuff + rank*recvcount*size == recvbuff). count == 0 is valid and does nothing
 * but still matches across ranks.
 * ------------------------------------------------------------------------------------------- */

BRAID_API braidResult_t braidAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                                       braidDataType_t datatype, braidRedOp_t op, braidComm_t comm,
                                       braidStream_t stream);
BRAID_API braidResult_t braidBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                                       braidDataType_t datatype, int root, braidComm_t comm,
                                       braidStream_t stream);
BRAID_API braidResult_t braidReduce(const void* sendbuff, void* recvbuff, size_t count,
                                    braidDataType_t datatype, braidRedOp_t op, int root,
                                    braidComm_t comm, braidStream_t stream);
BRAID_API braidResult_t braidAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                                       braidDataType_t datatype, braidComm_t comm,
                                       braidStream_t stream);
BRAID_API braidResult_t braidReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                           braidDataType_t datatype, braidRedOp_t op,
                                           braidComm_t comm, braidStream_t stream);
/** count elements go to each peer: block p of sendbuff to rank p, block p of recvbuff from p. */
BRAID_API braidResult_t braidAllToAll(const void* sendbuff, void* recvbuff, size_t count,
                                      braidDataType_t datatype, braidComm_t comm,
                                      braidStream_t stream);
BRAID_API braidResult_t braidSend(const void* sendbuff, size_t count, braidDataType_t datatype,
                                  int peer, braidComm_t comm, braidStream_t stream);
BRAID_API braidResult_t braidRecv(void* recvbuff, size_t count, braidDataType_t datatype, int peer,
                                  braidComm_t comm, braidStream_t stream);

/** Calls between Start and End are queued and run together at End, so that matching Send/Recv
 *  pairs, or several ranks driven from one thread, cannot deadlock. Nestable. */
BRAID_API braidResult_t braidGroupStart(void);
BRAID_API braidResult_t braidGroupEnd(void);

/* ---------------------------------------------------------------------------------------------
 * Extensions (additions to the NCCL-shaped core)
 * ------------------------------------------------------------------------------------------- */

/** Per-communicator settings that take precedence over the environment. */
typedef struct {
  size_t size;                 /**< sizeof(braidConfig_t): lets the struct grow compatibly */
  const char* const* settings; /**< NULL-terminated "BRAID_NAME=value" strings, or NULL */
} braidConfig_t;
#define BRAID_CONFIG_INITIALIZER \
  { sizeof(braidConfig_t), NULL }

/** braidCommInitRank with settings that override the environment (config may be NULL). */
BRAID_API braidResult_t braidCommInitRankConfig(braidComm_t* comm, int nranks, braidUniqueId commId,
                                                int rank, const braidConfig_t* config);
/** braidCommInitAll with settings that override the environment (config may be NULL). */
BRAID_API braidResult_t braidCommInitAllConfig(braidComm_t* comms, int ndev, const int* devlist,
                                               const braidConfig_t* config);
/** Size in bytes of one element of datatype, or 0 for an unknown datatype. */
BRAID_API size_t braidDataTypeSize(braidDataType_t datatype);
/** Allocates size bytes of host memory that ranks on this host can read from one another's
 *  processes (like ncclMemAlloc). A collective whose sendbuff lies in such memory hands it to the
 *  peers on this host to read in place, rather than copying it through shared-memory FIFOs: each
 *  byte is copied once instead of twice. Page-aligned and zero-filled; any host buffer still works
 *  everywhere, this one is only faster. Free with braidMemFree. */
BRAID_API braidResult_t braidMemAlloc(void** ptr, size_t size);
/** Frees memory from braidMemAlloc (NULL: nothing). Not while a call that uses it is in flight. */
BRAID_API braidResult_t braidMemFree(void* ptr);

/* ---------------------------------------------------------------------------------------------
 * Rooted and irregular exchanges, and a barrier. Each runs as one group of sends and receives
 * (braidGroupStart/End inside the call): inside a caller's open group it joins that group.
 * ------------------------------------------------------------------------------------------- */

/** Gathers every rank's sendcount elements into root's recvbuff, block p from rank p
 *  (nranks * sendcount elements; read on root only, may be NULL elsewhere). In place on root
 *  where sendbuff == recvbuff + root * sendcount * size. */
BRAID_API braidResult_t braidGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                                    braidDataType_t datatype, int root, braidComm_t comm,
                                    braidStream_t stream);
/** Scatters root's sendbuff, block p to rank p (nranks * recvcount elements; read on root only,
 *  may be NULL elsewhere), into every rank's recvbuff of recvcount elements. In place on root
 *  where recvbuff == sendbuff + root * recvcount * size. */
BRAID_API braidResult_t braidScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                     braidDataType_t datatype, int root, braidComm_t comm,
                                     braidStream_t stream);
/** All-to-all with a count per peer: sendcounts[p] elements at sendbuff + sdispls[p] elements go
 *  to rank p, and recvcounts[p] elements from rank p land at recvbuff + rdispls[p] elements.
 *  Each array has nranks entries; rank p's sendcounts[q] must equal rank q's recvcounts[p].
 *  Send and receive buffers must not overlap. */
BRAID_API braidResult_t braidAllToAllv(const void* sendbuff, const size_t* sendcounts,
                                       const size_t* sdispls, void* recvbuff,
                                       const size_t* recvcounts, const size_t* rdispls,
                                       braidDataType_t datatype, braidComm_t comm,
                                       braidStream_t stream);
/** Returns once every rank of comm has called it (host execution; not inside a group). */
BRAID_API braidResult_t braidBarrier(braidComm_t comm);

/* ---------------------------------------------------------------------------------------------
 * Fault tolerance.
 * ------------------------------------------------------------------------------------------- */

/** Survivors carry on (like ncclCommShrink): the ranks of comm not listed in excludeRanks (nexclude
 *  entries, each in 0..nranks-1; typically the ranks a braidRemoteError named) form *newcomm,
 *  keeping their relative order (new rank = old rank minus the excluded ranks below it). Every
 *  remaining rank calls it with the same set; the excluded ranks, dead or alive, do not. It works
 *  on a communicator that failed, whichever ranks were lost (rank 0 included): the survivors meet
 *  through their bootstrap connections, never through the lost ranks or comm's data path, and
 *  build new transports. comm itself is left as it was (unusable after a failure) and is still
 *  freed with braidCommDestroy or braidCommAbort. The new communicator has comm's settings. Not
 *  inside a group. A survivor that dies during the shrink fails it on the others (and it cannot
 *  complete if the lowest remaining rank, which gathers the others' addresses, dies then). */
BRAID_API braidResult_t braidCommShrink(braidComm_t comm, const int* excludeRanks, int nexclude,
                                        braidComm_t* newcomm);

#ifdef __cplusplus
}
#endif

#endif /* BRAID_H_ */
