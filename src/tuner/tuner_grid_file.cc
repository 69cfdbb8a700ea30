// The tuner's grid kept between processes: a later communicator with the same model inputs, limits
// and library build reads the cells instead of simulating them again
// (docs/tuning.md#what-the-tuner-costs-at-creation).
#include <algorithm>
#include <bit>

#include "base/file.h"
#include "base/hash.h"
#include "base/little_endian.h"
#include "tuner/calibration.h"
#include "tuner/tuner.h"

namespace braid {
namespace {

// Raised whenever the cells' meaning or layout changes (not needed for a new build: the build's
// fingerprint is part of the key).
constexpr uint64_t kGridFileFormat = 1;
// Grid files a cache folder keeps: one per communicator shape, 10-100 KB each.
constexpr int kGridFilesKept = 64;
constexpr const char* kGridFilePrefix = "grid";

}  // namespace

std::string Tuner::gridFileKey(const std::string& key) {
  std::string fileKey = key;
  uint8_t format[8];
  putLe64(format, kGridFileFormat);
  fileKey.append(reinterpret_cast<const char*>(format), sizeof(format));
  return fileKey + buildFingerprint();
}

// The payload: the grid's cells in order, the two staged rounds each as a count and its cells,
// and a hash of all that (a file damaged in place is not used).
void Tuner::writeGridFile(const std::string& key, const GridBuild& build) {
  const size_t gridCells = sizeof(Grid) / sizeof(Cell);
  const size_t cells = gridCells + build.channelRound.size() + build.chunkRound.size();
  std::string payload(kCellBytes * cells + 8 * 3, '\0');
  auto* at = reinterpret_cast<uint8_t*>(payload.data());
  for (const auto& sizes : build.grid) {
    for (const AlgoCells& algos : sizes) {
      for (const Cell& cell : algos) {
        putCell(at, cell);
        at += kCellBytes;
      }
    }
  }
  for (const std::vector<Cell>* round : {&build.channelRound, &build.chunkRound}) {
    putLe64(at, round->size());
    at += 8;
    for (const Cell& cell : *round) {
      putCell(at, cell);
      at += kCellBytes;
    }
  }
  const auto* begin = reinterpret_cast<const uint8_t*>(payload.data());
  putLe64(at, fnv1a(std::string_view(payload.data(), size_t(at - begin))));
  const std::string fileKey = gridFileKey(key);
  const Status saved =
      saveKeyedFile(options_.gridFileDir, kGridFilePrefix, fileKey, payload, kGridFilesKept);
  const std::string path = keyedFilePath(options_.gridFileDir, kGridFilePrefix, fileKey);
  gridNote_ = saved.ok() ? "kept in " + path : "not kept: " + saved.message();
}

std::shared_ptr<const Tuner::GridBuild> Tuner::readGridFile(const std::string& key) {
  const std::string fileKey = gridFileKey(key);
  const std::optional<std::string> payload =
      loadKeyedFile(options_.gridFileDir, kGridFilePrefix, fileKey);
  if (!payload) return nullptr;
  const auto* begin = reinterpret_cast<const uint8_t*>(payload->data());
  const uint8_t* end = begin + payload->size();
  const size_t gridBytes = kCellBytes * (sizeof(Grid) / sizeof(Cell));
  if (payload->size() < gridBytes + 8 * 3 ||
      getLe64(end - 8) != fnv1a(std::string_view(*payload).substr(0, payload->size() - 8))) {
    return nullptr;
  }
  auto build = std::make_shared<GridBuild>();
  const uint8_t* at = begin;
  for (auto& sizes : build->grid) {
    for (AlgoCells& algos : sizes) {
      for (Cell& cell : algos) {
        cell = getCell(at);
        at += kCellBytes;
      }
    }
  }
  for (std::vector<Cell>* round : {&build->channelRound, &build->chunkRound}) {
    if (end - at < 8 + 8) return nullptr;
    const uint64_t count = getLe64(at);
    at += 8;
    if (count > uint64_t(end - at - 8) / kCellBytes) return nullptr;
    round->resize(size_t(count));
    for (Cell& cell : *round) {
      cell = getCell(at);
      at += kCellBytes;
    }
  }
  if (end - at != 8) return nullptr;
  gridNote_ = "read from " + keyedFilePath(options_.gridFileDir, kGridFilePrefix, fileKey);
  return build;
}

}  // namespace braid
