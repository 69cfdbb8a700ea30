#include "tests/support/collective_check.h"

#include <cstring>
#include <sstream>

#include "tests/support/reference.h"

namespace braid::testing {
namespace {

constexpr int kAllTypes[] = {braidInt8,   braidUint8,   braidInt32,   braidUint32,  braidInt64,
                             braidUint64, braidFloat16, braidFloat32, braidFloat64, braidBfloat16};
constexpr int kAllOps[] = {braidSum, braidProd, braidMax, braidMin, braidAvg};

std::string callError(const char* what, braidResult_t rc, braidComm_t comm) {
  return std::string(what) + " returned " + braidGetErrorString(rc) + ": " +
         braidGetLastError(comm);
}

}  // namespace

std::string testCollName(TestColl coll) {
  switch (coll) {
    case TestColl::kAllReduce: return "allreduce";
    case TestColl::kBroadcast: return "broadcast";
    case TestColl::kReduce: return "reduce";
    case TestColl::kAllGather: return "allgather";
    case TestColl::kReduceScatter: return "reducescatter";
    case TestColl::kAllToAll: return "alltoall";
    case TestColl::kSendRecvRing: return "sendrecv";
  }
  return "?";
}

bool isReduction(TestColl coll) {
  return coll == TestColl::kAllReduce || coll == TestColl::kReduce ||
         coll == TestColl::kReduceScatter;
}

std::string describe(const CollCase& c) {
  std::ostringstream os;
  os << testCollName(c.coll) << " type=" << c.type << " op=" << c.op << " count=" << c.count
     << " root=" << c.root << (c.inPlace ? " in-place" : " out-of-place") << " seed=" << c.seed;
  return os.str();
}

std::string runAndCheck(braidComm_t comm, int rank, int n, const CollCase& c) {
  const size_t es = braidDataTypeSize(c.type);
  const size_t bytes = c.count * es;
  const std::string what = describe(c) + " on rank " + std::to_string(rank);
  // Patterns for data-movement collectives use the Sum values; the op does not matter there.
  const braidRedOp_t pattern = isReduction(c.coll) ? c.op : braidSum;
  std::vector<char> expected;
  std::string error;

  switch (c.coll) {
    case TestColl::kAllReduce:
    case TestColl::kReduce: {
      const bool isRoot = c.coll == TestColl::kAllReduce || rank == c.root;
      GuardedBuffer in(bytes, c.sharedBuffers), out(bytes, c.sharedBuffers);
      fillInput(in.data(), c.count, c.type, pattern, rank, 0, c.seed);
      std::vector<char> original(in.data(), in.data() + bytes);
      void* recv = isRoot ? out.data() : nullptr;
      const void* send = in.data();
      if (c.inPlace && isRoot) {
        std::memcpy(out.data(), in.data(), bytes);
        send = out.data();
      }
      braidResult_t rc =
          c.coll == TestColl::kAllReduce
              ? braidAllReduce(send, recv, c.count, c.type, c.op, comm, nullptr)
              : braidReduce(send, recv, c.count, c.type, c.op, c.root, comm, nullptr);
      if (rc != braidSuccess)
        return what + ": " + callError(testCollName(c.coll).c_str(), rc, comm);
      if (isRoot) {
        expected.resize(bytes);
        for (size_t i = 0; i < c.count; ++i) {
          expectedReduction(expected.data() + i * es, c.type, c.op, n, i, c.seed);
        }
        error = compareElements(out.data(), expected.data(), c.count, c.type, what);
      }
      if (error.empty()) error = out.checkGuards(what + " output");
      if (error.empty()) error = in.checkGuards(what + " input");
      // bytes == 0: original.data() may be null, which memcmp must not see even for no bytes.
      if (error.empty() && !(c.inPlace && isRoot) && bytes > 0 &&
          std::memcmp(original.data(), in.data(), bytes) != 0) {
        error = what + ": the input buffer was modified";
      }
      return error;
    }
    case TestColl::kBroadcast: {
      GuardedBuffer in(bytes, c.sharedBuffers), out(bytes, c.sharedBuffers);
      const bool isRoot = rank == c.root;
      if (isRoot) fillInput(in.data(), c.count, c.type, pattern, rank, 0, c.seed);
      std::memset(out.data(), 0x5a, bytes);
      const void* send = isRoot ? in.data() : nullptr;
      if (c.inPlace && isRoot) {
        std::memcpy(out.data(), in.data(), bytes);
        send = out.data();
      }
      braidResult_t rc = braidBroadcast(send, out.data(), c.count, c.type, c.root, comm, nullptr);
      if (rc != braidSuccess) return what + ": " + callError("broadcast", rc, comm);
      expected.resize(bytes);
      fillInput(expected.data(), c.count, c.type, pattern, c.root, 0, c.seed);
      error = compareElements(out.data(), expected.data(), c.count, c.type, what);
      if (error.empty()) error = out.checkGuards(what + " output");
      return error;
    }
    case TestColl::kAllGather: {
      GuardedBuffer in(bytes, c.sharedBuffers), out(bytes * n, c.sharedBuffers);
      fillInput(in.data(), c.count, c.type, pattern, rank, 0, c.seed);
      std::memset(out.data(), 0x5a, bytes * n);
      const void* send = in.data();
      if (c.inPlace) {
        std::memcpy(out.data() + rank * bytes, in.data(), bytes);
        send = out.data() + rank * bytes;
      }
      braidResult_t rc = braidAllGather(send, out.data(), c.count, c.type, comm, nullptr);
      if (rc != braidSuccess) return what + ": " + callError("allgather", rc, comm);
      expected.resize(bytes * n);
      for (int r = 0; r < n; ++r) {
        fillInput(expected.data() + r * bytes, c.count, c.type, pattern, r, 0, c.seed);
      }
      error = compareElements(out.data(), expected.data(), c.count * n, c.type, what);
      if (error.empty()) error = out.checkGuards(what + " output");
      return error;
    }
    case TestColl::kReduceScatter: {
      GuardedBuffer in(bytes * n, c.sharedBuffers), out(bytes, c.sharedBuffers);
      fillInput(in.data(), c.count * n, c.type, pattern, rank, 0, c.seed);
      char* recv = out.data();
      const char* send = in.data();
      if (c.inPlace) recv = in.data() + rank * bytes;
      braidResult_t rc = braidReduceScatter(send, recv, c.count, c.type, c.op, comm, nullptr);
      if (rc != braidSuccess) return what + ": " + callError("reducescatter", rc, comm);
      expected.resize(bytes);
      for (size_t i = 0; i < c.count; ++i) {
        expectedReduction(expected.data() + i * es, c.type, c.op, n, rank * c.count + i, c.seed);
      }
      error = compareElements(recv, expected.data(), c.count, c.type, what);
      if (error.empty()) error = out.checkGuards(what + " output");
      if (error.empty()) error = in.checkGuards(what + " input");
      return error;
    }
    case TestColl::kAllToAll: {
      GuardedBuffer in(bytes * n, c.sharedBuffers), out(bytes * n, c.sharedBuffers);
      fillInput(in.data(), c.count * n, c.type, pattern, rank, 0, c.seed);
      std::memset(out.data(), 0x5a, bytes * n);
      const void* send = in.data();
      if (c.inPlace) {
        std::memcpy(out.data(), in.data(), bytes * n);
        send = out.data();
      }
      braidResult_t rc = braidAllToAll(send, out.data(), c.count, c.type, comm, nullptr);
      if (rc != braidSuccess) return what + ": " + callError("alltoall", rc, comm);
      expected.resize(bytes * n);
      for (int p = 0; p < n; ++p) {
        fillInput(expected.data() + p * bytes, c.count, c.type, pattern, p, rank * c.count, c.seed);
      }
      error = compareElements(out.data(), expected.data(), c.count * n, c.type, what);
      if (error.empty()) error = out.checkGuards(what + " output");
      return error;
    }
    case TestColl::kSendRecvRing: {
      GuardedBuffer in(bytes, c.sharedBuffers), out(bytes, c.sharedBuffers);
      fillInput(in.data(), c.count, c.type, pattern, rank, 0, c.seed);
      std::memset(out.data(), 0x5a, bytes);
      const int next = (rank + 1) % n;
      const int prev = (rank + n - 1) % n;
      braidGroupStart();
      braidResult_t rs = braidSend(in.data(), c.count, c.type, next, comm, nullptr);
      braidResult_t rr = braidRecv(out.data(), c.count, c.type, prev, comm, nullptr);
      braidResult_t rc = braidGroupEnd();
      if (rs != braidSuccess) return what + ": " + callError("send", rs, comm);
      if (rr != braidSuccess) return what + ": " + callError("recv", rr, comm);
      if (rc != braidSuccess) return what + ": " + callError("group end", rc, comm);
      expected.resize(bytes);
      fillInput(expected.data(), c.count, c.type, pattern, prev, 0, c.seed);
      error = compareElements(out.data(), expected.data(), c.count, c.type, what);
      if (error.empty()) error = out.checkGuards(what + " output");
      return error;
    }
  }
  return "unknown collective";
}

std::vector<CollCase> conformanceCases(int nranks, const std::vector<size_t>& smallCounts,
                                       const std::vector<size_t>& largeCounts) {
  std::vector<CollCase> cases;
  uint32_t seed = 1;
  int rootTurn = 0;
  const TestColl colls[] = {TestColl::kAllReduce,   TestColl::kBroadcast,     TestColl::kReduce,
                            TestColl::kAllGather,   TestColl::kReduceScatter, TestColl::kAllToAll,
                            TestColl::kSendRecvRing};
  for (TestColl coll : colls) {
    for (int type : kAllTypes) {
      for (int op : kAllOps) {
        if (!isReduction(coll) && op != braidSum) continue;
        for (size_t count : smallCounts) {
          for (bool inPlace : {false, true}) {
            if (coll == TestColl::kSendRecvRing && inPlace) continue;
            CollCase c;
            c.coll = coll;
            c.type = static_cast<braidDataType_t>(type);
            c.op = static_cast<braidRedOp_t>(op);
            c.count = count;
            c.inPlace = inPlace;
            c.root = (rootTurn++) % nranks;
            c.seed = seed++;
            cases.push_back(c);
          }
        }
      }
    }
    // Large counts: one integer and one float type per collective, a few ops.
    for (size_t count : largeCounts) {
      for (auto [type, op] :
           {std::pair{braidFloat32, braidSum}, std::pair{braidBfloat16, braidAvg},
            std::pair{braidInt32, braidMax}, std::pair{braidFloat64, braidProd}}) {
        if (!isReduction(coll) && op != braidSum) continue;
        CollCase c;
        c.coll = coll;
        c.type = type;
        c.op = op;
        c.count = count;
        c.inPlace = (seed % 2) == 0;
        c.root = (rootTurn++) % nranks;
        c.seed = seed++;
        cases.push_back(c);
      }
    }
  }
  return cases;
}

}  // namespace braid::testing
