// The number parsers of src/core/tools_api.h, apart from the rest of it: the peer programs link
// them (for braid-perf's option parser) and need nothing else of the library.
#include "base/config.h"
#include "core/tools_api.h"

namespace braid::tools {

std::string parseInteger(std::string_view text, int64_t lo, int64_t hi, int64_t* value) {
  Result<int64_t> parsed = braid::parseInteger(text, lo, hi);
  if (!parsed.ok()) return parsed.status().message();
  *value = parsed.value();
  return "";
}

std::string parseByteSize(std::string_view text, uint64_t* bytes) {
  Result<uint64_t> parsed = braid::parseByteSize(text);
  if (!parsed.ok()) return parsed.status().message();
  *bytes = parsed.value();
  return "";
}

std::string parseSeconds(std::string_view text, double* seconds) {
  Result<double> parsed = braid::parseSeconds(text);
  if (!parsed.ok()) return parsed.status().message();
  *seconds = parsed.value();
  return "";
}

}  // namespace braid::tools
