#include "core/validate.h"

#include <cstdint>
#include <string>

#include "base/dtype.h"

namespace braid {
namespace {

struct Extents {
  size_t inBytes = 0;   // what the call reads from sendbuff on this rank
  size_t outBytes = 0;  // what it writes into recvbuff on this rank
};

bool overlaps(const void* a, size_t aBytes, const void* b, size_t bBytes) {
  const auto x = reinterpret_cast<uintptr_t>(a);
  const auto y = reinterpret_cast<uintptr_t>(b);
  return aBytes > 0 && bBytes > 0 && x < y + bBytes && y < x + aBytes;
}

}  // namespace

Status validateCall(const CallArgs& a, int rank, int nranks) {
  // Spelt out only for an error: a valid call builds no strings.
  auto name = [&a] { return std::string(collectiveName(a.coll)); };
  if (!isValidDataType(a.dtype)) {
    return invalidArgument(name() + ": datatype " + std::to_string(static_cast<int>(a.dtype)) +
                           " is not a braidDataType_t");
  }
  const bool reduces = a.coll == Collective::kAllReduce || a.coll == Collective::kReduce ||
                       a.coll == Collective::kReduceScatter;
  if (reduces && !isValidRedOp(a.op)) {
    return invalidArgument(name() + ": reduction op " + std::to_string(static_cast<int>(a.op)) +
                           " is not a braidRedOp_t");
  }
  const bool rooted = a.coll == Collective::kBroadcast || a.coll == Collective::kReduce;
  const bool p2p = a.coll == Collective::kSend || a.coll == Collective::kRecv;
  if ((rooted || p2p) && (a.root < 0 || a.root >= nranks)) {
    return invalidArgument(name() + ": " + (p2p ? "peer " : "root ") + std::to_string(a.root) +
                           " is outside [0, " + std::to_string(nranks) + ")");
  }

  const size_t elem = dataTypeSize(a.dtype);
  const bool scaled = a.coll == Collective::kAllGather || a.coll == Collective::kReduceScatter ||
                      a.coll == Collective::kAllToAll;
  const size_t factor = scaled ? static_cast<size_t>(nranks) : 1;
  size_t callBytes = 0;  // multiplied with overflow checks, not divided: a division costs more
  if (__builtin_mul_overflow(a.count, elem, &callBytes) ||
      __builtin_mul_overflow(callBytes, factor, &callBytes) || callBytes > (size_t{1} << 62)) {
    return invalidArgument(name() + ": count " + std::to_string(a.count) + " of " +
                           std::string(dataTypeName(a.dtype)) + " overflows the byte size");
  }
  if (a.count == 0) return okStatus();

  const size_t bytes = a.count * elem;
  Extents e;
  switch (a.coll) {
    case Collective::kAllReduce: e = {bytes, bytes}; break;
    case Collective::kBroadcast: e = {rank == a.root ? bytes : 0, bytes}; break;
    case Collective::kReduce: e = {bytes, rank == a.root ? bytes : 0}; break;
    case Collective::kAllGather: e = {bytes, bytes * nranks}; break;
    case Collective::kReduceScatter: e = {bytes * nranks, bytes}; break;
    case Collective::kAllToAll: e = {bytes * nranks, bytes * nranks}; break;
    case Collective::kSend: e = {bytes, 0}; break;
    case Collective::kRecv: e = {0, bytes}; break;
  }
  if (e.inBytes > 0 && a.sendbuff == nullptr) return invalidArgument(name() + ": sendbuff is NULL");
  if (e.outBytes > 0 && a.recvbuff == nullptr)
    return invalidArgument(name() + ": recvbuff is NULL");

  // Overlap is allowed only in the exact in-place layouts of the contract.
  if (overlaps(a.sendbuff, e.inBytes, a.recvbuff, e.outBytes)) {
    const auto* send = static_cast<const char*>(a.sendbuff);
    const auto* recv = static_cast<const char*>(a.recvbuff);
    bool inPlace = false;
    switch (a.coll) {
      case Collective::kAllGather: inPlace = send == recv + size_t(rank) * bytes; break;
      case Collective::kReduceScatter: inPlace = recv == send + size_t(rank) * bytes; break;
      default: inPlace = send == recv; break;
    }
    if (!inPlace) {
      return invalidArgument(name() +
                             ": sendbuff and recvbuff overlap without being the in-place "
                             "layout");
    }
  }
  return okStatus();
}

}  // namespace braid
