#include "support/nat_lab.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace yonder::testing {

namespace {

std::atomic<int> lab_counter{0};

std::map<std::string, std::string> parse_summary(const std::string& text) {
  std::map<std::string, std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    auto eq = line.find('=');
    if (eq != std::string::npos) out[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return out;
}

RunResult script(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"/bin/bash", natlab_script()};
  argv.insert(argv.end(), args.begin(), args.end());
  return run(argv);
}

}  // namespace

const char* nat_mode_name(NatMode mode) {
  return mode == NatMode::kSymmetric ? "symmetric" : "preserving";
}

std::string natlab_script() {
  const char* src = std::getenv("YONDER_SOURCE_DIR");
  if (src == nullptr) throw std::runtime_error("YONDER_SOURCE_DIR is not set; run this test through ctest");
  return std::string(src) + "/scripts/natlab.sh";
}

std::string ip_program() {
  for (const char* p : {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"}) {
    if (::access(p, X_OK) == 0) return p;
  }
  throw std::runtime_error("iproute2's ip not found: install iproute2 (scripts/setup.sh)");
}

std::optional<std::string> NatLab::unavailable_reason() {
  if (::geteuid() != 0) {
    return "the NAT lab needs root (network namespaces, veth pairs, iptables inside them): run the integration "
           "tests as root";
  }
  return std::nullopt;
}

NatLab::NatLab(NatLabOptions options) {
  prefix_ = "ylab" + std::to_string(::getpid()) + "-" + std::to_string(++lab_counter);
  // Labs whose test was killed (a ctest timeout sends SIGKILL) go first.
  auto reaped = script({"reap"});
  if (!reaped.err.empty()) std::cerr << reaped.err;
  auto up = script({"up", "--prefix", prefix_, "--nat-a", nat_mode_name(options.nat_a), "--nat-b",
                    nat_mode_name(options.nat_b), "--owner", std::to_string(::getpid())});
  if (up.exit_code != 0) {
    script({"down", "--prefix", prefix_});
    throw std::runtime_error("natlab.sh up failed (exit " + std::to_string(up.exit_code) + "): " + up.err);
  }
  info_ = parse_summary(up.out);
  if (info_["prefix"] != prefix_) {
    script({"down", "--prefix", prefix_});
    throw std::runtime_error("natlab.sh up printed no summary for " + prefix_ + ": " + up.out);
  }
}

NatLab::~NatLab() {
  auto down = script({"down", "--prefix", prefix_});
  if (down.exit_code != 0) std::cerr << "natlab.sh down --prefix " << prefix_ << " failed: " << down.err;
}

std::string NatLab::netns(std::string_view node) const {
  auto it = info_.find("netns." + std::string(node));
  if (it == info_.end()) throw std::invalid_argument("no node '" + std::string(node) + "' in the NAT lab");
  return it->second;
}

std::string NatLab::address(std::string_view key) const {
  auto it = info_.find("addr." + std::string(key));
  if (it == info_.end()) throw std::invalid_argument("no address 'addr." + std::string(key) + "' in the NAT lab");
  return it->second;
}

RunResult NatLab::run_in(std::string_view node, const std::vector<std::string>& argv, const Env& env,
                         const std::string& input) const {
  std::vector<std::string> full = {ip_program(), "netns", "exec", netns(node)};
  full.insert(full.end(), argv.begin(), argv.end());
  return run(full, env, input);
}

std::unique_ptr<BackgroundProcess> NatLab::spawn_in(std::string_view node, const std::vector<std::string>& argv,
                                                    const Env& env) const {
  std::vector<std::string> full = {ip_program(), "netns", "exec", netns(node)};
  full.insert(full.end(), argv.begin(), argv.end());
  return std::make_unique<BackgroundProcess>(full, env);
}

std::unique_ptr<Daemon> NatLab::daemon_in(std::string_view node, const Env& env,
                                          const std::vector<std::string>& extra_args) const {
  // nsenter joins only the network namespace and execs, so the pid stays
  // the daemon's. (Not `ip netns exec`: it also gives its command a mount
  // namespace of its own, where a provider's per-job workspace mounts would
  // be invisible to dockerd, which bind-mounts them from the host's.)
  return std::make_unique<Daemon>(
      env, extra_args, std::vector<std::string>{"/usr/bin/nsenter", "--net=/run/netns/" + netns(node), "--"});
}

void NatLab::in_node(std::string_view node, const std::function<void()>& fn) const {
  std::string path = "/run/netns/" + netns(node);
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error("cannot open " + path + ": " + std::strerror(errno));
  std::exception_ptr failure;
  // A thread of its own: setns changes only the calling thread, and this
  // one ends right after, so no other work ever runs in the lab by accident.
  std::thread t([&] {
    try {
      if (::setns(fd, CLONE_NEWNET) != 0) {
        throw std::runtime_error("setns into " + path + ": " + std::strerror(errno));
      }
      fn();
    } catch (...) {
      failure = std::current_exception();
    }
  });
  t.join();
  ::close(fd);
  if (failure) std::rethrow_exception(failure);
}

int NatLab::socket_in(std::string_view node, int domain, int type) const {
  int fd = -1;
  int err = 0;
  in_node(node, [&] {
    fd = ::socket(domain, type | SOCK_CLOEXEC, 0);
    err = errno;
  });
  if (fd < 0) throw std::runtime_error(std::string("socket() in the NAT lab: ") + std::strerror(err));
  return fd;
}

void NatLab::move_host(std::string_view host, std::string_view home) const {
  auto r = script({"move", "--prefix", prefix_, std::string(host), std::string(home)});
  if (r.exit_code != 0) {
    throw std::runtime_error("natlab.sh move " + std::string(host) + " " + std::string(home) + " failed (exit " +
                             std::to_string(r.exit_code) + "): " + r.err);
  }
}

std::string NatLab::status() const {
  auto r = script({"status", "--prefix", prefix_});
  return r.out + r.err;
}

}  // namespace yonder::testing
