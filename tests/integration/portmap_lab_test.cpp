// Port mapping against a real gateway daemon: Debian's miniupnpd (nftables
// flavour) runs in the NAT lab's home-A router (nat-a), with NAT-PMP and
// UPnP-IGD on its LAN side (br0) and wan0 as its public side. From a1, the
// tool tests/portmap/portmap_probe (src/portmap as a command) maps a port a
// listener in a1 holds; from pub (the internet side) a connection to
// nat-a's public address at the external port must reach that listener, and
// must be refused once the mapping is removed. Home B has no gateway daemon:
// there the library reports "unavailable" with advice.
//
// The gateway and what the lab needs for it (nftables chains, a FORWARD
// rule, a STUN responder on pub for its public address): support/lab_gateway.h.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <nlohmann/json.hpp>

#include "support/lab_gateway.h"
#include "support/nat_lab.h"
#include "support/piped_process.h"

namespace yonder::testing {
namespace {

sockaddr_in ipv4(const std::string& ip, uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  ::inet_pton(AF_INET, ip.c_str(), &a.sin_addr);
  return a;
}

nlohmann::json parse_last_line(const std::string& out) {
  auto end = out.find_last_not_of('\n');
  auto start = out.rfind('\n', end);
  auto line = out.substr(start == std::string::npos ? 0 : start + 1, end == std::string::npos ? 0 : end + 1);
  return nlohmann::json::parse(line, nullptr, false);
}

class PortmapLab : public ::testing::Test {
 protected:
  void SetUp() override {
    YONDER_SKIP_WITHOUT_NAT_LAB();
    if (auto why = LabGateway::unavailable_reason()) FAIL() << *why;
    lab_ = std::make_unique<NatLab>();
    probe_ = program_path("portmap_probe");
    gateway_ = std::make_unique<LabGateway>(*lab_, "nat-a");
  }

  void TearDown() override { gateway_.reset(); }

  // A TCP listener in a1 on a port of the kernel's choosing.
  int listen_in_a1(uint16_t* port) {
    int fd = lab_->socket_in("a1", AF_INET, SOCK_STREAM);
    auto any = ipv4("0.0.0.0", 0);
    EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&any), sizeof any), 0);
    EXPECT_EQ(::listen(fd, 8), 0);
    sockaddr_in got{};
    socklen_t len = sizeof got;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&got), &len);
    *port = ntohs(got.sin_port);
    return fd;
  }

  // Connects from pub to nat-a's public address; 0 or the errno. The send
  // timeout only keeps a broken lab from hanging the test.
  int connect_from_pub(uint16_t port, int* out_fd) {
    int fd = lab_->socket_in("pub", AF_INET, SOCK_STREAM);
    timeval tv{.tv_sec = 10, .tv_usec = 0};
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    auto to = ipv4(lab_->address("nat-a"), port);
    int rc = ::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) == 0 ? 0 : errno;
    if (rc == 0 && out_fd) {
      *out_fd = fd;
    } else {
      ::close(fd);
    }
    return rc;
  }

  // From pub, reaches the listener in a1 through nat-a's public address.
  void expect_reaches_a1(int listener, uint16_t external_port) {
    int client = -1;
    ASSERT_EQ(connect_from_pub(external_port, &client), 0) << "gateway log:\n" << gateway_->log();
    int conn = ::accept(listener, nullptr, nullptr);
    ASSERT_GE(conn, 0);
    ASSERT_EQ(::write(conn, "a1", 2), 2);
    char buf[2] = {};
    ASSERT_EQ(::read(client, buf, 2), 2);
    EXPECT_EQ(std::string(buf, 2), "a1");
    sockaddr_in peer{};
    socklen_t len = sizeof peer;
    ::getpeername(conn, reinterpret_cast<sockaddr*>(&peer), &len);
    char ip[INET_ADDRSTRLEN] = {};
    ::inet_ntop(AF_INET, &peer.sin_addr, ip, sizeof ip);
    EXPECT_EQ(std::string(ip), lab_->address("pub.a"));  // came in from the internet side
    ::close(conn);
    ::close(client);
  }

  void map_reach_unmap(const std::string& method) {
    uint16_t port = 0;
    int listener = listen_in_a1(&port);
    auto mapped = lab_->run_in("a1", {probe_, "map", std::to_string(port), "--method", method});
    ASSERT_EQ(mapped.exit_code, 0) << mapped.out << mapped.err << "\ngateway log:\n" << gateway_->log();
    auto j = parse_last_line(mapped.out);
    ASSERT_TRUE(j.is_object()) << mapped.out;
    auto m = j["mapping"];
    EXPECT_EQ(m["protocol"], method);
    EXPECT_EQ(m["external_ip"], lab_->address("nat-a"));
    EXPECT_EQ(m["internal_port"], port);
    EXPECT_EQ(m["external_port"], port);  // the same port, since it was free
    EXPECT_GT(m["lifetime_s"].get<int>(), 0);
    uint16_t external = m["external_port"].get<uint16_t>();

    expect_reaches_a1(listener, external);

    auto removed = lab_->run_in("a1", {probe_, "unmap", m.dump()});
    ASSERT_EQ(removed.exit_code, 0) << removed.out << removed.err;
    EXPECT_EQ(connect_from_pub(external, nullptr), ECONNREFUSED);
    ::close(listener);
  }

  std::unique_ptr<NatLab> lab_;
  std::string probe_;
  std::unique_ptr<LabGateway> gateway_;  // after lab_: stopped before the lab goes
};

