#include "transport/transport_filter.h"

#include <gtest/gtest.h>

namespace braid {
namespace {

TEST(TransportFilter, EmptyAllowsEverything) {
  const TransportFilter f = TransportFilter::parse("").value();
  EXPECT_TRUE(f.allows(TransportKind::kShm));
  EXPECT_TRUE(f.allows(TransportKind::kSocket));
  EXPECT_TRUE(f.allows(TransportKind::kIb));
  EXPECT_TRUE(f.allows(TransportKind::kP2p));
}

TEST(TransportFilter, ListAllowsExactlyThose) {
  const TransportFilter f = TransportFilter::parse(" Socket , shm").value();
  EXPECT_TRUE(f.allows(TransportKind::kShm));
  EXPECT_TRUE(f.allows(TransportKind::kSocket));
  EXPECT_FALSE(f.allows(TransportKind::kIb));
  EXPECT_FALSE(f.allows(TransportKind::kP2p));
  EXPECT_EQ(f.describe(), "shm,socket");
}

TEST(TransportFilter, CaretExcludes) {
  const TransportFilter f = TransportFilter::parse("^shm,ib").value();
  EXPECT_FALSE(f.allows(TransportKind::kShm));
  EXPECT_FALSE(f.allows(TransportKind::kIb));
  EXPECT_TRUE(f.allows(TransportKind::kSocket));
  EXPECT_TRUE(f.allows(TransportKind::kP2p));
}

TEST(TransportFilter, TyposAndEmptySetsAreErrorsNamingTheVariable) {
  for (const char* bad : {"shmm", "shm,,socket", "^shm,p2p,socket,ib", "tcp"}) {
    Result<TransportFilter> f = TransportFilter::parse(bad);
    ASSERT_FALSE(f.ok()) << bad;
    EXPECT_EQ(f.status().code(), braidInvalidArgument);
    EXPECT_NE(f.status().message().find("BRAID_TRANSPORT"), std::string::npos) << bad;
  }
}

}  // namespace
}  // namespace braid
