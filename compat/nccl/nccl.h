/*
 * nccl.h for Braid's NCCL-compatible library (libnccl.so.2).
 *
 * Declares the NCCL 2.x C API as NVIDIA documents it, so that programs and frameworks written for
 * NCCL compile against this header (or against NVIDIA's) and run on Braid by loading this
 * libnccl.so.2 instead of NVIDIA's. Every function maps onto Braid's C API (braid.h); the
 * differences are listed at each declaration and in docs/frameworks.md.
 *
 * Types and enum values follow NCCL's documented numbering, which braid.h shares.
 */
#ifndef NCCL_H_
#define NCCL_H_

#include <limits.h>
#include <stddef.h>

/* cudaStream_t: from the CUDA runtime header where it is on the include path (as NVIDIA's nccl.h
 * does), declared here as the same type otherwise, so that host-only programs build without a
 * CUDA toolkit. */
#if !defined(__CUDA_RUNTIME_H__) && !defined(CUDART_VERSION) && defined(__has_include)
#if __has_include(<cuda_runtime.h>)
#include <cuda_runtime.h>
#endif
#endif
#if !defined(__CUDA_RUNTIME_H__) && !defined(CUDART_VERSION)
struct CUstream_st;
typedef struct CUstream_st* cudaStream_t;
#endif

#if defined(__GNUC__)
#define NCCL_EXPORT __attribute__((visibility("default")))
#else
#define NCCL_EXPORT
#endif

#define NCCL_MAJOR 2
#define NCCL_MINOR 28
#define NCCL_PATCH 3
#define NCCL_SUFFIX ""

/* Version encoding since NCCL 2.9: MAJOR*10000 + MINOR*100 + PATCH (older releases used 1000). */
#define NCCL_VERSION(X, Y, Z) \
  (((X) <= 2 && (Y) <= 8) ? (X)*1000 + (Y)*100 + (Z) : (X)*10000 + (Y)*100 + (Z))
#define NCCL_VERSION_CODE NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH)

/* Which API generations this header carries (frameworks test these at compile time). */
#define NCCL_HAS_COMM_SPLIT 1
#define NCCL_HAS_COMM_REGISTER 1
#define NCCL_HAS_MEM_ALLOC 1

#ifdef __cplusplus
extern "C" {
#endif

/** An opaque communicator. */
typedef struct ncclComm* ncclComm_t;
#define NCCL_COMM_NULL NULL

#define NCCL_UNIQUE_ID_BYTES 128
/** Rendezvous address and secret of one communicator; made once, handed to every rank. */
typedef struct {
  char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6, /* also: a collective that did not finish within BRAID_TIMEOUT */
  ncclInProgress = 7,
  ncclNumResults = 8
} ncclResult_t;

/* ncclConfig_t fields left at these values keep the library's default. */
#define NCCL_CONFIG_UNDEF_INT INT_MIN
#define NCCL_CONFIG_UNDEF_PTR NULL
#define NCCL_SPLIT_NOCOLOR -1
#define NCCL_UNDEF_FLOAT -1.0f

/** Communicator settings for ncclCommInitRankConfig / ncclCommSplit. The layout is NCCL's
 *  (NCCL 2.28): the library reads fields only within `size` bytes, so a program built against an
 *  older header passes a shorter struct safely. Braid honours `blocking` (calls always complete
 *  before returning, which a non-blocking caller accepts as well) and `netName` ("Socket" excludes
 *  the RDMA transport); the GPU-launch fields (CTAs, cluster size...) have no meaning for Braid's
 *  executors and are accepted and ignored. */
typedef struct ncclConfig_v22800 {
  size_t size;          /* sizeof(ncclConfig_t) of the caller's header */
  unsigned int magic;   /* 0xcafebeef */
  unsigned int version; /* NCCL_VERSION_CODE of the caller's header */
  int blocking;
  int cgaClusterSize;
  int minCTAs;
  int maxCTAs;
  const char* netName;
  int splitShare;
  int trafficClass;
  const char* commName;
  int collnetEnable;
  int CTAPolicy;
  int shrinkShare;
  int nvlsCTAs;
  int nChannelsPerNetPeer;
  int nvlinkCentricSched;
} ncclConfig_t;

#define NCCL_CONFIG_MAGIC 0xcafebeef
#define NCCL_CONFIG_INITIALIZER                                                                \
  {                                                                                            \
    sizeof(ncclConfig_t), NCCL_CONFIG_MAGIC, NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH), \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,                   \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_PTR, NCCL_CONFIG_UNDEF_INT,                   \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_PTR, NCCL_CONFIG_UNDEF_INT,                   \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,                   \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT                                           \
  }

/* ---------------------------------------------------------------------------------------------
 * Version, errors, memory
 * ------------------------------------------------------------------------------------------- */

/** NCCL_VERSION_CODE of this library (the NCCL API level it implements). */
NCCL_EXPORT ncclResult_t ncclGetVersion(int* version);
/** A static name for a result code. */
NCCL_EXPORT const char* ncclGetErrorString(ncclResult_t result);
/** Detail of the last failure: of comm when given and it failed last, else of the calling thread.
 *  Valid until the calling thread's next NCCL call. */
