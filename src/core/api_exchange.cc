// Gather, scatter, all-to-all with a count per peer, and the barrier: the C API's exchanges that
// are made of other calls. Gather, scatter and all-to-allv are one group of sends and receives
// (every transfer in flight at once, so none waits on another); a rank's own block is a send to
// itself, which the group runs as a local copy, on host or device memory alike. The barrier is a
// one-byte all-reduce: its result needs every rank's contribution, so no rank leaves before all
// have come. Arguments are checked here, before anything is queued, so that a bad call leaves
// the caller's group as it was.
#include <algorithm>
#include <cstdint>
#include <string>

#include "base/dtype.h"
#include "base/status.h"
#include "braid.h"
#include "core/api_errors.h"
#include "core/group.h"

namespace braid {
namespace {

/// Rank and size of comm, or the query's error (a communicator that is not live).
Status rankAndSize(braidComm_t comm, int* rank, int* nranks) {
  braidResult_t r = braidCommUserRank(comm, rank);
  if (r == braidSuccess) r = braidCommCount(comm, nranks);
  return r == braidSuccess ? okStatus() : Status(r, braidGetLastError(nullptr));
}

/// Bytes of count elements of elemSize, or an error naming the call.
Result<size_t> byteSize(const char* call, const char* what, size_t count, size_t elemSize) {
  size_t bytes = 0;
  if (__builtin_mul_overflow(count, elemSize, &bytes) || bytes > (size_t{1} << 62)) {
    return invalidArgument(std::string(call) + ": " + what + " " + std::to_string(count) +
                           " overflows the byte size");
  }
  return bytes;
}

/// Runs queue() between braidGroupStart and braidGroupEnd. A call queue() rejects closes the
/// group before its error is returned (the rejected call was never queued).
template <typename F>
braidResult_t inOneGroup(F&& queue) {
  braidGroupStart();
  const braidResult_t queued = queue();
  if (queued != braidSuccess) {
    const std::string message = braidGetLastError(nullptr);
    braidGroupEnd();
    return finish(Status(queued, message));
  }
  return braidGroupEnd();
}

enum class Rooted { kGather, kScatter };

braidResult_t rootedExchange(Rooted kind, const void* sendbuff, void* recvbuff, size_t count,
                             braidDataType_t datatype, int root, braidComm_t comm,
                             braidStream_t stream) {
  const char* call = kind == Rooted::kGather ? "braidGather" : "braidScatter";
  int rank = 0;
  int nranks = 0;
  Status status = rankAndSize(comm, &rank, &nranks);
  if (!status.ok()) return finish(status);
  const size_t elemSize = dataTypeSize(datatype);
  if (elemSize == 0) {
    return finish(
        invalidArgument(std::string(call) + ": datatype " +
                        std::to_string(static_cast<int>(datatype)) + " is not a braidDataType_t"),
        comm);
  }
  if (root < 0 || root >= nranks) {
    return finish(invalidArgument(std::string(call) + ": root " + std::to_string(root) +
                                  " is outside [0, " + std::to_string(nranks) + ")"),
                  comm);
  }
  Result<size_t> block = byteSize(call, "count", count, elemSize);
  size_t allBytes = 0;
  if (block.ok() && __builtin_mul_overflow(block.value(), size_t(nranks), &allBytes)) {
    block = invalidArgument(std::string(call) + ": count " + std::to_string(count) + " x " +
                            std::to_string(nranks) + " ranks overflows the byte size");
  }
  if (!block.ok()) return finish(block.status(), comm);
  const bool isRoot = rank == root;
  const bool gather = kind == Rooted::kGather;
  const auto* send = static_cast<const char*>(sendbuff);
  auto* recv = static_cast<char*>(recvbuff);
  if (count > 0 && ((gather || isRoot) && send == nullptr)) {
    return finish(invalidArgument(std::string(call) + ": sendbuff is NULL"), comm);
  }
  if (count > 0 && ((!gather || isRoot) && recv == nullptr)) {
    return finish(invalidArgument(std::string(call) + ": recvbuff is NULL"), comm);
  }
  const size_t blockBytes = block.value();
  // The root's own block stays where it is when it already lies in place.
  const bool selfInPlace = isRoot && (gather ? send == recv + size_t(rank) * blockBytes
                                             : recv == send + size_t(rank) * blockBytes);
  return inOneGroup([&]() -> braidResult_t {
    braidResult_t r = braidSuccess;
    if (gather) {
      if (!selfInPlace) r = braidSend(send, count, datatype, root, comm, stream);
      for (int p = 0; isRoot && p < nranks && r == braidSuccess; ++p) {
        if (p == rank && selfInPlace) continue;
        r = braidRecv(recv + size_t(p) * blockBytes, count, datatype, p, comm, stream);
      }
    } else {
      for (int p = 0; isRoot && p < nranks && r == braidSuccess; ++p) {
        if (p == rank && selfInPlace) continue;
        r = braidSend(send + size_t(p) * blockBytes, count, datatype, p, comm, stream);
      }
      if (r == braidSuccess && !selfInPlace) {
        r = braidRecv(recv, count, datatype, root, comm, stream);
      }
    }
    return r;
  });
}

/// The byte range [first, end) that counts/displs of one side touch, or an error.
/// countsName and displsName are the parameter names, for the messages.
Status sideExtent(const char* countsName, const char* displsName, const size_t* counts,
                  const size_t* displs, int nranks, size_t elemSize, uintptr_t* first,
                  uintptr_t* end) {
  if (counts == nullptr || displs == nullptr) {
    return invalidArgument(std::string("braidAllToAllv: ") + countsName + " or " + displsName +
                           " is NULL");
  }
  size_t lo = SIZE_MAX;
  size_t hi = 0;
  for (int p = 0; p < nranks; ++p) {
    size_t last = 0;
    if (__builtin_add_overflow(displs[p], counts[p], &last) ||
        __builtin_mul_overflow(last, elemSize, &last) || last > (size_t{1} << 62)) {
      return invalidArgument(std::string("braidAllToAllv: ") + displsName + "[" +
                             std::to_string(p) + "] + " + countsName + "[" + std::to_string(p) +
                             "] overflows the byte size");
    }
    if (counts[p] == 0) continue;
    lo = std::min(lo, displs[p] * elemSize);
    hi = std::max(hi, last);
  }
  *first = lo == SIZE_MAX ? 0 : lo;
  *end = lo == SIZE_MAX ? 0 : hi;
  return okStatus();
}

}  // namespace
}  // namespace braid

