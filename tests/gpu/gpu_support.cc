#include "tests/gpu/gpu_support.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include "tests/support/reference.h"

namespace braid::testing {
namespace {

std::string callError(const std::string& what, braidResult_t rc, braidComm_t comm) {
  return what + " returned " + braidGetErrorString(rc) + ": " + braidGetLastError(comm);
}

}  // namespace

int visibleGpus() {
  static const int count = [] {
    // A child asks: CUDA initialised in this process would be unusable in its forked ranks.
    const pid_t pid = fork();
    if (pid == 0) {
      int n = 0;
      if (cudaGetDeviceCount(&n) != cudaSuccess) n = 0;
      _exit(n > 100 ? 100 : n);
    }
    if (pid < 0) return 0;
    int status = 0;
    for (int waited = 0; waited < 600; ++waited) {  // 60 s
      const pid_t done = waitpid(pid, &status, WNOHANG);
      if (done == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 0;
      if (done < 0) return 0;
      usleep(100000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    return 0;
  }();
  return count;
}

// Probed while the test program is still single-threaded (before main): a fork from a process
// whose other threads hold locks could leave the child stuck.
const int kGpusAtStart = visibleGpus();

std::string cudaProblem(cudaError_t error, const std::string& what) {
  if (error == cudaSuccess) return "";
  return what + ": " + cudaGetErrorName(error) + " (" + cudaGetErrorString(error) + ")";
}

DeviceBuffer::DeviceBuffer(size_t bytes) : bytes_(bytes) {
  void* p = nullptr;
  error_ = cudaProblem(cudaMalloc(&p, bytes + 2 * kGuard), "cudaMalloc");
  if (!error_.empty()) return;
  base_ = static_cast<char*>(p);
  error_ = cudaProblem(cudaMemset(base_, kPattern, bytes + 2 * kGuard), "cudaMemset");
}

DeviceBuffer::~DeviceBuffer() {
  if (base_ != nullptr) cudaFree(base_);
}

std::string DeviceBuffer::upload(const void* host, size_t bytes, size_t offset) {
  if (bytes == 0) return "";
  return cudaProblem(cudaMemcpy(data() + offset, host, bytes, cudaMemcpyHostToDevice), "upload");
}

std::string DeviceBuffer::download(std::vector<char>& host, size_t bytes, size_t offset) {
  host.resize(bytes);
  if (bytes == 0) return "";
  return cudaProblem(cudaMemcpy(host.data(), data() + offset, bytes, cudaMemcpyDeviceToHost),
                     "download");
}

std::string DeviceBuffer::checkGuards(const std::string& what) {
  std::vector<unsigned char> before(kGuard), after(kGuard);
  std::string e = cudaProblem(cudaMemcpy(before.data(), base_, kGuard, cudaMemcpyDeviceToHost),
                              "guard download");
  if (e.empty()) {
    e = cudaProblem(
        cudaMemcpy(after.data(), base_ + kGuard + bytes_, kGuard, cudaMemcpyDeviceToHost),
        "guard download");
  }
  if (!e.empty()) return what + ": " + e;
  for (size_t i = 0; i < kGuard; ++i) {
    if (before[i] != kPattern)
      return what + ": guard byte " + std::to_string(i) + " before the buffer was overwritten";
    if (after[i] != kPattern)
      return what + ": guard byte " + std::to_string(i) + " after the buffer was overwritten";
  }
  return "";
}

std::string runAndCheckOnDevice(braidComm_t comm, int rank, int n, const CollCase& c,
                                cudaStream_t stream) {
  const size_t es = braidDataTypeSize(c.type);
  const size_t bytes = c.count * es;
  const std::string what = describe(c) + " on device, rank " + std::to_string(rank) +
                           (stream != nullptr ? " (stream)" : " (NULL stream)");
  const braidRedOp_t pattern = isReduction(c.coll) ? c.op : braidSum;
  void* s = stream;

  // Sizes of the input and output buffers, per collective.
  size_t inBytes = bytes, outBytes = bytes;
  if (c.coll == TestColl::kAllGather) outBytes = bytes * n;
  if (c.coll == TestColl::kReduceScatter) inBytes = bytes * n;
  if (c.coll == TestColl::kAllToAll) inBytes = outBytes = bytes * n;
  DeviceBuffer in(inBytes), out(outBytes);
  if (!in.error().empty()) return what + ": " + in.error();
  if (!out.error().empty()) return what + ": " + out.error();

  std::vector<char> input(inBytes);
  const bool fills = c.coll != TestColl::kBroadcast || rank == c.root;
  if (fills) fillInput(input.data(), inBytes / es, c.type, pattern, rank, 0, c.seed);
  std::string e = in.upload(input.data(), inBytes);
  std::vector<char> poison(outBytes, 0x5a);
  if (e.empty()) e = out.upload(poison.data(), outBytes);
  if (!e.empty()) return what + ": " + e;

  // The call, with the in-place variants the API defines.
  const bool rootOnly = c.coll == TestColl::kReduce;
  const bool receives = !rootOnly || rank == c.root;
  const char* send = in.data();
  char* recv = receives ? out.data() : nullptr;
  size_t resultOffset = 0;
  if (c.inPlace && c.coll != TestColl::kSendRecvRing) {
    switch (c.coll) {
      case TestColl::kAllGather:
        e = out.upload(input.data(), bytes, rank * bytes);
        send = out.data() + rank * bytes;
        break;
      case TestColl::kReduceScatter:
        recv = in.data() + rank * bytes;
        resultOffset = rank * bytes;
        break;
      default:
        if (receives && fills) {
          e = out.upload(input.data(), inBytes);
          send = out.data();
        }
        break;
    }
    if (!e.empty()) return what + ": " + e;
  }
  if (c.coll == TestColl::kBroadcast && rank != c.root) send = nullptr;

  braidResult_t rc = braidSuccess;
  std::string call = testCollName(c.coll);
  switch (c.coll) {
    case TestColl::kAllReduce:
      rc = braidAllReduce(send, recv, c.count, c.type, c.op, comm, s);
      break;
    case TestColl::kReduce:
      rc = braidReduce(send, recv, c.count, c.type, c.op, c.root, comm, s);
      break;
    case TestColl::kBroadcast:
      rc = braidBroadcast(send, recv, c.count, c.type, c.root, comm, s);
      break;
    case TestColl::kAllGather: rc = braidAllGather(send, recv, c.count, c.type, comm, s); break;
    case TestColl::kReduceScatter:
      rc = braidReduceScatter(send, recv, c.count, c.type, c.op, comm, s);
      break;
    case TestColl::kAllToAll: rc = braidAllToAll(send, recv, c.count, c.type, comm, s); break;
    case TestColl::kSendRecvRing: {
      braidGroupStart();
      const braidResult_t rs = braidSend(send, c.count, c.type, (rank + 1) % n, comm, s);
      const braidResult_t rr = braidRecv(recv, c.count, c.type, (rank + n - 1) % n, comm, s);
      rc = braidGroupEnd();
      if (rs != braidSuccess) return what + ": " + callError("send", rs, comm);
      if (rr != braidSuccess) return what + ": " + callError("recv", rr, comm);
      call = "group end";
      break;
    }
  }
  if (rc != braidSuccess) return what + ": " + callError(call, rc, comm);
  if (stream != nullptr) {
    e = cudaProblem(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    if (!e.empty()) return what + ": " + e;
  }

  // Expected results, computed on the host independently of the library.
  std::vector<char> expected;
  size_t resultCount = 0;
  DeviceBuffer* result = c.coll == TestColl::kReduceScatter && c.inPlace ? &in : &out;
  switch (c.coll) {
    case TestColl::kAllReduce:
    case TestColl::kReduce:
    case TestColl::kReduceScatter: {
      if (!receives) break;
      resultCount = c.count;
      expected.resize(bytes);
      const size_t first = c.coll == TestColl::kReduceScatter ? rank * c.count : 0;
      for (size_t i = 0; i < c.count; ++i) {
        expectedReduction(expected.data() + i * es, c.type, c.op, n, first + i, c.seed);
      }
      break;
    }
    case TestColl::kBroadcast:
      resultCount = c.count;
      expected.resize(bytes);
      fillInput(expected.data(), c.count, c.type, pattern, c.root, 0, c.seed);
      break;
    case TestColl::kAllGather:
      resultCount = c.count * n;
      expected.resize(bytes * n);
      for (int r = 0; r < n; ++r) {
        fillInput(expected.data() + r * bytes, c.count, c.type, pattern, r, 0, c.seed);
      }
      break;
    case TestColl::kAllToAll:
      resultCount = c.count * n;
      expected.resize(bytes * n);
      for (int p = 0; p < n; ++p) {
        fillInput(expected.data() + p * bytes, c.count, c.type, pattern, p, rank * c.count, c.seed);
      }
      break;
    case TestColl::kSendRecvRing:
      resultCount = c.count;
      expected.resize(bytes);
      fillInput(expected.data(), c.count, c.type, pattern, (rank + n - 1) % n, 0, c.seed);
      break;
  }
  std::vector<char> actual;
  e = result->download(actual, resultCount * es, resultOffset);
  if (!e.empty()) return what + ": " + e;
  std::string error = compareElements(actual.data(), expected.data(), resultCount, c.type, what);
  if (error.empty()) error = out.checkGuards(what + " output");
  if (error.empty()) error = in.checkGuards(what + " input");
  const bool inputIsOutput = c.inPlace && c.coll == TestColl::kReduceScatter;
  if (error.empty() && !inputIsOutput) {
    std::vector<char> after;
    e = in.download(after, inBytes);
    if (!e.empty()) return what + ": " + e;
    if (std::memcmp(after.data(), input.data(), inBytes) != 0) {
      error = what + ": the input buffer was modified";
    }
  }
  return error;
}

std::vector<CollCase> deviceCases(int nranks, size_t largeCount) {
  const TestColl colls[] = {TestColl::kAllReduce,   TestColl::kBroadcast,     TestColl::kReduce,
                            TestColl::kAllGather,   TestColl::kReduceScatter, TestColl::kAllToAll,
                            TestColl::kSendRecvRing};
  std::vector<CollCase> cases;
  uint32_t seed = 7;
  int turn = 0;
  for (TestColl coll : colls) {
    for (size_t count : {size_t{0}, size_t{1}, size_t{273}, largeCount}) {
      for (bool inPlace : {false, true}) {
        if (coll == TestColl::kSendRecvRing && inPlace) continue;
        CollCase c;
        c.coll = coll;
        // Datatypes and ops rotate so that each appears across the matrix.
        c.type = static_cast<braidDataType_t>(turn % 10);
        c.op = isReduction(coll) ? static_cast<braidRedOp_t>((turn / 2) % 5) : braidSum;
        c.count = count;
        c.inPlace = inPlace;
        c.root = turn % nranks;
        c.seed = seed++;
        ++turn;
        cases.push_back(c);
      }
    }
  }
  // Every datatype with every op once through all-reduce, at a count with a ragged tail.
  for (int type = 0; type < 10; ++type) {
    for (int op = 0; op < 5; ++op) {
      CollCase c;
      c.coll = TestColl::kAllReduce;
      c.type = static_cast<braidDataType_t>(type);
      c.op = static_cast<braidRedOp_t>(op);
      c.count = 1000 + type;
      c.inPlace = (op % 2) == 1;
      c.seed = seed++;
      cases.push_back(c);
    }
  }
  return cases;
}

}  // namespace braid::testing
