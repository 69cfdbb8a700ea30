#include "perf/perf_numbers.h"

#include <string>

#include "core/tools_api.h"

namespace braid::perf {

Expected<int64_t> parseIntegerValue(std::string_view text, int64_t lo, int64_t hi) {
  int64_t value = 0;
  const std::string error = tools::parseInteger(text, lo, hi, &value);
  if (!error.empty()) return failure(error);
  return value;
}

Expected<uint64_t> parseSizeValue(std::string_view text) {
  uint64_t bytes = 0;
  const std::string error = tools::parseByteSize(text, &bytes);
  if (!error.empty()) return failure(error);
  return bytes;
}

Expected<double> parseSecondsValue(std::string_view text) {
  double seconds = 0;
  const std::string error = tools::parseSeconds(text, &seconds);
  if (!error.empty()) return failure(error);
  return seconds;
}

}  // namespace braid::perf