using namespace braid;

extern "C" {

braidResult_t braidGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                          braidDataType_t datatype, int root, braidComm_t comm,
                          braidStream_t stream) {
  return rootedExchange(Rooted::kGather, sendbuff, recvbuff, sendcount, datatype, root, comm,
                        stream);
}

braidResult_t braidScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                           braidDataType_t datatype, int root, braidComm_t comm,
                           braidStream_t stream) {
  return rootedExchange(Rooted::kScatter, sendbuff, recvbuff, recvcount, datatype, root, comm,
                        stream);
}

braidResult_t braidAllToAllv(const void* sendbuff, const size_t* sendcounts, const size_t* sdispls,
                             void* recvbuff, const size_t* recvcounts, const size_t* rdispls,
                             braidDataType_t datatype, braidComm_t comm, braidStream_t stream) {
  int rank = 0;
  int nranks = 0;
  Status status = rankAndSize(comm, &rank, &nranks);
  if (!status.ok()) return finish(status);
  const size_t elemSize = dataTypeSize(datatype);
  if (elemSize == 0) {
    return finish(
        invalidArgument("braidAllToAllv: datatype " + std::to_string(static_cast<int>(datatype)) +
                        " is not a braidDataType_t"),
        comm);
  }
  uintptr_t sendFirst = 0, sendEnd = 0, recvFirst = 0, recvEnd = 0;
  status = sideExtent("sendcounts", "sdispls", sendcounts, sdispls, nranks, elemSize, &sendFirst,
                      &sendEnd);
  if (status.ok()) {
    status = sideExtent("recvcounts", "rdispls", recvcounts, rdispls, nranks, elemSize, &recvFirst,
                        &recvEnd);
  }
  if (status.ok() && sendEnd > sendFirst && sendbuff == nullptr) {
    status = invalidArgument("braidAllToAllv: sendbuff is NULL");
  }
  if (status.ok() && recvEnd > recvFirst && recvbuff == nullptr) {
    status = invalidArgument("braidAllToAllv: recvbuff is NULL");
  }
  if (status.ok() && sendEnd > sendFirst && recvEnd > recvFirst) {
    const auto s = reinterpret_cast<uintptr_t>(sendbuff);
    const auto r = reinterpret_cast<uintptr_t>(recvbuff);
    if (s + sendFirst < r + recvEnd && r + recvFirst < s + sendEnd) {
      status = invalidArgument("braidAllToAllv: the send and receive blocks overlap");
    }
  }
  if (!status.ok()) return finish(status, comm);
  const auto* send = static_cast<const char*>(sendbuff);
  auto* recv = static_cast<char*>(recvbuff);
  return inOneGroup([&]() -> braidResult_t {
    for (int i = 0; i < nranks; ++i) {
      // From this rank's successor on, so that every rank starts with a different peer.
      const int p = (rank + i) % nranks;
      if (sendcounts[p] > 0) {
        const braidResult_t r =
            braidSend(send + sdispls[p] * elemSize, sendcounts[p], datatype, p, comm, stream);
        if (r != braidSuccess) return r;
      }
      if (recvcounts[p] > 0) {
        const braidResult_t r =
            braidRecv(recv + rdispls[p] * elemSize, recvcounts[p], datatype, p, comm, stream);
        if (r != braidSuccess) return r;
      }
    }
    return braidSuccess;
  });
}

braidResult_t braidBarrier(braidComm_t comm) {
  if (inGroup()) {
    // The all-reduce would be queued with this frame's byte, gone by the time it runs.
    return finish(invalidUsage("braidBarrier inside a group is not supported"));
  }
  unsigned char token = 0;
  return braidAllReduce(&token, &token, 1, braidUint8, braidMax, comm, nullptr);
}

}  // extern "C"
