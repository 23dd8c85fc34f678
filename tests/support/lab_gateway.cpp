#include "support/lab_gateway.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <iostream>
#include <stdexcept>
#include <thread>

#include "support/piped_process.h"

namespace yonder::testing {

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
  StunResponder(const StunResponder&) = delete;
  StunResponder& operator=(const StunResponder&) = delete;

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
  std::thread thread_;  // last: starts once fd_ is set
};

namespace {

// The chains miniupnpd's nftables backend fills (its defaults).
constexpr const char* kChains = R"(table inet filter {
  chain forward { type filter hook forward priority 0; policy accept; jump miniupnpd; }
  chain miniupnpd { }
  chain prerouting { type nat hook prerouting priority -100; policy accept; jump prerouting_miniupnpd; }
  chain postrouting { type nat hook postrouting priority 100; policy accept; jump postrouting_miniupnpd; }
  chain prerouting_miniupnpd { }
  chain postrouting_miniupnpd { }
}
)";

// The router's FORWARD rule for DNATed connections; "-I"/"-D" goes first.
std::vector<std::string> forward_rule(const char* op) {
  return {"iptables", op, "FORWARD", "-i", "wan0", "-o", "br0", "-m", "conntrack", "--ctstate", "DNAT", "-j", "ACCEPT"};
}

}  // namespace

std::optional<std::string> LabGateway::unavailable_reason() {
  if (::access(kMiniupnpd, X_OK) != 0) {
    return std::string(kMiniupnpd) + " is missing: install miniupnpd-nftables (scripts/setup.sh)";
  }
  return std::nullopt;
}

LabGateway::LabGateway(const NatLab& lab, std::string home) : lab_(lab), home_(std::move(home)) {
  try {
    start();
  } catch (...) {
    stop();
    throw;
  }
}

LabGateway::~LabGateway() {
  stop();
}

void LabGateway::start() {
  if (auto why = unavailable_reason()) throw std::runtime_error(*why);
  auto nft = lab_.run_in(home_, {"nft", "-f", "-"}, {}, kChains);
  if (nft.exit_code != 0) throw std::runtime_error("nft (package nftables, scripts/setup.sh): " + nft.err);
  configured_ = true;
  auto fw = lab_.run_in(home_, forward_rule("-I"));
  if (fw.exit_code != 0) throw std::runtime_error("iptables -I FORWARD in " + home_ + ": " + fw.err);

  int fd = lab_.socket_in("pub", AF_INET, SOCK_DGRAM);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  ::inet_pton(AF_INET, lab_.server_address().c_str(), &addr.sin_addr);
  socklen_t len = sizeof addr;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    std::string err = std::strerror(errno);
    ::close(fd);
    throw std::runtime_error("STUN responder on pub: " + err);
  }
  stun_ = std::make_unique<StunResponder>(fd);

  std::string conf = dir_ / "miniupnpd.conf";
  std::ofstream(conf) << "ext_ifname=wan0\n"
                         "listening_ip=br0\n"
                         "enable_natpmp=yes\n"
                         "enable_upnp=yes\n"
                         "secure_mode=yes\n"
                         "ext_perform_stun=yes\n"
                         "ext_stun_host="
                      << lab_.server_address() << "\next_stun_port=" << ntohs(addr.sin_port)
                      << "\nlease_file=" << (dir_ / "leases")
                      << "\n"
                         "uuid=4bf5cfd4-7a59-4b4b-9a3c-7d0c8b2f6a11\n"
                         "allow 1024-65535 192.168.1.0/24 1024-65535\n"
                         "deny 0-65535 0.0.0.0/0 0-65535\n";
  daemon_ = std::make_unique<PipedProcess>(lab_, home_,
                                           std::vector<std::string>{kMiniupnpd, "-d", "-f", conf, "-P", dir_ / "pid"});
  // Its last start-up line; STUN (and so the public address) comes before it.
  auto ready = daemon_->wait_for_line([](const std::string& l) { return l.find("Listening for NAT-PMP") != l.npos; },
                                      std::chrono::seconds(30));
  if (ready.empty()) throw std::runtime_error("miniupnpd did not start in " + home_ + ":\n" + daemon_->output());
  if (daemon_->output().find("Port forwarding is impossible") != std::string::npos) {
    throw std::runtime_error("miniupnpd in " + home_ + " refuses to forward ports:\n" + daemon_->output());
  }
}

void LabGateway::stop() {
  if (daemon_) {
    daemon_->terminate();
    // Its output ends when it exits; a daemon stuck past the bound is killed.
    daemon_->wait_for_line([](const std::string&) { return false; }, std::chrono::seconds(10));
    stopped_log_ = daemon_->output();
    daemon_.reset();
  }
  stun_.reset();
  if (configured_) {
    configured_ = false;
    auto fw = lab_.run_in(home_, forward_rule("-D"));
    auto nft = lab_.run_in(home_, {"nft", "delete", "table", "inet", "filter"});
    // Only reported: the lab's teardown removes the router anyway.
    if (fw.exit_code != 0 || nft.exit_code != 0) {
      std::cerr << "LabGateway: cleaning up " << home_ << ": " << fw.err << nft.err;
    }
  }
}

std::string LabGateway::log() const {
  return daemon_ ? daemon_->output() : stopped_log_;
}

std::string LabGateway::forwards() const {
  if (!configured_) return "";
  return lab_.run_in(home_, {"nft", "list", "chain", "inet", "filter", "prerouting_miniupnpd"}).out;
}

}  // namespace yonder::testing