NCCL_EXPORT const char* ncclGetLastError(ncclComm_t comm);

/** Device memory from the CUDA driver where it is loaded and a context is current; page-aligned
 *  host memory otherwise (host-only machines, tests). Free with ncclMemFree. */
NCCL_EXPORT ncclResult_t ncclMemAlloc(void** ptr, size_t size);
NCCL_EXPORT ncclResult_t ncclMemFree(void* ptr);

/* ---------------------------------------------------------------------------------------------
 * Communicators
 * ------------------------------------------------------------------------------------------- */

/** Makes a new id (starts a rendezvous listener in this process, which must outlive the init). */
NCCL_EXPORT ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId);
/** Joins commId as rank of nranks; blocks until every rank has joined (or inside a group, until
 *  ncclGroupEnd). NCCL_* environment variables are translated to Braid settings at this point. */
NCCL_EXPORT ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId,
                                          int rank);
/** ncclCommInitRank with a config (may be NULL). */
NCCL_EXPORT ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId,
                                                int rank, ncclConfig_t* config);
/** ncclCommInitRankConfig where several ids were made: every rank passes the same nId ids; Braid
 *  needs only one rendezvous and uses commIds[0]. */
NCCL_EXPORT ncclResult_t ncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank,
                                                  int nId, ncclUniqueId* commIds,
                                                  ncclConfig_t* config);
/** ndev ranks in this process; devlist NULL: host memory (or devices 0..ndev-1 in a CUDA build). */
NCCL_EXPORT ncclResult_t ncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist);
/** Collective over comm: ranks with the same color form newcomm, ordered by key then old rank;
 *  color NCCL_SPLIT_NOCOLOR gives NULL. config (may be NULL) as for ncclCommInitRankConfig; the
 *  new communicator inherits the parent's settings. */
NCCL_EXPORT ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
                                       ncclConfig_t* config);

#define NCCL_SHRINK_DEFAULT 0x00
#define NCCL_SHRINK_ABORT 0x01
/** Called by every rank of comm that is not in excludeRanksList (the excluded ranks do not call):
 *  newcomm holds the callers, ranked in their old order (braidCommShrink). comm may have failed
 *  (NCCL_SHRINK_ABORT: shrinking around ranks that died) or be healthy (NCCL_SHRINK_DEFAULT); it
 *  is left as it was, to be destroyed or aborted. config (may be NULL) as for ncclCommSplit: the
 *  new communicator inherits the parent's settings. */
NCCL_EXPORT ncclResult_t ncclCommShrink(ncclComm_t comm, int* excludeRanksList,
                                        int excludeRanksCount, ncclComm_t* newcomm,
                                        ncclConfig_t* config, int shrinkFlags);
/** Ends the use of comm for communication: waits for its operations; afterwards only
 *  ncclCommDestroy / ncclCommAbort and the queries are valid. */
NCCL_EXPORT ncclResult_t ncclCommFinalize(ncclComm_t comm);
NCCL_EXPORT ncclResult_t ncclCommDestroy(ncclComm_t comm);
/** Unblocks every call in progress on comm (they fail), then frees it. */
NCCL_EXPORT ncclResult_t ncclCommAbort(ncclComm_t comm);
/** The error that made comm unusable (ncclSuccess while it is healthy). */
NCCL_EXPORT ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError);
NCCL_EXPORT ncclResult_t ncclCommCount(const ncclComm_t comm, int* count);
/** -1 for a communicator on host memory. */
NCCL_EXPORT ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device);
NCCL_EXPORT ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank);

/** Buffer registration. Braid moves data through its own FIFOs and needs no registration: the
 *  handle records the range (checked at deregistration) and changes nothing else. */
NCCL_EXPORT ncclResult_t ncclCommRegister(const ncclComm_t comm, void* buff, size_t size,
                                          void** handle);
NCCL_EXPORT ncclResult_t ncclCommDeregister(const ncclComm_t comm, void* handle);

/** Window registration (NCCL's symmetric-memory windows). Braid has no symmetric kernels: a
 *  window is a registration like ncclCommRegister's, and winFlags are accepted and ignored. */
typedef struct ncclWindow* ncclWindow_t;
#define NCCL_WIN_DEFAULT 0x00
#define NCCL_WIN_COLL_SYMMETRIC 0x01
NCCL_EXPORT ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size,
                                                ncclWindow_t* win, int winFlags);
NCCL_EXPORT ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win);

/** NCCL's device-side API (communicators used from the caller's own kernels) is not provided:
 *  both calls fail with ncclInvalidUsage. The structs stay opaque. */
struct ncclDevCommRequirements;
struct ncclDevComm;
NCCL_EXPORT ncclResult_t ncclDevCommCreate(ncclComm_t comm,
                                           const struct ncclDevCommRequirements* reqs,
                                           struct ncclDevComm* outDevComm);
NCCL_EXPORT ncclResult_t ncclDevCommDestroy(ncclComm_t comm, const struct ncclDevComm* devComm);

/* ---------------------------------------------------------------------------------------------
 * Data types and reductions
 * ------------------------------------------------------------------------------------------- */

