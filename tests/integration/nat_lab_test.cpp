// The NAT lab itself (scripts/natlab.sh through support/nat_lab.h): the
// homes reach the public servers from their NAT's address, stay apart from
// each other, map ports the way their NAT mode says, and leave nothing
// behind. Servers and clients are plain sockets made inside the lab's
// namespaces; every wait is on an event (accept, a datagram, an exit), with
// a bound only where the point is that nothing arrives.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "os/unique_fd.h"
#include "support/nat_lab.h"
#include "support/read_file.h"
#include "support/subprocess.h"
#include "support/temp_dir.h"

namespace yonder::testing {
namespace {

using Fd = os::UniqueFd;

sockaddr_in inet(const std::string& ip, uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  if (::inet_pton(AF_INET, ip.c_str(), &a.sin_addr) != 1) throw std::invalid_argument("bad address " + ip);
  return a;
}

sockaddr* sa(sockaddr_in& a) {
  return reinterpret_cast<sockaddr*>(&a);
}

std::string ip_of(const sockaddr_in& a) {
  char buf[INET_ADDRSTRLEN];
  ::inet_ntop(AF_INET, &a.sin_addr, buf, sizeof buf);
  return buf;
}

uint16_t local_port(int fd) {
  sockaddr_in a{};
  socklen_t len = sizeof a;
  if (::getsockname(fd, sa(a), &len) != 0) throw std::runtime_error("getsockname");
  return ntohs(a.sin_port);
}

void bind_to(int fd, const std::string& ip, uint16_t port = 0) {
  auto a = inet(ip, port);
  if (::bind(fd, sa(a), sizeof a) != 0) throw std::runtime_error("bind " + ip + ": " + std::strerror(errno));
}

bool readable(int fd, int timeout_ms) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, timeout_ms) == 1;
}

// A TCP listener on `ip` inside `node`.
int listener_in(const NatLab& lab, const std::string& node, const std::string& ip) {
  int fd = lab.socket_in(node, AF_INET, SOCK_STREAM);
  bind_to(fd, ip);
  if (::listen(fd, 8) != 0) throw std::runtime_error("listen");
  return fd;
}

// Connects from `node` to ip:port and returns the address the server saw.
std::string seen_by_server(const NatLab& lab, const std::string& node, int listener, const std::string& ip) {
  Fd client(lab.socket_in(node, AF_INET, SOCK_STREAM));
  auto to = inet(ip, local_port(listener));
  if (::connect(client.get(), sa(to), sizeof to) != 0) {
    return std::string("connect failed: ") + std::strerror(errno);
  }
  sockaddr_in peer{};
  socklen_t len = sizeof peer;
  Fd conn(::accept4(listener, sa(peer), &len, SOCK_CLOEXEC));
  if (conn.get() < 0) return "accept failed";
  // Bytes go both ways through the NAT.
  EXPECT_EQ(::write(client.get(), "ping", 4), 4);
  char buf[8];
  EXPECT_EQ(::read(conn.get(), buf, sizeof buf), 4);
  return ip_of(peer);
}

TEST(NatLab, HomesReachTheServersFromTheirNatsPublicAddress) {
  YONDER_SKIP_WITHOUT_NAT_LAB();
  NatLab lab;
  Fd listener(listener_in(lab, "pub", lab.server_address()));
  EXPECT_EQ(seen_by_server(lab, "a1", listener.get(), lab.server_address()), lab.address("nat-a"));
  EXPECT_EQ(seen_by_server(lab, "a2", listener.get(), lab.server_address()), lab.address("nat-a"));
  EXPECT_EQ(seen_by_server(lab, "b1", listener.get(), lab.server_address()), lab.address("nat-b"));
  EXPECT_EQ(lab.address("nat-a"), "203.0.113.2");
  EXPECT_EQ(lab.address("nat-b"), "198.51.100.2");
  // Same private subnet in both homes.
  EXPECT_EQ(lab.address("nat-a.lan"), lab.address("nat-b.lan"));
}

