#include "core/tools_api.h"

#include <unistd.h>

#include <optional>

#include "algorithms/algorithms.h"
#include "base/config.h"
#include "base/status.h"
#include "core/comm_handle.h"
#include "device/device_memory.h"
#include "device/device_tools.h"
#include "tuner/tuner.h"
#include "tuner/tuning_table.h"

namespace braid::tools {
namespace {

/// A Status as the functions here report it: empty for success, never empty for a failure.
std::string errorText(const Status& status) {
  if (status.ok()) return "";
  return status.message().empty() ? "failed" : status.message();
}

Result<const Tuner*> tunerOf(braidComm_t comm) {
  if (comm == nullptr) return invalidArgument("null communicator");
  if (comm->impl == nullptr) return invalidUsage("communicator not initialised");
  return &comm->impl->tuner();
}

Result<Collective> collectiveNamed(std::string_view name) {
  for (int c = 0; c < kNumCollectives; ++c) {
    if (collectiveName(static_cast<Collective>(c)) == name) return static_cast<Collective>(c);
  }
  return invalidArgument("unknown collective '" + std::string(name) + "'");
}

Result<Algorithm> algorithmNamed(std::string_view name) {
  std::optional<Algorithm> algo = findAlgorithm(name);
  if (!algo) return invalidArgument("unknown algorithm '" + std::string(name) + "'");
  return *algo;
}

Result<Choice> choiceOf(braidComm_t comm, std::string_view collective, uint64_t bytes,
                        bool honourOverride) {
  ASSIGN_OR_RETURN(const Tuner* tuner, tunerOf(comm));
  ASSIGN_OR_RETURN(Collective coll, collectiveNamed(collective));
  return honourOverride ? tuner->choose(coll, bytes) : tuner->chooseUnforced(coll, bytes);
}

Result<double> predictionOf(braidComm_t comm, std::string_view collective,
                            std::string_view algorithm, uint64_t bytes) {
  ASSIGN_OR_RETURN(const Tuner* tuner, tunerOf(comm));
  ASSIGN_OR_RETURN(Collective coll, collectiveNamed(collective));
  ASSIGN_OR_RETURN(Algorithm algo, algorithmNamed(algorithm));
  std::optional<double> us = tuner->predictedUs(coll, algo, bytes);
  if (!us) return invalidArgument("the model has no prediction for this algorithm");
  return *us;
}

Status merge(const std::string& file, std::string_view collective, int nranks,
             const std::vector<TuningLine>& lines) {
  Collective coll = Collective::kAllReduce;
  if (!parseTunableCollective(std::string(collective), &coll)) {
    return invalidArgument("a tuning table has no lines for '" + std::string(collective) + "'");
  }
  std::vector<TuningEntry> entries;
  for (const TuningLine& line : lines) {
    TuningEntry e;
    e.minBytes = line.minBytes;
    e.maxBytes = line.maxBytes;
    e.toInf = line.toInf;
    ASSIGN_OR_RETURN(e.algo, algorithmNamed(line.algorithm));
    e.chunkBytes = line.chunkBytes;
    e.nchannels = line.nchannels;
    e.timeUs = line.timeUs;
    entries.push_back(e);
  }
  TuningTable table;
  if (access(file.c_str(), F_OK) == 0) {
    Result<TuningTable> existing = TuningTable::load(file);
    if (!existing.ok()) {
      return existing.status().withContext("--tune: not overwriting " + file);
    }
    table = std::move(existing).value();
  }
  RETURN_IF_ERROR(table.replace(coll, nranks, std::move(entries)));
  return table.save(file);
}

}  // namespace

std::string tunerChoice(braidComm_t comm, std::string_view collective, uint64_t bytes,
                        bool honourOverride, TunerChoice* choice) {
  Result<Choice> made = choiceOf(comm, collective, bytes, honourOverride);
  if (!made.ok()) return errorText(made.status());
  choice->algorithm = std::string(algorithmName(made->algo));
  choice->chunkBytes = made->chunkBytes;
  choice->nchannels = made->nchannels;
  choice->source = choiceSourceName(made->source);
  choice->predictedUs = made->predictedUs;
  return "";
}

std::string tunerPredictionUs(braidComm_t comm, std::string_view collective,
                              std::string_view algorithm, uint64_t bytes, double* us) {
  Result<double> predicted = predictionOf(comm, collective, algorithm, bytes);
  if (!predicted.ok()) return errorText(predicted.status());
  *us = predicted.value();
  return "";
}

std::string tunerTable(braidComm_t comm, std::string* table) {
  Result<const Tuner*> tuner = tunerOf(comm);
  if (!tuner.ok()) return errorText(tuner.status());
  *table = tuner.value()->formatTable();
  return "";
}

std::vector<std::string> algorithmsFor(std::string_view collective) {
  std::vector<std::string> names;
  Result<Collective> coll = collectiveNamed(collective);
  if (!coll.ok()) return names;
  for (Algorithm algo : braid::algorithmsFor(coll.value())) {
    names.emplace_back(algorithmName(algo));
  }
  return names;
}

std::string tuneSpace(TuneSpace* space) {
  Result<Config> config = Config::load();
  if (!config.ok()) return errorText(config.status());
  space->chunkBytes.assign(Tuner::kChunkCandidates.begin(), Tuner::kChunkCandidates.end());
  space->channels.assign(Tuner::kChannelCandidates.begin(), Tuner::kChannelCandidates.end());
  space->slotBytes = config->slotBytes;
  space->maxChannels = config->nchannels > 0 ? config->nchannels : Tuner::kChannelCandidates.back();
  return "";
}

std::string mergeTuningTable(const std::string& file, std::string_view collective, int nranks,
                             const std::vector<TuningLine>& lines) {
  return errorText(merge(file, collective, nranks, lines));
}

std::vector<EnvVariable> environmentVariables() {
  std::vector<EnvVariable> out;
  for (const ConfigVarInfo& v : configVariables()) {
    out.push_back({std::string(v.name), std::string(v.defaultText), std::string(v.doc)});
  }
  return out;
}

std::string deviceAllocate(size_t bytes, void** ptr) {
  Result<void*> allocated = braid::deviceAllocate(bytes);
  if (!allocated.ok()) return errorText(allocated.status());
  *ptr = allocated.value();
  return "";
}

void deviceFree(void* ptr) { braid::deviceFree(ptr); }

std::string copyToDevice(void* deviceDst, const void* hostSrc, size_t bytes) {
  return errorText(braid::copyToDevice(deviceDst, hostSrc, bytes));
}

std::string copyToHost(void* hostDst, const void* deviceSrc, size_t bytes) {
  return errorText(braid::copyToHost(hostDst, deviceSrc, bytes));
}

std::string streamCreate(void** stream) {
  Result<void*> made = braid::streamCreate();
  if (!made.ok()) return errorText(made.status());
  *stream = made.value();
  return "";
}

void streamDestroy(void* stream) { braid::streamDestroy(stream); }

std::string streamSynchronize(void* stream) { return errorText(braid::streamSynchronize(stream)); }

std::string graphBeginCapture(void* stream) { return errorText(braid::graphBeginCapture(stream)); }

std::string graphEndCapture(void* stream, void** graph) {
  Result<void*> made = braid::graphEndCapture(stream);
  if (!made.ok()) return errorText(made.status());
  *graph = made.value();
  return "";
}

std::string graphLaunch(void* graph, void* stream) {
  return errorText(braid::graphLaunch(graph, stream));
}

void graphDestroy(void* graph) { braid::graphDestroy(graph); }

}  // namespace braid::tools
