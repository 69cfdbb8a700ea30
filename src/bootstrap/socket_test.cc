#include "bootstrap/socket.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <thread>

namespace braid {
namespace {

SocketAddress addr(const char* text) {
  Result<SocketAddress> a = SocketAddress::parse(text);
  EXPECT_TRUE(a.ok()) << a.status().message();
  return a.ok() ? a.value() : SocketAddress();
}

InterfaceAddress iface(const char* name, const char* address, bool up = true) {
  InterfaceAddress entry;
  entry.name = name;
  entry.address = addr(address);
  entry.up = up;
  entry.loopback = entry.address.isLoopback();
  return entry;
}

TEST(NameFilter, EmptyMatchesEverything) {
  Result<NameFilter> f = parseNameFilter("");
  ASSERT_TRUE(f.ok());
  EXPECT_TRUE(f->matches("eth0"));
  EXPECT_TRUE(f->matches("lo"));
}

TEST(NameFilter, PrefixesExclusionAndExactNames) {
  Result<NameFilter> prefix = parseNameFilter("eth,ib");
  ASSERT_TRUE(prefix.ok());
  EXPECT_TRUE(prefix->matches("eth0"));
  EXPECT_TRUE(prefix->matches("ib1"));
  EXPECT_FALSE(prefix->matches("lo"));
  EXPECT_FALSE(prefix->matches("et"));

  Result<NameFilter> exclude = parseNameFilter("^docker,lo");
  ASSERT_TRUE(exclude.ok());
  EXPECT_TRUE(exclude->exclude);
  EXPECT_FALSE(exclude->matches("docker0"));
  EXPECT_FALSE(exclude->matches("lo"));
  EXPECT_TRUE(exclude->matches("eth0"));

  Result<NameFilter> exact = parseNameFilter("=eth0");
  ASSERT_TRUE(exact.ok());
  EXPECT_TRUE(exact->matches("eth0"));
  EXPECT_FALSE(exact->matches("eth01"));

  Result<NameFilter> both = parseNameFilter(" ^=eth0 , eth1 ");
  ASSERT_TRUE(both.ok());
  EXPECT_EQ(both->names, (std::vector<std::string>{"eth0", "eth1"}));
  EXPECT_FALSE(both->matches("eth0"));
  EXPECT_TRUE(both->matches("eth01"));
}

TEST(NameFilter, RejectsMalformedSpecs) {
  for (const char* bad :
       {"^", "=", "^=", "eth0,,ib0", ",eth0", "eth0,", "et^h", "=^eth0", "eth 0"}) {
    Result<NameFilter> f = parseNameFilter(bad);
    EXPECT_FALSE(f.ok()) << "'" << bad << "' was accepted";
    if (!f.ok()) {
      EXPECT_EQ(f.status().code(), braidInvalidArgument);
    }
  }
}

TEST(ChooseInterface, FollowsTheIfnameGrammar) {
  const std::vector<InterfaceAddress> list = {
      iface("lo", "127.0.0.1:0"),   iface("eth1", "10.1.0.1:0", /*up=*/false),
      iface("eth0", "[fe80::1]:0"), iface("docker0", "172.17.0.1:0"),
      iface("eth0", "10.0.0.2:0"),  iface("ib0", "[2001:db8::5]:0"),
  };
  auto pick = [&](const char* spec) {
    Result<InterfaceAddress> r = chooseInterface(list, spec);
    return r.ok() ? r->name + " " + r->address.toString() : "error";
  };
  EXPECT_EQ(pick(""), "docker0 172.17.0.1:0");  // first up non-loopback IPv4
  EXPECT_EQ(pick("eth"), "eth0 10.0.0.2:0");    // eth1 is down; IPv4 before link-local
  EXPECT_EQ(pick("^docker,lo"), "eth0 10.0.0.2:0");
  EXPECT_EQ(pick("^=docker0"), "eth0 10.0.0.2:0");
  EXPECT_EQ(pick("lo"), "lo 127.0.0.1:0");
  EXPECT_EQ(pick("=ib0"), "ib0 [2001:db8::5]:0");
  EXPECT_EQ(pick("=eth"), "error");  // exact: no interface is called "eth"
  EXPECT_EQ(pick("eth1"), "error");  // down
  EXPECT_EQ(pick("bad,,spec"), "error");
}

TEST(ChooseInterface, FallsBackToLoopback) {
  const std::vector<InterfaceAddress> list = {iface("eth0", "[fe80::2]:0"),
                                              iface("lo", "127.0.0.1:0")};
  Result<InterfaceAddress> r = chooseInterface(list, "");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->name, "lo");
  // Asked for by name, a link-local address is used.
  r = chooseInterface(list, "eth0");
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->address.isLinkLocal());
}

TEST(ChooseInterface, ThisHostHasAnUsableInterface) {
  Result<InterfaceAddress> r = selectInterface("");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->up);
  EXPECT_TRUE(selectInterface("lo").ok());
  EXPECT_FALSE(selectInterface("=no-such-interface").ok());
}

TEST(SocketAddress, ParsesPrintsAndRoundTripsTheWireForm) {
  for (const char* text : {"127.0.0.1:80", "10.2.3.4:65535", "[::1]:1234", "[2001:db8::7]:9"}) {
    const SocketAddress a = addr(text);
    EXPECT_EQ(a.toString(), text);
    uint8_t wire[SocketAddress::kWireBytes];
    a.toWire(wire);
    Result<SocketAddress> back = SocketAddress::fromWire(wire);
    ASSERT_TRUE(back.ok());
    EXPECT_TRUE(back.value() == a) << text;
  }
  EXPECT_TRUE(addr("[::1]:5").isLoopback());
  EXPECT_FALSE(addr("10.0.0.1:5").isLoopback());
  for (const char* bad : {"1.2.3.4", "1.2.3.4:", "1.2.3.4:99999", "host:80", "[::1:80", ":80"}) {
    EXPECT_FALSE(SocketAddress::parse(bad).ok()) << bad;
  }
}

