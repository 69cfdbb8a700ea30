// What braid-perf asks the library beyond include/braid.h: the tuner's choices and table, the
// algorithms that serve a collective, the BRAID_ variables, tuning-table files (--tune), device
// buffers (--device) and the library's number parsers. Only plain types cross it, so braid-perf
// includes no other internal header. It is no part of the public API and changes with braid-perf,
// which links the internal library: libbraid.so does not export it.
//
// A function that can fail returns what went wrong as one line of text (empty on success) and
// writes its answer through its last argument. Collectives and algorithms are named as BRAID_ALGO
// spells them: "allreduce", "broadcast", "reduce", "allgather", "reducescatter", "alltoall",
// "send", "recv"; "ring", "tree", "rhd", "rd", "direct", "pairwise", "hier",
// "hier_rhd".
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "braid.h"

namespace braid::tools {

/// How a communicator's tuner would run one call.
struct TunerChoice {
  std::string algorithm;
  uint32_t chunkBytes = 0;
  int nchannels = 1;
  std::string source;       ///< what decided: "model", "table", "BRAID_ALGO" or "fixed"
  double predictedUs = -1;  ///< the model's time for the choice; -1: none
};

/// The choice `comm`'s tuner makes for a call of `collective` moving `bytes` per rank (count x
/// element size). With honourOverride false it is the choice BRAID_ALGO aside: the tuning
/// table's or the model's. Fails for a null or uninitialised communicator or an unknown name.
std::string tunerChoice(braidComm_t comm, std::string_view collective, uint64_t bytes,
                        bool honourOverride, TunerChoice* choice);

/// The model's predicted time of `algorithm`'s best candidate for such a call; fails where the
/// model cannot cost it.
std::string tunerPredictionUs(braidComm_t comm, std::string_view collective,
                              std::string_view algorithm, uint64_t bytes, double* us);

/// The table rank 0 prints at BRAID_DEBUG=INFO.
std::string tunerTable(braidComm_t comm, std::string* table);

/// The algorithms that serve `collective`, in the library's order; none for an unknown name.
std::vector<std::string> algorithmsFor(std::string_view collective);

/// The chunk sizes and channel counts the tuner weighs, and the bounds a communicator made in
/// this process's environment puts on them.
struct TuneSpace {
  std::vector<uint32_t> chunkBytes;
  std::vector<int> channels;
  uint32_t slotBytes = 0;  ///< the largest chunk it takes (BRAID_CHUNK_BYTES raises it)
  int maxChannels = 1;     ///< BRAID_NCHANNELS, else the largest channel count weighed
};

/// The tune space of this process's BRAID_ variables; fails, naming it, for a malformed one.
std::string tuneSpace(TuneSpace* space);

/// One line of a tuning table: the choice for the sizes [minBytes, maxBytes).
struct TuningLine {
  uint64_t minBytes = 0;
  uint64_t maxBytes = 0;  ///< unused when toInf
  bool toInf = false;
  std::string algorithm;
  uint32_t chunkBytes = 0;
  int nchannels = 1;
  double timeUs = -1;  ///< what was measured; negative: nothing
};

/// Replaces the lines of (collective, nranks) in the tuning table `file` by `lines` and writes it
/// back; lines of other collectives and rank counts stay. A missing file is created; one that
/// cannot be read as a tuning table is left alone, and the error says so in --tune's words.
std::string mergeTuningTable(const std::string& file, std::string_view collective, int nranks,
                             const std::vector<TuningLine>& lines);

/// One BRAID_ environment variable, as --help-env lists it.
struct EnvVariable {
  std::string name;
  std::string defaultText;  ///< empty: unset by default
  std::string doc;
};

/// Every BRAID_ variable the library reads, in its documentation order.
std::vector<EnvVariable> environmentVariables();

/// Device memory on the current CUDA device, freed with deviceFree; fails cleanly in builds
/// without CUDA and where no device can be used.
std::string deviceAllocate(size_t bytes, void** ptr);
void deviceFree(void* ptr);
/// Synchronous copies between host and device memory.
std::string copyToDevice(void* deviceDst, const void* hostSrc, size_t bytes);
std::string copyToHost(void* hostDst, const void* deviceSrc, size_t bytes);
/// A CUDA stream of the current device to enqueue device calls on, and waiting for it.
std::string streamCreate(void** stream);
void streamDestroy(void* stream);
std::string streamSynchronize(void* stream);
/// Captures the calls enqueued on `stream` between begin and end into a graph (*graph), which
/// graphLaunch replays on a stream.
std::string graphBeginCapture(void* stream);
std::string graphEndCapture(void* stream, void** graph);
std::string graphLaunch(void* graph, void* stream);
void graphDestroy(void* graph);

/// The library's parsers of BRAID_ values, so that braid-perf's options read numbers by the same
/// rules: a decimal integer in [lo, hi], a byte size ("64K", "1M", "2G": powers of 1024), and a
/// non-negative number of seconds.
std::string parseInteger(std::string_view text, int64_t lo, int64_t hi, int64_t* value);
std::string parseByteSize(std::string_view text, uint64_t* bytes);
std::string parseSeconds(std::string_view text, double* seconds);

}  // namespace braid::tools
