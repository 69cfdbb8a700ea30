#include "transport/shm/shared_buffers.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <vector>

namespace braid {
namespace {

TEST(SharedBuffers, AllocatedMemoryIsZeroWritableAndFound) {
  Result<void*> p = allocateSharedBuffer(10000);
  ASSERT_TRUE(p.ok()) << p.status().message();
  char* c = static_cast<char*>(*p);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(c) % 4096, 0u);
  EXPECT_EQ(c[0], 0);
  EXPECT_EQ(c[9999], 0);
  std::memset(c, 7, 10000);

  std::optional<LentSpan> whole = findSharedBuffer(c, 10000);
  ASSERT_TRUE(whole.has_value());
  EXPECT_NE(whole->buffer, 0u);
  EXPECT_EQ(whole->offset, 0u);
  EXPECT_GE(whole->fd, 0);
  std::optional<LentSpan> inside = findSharedBuffer(c + 100, 50);
  ASSERT_TRUE(inside.has_value());
  EXPECT_EQ(inside->buffer, whole->buffer);
  EXPECT_EQ(inside->offset, 100u);
  // Up to the page the size was rounded to, and not a byte past it.
  EXPECT_TRUE(findSharedBuffer(c, 12288).has_value());
  EXPECT_FALSE(findSharedBuffer(c, 12289).has_value());
  EXPECT_FALSE(findSharedBuffer(c - 1, 2).has_value());

  ASSERT_TRUE(freeSharedBuffer(c).ok());
  EXPECT_FALSE(findSharedBuffer(c, 1).has_value());
}

TEST(SharedBuffers, EachBufferIsItsOwnAndOrdinaryMemoryIsNone) {
  Result<void*> a = allocateSharedBuffer(4096);
  Result<void*> b = allocateSharedBuffer(4096);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(findSharedBuffer(*a, 1)->buffer, findSharedBuffer(*b, 1)->buffer);
  std::vector<char> heap(4096);
  EXPECT_FALSE(findSharedBuffer(heap.data(), heap.size()).has_value());
  EXPECT_TRUE(freeSharedBuffer(*a).ok());
  EXPECT_TRUE(freeSharedBuffer(*b).ok());
}

TEST(SharedBuffers, BadRequestsAreErrorsSayingSo) {
  Result<void*> none = allocateSharedBuffer(0);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("size is 0"), std::string::npos);
  Result<void*> huge = allocateSharedBuffer(SIZE_MAX);
  EXPECT_FALSE(huge.ok());
  int onStack = 0;
  Status s = freeSharedBuffer(&onStack);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("not returned by braidMemAlloc"), std::string::npos);
  Result<void*> p = allocateSharedBuffer(100);
  ASSERT_TRUE(p.ok());
  ASSERT_TRUE(freeSharedBuffer(*p).ok());
  EXPECT_FALSE(freeSharedBuffer(*p).ok());  // twice
  EXPECT_TRUE(freeSharedBuffer(nullptr).ok());
}

// A reader maps the buffer through /proc/<pid>/fd as a peer process would (here: this process
// reading its own, which takes the same path).
TEST(PeerBufferReader, MapsALentBufferAndReadsItInPlace) {
  Result<void*> p = allocateSharedBuffer(8192);
  ASSERT_TRUE(p.ok());
  char* c = static_cast<char*>(*p);
  for (int i = 0; i < 8192; ++i) c[i] = static_cast<char>(i * 3);
  LentSpan span = *findSharedBuffer(c + 1000, 500);

  PeerBufferReader reader(getpid(), /*sameProcess=*/false);
  const char* seen = reader.address(span, 500);
  ASSERT_NE(seen, nullptr);
  EXPECT_NE(seen, c + 1000);  // a mapping of its own
  EXPECT_EQ(std::memcmp(seen, c + 1000, 500), 0);
  c[1000] = 42;  // the same pages
  EXPECT_EQ(seen[0], 42);
  EXPECT_EQ(reader.address(span, 500), seen);  // mapped once

  EXPECT_EQ(reader.address(span, 8192), nullptr);  // past the buffer's end
  LentSpan wrongId = span;
  wrongId.buffer += 1000;  // the descriptor names another buffer
  EXPECT_EQ(reader.address(wrongId, 1), nullptr);
  LentSpan address;  // an address means nothing from another process
  address.offset = reinterpret_cast<uintptr_t>(c);
  EXPECT_EQ(reader.address(address, 1), nullptr);
  EXPECT_TRUE(freeSharedBuffer(c).ok());
  // Freed by its owner, the pages stay readable through the reader's mapping.
  EXPECT_EQ(seen[0], 42);
}

TEST(PeerBufferReader, ASameProcessPeerLendsAddresses) {
  char data[16] = {1};
  LentSpan span;
  span.offset = reinterpret_cast<uintptr_t>(data);
  PeerBufferReader reader(getpid(), /*sameProcess=*/true);
  EXPECT_EQ(reader.address(span, sizeof(data)), data);
}

TEST(PeerBufferReader, KeepsABoundedNumberOfMappings) {
  PeerBufferReader reader(getpid(), /*sameProcess=*/false);
  std::vector<void*> buffers;
  for (int i = 0; i < 40; ++i) {
    Result<void*> p = allocateSharedBuffer(4096);
    ASSERT_TRUE(p.ok());
    static_cast<char*>(*p)[0] = static_cast<char>(i);
    buffers.push_back(*p);
    const char* seen = reader.address(*findSharedBuffer(*p, 1), 1);
    ASSERT_NE(seen, nullptr);
    EXPECT_EQ(seen[0], static_cast<char>(i));
  }
  // The first buffers were unmapped to make room; read again, they are mapped anew.
  const char* again = reader.address(*findSharedBuffer(buffers[0], 1), 1);
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(again[0], 0);
  for (void* p : buffers) EXPECT_TRUE(freeSharedBuffer(p).ok());
}

TEST(SharedBuffers, ThisProcessCanOpenItsOwnProbe) {
  const int probe = openProbeFd();
  ASSERT_GE(probe, 0);
  EXPECT_TRUE(canOpenPeerFd(getpid(), probe));
  EXPECT_FALSE(canOpenPeerFd(getpid(), -1));
  EXPECT_FALSE(canOpenPeerFd(0, probe));
  close(probe);
  EXPECT_FALSE(canOpenPeerFd(getpid(), probe));
}

}  // namespace
}  // namespace braid