typedef enum {
  ncclInt8 = 0,
  ncclChar = 0,
  ncclUint8 = 1,
  ncclInt32 = 2,
  ncclInt = 2,
  ncclUint32 = 3,
  ncclInt64 = 4,
  ncclUint64 = 5,
  ncclFloat16 = 6,
  ncclHalf = 6,
  ncclFloat32 = 7,
  ncclFloat = 7,
  ncclFloat64 = 8,
  ncclDouble = 8,
  ncclBfloat16 = 9,
  ncclNumTypes = 10 /* Braid has no fp8 types: NCCL's ncclFloat8e4m3/e5m2 are not accepted */
} ncclDataType_t;

/* ncclMaxRedOp keeps the enum as wide as an int: ops made by ncclRedOpCreatePreMulSum are
 * values from ncclNumOps up. */
typedef enum {
  ncclSum = 0,
  ncclProd = 1,
  ncclMax = 2,
  ncclMin = 3,
  ncclAvg = 4,
  ncclNumOps = 5,
  ncclMaxRedOp = INT_MAX
} ncclRedOp_t;

/** Where the scalar of ncclRedOpCreatePreMulSum lives. */
typedef enum {
  ncclScalarDevice = 0,       /* read through the pointer at each collective */
  ncclScalarHostImmediate = 1 /* read once, at creation */
} ncclScalarResidence_t;

/** A reduction that multiplies each rank's input by *scalar (of datatype), then sums. Supported
 *  on host memory with stream NULL: the shim scales a copy of the input, then sums. With a CUDA
 *  stream or device buffers the collective returns ncclInvalidUsage. A ncclScalarDevice scalar
 *  must be host-readable (it is read when the collective starts). */
NCCL_EXPORT ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar,
                                                  ncclDataType_t datatype,
                                                  ncclScalarResidence_t residence, ncclComm_t comm);
NCCL_EXPORT ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm);

/* ---------------------------------------------------------------------------------------------
 * Collectives. stream NULL: the call returns when the operation is complete (host memory).
 * A non-NULL stream needs a CUDA build of Braid (else ncclUnhandledCudaError).
 * ------------------------------------------------------------------------------------------- */

NCCL_EXPORT ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count,
                                    ncclDataType_t datatype, ncclRedOp_t op, int root,
                                    ncclComm_t comm, cudaStream_t stream);
/** In-place ncclBroadcast(buff, buff, ...). */
NCCL_EXPORT ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root,
                                   ncclComm_t comm, cudaStream_t stream);
NCCL_EXPORT ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                                       ncclDataType_t datatype, int root, ncclComm_t comm,
                                       cudaStream_t stream);
NCCL_EXPORT ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                                       ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                       cudaStream_t stream);
NCCL_EXPORT ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                           cudaStream_t stream);
NCCL_EXPORT ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                                       ncclDataType_t datatype, ncclComm_t comm,
                                       cudaStream_t stream);
/** count elements to and from each peer (NCCL 2.28). */
NCCL_EXPORT ncclResult_t ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                                      ncclDataType_t datatype, ncclComm_t comm,
                                      cudaStream_t stream);
/** Every rank's count elements into root's recvbuff, in rank order (NCCL 2.28). */
NCCL_EXPORT ncclResult_t ncclGather(const void* sendbuff, void* recvbuff, size_t count,
                                    ncclDataType_t datatype, int root, ncclComm_t comm,
                                    cudaStream_t stream);
/** Block r of root's sendbuff (count elements each) to rank r's recvbuff (NCCL 2.28). */
NCCL_EXPORT ncclResult_t ncclScatter(const void* sendbuff, void* recvbuff, size_t count,
                                     ncclDataType_t datatype, int root, ncclComm_t comm,
                                     cudaStream_t stream);

NCCL_EXPORT ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype,
                                  int peer, ncclComm_t comm, cudaStream_t stream);
NCCL_EXPORT ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
                                  ncclComm_t comm, cudaStream_t stream);

/** Calls between Start and End are queued and run together at End. Nestable. */
NCCL_EXPORT ncclResult_t ncclGroupStart(void);
NCCL_EXPORT ncclResult_t ncclGroupEnd(void);

/** What ncclGroupSimulateEnd fills in; NCCL's layout. */
typedef struct {
  size_t size;          /* sizeof(ncclSimInfo_t) of the caller's header */
  unsigned int magic;   /* not read by Braid */
  unsigned int version; /* NCCL_VERSION_CODE of the caller's header */
  float estimatedTime;  /* microseconds */
} ncclSimInfo_t;
#define NCCL_SIM_INFO_INITIALIZER                                                         \
  {                                                                                       \
    sizeof(ncclSimInfo_t), 0x74685283u, NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH), \
        NCCL_UNDEF_FLOAT                                                                  \
  }
/** Braid does not simulate a group: fails with ncclInvalidUsage and leaves the group open, to be
 *  ended with ncclGroupEnd. */
NCCL_EXPORT ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t* simInfo);

#ifdef __cplusplus
}
#endif

#endif /* NCCL_H_ */
