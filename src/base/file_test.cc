#include "base/file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

namespace braid {
namespace {

namespace fs = std::filesystem;

class KeyedFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (fs::temp_directory_path() / ("braid_keyed_file_" + std::to_string(getpid())) / "nested")
               .string();
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(fs::path(dir_).parent_path(), ec);
  }
  int filesWith(const std::string& prefix) const {
    int n = 0;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir_, ec)) {
      n += e.path().filename().string().rfind(prefix + "-", 0) == 0;
    }
    return n;
  }
  std::string dir_;
};

TEST_F(KeyedFile, KeepsBytesForExactlyTheirKey) {
  const std::string key("model\0inputs", 12);
  const std::string payload("\x01\x00\xff cells", 9);
  EXPECT_FALSE(loadKeyedFile(dir_, "grid", key).has_value());
  ASSERT_TRUE(saveKeyedFile(dir_, "grid", key, payload, 4).ok());  // creates the folders
  EXPECT_EQ(loadKeyedFile(dir_, "grid", key), payload);
  EXPECT_FALSE(loadKeyedFile(dir_, "grid", key + "x").has_value());
  EXPECT_FALSE(loadKeyedFile(dir_, "other", key).has_value());
  EXPECT_EQ(filesWith("grid"), 1);
}

TEST_F(KeyedFile, AFileHoldingAnotherKeyUnderTheSameNameIsNotUsed) {
  ASSERT_TRUE(saveKeyedFile(dir_, "grid", "a", "payload of a", 4).ok());
  // As if two keys hashed alike: b's name, a's contents.
  fs::rename(keyedFilePath(dir_, "grid", "a"), keyedFilePath(dir_, "grid", "b"));
  EXPECT_FALSE(loadKeyedFile(dir_, "grid", "b").has_value());
}

TEST_F(KeyedFile, CutOffOrForeignFilesAreNotUsed) {
  ASSERT_TRUE(saveKeyedFile(dir_, "grid", "key", "0123456789", 4).ok());
  const std::string path = keyedFilePath(dir_, "grid", "key");
  const std::string whole = readFile(path).value();
  fs::resize_file(path, whole.size() - 1);
  EXPECT_FALSE(loadKeyedFile(dir_, "grid", "key").has_value());
  std::ofstream(path, std::ios::trunc) << "not a keyed file";
  EXPECT_FALSE(loadKeyedFile(dir_, "grid", "key").has_value());
  std::ofstream(path, std::ios::trunc) << whole << "trailing";
  EXPECT_FALSE(loadKeyedFile(dir_, "grid", "key").has_value());
}

TEST_F(KeyedFile, KeepsOnlyTheNewestFilesOfItsPrefix) {
  ASSERT_TRUE(saveKeyedFile(dir_, "other", "x", "kept whatever the grids do", 1).ok());
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(saveKeyedFile(dir_, "grid", "key" + std::to_string(i), "p", 3).ok());
    // File times may be coarse: make each file visibly newer than the one before.
    fs::last_write_time(keyedFilePath(dir_, "grid", "key" + std::to_string(i)),
                        fs::file_time_type::clock::now() + std::chrono::seconds(i));
  }
  EXPECT_EQ(filesWith("grid"), 3);
  EXPECT_FALSE(loadKeyedFile(dir_, "grid", "key0").has_value());
  EXPECT_FALSE(loadKeyedFile(dir_, "grid", "key1").has_value());
  EXPECT_EQ(loadKeyedFile(dir_, "grid", "key4"), "p");
  EXPECT_EQ(loadKeyedFile(dir_, "other", "x"), "kept whatever the grids do");
}

TEST_F(KeyedFile, AFolderThatCannotBeMadeIsAnError) {
  ASSERT_TRUE(makeDirs(dir_).ok());
  const std::string blocker = dir_ + "/file";
  std::ofstream(blocker) << "x";
  const Status s = saveKeyedFile(blocker + "/below", "grid", "k", "p", 4);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find(blocker), std::string::npos) << s.message();
}

TEST_F(KeyedFile, WritersRacingLeaveOneWholeFile) {
  const std::string payload(1 << 16, 'z');
  std::vector<std::thread> writers;
  for (int i = 0; i < 4; ++i) {
    writers.emplace_back([&] { EXPECT_TRUE(saveKeyedFile(dir_, "grid", "k", payload, 4).ok()); });
  }
  for (std::thread& t : writers) t.join();
  EXPECT_EQ(loadKeyedFile(dir_, "grid", "k"), payload);
  EXPECT_EQ(filesWith("grid"), 1);
}

}  // namespace
}  // namespace braid