TEST_F(PortmapLab, ProbeSeesBothProtocolsAndLeavesNothing) {
  auto r = lab_->run_in("a1", {probe_, "probe"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  auto j = parse_last_line(r.out);
  EXPECT_TRUE(j["nat_pmp"]["available"].get<bool>()) << r.out;
  EXPECT_TRUE(j["upnp_igd"]["available"].get<bool>()) << r.out;
  EXPECT_EQ(j["nat_pmp"]["external_ip"], lab_->address("nat-a"));
  EXPECT_EQ(j["upnp_igd"]["external_ip"], lab_->address("nat-a"));
  EXPECT_EQ(j["nat_pmp"]["gateway"], lab_->address("nat-a.lan"));
  auto rules = gateway_->forwards();
  EXPECT_EQ(rules.find("dnat"), std::string::npos) << rules;
}

TEST_F(PortmapLab, NatPmpMappingReachesA1FromTheInternetUntilRemoved) {
  map_reach_unmap("nat-pmp");
}

TEST_F(PortmapLab, UpnpIgdMappingReachesA1FromTheInternetUntilRemoved) {
  map_reach_unmap("upnp-igd");
}

TEST_F(PortmapLab, PortMapperRemovesTheMappingOnExit) {
  uint16_t port = 0;
  int listener = listen_in_a1(&port);
  PipedProcess holder(*lab_, "a1", {probe_, "hold", std::to_string(port)});
  auto line = holder.wait_for_line([](const std::string& l) {
    return l.find("\"state\":\"") != l.npos && l.find("\"state\":\"mapping\"") == l.npos;
  });
  auto st = nlohmann::json::parse(line, nullptr, false);
  ASSERT_EQ(st.value("state", ""), "mapped") << holder.output();
  EXPECT_EQ(st["mapping"]["protocol"], "nat-pmp");  // tried first
  EXPECT_EQ(st["next_attempt_in_s"], 3600);         // half of the 2 h lease
  expect_reaches_a1(listener, st["mapping"]["external_port"].get<uint16_t>());

  holder.close_stdin();  // the tool's "exit": PortMapper::stop()
  EXPECT_EQ(holder.wait(), 0) << holder.output();
  auto last = holder.wait_for_line([](const std::string& l) { return l.find("\"state\":\"none\"") != l.npos; });
  EXPECT_EQ(last, R"({"state":"none"})") << holder.output();  // no "could not remove" reason
  EXPECT_EQ(connect_from_pub(st["mapping"]["external_port"].get<uint16_t>(), nullptr), ECONNREFUSED);
  ::close(listener);
}

// Home B has no gateway daemon: NAT-PMP is refused by ICMP at once, the
// SSDP search waits its bounded delay, and the answer says what to do.
TEST_F(PortmapLab, HomeWithoutGatewayIsUnavailableWithAdvice) {
  auto r = lab_->run_in("b1", {probe_, "map", "40000"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  auto j = parse_last_line(r.out);
  EXPECT_EQ(j["code"], "unavailable") << r.out;
  std::string err = j.value("error", "");
  EXPECT_NE(err.find("no UPnP-IGD or NAT-PMP gateway answered on the local network"), std::string::npos) << err;
  EXPECT_NE(err.find("enable UPnP or NAT-PMP on the router, or rely on a relay"), std::string::npos) << err;

  auto p = lab_->run_in("b1", {probe_, "probe"});
  ASSERT_EQ(p.exit_code, 0) << p.out << p.err;
  auto pj = parse_last_line(p.out);
  EXPECT_FALSE(pj["nat_pmp"]["available"].get<bool>());
  EXPECT_FALSE(pj["upnp_igd"]["available"].get<bool>());
  EXPECT_TRUE(pj.contains("advice"));

  PipedProcess holder(*lab_, "b1", {probe_, "hold", "40000"});
  auto line = holder.wait_for_line([](const std::string& l) { return l.find("unavailable") != l.npos; });
  auto st = nlohmann::json::parse(line, nullptr, false);
  EXPECT_EQ(st.value("state", ""), "unavailable") << holder.output();
  EXPECT_NE(st.value("reason", "").find("no UPnP-IGD or NAT-PMP gateway answered"), std::string::npos);
  EXPECT_EQ(st["next_attempt_in_s"], 30);
  holder.close_stdin();
  EXPECT_EQ(holder.wait(), 0) << holder.output();
}

}  // namespace
}  // namespace yonder::testing
