// Numbers in option values, read by the library's own rules (src/core/tools_api.h): `-n 20` and
// `-b 1M` read as BRAID_NSLOTS=20 and BRAID_CHUNK_BYTES=1M do, with the same errors. This is the
// one piece of the code braid-perf shares with the peer programs that calls into the library.
#pragma once

#include <cstdint>
#include <string_view>

#include "perf/perf_error.h"

namespace braid::perf {

/// A decimal integer in [lo, hi].
Expected<int64_t> parseIntegerValue(std::string_view text, int64_t lo, int64_t hi);
/// A byte count with an optional K, M, G or T suffix (powers of 1024).
Expected<uint64_t> parseSizeValue(std::string_view text);
/// A non-negative, finite number of seconds.
Expected<double> parseSecondsValue(std::string_view text);

}  // namespace braid::perf
