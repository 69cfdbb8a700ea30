#include "bootstrap/unique_id.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "bootstrap/auth.h"

namespace braid {
namespace {

UniqueIdInfo sample(const char* address) {
  UniqueIdInfo info;
  info.root = SocketAddress::parse(address).value();
  for (size_t i = 0; i < info.secret.size(); ++i) info.secret[i] = static_cast<uint8_t>(i * 13 + 1);
  return info;
}

TEST(UniqueId, RoundTripsIpv4AndIpv6) {
  for (const char* address : {"192.0.2.7:41000", "[2001:db8::1]:5000"}) {
    const UniqueIdInfo info = sample(address);
    Result<UniqueIdInfo> back = decodeUniqueId(encodeUniqueId(info));
    ASSERT_TRUE(back.ok()) << back.status().message();
    EXPECT_TRUE(back->root == info.root);
    EXPECT_EQ(back->secret, info.secret);
  }
}

TEST(UniqueId, RejectsEveryKindOfDamage) {
  const braidUniqueId good = encodeUniqueId(sample("10.0.0.1:1234"));
  auto damaged = [&](size_t offset, uint8_t value) {
    braidUniqueId id = good;
    id.internal[offset] = static_cast<char>(value);
    return decodeUniqueId(id);
  };
  struct Case {
    size_t offset;
    const char* words;
  };
  for (const Case& c :
       {Case{0, "magic"}, Case{4, "version"}, Case{6, "reserved"}, Case{8, "checksum"},
        Case{40, "checksum"}, Case{64, "checksum"}, Case{100, "reserved"}, Case{127, "reserved"}}) {
    Result<UniqueIdInfo> r =
        damaged(c.offset, static_cast<uint8_t>(good.internal[c.offset] ^ 0x5a));
    ASSERT_FALSE(r.ok()) << "damage at " << c.offset << " accepted";
    EXPECT_EQ(r.status().code(), braidInvalidArgument);
    EXPECT_NE(r.status().message().find(c.words), std::string::npos)
        << c.offset << ": " << r.status().message();
  }
  EXPECT_FALSE(decodeUniqueId(braidUniqueId{}).ok());
}

// Re-seals a hand-edited id so that the checks behind the checksum are reached.
void reseal(braidUniqueId& id) {
  auto* bytes = reinterpret_cast<uint8_t*>(id.internal);
  uint32_t h = 2166136261u;
  for (int i = 0; i < 64; ++i) h = (h ^ bytes[i]) * 16777619u;
  for (int i = 0; i < 4; ++i) bytes[64 + i] = static_cast<uint8_t>(h >> (8 * i));
}

TEST(UniqueId, RejectsAnUnknownFamilyBehindAValidChecksum) {
  braidUniqueId id = encodeUniqueId(sample("10.0.0.1:1234"));
  reseal(id);
  ASSERT_TRUE(decodeUniqueId(id).ok());  // resealing alone changes nothing
  id.internal[8] = 5;
  reseal(id);
  Result<UniqueIdInfo> r = decodeUniqueId(id);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("family"), std::string::npos) << r.status().message();
}

TEST(UniqueId, RejectsPortZero) {
  UniqueIdInfo info = sample("10.0.0.1:1");
  info.root.setPort(0);
  EXPECT_FALSE(decodeUniqueId(encodeUniqueId(info)).ok());
}

TEST(UniqueId, RejectsRandomGarbage) {
  std::mt19937 rng(42);
  for (int trial = 0; trial < 2000; ++trial) {
    braidUniqueId id;
    for (char& c : id.internal) c = static_cast<char>(rng());
    // Even with the magic and version right, garbage must not pass.
    if (trial % 2 == 0) {
      const braidUniqueId good = encodeUniqueId(sample("10.0.0.1:1234"));
      std::memcpy(id.internal, good.internal, 8);
    }
    EXPECT_FALSE(decodeUniqueId(id).ok()) << "trial " << trial;
  }
}

}  // namespace
}  // namespace braid