TEST(SocketAddress, WireDecodingRejectsGarbage) {
  uint8_t wire[SocketAddress::kWireBytes];
  addr("10.0.0.1:7").toWire(wire);
  uint8_t bad[SocketAddress::kWireBytes];
  std::memcpy(bad, wire, sizeof(bad));
  bad[0] = 9;  // unknown family
  EXPECT_FALSE(SocketAddress::fromWire(bad).ok());
  std::memcpy(bad, wire, sizeof(bad));
  bad[20] = 1;  // IPv4 padding
  EXPECT_FALSE(SocketAddress::fromWire(bad).ok());
}

TEST(Deadline, LimitsAndAbort) {
  EXPECT_FALSE(Deadline::never().expired());
  EXPECT_TRUE(Deadline::never().check("x").ok());
  const Deadline shortOne = Deadline::after(0.02);
  while (!shortOne.expired()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(shortOne.check("wait").code(), braidTimeout);
  EXPECT_EQ(shortOne.pollMs(), 0);
  std::atomic<bool> abort{true};
  const Status s = Deadline::after(100, &abort).check("wait");
  EXPECT_EQ(s.code(), braidRemoteError);
  EXPECT_NE(s.message().find("aborted"), std::string::npos);
  EXPECT_LE(Deadline::after(100).pollMs(), kAbortPollMs);
}

class SocketPair : public ::testing::Test {
 protected:
  void SetUp() override {
    Result<Socket> l = Socket::listenOn(addr("127.0.0.1:0"));
    ASSERT_TRUE(l.ok()) << l.status().message();
    listener_ = std::move(l.value());
    Result<SocketAddress> where = listener_.localAddress();
    ASSERT_TRUE(where.ok());
    Result<Socket> c = Socket::connectTo(where.value(), Deadline::after(5), "test", false);
    ASSERT_TRUE(c.ok()) << c.status().message();
    client_ = std::move(c.value());
    const Deadline deadline = Deadline::after(5);
    while (!server_.valid() && !deadline.expired()) {
      Result<Socket> s = listener_.acceptPending(nullptr);
      ASSERT_TRUE(s.ok());
      if (s->valid()) {
        server_ = std::move(s.value());
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    }
    ASSERT_TRUE(server_.valid());
  }
  Socket listener_, client_, server_;
};

TEST_F(SocketPair, TransfersMoreThanTheSocketBuffers) {
  std::vector<uint8_t> out(4 << 20), in(out.size());
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<uint8_t>(i * 7 + 3);
  std::thread writer([&] {
    EXPECT_TRUE(client_.writeAll(out.data(), out.size(), Deadline::after(10), "w").ok());
  });
  EXPECT_TRUE(server_.readAll(in.data(), in.size(), Deadline::after(10), "r").ok());
  writer.join();
  EXPECT_EQ(in, out);
}

TEST_F(SocketPair, ReadTimesOutWithNamedOperation) {
  uint8_t byte;
  const Status s = server_.readAll(&byte, 1, Deadline::after(0.1), "read from rank 3");
  EXPECT_EQ(s.code(), braidTimeout);
  EXPECT_NE(s.message().find("read from rank 3"), std::string::npos) << s.message();
}

TEST_F(SocketPair, AbortEndsABlockedRead) {
  std::atomic<bool> abort{false};
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    abort = true;
  });
  uint8_t byte;
  const Status s = server_.readAll(&byte, 1, Deadline::after(30, &abort), "r");
  aborter.join();
  EXPECT_EQ(s.code(), braidRemoteError);
  EXPECT_NE(s.message().find("aborted"), std::string::npos);
}

TEST_F(SocketPair, PeerCloseIsARemoteErrorForReadsAndWrites) {
  client_.close();
  uint8_t byte;
  EXPECT_EQ(server_.readAll(&byte, 1, Deadline::after(5), "r").code(), braidRemoteError);
  // Writing into a closed connection fails (after the reset arrives), and SIGPIPE is not raised.
  std::vector<uint8_t> data(1 << 16);
  Status s;
  for (int i = 0; i < 100 && s.ok(); ++i) {
    s = server_.writeAll(data.data(), data.size(), Deadline::after(5), "w");
  }
  EXPECT_EQ(s.code(), braidRemoteError);
}

TEST_F(SocketPair, ListenerPortIsFreeAgainWhileItsLastConnectionLingers) {
  const SocketAddress where = listener_.localAddress().value();
  server_.close();  // the listening side closes first, so its end lingers in TIME_WAIT
  client_.close();
  listener_.close();
  Result<Socket> again = Socket::listenOn(where);
  EXPECT_TRUE(again.ok()) << again.status().message();
}

TEST(Socket, ConnectToNobody) {
  Result<Socket> l = Socket::listenOn(addr("127.0.0.1:0"));
  ASSERT_TRUE(l.ok());
  const SocketAddress where = l->localAddress().value();
  l->close();
  Result<Socket> refused = Socket::connectTo(where, Deadline::after(5), "c", false);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), braidRemoteError);
  Result<Socket> retried = Socket::connectTo(where, Deadline::after(0.2), "c", true);
  ASSERT_FALSE(retried.ok());
  EXPECT_EQ(retried.status().code(), braidTimeout);
}

}  // namespace
}  // namespace braid
