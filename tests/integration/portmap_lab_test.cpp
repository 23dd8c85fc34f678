// Port mapping against a real gateway daemon: Debian's miniupnpd (nftables
// flavour) runs in the NAT lab's home-A router (nat-a), with NAT-PMP and
// UPnP-IGD on its LAN side (br0) and wan0 as its public side. From a1, the
// tool tests/portmap/portmap_probe (src/portmap as a command) maps a port a
// listener in a1 holds; from pub (the internet side) a connection to
// nat-a's public address at the external port must reach that listener, and
// must be refused once the mapping is removed. Home B has no gateway daemon:
// there the library reports "unavailable" with advice.
//
// Two things the lab needs for miniupnpd, as a real router would have them:
//  - nftables chains for miniupnpd to fill (table inet filter: forward ->
//    miniupnpd, nat prerouting -> prerouting_miniupnpd, ...), and a rule in
//    the router's own FORWARD chain letting in what was DNATed (OpenWrt does
//    the same with "ct status dnat accept"), since the lab's FORWARD policy
//    is DROP and miniupnpd only adds to its own chain.
//  - a public address: miniupnpd 2.3 refuses to forward ports when its WAN
//    address is in a reserved range, and all the lab's are (RFC 5737, 2544).
//    It accepts the address a STUN server reports, so a minimal STUN
//    responder (RFC 5389 Binding, XOR-MAPPED-ADDRESS) runs on pub.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <condition_variable>
#include <cstring>
#include <fstream>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "support/nat_lab.h"
#include "support/temp_dir.h"

extern char** environ;

namespace yonder::testing {
namespace {

constexpr const char* kMiniupnpd = "/usr/sbin/miniupnpd";

// A process in a lab node with a pipe on stdin and one on stdout+stderr,
// read line by line on a thread so the test can wait for a line (an event)
// and the process never blocks on a full pipe. Killed when destroyed.
class PipedProcess {
 public:
  PipedProcess(const NatLab& lab, std::string_view node, const std::vector<std::string>& argv) {
    std::vector<std::string> full{ip_program(), "netns", "exec", lab.netns(node)};
    full.insert(full.end(), argv.begin(), argv.end());
    int in[2], out[2];
    if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0) throw std::runtime_error("pipe2 failed");
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    posix_spawn_file_actions_adddup2(&fa, out[1], 2);
    std::vector<char*> a;
    for (auto& s : full) a.push_back(s.data());
    a.push_back(nullptr);
    int rc = ::posix_spawn(&pid_, a[0], &fa, nullptr, a.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    ::close(in[0]);
    ::close(out[1]);
    if (rc != 0) throw std::runtime_error("posix_spawn failed: " + std::string(std::strerror(rc)));
    stdin_ = in[1];
    out_ = out[0];
    reader_ = std::thread([this] { read_all(); });
  }
  ~PipedProcess() {
    if (pid_ > 0 && !waited_) {
      ::kill(pid_, SIGKILL);
      wait();
    }
    close_stdin();
    if (reader_.joinable()) reader_.join();
    ::close(out_);
  }
  PipedProcess(const PipedProcess&) = delete;
  PipedProcess& operator=(const PipedProcess&) = delete;

  // The first line (since the start) for which `pred` holds; "" at end of output.
  std::string wait_for_line(const std::function<bool(const std::string&)>& pred) {
    std::unique_lock lock(mu_);
    size_t seen = 0;
    std::string found;
    cv_.wait(lock, [&] {
      for (; seen < lines_.size(); ++seen) {
        if (pred(lines_[seen])) {
          found = lines_[seen];
          return true;
        }
      }
      return eof_;
    });
    return found;
  }
  std::string output() {
    std::lock_guard lock(mu_);
    std::string all;
    for (auto& l : lines_) all += l + "\n";
    return all;
  }
  void close_stdin() {
    if (stdin_ >= 0) ::close(stdin_);
    stdin_ = -1;
  }
  void terminate() {
    if (pid_ > 0 && !waited_) ::kill(pid_, SIGTERM);
  }
  int wait() {
    int status = 0;
    ::waitpid(pid_, &status, 0);
    waited_ = true;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

 private:
  void read_all() {
    std::string partial;
    char buf[4096];
    for (;;) {
      ssize_t n = ::read(out_, buf, sizeof buf);
      if (n <= 0) break;
      partial.append(buf, static_cast<size_t>(n));
      size_t nl;
      std::lock_guard lock(mu_);
      while ((nl = partial.find('\n')) != std::string::npos) {
        lines_.push_back(partial.substr(0, nl));
        partial.erase(0, nl + 1);
      }
      cv_.notify_all();
    }
    std::lock_guard lock(mu_);
    if (!partial.empty()) lines_.push_back(partial);
    eof_ = true;
    cv_.notify_all();
  }

  pid_t pid_ = -1;
  bool waited_ = false;
  int stdin_ = -1, out_ = -1;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> lines_;
  bool eof_ = false;
  std::thread reader_;
};

// Answers STUN Binding requests on `fd` with the sender's address until the
// socket is shut down. Bounded: a request is at most 548 bytes here and only
// its 20-byte header is read.
class StunResponder {
 public:
  explicit StunResponder(int fd) : fd_(fd), thread_([this] { serve(); }) {}
  ~StunResponder() {
    ::shutdown(fd_, SHUT_RDWR);
    thread_.join();
    ::close(fd_);
  }

