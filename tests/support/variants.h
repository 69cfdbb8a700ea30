// The named sets of settings that the multi-process conformance tests (host memory and device
// memory) run under, and how each rank of such a test starts its communicator with them.
#pragma once

#include <string>
#include <vector>

#include "braid.h"
#include "tests/support/multiprocess.h"

namespace braid::testing {

/// A named set of BRAID_* settings a test runs under.
struct Variant {
  std::string name;                   ///< in the test's name
  std::vector<std::string> settings;  ///< "NAME=value" items
};

/// The data paths every conformance suite covers: the defaults, tiny chunks on two channels, and
/// every algorithm forced in turn (one with several channels).
const std::vector<Variant>& dataPathVariants();

/// The settings of `variant`, with a timeout that ends a stuck test's calls.
Settings settingsOf(const Variant& variant);

/// Starts rank `rank` of `nranks` with `settings`. Returns "" or why it failed.
std::string initRank(braidComm_t* comm, int nranks, const braidUniqueId& id, int rank,
                     Settings& settings);

}  // namespace braid::testing
