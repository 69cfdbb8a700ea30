// Whole-file reads and writes for the caches under ~/.cache/braid, and the keyed cache file.
//
// A keyed file holds bytes that a long computation produced from some inputs (the key): its name
// carries a hash of the key and the file the key itself, so a file is used only for exactly the
// inputs it was made from. Writes go to a temporary file renamed into place, so readers (other
// ranks, other processes on the host) see a whole file or none.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/status.h"

namespace braid {

/// The whole file at `path`.
Result<std::string> readFile(const std::string& path);
/// Creates `dir` and the folders above it that are missing.
Status makeDirs(const std::string& dir);
/// Writes `bytes` to `path` through a temporary file in the same folder and a rename.
Status writeFileAtomically(const std::string& path, const std::string& bytes);

/// Keeps the `keep` most recently modified files named PREFIX-*EXTENSION in `dir`, `spare` (a
/// path) always among them, and removes the others, each with its companions (its path followed
/// by each of `companionSuffixes`).
void removeOldestFiles(const std::string& dir, const std::string& prefix,
                       const std::string& extension, const std::string& spare, int keep,
                       const std::vector<std::string>& companionSuffixes = {});

/// The file under `dir` that keeps what was computed from `key`: dir/PREFIX-HASH.bin.
std::string keyedFilePath(const std::string& dir, const std::string& prefix,
                          const std::string& key);
/// What saveKeyedFile kept for exactly `key`; nullopt when there is no such file or it holds
/// another key, a different format or a cut-off payload.
std::optional<std::string> loadKeyedFile(const std::string& dir, const std::string& prefix,
                                         const std::string& key);
/// Keeps `payload` for `key` under `dir` (created if missing), then removes the oldest files of
/// the same prefix beyond `keep`.
Status saveKeyedFile(const std::string& dir, const std::string& prefix, const std::string& key,
                     const std::string& payload, int keep);

}  // namespace braid