// natlab.sh move: a1 plugged into home B's LAN keeps its address and is
// seen from home B's public address; moving it back restores home A's.
TEST(NatLab, AHostMovedToTheOtherHomeIsSeenFromThatHomesAddress) {
  YONDER_SKIP_WITHOUT_NAT_LAB();
  NatLab lab;
  Fd listener(listener_in(lab, "pub", lab.server_address()));
  lab.move_host("a1", "nat-b");
  EXPECT_EQ(seen_by_server(lab, "a1", listener.get(), lab.server_address()), lab.address("nat-b"));
  lab.move_host("a1", "nat-a");
  EXPECT_EQ(seen_by_server(lab, "a1", listener.get(), lab.server_address()), lab.address("nat-a"));
  EXPECT_THROW(lab.move_host("pub", "nat-a"), std::runtime_error);
}

TEST(NatLab, RunAndSpawnInANode) {
  YONDER_SKIP_WITHOUT_NAT_LAB();
  NatLab lab;
  auto r = lab.run_in("a1", {"sh", "-c", "ip -4 -o addr show dev eth0; echo \"env=$NATLAB_PROBE\""},
                      {{"NATLAB_PROBE", "seen"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find(lab.address("a1") + "/24"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("env=seen"), std::string::npos) << r.out;
  // The host's own interfaces are not visible in a lab node.
  auto links = lab.run_in("b1", {"ip", "-o", "link"});
  EXPECT_EQ(links.out.find("docker0"), std::string::npos) << links.out;

  // A background client in b1 (busybox nc) against a server in pub.
  Fd listener(listener_in(lab, "pub", lab.server2_address()));
  auto nc = lab.spawn_in("b1", {"busybox", "nc", lab.server2_address(), std::to_string(local_port(listener.get()))});
  ASSERT_TRUE(readable(listener.get(), 10000)) << "nc in b1 never connected";
  sockaddr_in peer{};
  socklen_t len = sizeof peer;
  Fd conn(::accept4(listener.get(), sa(peer), &len, SOCK_CLOEXEC));
  EXPECT_EQ(ip_of(peer), lab.address("nat-b"));
  ASSERT_EQ(::write(conn.get(), "hello from pub\n", 15), 15);
  ::shutdown(conn.get(), SHUT_RDWR);
  auto done = nc->wait();
  EXPECT_EQ(done.out, "hello from pub\n") << done.err;
}

TEST(NatLab, HomesCannotReachEachOtherOrBeReachedUnasked) {
  YONDER_SKIP_WITHOUT_NAT_LAB();
  NatLab lab;
  Fd b1_listener(lab.socket_in("b1", AF_INET, SOCK_STREAM));
  bind_to(b1_listener.get(), "0.0.0.0");
  ASSERT_EQ(::listen(b1_listener.get(), 8), 0);
  uint16_t port = local_port(b1_listener.get());

  // a1 dialling b1's private address stays on its own LAN, where no one
  // has it: the neighbour lookup fails (EHOSTUNREACH, about 3 s).
  {
    Fd c(lab.socket_in("a1", AF_INET, SOCK_STREAM));
    auto to = inet(lab.address("b1"), port);
    int rc = ::connect(c.get(), sa(to), sizeof to);
    int err = errno;
    EXPECT_NE(rc, 0);
    EXPECT_TRUE(err == EHOSTUNREACH || err == ETIMEDOUT) << std::strerror(err);
  }
  // The public side has no route to private addresses at all.
  {
    Fd c(lab.socket_in("pub", AF_INET, SOCK_STREAM));
    auto to = inet(lab.address("b1"), port);
    int rc = ::connect(c.get(), sa(to), sizeof to);
    int err = errno;
    EXPECT_NE(rc, 0);
    EXPECT_EQ(err, ENETUNREACH) << std::strerror(err);
  }
  // Even with a route through NAT B, an unasked connection is dropped there.
  auto route = lab.run_in("pub", {"ip", "route", "add", "192.168.1.0/24", "via", lab.address("nat-b")});
  ASSERT_EQ(route.exit_code, 0) << route.err;
  {
    Fd c(lab.socket_in("pub", AF_INET, SOCK_STREAM | SOCK_NONBLOCK));
    auto to = inet(lab.address("b1"), port);
    int rc = ::connect(c.get(), sa(to), sizeof to);
    int err = errno;
    EXPECT_NE(rc, 0);
    EXPECT_EQ(err, EINPROGRESS);
    pollfd p{c.get(), POLLOUT, 0};
    EXPECT_EQ(::poll(&p, 1, 1500), 0) << "the connection was answered";
  }
  EXPECT_FALSE(readable(b1_listener.get(), 0)) << "b1's listener saw a connection";
}

// Sends one datagram from a socket in `node` to each server and returns the
// source each server saw, in order.
std::vector<sockaddr_in> udp_sources(const NatLab& lab, int client, const std::vector<int>& servers) {
  std::vector<sockaddr_in> out;
  for (int s : servers) {
    sockaddr_in to{};
    socklen_t len = sizeof to;
    ::getsockname(s, sa(to), &len);
    EXPECT_EQ(::sendto(client, "x", 1, 0, sa(to), sizeof to), 1);
    EXPECT_TRUE(readable(s, 5000)) << "no datagram reached " << ip_of(to) << "\n" << lab.status();
    sockaddr_in from{};
    len = sizeof from;
    char b;
    EXPECT_EQ(::recvfrom(s, &b, 1, MSG_DONTWAIT, sa(from), &len), 1);
    out.push_back(from);
  }
  return out;
}

TEST(NatLab, PreservingNatKeepsThePortSymmetricNatPicksOnePerDestination) {
  YONDER_SKIP_WITHOUT_NAT_LAB();
  NatLab lab({.nat_a = NatMode::kPreserving, .nat_b = NatMode::kSymmetric});
  EXPECT_EQ(lab.info().at("nat_a"), "preserving");
  EXPECT_EQ(lab.info().at("nat_b"), "symmetric");
  // Four destinations: two addresses, two ports each.
  std::vector<std::unique_ptr<Fd>> servers;
  std::vector<int> fds;
  for (const auto& ip : {lab.server_address(), lab.server_address(), lab.server2_address(), lab.server2_address()}) {
    servers.push_back(std::make_unique<Fd>(lab.socket_in("pub", AF_INET, SOCK_DGRAM)));
    bind_to(servers.back()->get(), ip);
    fds.push_back(servers.back()->get());
  }

  Fd a1(lab.socket_in("a1", AF_INET, SOCK_DGRAM));
  bind_to(a1.get(), "0.0.0.0");
  uint16_t a1_port = local_port(a1.get());
  for (const auto& from : udp_sources(lab, a1.get(), fds)) {
    EXPECT_EQ(ip_of(from), lab.address("nat-a"));
    EXPECT_EQ(ntohs(from.sin_port), a1_port) << "port-preserving NAT changed the port";
  }

  Fd b1(lab.socket_in("b1", AF_INET, SOCK_DGRAM));
  bind_to(b1.get(), "0.0.0.0");
  std::set<uint16_t> b1_ports;
  for (const auto& from : udp_sources(lab, b1.get(), fds)) {
    EXPECT_EQ(ip_of(from), lab.address("nat-b"));
    b1_ports.insert(ntohs(from.sin_port));
  }
  // Random per flow: four equal draws out of ~64k ports do not happen.
  EXPECT_GE(b1_ports.size(), 2u) << "symmetric NAT gave one port to every destination";
}

TEST(NatLab, DaemonRunsInsideANode) {
  YONDER_SKIP_WITHOUT_NAT_LAB();
  NatLab lab;
  TempDir dir;
  Env env = {{"YONDER_HOME", dir / "home"},       {"YONDER_CONFIG", ""},
             {"YONDER_LINK_LISTEN", "0.0.0.0:0"}, {"YONDER_GPU_INVENTORY", "nvml:/nonexistent/libnvidia-ml.so.1"},
             {"YONDER_PASSPHRASE", ""},           {"YONDER_PASSPHRASE_FILE", ""}};
  auto init = run({program_path("yonder"), "init", "--name", "a1"}, env);
  ASSERT_EQ(init.exit_code, 0) << init.err;
  auto d = lab.daemon_in("a1", env);
  ASSERT_TRUE(d->ready()) << d->log();
  struct stat mine {
  }, lab_ns{};
  ASSERT_EQ(::stat(("/proc/" + std::to_string(d->pid()) + "/ns/net").c_str(), &mine), 0);
  ASSERT_EQ(::stat(("/run/netns/" + lab.netns("a1")).c_str(), &lab_ns), 0);
  EXPECT_EQ(mine.st_ino, lab_ns.st_ino) << "yonderd is not in a1's namespace";
  // The CLI reaches it over its unix socket (file systems are shared).
  auto status = run({program_path("yonder"), "status"}, env);
  EXPECT_EQ(status.exit_code, 0) << status.err;
  EXPECT_EQ(d->stop(), 0) << d->log();
}

// Names the lab gives its interfaces; none may ever appear on the host.
const std::vector<std::string> kLabLinks = {"to-a", "to-b", "wan0", "br0", "lan-a1", "lan-a2", "lan-b1"};

std::string host_state() {
  return run({ip_program(), "-o", "link"}).out + run({ip_program(), "-4", "addr"}).out +
         run({ip_program(), "-4", "route"}).out + run({"/usr/sbin/iptables", "-S"}).out +
         run({"/usr/sbin/iptables", "-t", "nat", "-S"}).out;
}

// Nothing of the lab shows on the host: no interface by a lab name, and no
// lab network in its addresses, routes or iptables unless it was there
// before (a host may use one of these ranges for its real network).
void expect_host_untouched(const std::string& before, const std::string& now) {
  for (const auto& name : kLabLinks) EXPECT_EQ(now.find(": " + name), std::string::npos) << name;
  for (const auto& net : {"198.18.0.", "203.0.113.", "198.51.100.", "192.168.1."}) {
    if (before.find(net) != std::string::npos) continue;
    EXPECT_EQ(now.find(net), std::string::npos) << net << " in the host's addresses, routes or iptables:\n" << now;
  }
}

TEST(NatLab, DownLeavesNothingBehind) {
  YONDER_SKIP_WITHOUT_NAT_LAB();
  std::string forward_before = read_file("/proc/sys/net/ipv4/ip_forward");
  std::string host_before = host_state();
  std::string prefix;
  int orphan = -1;
  {
    NatLab lab({.nat_a = NatMode::kSymmetric, .nat_b = NatMode::kSymmetric});
    prefix = lab.prefix();
    auto listed = run({ip_program(), "netns", "list"}).out;
    for (const auto* node : {"pub", "nat-a", "nat-b", "a1", "a2", "b1"}) {
      EXPECT_NE(listed.find(lab.netns(node)), std::string::npos) << listed;
    }
    expect_host_untouched(host_before, host_state());
    // A process left running in a node (detached from the test) is stopped by down.
    auto r = lab.run_in("a2", {"sh", "-c", "sleep 600 </dev/null >/dev/null 2>&1 & echo $!"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    orphan = std::stoi(r.out);
  }
  auto listed = run({ip_program(), "netns", "list"}).out;
  EXPECT_EQ(listed.find(prefix + "-"), std::string::npos) << listed;
  expect_host_untouched(host_before, host_state());
  EXPECT_EQ(read_file("/proc/sys/net/ipv4/ip_forward"), forward_before);
  struct stat st {};
  EXPECT_NE(::stat(("/run/yonder-natlab/" + prefix).c_str(), &st), 0) << "the lab's state file is left";
  std::string proc_state = read_file("/proc/" + std::to_string(orphan) + "/stat");
  EXPECT_TRUE(proc_state.empty() || proc_state.find(") Z") != std::string::npos)
      << "a process in the lab survived down: " << proc_state;
  // down again is harmless.
  auto again = run({"/bin/bash", natlab_script(), "down", "--prefix", prefix});
  EXPECT_EQ(again.exit_code, 0) << again.err;
}

}  // namespace
}  // namespace yonder::testing