 private:
  void serve() {
    unsigned char req[548];
    for (;;) {
      sockaddr_in from{};
      socklen_t len = sizeof from;
      ssize_t n = ::recvfrom(fd_, req, sizeof req, 0, reinterpret_cast<sockaddr*>(&from), &len);
      if (n <= 0) return;  // shut down
      if (n < 20 || req[0] != 0x00 || req[1] != 0x01) continue;
      unsigned char resp[32] = {0x01, 0x01, 0x00, 12};  // Binding Success, 12 bytes of attributes
      std::memcpy(resp + 4, req + 4, 16);               // magic cookie and transaction id
      uint16_t port = ntohs(from.sin_port) ^ 0x2112;
      uint32_t addr = ntohl(from.sin_addr.s_addr) ^ 0x2112A442;
      unsigned char attr[12] = {0x80,
                                0x20,
                                0x00,
                                8,
                                0x00,
                                0x01,  // XOR-MAPPED-ADDRESS, IPv4
                                static_cast<unsigned char>(port >> 8),
                                static_cast<unsigned char>(port),
                                static_cast<unsigned char>(addr >> 24),
                                static_cast<unsigned char>(addr >> 16),
                                static_cast<unsigned char>(addr >> 8),
                                static_cast<unsigned char>(addr)};
      std::memcpy(resp + 20, attr, sizeof attr);
      ::sendto(fd_, resp, sizeof resp, 0, reinterpret_cast<sockaddr*>(&from), len);
    }
  }
  int fd_;
  std::thread thread_;
};

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
    ASSERT_EQ(::access(kMiniupnpd, X_OK), 0) << kMiniupnpd << " missing: run scripts/setup.sh (miniupnpd-nftables)";
    lab_ = std::make_unique<NatLab>();
    probe_ = program_path("portmap_probe");

    auto nft = lab_->run_in("nat-a", {"nft", "-f", "-"}, {}, R"(table inet filter {
  chain forward { type filter hook forward priority 0; policy accept; jump miniupnpd; }
  chain miniupnpd { }
  chain prerouting { type nat hook prerouting priority -100; policy accept; jump prerouting_miniupnpd; }
  chain postrouting { type nat hook postrouting priority 100; policy accept; jump postrouting_miniupnpd; }
  chain prerouting_miniupnpd { }
  chain postrouting_miniupnpd { }
}
)");
    ASSERT_EQ(nft.exit_code, 0) << "nft (package nftables, scripts/setup.sh): " << nft.err;
    auto fw = lab_->run_in("nat-a", {"iptables", "-I", "FORWARD", "-i", "wan0", "-o", "br0", "-m", "conntrack",
                                     "--ctstate", "DNAT", "-j", "ACCEPT"});
    ASSERT_EQ(fw.exit_code, 0) << fw.err;

    int stun_fd = lab_->socket_in("pub", AF_INET, SOCK_DGRAM);
    auto stun_addr = ipv4(lab_->server_address(), 3478);
    ASSERT_EQ(::bind(stun_fd, reinterpret_cast<sockaddr*>(&stun_addr), sizeof stun_addr), 0) << std::strerror(errno);
    stun_ = std::make_unique<StunResponder>(stun_fd);

    std::ofstream(dir_.path() + "/miniupnpd.conf") << "ext_ifname=wan0\n"
                                                      "listening_ip=br0\n"
                                                      "enable_natpmp=yes\n"
                                                      "enable_upnp=yes\n"
                                                      "secure_mode=yes\n"
                                                      "ext_perform_stun=yes\n"
                                                      "ext_stun_host=" +
                                                          lab_->server_address() +
                                                          "\n"
                                                          "lease_file=" +
                                                          dir_.path() +
                                                          "/leases\n"
                                                          "uuid=4bf5cfd4-7a59-4b4b-9a3c-7d0c8b2f6a11\n"
                                                          "allow 1024-65535 192.168.1.0/24 1024-65535\n"
                                                          "deny 0-65535 0.0.0.0/0 0-65535\n";
    gateway_ = std::make_unique<PipedProcess>(
        *lab_, "nat-a",
        std::vector<std::string>{kMiniupnpd, "-d", "-f", dir_.path() + "/miniupnpd.conf", "-P", dir_.path() + "/pid"});
    // Its last start-up line; STUN (and so the public address) comes before it.
    auto ready =
        gateway_->wait_for_line([](const std::string& l) { return l.find("Listening for NAT-PMP") != l.npos; });
    ASSERT_FALSE(ready.empty()) << "miniupnpd did not start:\n" << gateway_->output();
    ASSERT_EQ(gateway_->output().find("Port forwarding is impossible"), std::string::npos) << gateway_->output();
  }

  void TearDown() override {
    if (gateway_) {
      gateway_->terminate();
      gateway_->wait();
    }
    gateway_.reset();
    stun_.reset();
  }

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
    ASSERT_EQ(connect_from_pub(external_port, &client), 0) << "gateway log:\n" << gateway_->output();
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
    ASSERT_EQ(mapped.exit_code, 0) << mapped.out << mapped.err << "\ngateway log:\n" << gateway_->output();
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

  TempDir dir_;
  std::unique_ptr<NatLab> lab_;
  std::string probe_;
  std::unique_ptr<StunResponder> stun_;
  std::unique_ptr<PipedProcess> gateway_;  // after lab_: stopped before the lab goes
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
  auto rules = lab_->run_in("nat-a", {"nft", "list", "chain", "inet", "filter", "prerouting_miniupnpd"});
  EXPECT_EQ(rules.out.find("dnat"), std::string::npos) << rules.out;
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
