// The algorithm catalogue: which algorithm serves which collective, and the one entry point that
// turns a PlanRequest into a Plan. Each algorithm family lives in its own file (ring.cc,
// pairwise.cc, ...) and opens with a narrative of how it moves data.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "algorithms/plan.h"

namespace braid {

/// Whether `algo` has a builder for `coll`.
bool algorithmServes(Algorithm algo, Collective coll);
/// The algorithms that serve `coll`, in catalogue order.
std::vector<Algorithm> algorithmsFor(Collective coll);

/// The fewest FIFO slots per connector with which plans of `algo` for `coll` cannot deadlock. A
/// dependent step (recvReduceSend, ...) needs its input and room in the FIFO it sends to at the
/// same moment; in a ring where every rank sends before it receives, one-slot FIFOs are all full
/// and nobody can move, so those rings need two. Everything else progresses with one.
int minSlotsFor(Algorithm algo, Collective coll);

/// Whether plans of `algo` group ranks by host (PlanRequest::hosts): the hierarchical ones.
bool algorithmUsesHosts(Algorithm algo);

/// The algorithm algorithmName() spells `name` ("ring", "tree", "rhd", "rd", "direct",
/// "pairwise", "hier", "hier_rhd"), if any.
std::optional<Algorithm> findAlgorithm(std::string_view name);

/// The rank `shift` places after `rank` in the request's ring (request.ring, or rank order).
int ringNeighbour(const PlanRequest& request, int rank, int shift);

/// Appends the call check lane on `channel`, which no algorithm may use: a collective sends a
/// slot to its ring successor and takes one from its ring predecessor (request.ring), a
/// Send sends one to its peer and a Recv takes one from its peer. Each slot carries the call's
/// descriptor, so a rank whose call differs from its predecessor's (or from its peer's) fails
/// whatever route the algorithm's data takes. Plans that exchange nothing (one rank, count 0)
/// get no check, nor do calls whose data already does its job (dataChecksTheCall).
void addCallCheckLane(Plan& plan, const PlanRequest& request, int channel);

/// Whether every rank's plan for this small collective posts a data slot to its ring successor
/// before waiting for anything: that slot carries the call's descriptor as early as a check slot
/// would, so the check lane is left out (saving a hand-off per call). The answer depends on the
/// call alone, so ranks that agree on the call agree on it; ranks that disagree are caught by
/// the slots they do post (PlanRun::findMismatch looks at them while a call waits).
bool dataChecksTheCall(const PlanRequest& request);

/// Builds one rank's plan. Errors name what is wrong with the request (an algorithm that cannot
/// serve the collective, a rank or root out of range, a chunk size of zero...).
Result<Plan> buildPlan(const PlanRequest& request);

}  // namespace braid
