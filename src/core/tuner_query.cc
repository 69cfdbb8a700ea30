#include "core/tuner_query.h"

#include "core/comm_handle.h"

namespace braid {
namespace {

Result<const Tuner*> tunerOf(braidComm_t comm) {
  if (comm == nullptr) return invalidArgument("null communicator");
  if (comm->impl == nullptr) return invalidUsage("communicator not initialised");
  return &comm->impl->tuner();
}

}  // namespace

Result<Choice> tunerChoice(braidComm_t comm, Collective coll, uint64_t bytes, bool honourOverride) {
  ASSIGN_OR_RETURN(const Tuner* tuner, tunerOf(comm));
  return honourOverride ? tuner->choose(coll, bytes) : tuner->chooseUnforced(coll, bytes);
}

Result<double> tunerPredictionUs(braidComm_t comm, Collective coll, Algorithm algo,
                                 uint64_t bytes) {
  ASSIGN_OR_RETURN(const Tuner* tuner, tunerOf(comm));
  std::optional<double> us = tuner->predictedUs(coll, algo, bytes);
  if (!us) return invalidArgument("the model has no prediction for this algorithm");
  return *us;
}

Result<std::string> tunerTable(braidComm_t comm) {
  ASSIGN_OR_RETURN(const Tuner* tuner, tunerOf(comm));
  return tuner->formatTable();
}

}  // namespace braid
