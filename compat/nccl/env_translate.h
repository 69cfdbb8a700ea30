// NCCL_* environment variables -> Braid settings ("BRAID_NAME=value" strings for braidConfig_t).
//
// A program that moves from NCCL to Braid keeps its NCCL_* environment. Where Braid has the same
// knob the value is translated (NCCL_ALGO -> BRAID_ALGO, NCCL_DEBUG -> BRAID_DEBUG, ...) and handed
// to braidCommInitRankConfig as a per-communicator setting: the process environment is never
// modified. A BRAID_* variable set in the environment wins over the NCCL_* one it would replace.
// NCCL knobs with no Braid equivalent (NCCL_NTHREADS, NCCL_PROTO, NCCL_BUFFSIZE...) are ignored
// and listed in the notes, which the shim prints at NCCL_DEBUG=INFO. A malformed value of a
// translated variable is an error naming the NCCL variable.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace braid::ncclshim {

/// The outcome of translating one environment.
struct EnvTranslation {
  std::vector<std::string> settings;  ///< "BRAID_NAME=value", in the order they were made
  std::vector<std::string> notes;     ///< one human line per translated or ignored variable
  /// For each BRAID_ variable set: the NCCL_ variable(s) it came from, "NCCL_NAME=value", so
  /// that Braid's complaint about a value can name what the user actually set.
  std::vector<std::pair<std::string, std::string>> sources;
  bool printVersion = false;  ///< NCCL_DEBUG=VERSION or INFO: print the version banner
};

/// Translates the NCCL_* entries of `environment` ("NAME=value" strings, as in environ).
/// Returns "" on success, else a one-line reason naming the offending variable.
std::string translateEnvironment(const std::vector<std::string>& environment, EnvTranslation* out);

/// NCCL_ALGO's value in BRAID_ALGO's grammar ("" when nothing Braid has remains), lower-cased:
/// NCCL's Ring and Tree become Braid's ring and tree; NCCL-only algorithms (CollNet*, NVLS*, PAT)
/// are dropped with a note; other names (Braid's own) and size ranges pass through for Braid to
/// validate. Returns "" or an error.
std::string translateAlgo(std::string_view value, std::string* out,
                          std::vector<std::string>* notes);

/// NCCL_DEBUG_SUBSYS's value in BRAID_DEBUG_SUBSYS's grammar. Returns "" or an error.
std::string translateDebugSubsys(std::string_view value, std::string* out);

/// ncclConfig_t.netName ("IB", "Socket", case-insensitive) as a BRAID_TRANSPORT value; "" when it
/// changes nothing. Returns "" or an error.
std::string translateNetName(std::string_view netName, std::string* transport);

/// The current process environment as "NAME=value" strings.
std::vector<std::string> processEnvironment();

}  // namespace braid::ncclshim
