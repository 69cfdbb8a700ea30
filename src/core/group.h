// The group queue (braidGroupStart/End) and the batch runner behind every call.
//
// Outside a group a call is a batch of one. Inside, calls queue per thread and run together at
// the outermost GroupEnd: all of them progress at once on this thread, so matching sends and
// receives, or several ranks driven from one thread, cannot deadlock. Calls on one communicator
// keep their order, except point-to-point calls on different connectors, which overlap.
// Communicators created inside a group (braidCommInitRank) are joined in parallel first.
#pragma once

#include <functional>
#include <vector>

#include "base/status.h"
#include "core/communicator.h"

namespace braid {

void groupStart();
/// Ends one nesting level; the outermost runs everything queued on this thread.
Status groupEnd();
bool inGroup();

/// Runs the call now, or queues it while a group is open on this thread.
Status submit(Communicator* comm, const CallArgs& args);
/// Queues a communicator initialisation to run (in parallel with the others) at GroupEnd.
void deferInit(std::function<Status()> init);

/// Runs calls to completion together (exposed for tests).
Status runBatch(const std::vector<std::pair<Communicator*, CallArgs>>& calls);

}  // namespace braid
