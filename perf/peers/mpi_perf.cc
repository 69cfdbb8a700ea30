// braid-peer-ompi / braid-peer-mpich: braid-perf's sweep over MPI_Allreduce, MPI_Bcast,
// MPI_Reduce, MPI_Allgather, MPI_Reduce_scatter_block and MPI_Alltoall. One source, built once
// against each MPI; run under that MPI's own launcher (mpirun.openmpi, mpiexec.mpich).
#include <mpi.h>

#include <climits>
#include <cstdio>
#include <cstring>
#include <string>

#include "perf/peers/peer_bench.h"
#include "perf/perf_types.h"

namespace braid::perf::peers {
namespace {

Outcome mpiOutcome(int rc, const char* call) {
  if (rc == MPI_SUCCESS) return Outcome();
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(rc, text, &length);
  return failure(std::string(call) + " failed: " + std::string(text, length));
}

Expected<MPI_Datatype> mpiType(braidDataType_t type) {
  switch (type) {
    case braidInt8: return MPI_INT8_T;
    case braidUint8: return MPI_UINT8_T;
    case braidInt32: return MPI_INT32_T;
    case braidUint32: return MPI_UINT32_T;
    case braidInt64: return MPI_INT64_T;
    case braidUint64: return MPI_UINT64_T;
    case braidFloat32: return MPI_FLOAT;
    case braidFloat64: return MPI_DOUBLE;
    default: break;
  }
  return failure("MPI has no " + std::string(typeName(type)) + " datatype");
}

Expected<MPI_Op> mpiOp(braidRedOp_t op) {
  switch (op) {
    case braidSum: return MPI_SUM;
    case braidProd: return MPI_PROD;
    case braidMax: return MPI_MAX;
    case braidMin: return MPI_MIN;
    default: break;
  }
  return failure("MPI has no " + std::string(opName(op)) + " reduction");
}

class MpiComm final : public PeerComm {
 public:
  MpiComm() {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    // Errors come back as codes, reported with the call that failed.
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  std::string description() const override {
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int length = 0;
    MPI_Get_library_version(version, &length);
    std::string text(version, static_cast<size_t>(length));
    // Open MPI counts the terminating NUL in the length; MPICH's text runs over several lines.
    const size_t newline = text.find_first_of(std::string("\r\n\0", 3));
    if (newline != std::string::npos) text.resize(newline);
    std::string tidy;  // MPICH separates its fields with tabs
    for (char ch : text) {
      if (ch == '\t') ch = ' ';
      if (ch != ' ' || (!tidy.empty() && tidy.back() != ' ')) tidy += ch;
    }
    while (!tidy.empty() && (tidy.back() == ',' || tidy.back() == ' ')) tidy.pop_back();
    return tidy;
  }

  Outcome allGather(const void* mine, void* all, size_t bytes) override {
    return mpiOutcome(MPI_Allgather(mine, static_cast<int>(bytes), MPI_BYTE, all,
                                    static_cast<int>(bytes), MPI_BYTE, MPI_COMM_WORLD),
                      "MPI_Allgather");
  }

  Outcome barrier() override { return mpiOutcome(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier"); }

  uint64_t inPlaceRecvOffset(const CheckSpec& spec) const override {
    // MPI_Reduce_scatter_block with MPI_IN_PLACE leaves this rank's block at the buffer's start.
    if (spec.coll == PerfCollective::kReduceScatter) return 0;
    return PeerComm::inPlaceRecvOffset(spec);
  }

  Expected<PeerRunner> prepare(const PeerOp& op) override {
    const CheckSpec& c = op.spec;
    PERF_ASSIGN(MPI_Datatype type, mpiType(c.type));
    MPI_Op reduction = MPI_SUM;
    if (collectiveReduces(c.coll)) {
      PERF_ASSIGN(reduction, mpiOp(c.op));
    }
    if (c.shape.paramCount > static_cast<uint64_t>(INT_MAX) ||
        c.shape.sendCount > static_cast<uint64_t>(INT_MAX)) {
      return failure("counts above INT_MAX do not fit an MPI count");
    }
    const int count = static_cast<int>(c.shape.paramCount);
    const int root = c.root;
    const bool isRoot = c.rank == c.root;
    const bool inPlace = op.inPlace;
    void* send = op.send;
    void* recv = op.recv;
    const size_t bytes = c.shape.recvBytes();
    switch (c.coll) {
      case PerfCollective::kAllReduce:
        return PeerRunner([=] {
          return mpiOutcome(MPI_Allreduce(inPlace ? MPI_IN_PLACE : send, recv, count, type,
                                          reduction, MPI_COMM_WORLD),
                            "MPI_Allreduce");
        });
      case PerfCollective::kBroadcast:
        // MPI_Bcast has one buffer; out of place the root's recvbuff must hold the data too.
        return PeerRunner([=] {
          if (!inPlace && isRoot) std::memcpy(recv, send, bytes);
          return mpiOutcome(MPI_Bcast(recv, count, type, root, MPI_COMM_WORLD), "MPI_Bcast");
        });
      case PerfCollective::kReduce:
        return PeerRunner([=] {
          const void* input = inPlace && isRoot ? MPI_IN_PLACE : send;
          return mpiOutcome(MPI_Reduce(input, recv, count, type, reduction, root, MPI_COMM_WORLD),
                            "MPI_Reduce");
        });
      case PerfCollective::kAllGather:
        return PeerRunner([=] {
          return mpiOutcome(
              inPlace ? MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recv, count, type,
                                      MPI_COMM_WORLD)
                      : MPI_Allgather(send, count, type, recv, count, type, MPI_COMM_WORLD),
              "MPI_Allgather");
        });
      case PerfCollective::kReduceScatter:
        return PeerRunner([=] {
          return mpiOutcome(MPI_Reduce_scatter_block(inPlace ? MPI_IN_PLACE : send, recv, count,
                                                     type, reduction, MPI_COMM_WORLD),
                            "MPI_Reduce_scatter_block");
        });
      case PerfCollective::kAllToAll:
        return PeerRunner([=] {
          return mpiOutcome(
              inPlace ? MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recv, count, type,
                                     MPI_COMM_WORLD)
                      : MPI_Alltoall(send, count, type, recv, count, type, MPI_COMM_WORLD),
              "MPI_Alltoall");
        });
      case PerfCollective::kSendRecv: break;
    }
    return failure("collective not measured over MPI");
  }

 private:
  int rank_ = 0;
  int size_ = 1;
};

constexpr const char* kUsage =
    "\nRun under the launcher of the MPI this program was built with, e.g.\n"
    "  mpirun.openmpi -np 4 --oversubscribe --mca pml ob1 --mca btl self,vader braid-peer-ompi\n"
    "  mpiexec.mpich -n 4 braid-peer-mpich\n"
    "The rank count comes from the launcher (--np is rejected); -t must be 1.\n";

int mpiMain(int argc, char** argv) {
  PerfOptions options;
  int exitStatus = 0;
  if (!parsePeerArgs(argc, argv, kUsage, &options, &exitStatus)) return exitStatus;
  const char* program = argc > 0 ? argv[0] : "mpi-perf";
  if (options.nprocs != 0) {
    std::fprintf(stderr, "%s: --np: the MPI launcher sets the rank count (-np N)\n", program);
    return 2;
  }
  if (MPI_Init(&argc, &argv) != MPI_SUCCESS) {
    std::fprintf(stderr, "%s: MPI_Init failed\n", program);
    return 2;
  }
  MpiComm comm;
  const char* slash = std::strrchr(program, '/');
  Expected<int> rc = runPeerSweep(comm, options, slash != nullptr ? slash + 1 : program);
  if (!rc.ok()) {
    std::fprintf(stderr, "%s: rank %d: %s\n", program, comm.rank(), rc.outcome().message().c_str());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 2);
    return 2;
  }
  MPI_Finalize();
  return rc.value();
}

}  // namespace
}  // namespace braid::perf::peers

int main(int argc, char** argv) { return braid::perf::peers::mpiMain(argc, argv); }
