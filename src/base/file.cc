#include "base/file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "base/hash.h"
#include "base/little_endian.h"

namespace braid {
namespace {

// A keyed file: this magic, the key's length and the payload's (8 bytes each, little-endian),
// the key, the payload.
constexpr char kKeyedMagic[8] = {'b', 'r', 'a', 'i', 'd', 'k', 'f', '1'};
constexpr size_t kKeyedHeaderBytes = sizeof(kKeyedMagic) + 16;

}  // namespace

Result<std::string> readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return errnoError("cannot read " + path, errno);
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

Status makeDirs(const std::string& dir) {
  for (size_t pos = 1; pos <= dir.size(); ++pos) {
    if (pos != dir.size() && dir[pos] != '/') continue;
    const std::string part = dir.substr(0, pos);
    if (mkdir(part.c_str(), 0755) != 0 && errno != EEXIST) {
      return errnoError("cannot create " + part, errno);
    }
  }
  return okStatus();
}

Status writeFileAtomically(const std::string& path, const std::string& bytes) {
  // Unique to the process and the call: ranks of one process may write the same file at once.
  static std::atomic<uint64_t> writes{0};
  const std::string tmp =
      path + ".tmp." + std::to_string(getpid()) + "." + std::to_string(writes.fetch_add(1));
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return errnoError("cannot write " + tmp, errno);
    out << bytes;
    if (!out.flush()) {
      const int err = errno;
      std::remove(tmp.c_str());
      return errnoError("cannot write " + tmp, err);
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp.c_str());
    return errnoError("cannot rename " + tmp + " to " + path, err);
  }
  return okStatus();
}

std::string keyedFilePath(const std::string& dir, const std::string& prefix,
                          const std::string& key) {
  char hash[17];
  std::snprintf(hash, sizeof(hash), "%016llx", static_cast<unsigned long long>(fnv1a(key)));
  return dir + "/" + prefix + "-" + hash + ".bin";
}

std::optional<std::string> loadKeyedFile(const std::string& dir, const std::string& prefix,
                                         const std::string& key) {
  const std::string path = keyedFilePath(dir, prefix, key);
  if (access(path.c_str(), F_OK) != 0) return std::nullopt;
  Result<std::string> file = readFile(path);
  if (!file.ok()) return std::nullopt;
  const std::string& bytes = file.value();
  if (bytes.size() < kKeyedHeaderBytes ||
      !std::equal(kKeyedMagic, kKeyedMagic + sizeof(kKeyedMagic), bytes.begin())) {
    return std::nullopt;
  }
  const auto* header = reinterpret_cast<const uint8_t*>(bytes.data()) + sizeof(kKeyedMagic);
  const uint64_t keyBytes = getLe64(header);
  const uint64_t payloadBytes = getLe64(header + 8);
  if (keyBytes != key.size() || bytes.size() - kKeyedHeaderBytes - keyBytes != payloadBytes ||
      bytes.compare(kKeyedHeaderBytes, keyBytes, key) != 0) {
    return std::nullopt;
  }
  return bytes.substr(kKeyedHeaderBytes + keyBytes);
}

Status saveKeyedFile(const std::string& dir, const std::string& prefix, const std::string& key,
                     const std::string& payload, int keep) {
  RETURN_IF_ERROR(makeDirs(dir));
  std::string bytes(kKeyedMagic, sizeof(kKeyedMagic));
  uint8_t sizes[16];
  putLe64(sizes, key.size());
  putLe64(sizes + 8, payload.size());
  bytes.append(reinterpret_cast<const char*>(sizes), sizeof(sizes));
  bytes += key;
  bytes += payload;
  const std::string path = keyedFilePath(dir, prefix, key);
  RETURN_IF_ERROR(writeFileAtomically(path, bytes));
  // Each key leaves a file: the oldest others go once there are more than `keep` in all.
  removeOldestFiles(dir, prefix, ".bin", path, keep);
  return okStatus();
}

void removeOldestFiles(const std::string& dir, const std::string& prefix,
                       const std::string& extension, const std::string& spare, int keep,
                       const std::vector<std::string>& companionSuffixes) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::vector<std::pair<fs::file_time_type, fs::path>> others;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(prefix + "-", 0) != 0 || e.path().extension() != extension ||
        e.path().filename() == fs::path(spare).filename()) {
      continue;
    }
    const fs::file_time_type written = e.last_write_time(ec);
    if (!ec) others.emplace_back(written, e.path());
  }
  const size_t limit = size_t(std::max(keep, 1)) - 1;  // besides the spared file
  if (others.size() <= limit) return;
  std::sort(others.begin(), others.end());
  for (size_t i = 0; i + limit < others.size(); ++i) {
    fs::remove(others[i].second, ec);
    for (const std::string& suffix : companionSuffixes) {
      fs::remove(others[i].second.string() + suffix, ec);
    }
  }
}

}  // namespace braid
