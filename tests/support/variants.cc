#include "tests/support/variants.h"

namespace braid::testing {

const std::vector<Variant>& dataPathVariants() {
  static const std::vector<Variant> kVariants = {
      {"defaults", {}},
      // Tiny chunks and two channels: every path pipelines over many chunks (on shared memory
      // they travel in the FIFO lines' own payload areas, 64 in flight).
      {"small_chunks", {"BRAID_CHUNK_BYTES=1K", "BRAID_NSLOTS=2", "BRAID_NCHANNELS=2"}},
      {"ring", {"BRAID_ALGO=ring", "BRAID_NCHANNELS=3", "BRAID_CHUNK_BYTES=8K"}},
      {"tree", {"BRAID_ALGO=tree", "BRAID_CHUNK_BYTES=8K"}},
      {"rhd", {"BRAID_ALGO=rhd", "BRAID_CHUNK_BYTES=8K"}},
      {"rd", {"BRAID_ALGO=rd", "BRAID_CHUNK_BYTES=8K"}},
      {"direct", {"BRAID_ALGO=direct", "BRAID_CHUNK_BYTES=8K"}},
  };
  return kVariants;
}

Settings settingsOf(const Variant& variant) {
  Settings settings;
  for (const std::string& s : variant.settings) settings.add(s);
  settings.add("BRAID_TIMEOUT=60");
  return settings;
}

std::string initRank(braidComm_t* comm, int nranks, const braidUniqueId& id, int rank,
                     Settings& settings) {
  const braidResult_t rc = braidCommInitRankConfig(comm, nranks, id, rank, settings.config());
  if (rc != braidSuccess) {
    return std::string("init failed: ") + braidGetErrorString(rc) + ": " +
           braidGetLastError(nullptr);
  }
  return "";
}

}  // namespace braid::testing
