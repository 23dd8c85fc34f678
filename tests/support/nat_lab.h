// The NAT lab (scripts/natlab.sh) for integration tests: two homes behind
// NATs, both on 192.168.1.0/24, and a public router holding the "server"
// addresses 198.18.0.1 and 198.18.0.2 (where a relay runs). Topology and
// addresses: docs/architecture.md, "The NAT lab".
//
//   TEST(Reach, Something) {
//     YONDER_SKIP_WITHOUT_NAT_LAB();
//     NatLab lab({.nat_a = NatMode::kPreserving, .nat_b = NatMode::kSymmetric});
//     auto relay = lab.spawn_in("pub", {program_path("yonder-relay"), ...});
//     Daemon provider = ... lab.daemon_in("b1", env) ...
//   }
//
// Each NatLab has its own prefix (pid and a counter), so tests in parallel
// never meet, and records this process as its owner: a lab left by a test
// that was killed is removed by the next NatLab made anywhere (natlab.sh
// reap). Declare the lab before the processes that run in it, so they are
// stopped first; whatever still runs in the lab's namespaces when it is
// destroyed gets SIGTERM, then SIGKILL.
//
// Nodes: "pub", "nat-a", "nat-b", "a1", "a2" (home A), "b1" (home B).
// Not thread-safe; one test thread uses a lab.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "support/netns_env.h"
#include "support/subprocess.h"

namespace yonder::testing {

enum class NatMode {
  kPreserving,  // MASQUERADE: keeps the host's source port when it is free
  kSymmetric,   // MASQUERADE --random-fully: a random port per flow
};

struct NatLabOptions {
  NatMode nat_a = NatMode::kPreserving;
  NatMode nat_b = NatMode::kPreserving;
};

const char* nat_mode_name(NatMode mode);

class NatLab {
 public:
  // Why the lab cannot be built here (not root), or nothing. The one reason
  // a test may skip (and with YONDER_REQUIRE_NETNS=1 not even that); a lab
  // that fails to come up as root fails the test.
  static std::optional<std::string> unavailable_reason();

  // Brings the lab up (natlab.sh up); throws std::runtime_error with the
  // script's message if it cannot.
  explicit NatLab(NatLabOptions options = {});
  // Tears it down (natlab.sh down), also when the test failed.
  ~NatLab();
  NatLab(const NatLab&) = delete;
  NatLab& operator=(const NatLab&) = delete;

  const std::string& prefix() const { return prefix_; }
  // The network namespace of `node`, as `ip netns` names it.
  std::string netns(std::string_view node) const;
  // A lab address by natlab.sh's key without "addr.": "a1" (192.168.1.10),
  // "nat-a" (home A's public address), "server" (198.18.0.1 on pub), ...
  std::string address(std::string_view key) const;
  std::string server_address() const { return address("server"); }
  std::string server2_address() const { return address("server2"); }
  // Every key=value natlab.sh printed.
  const std::map<std::string, std::string>& info() const { return info_; }

  // `ip netns exec NS argv...` (argv[0] found on PATH), waiting for it.
  RunResult run_in(std::string_view node, const std::vector<std::string>& argv, const Env& env = {},
                   const std::string& input = "") const;
  // The same in the background, e.g. a server; killed when the result is destroyed.
  std::unique_ptr<BackgroundProcess> spawn_in(std::string_view node, const std::vector<std::string>& argv,
                                              const Env& env = {}) const;
  // A yonderd in `node`, ready (or not: check ready()) when this returns.
  std::unique_ptr<Daemon> daemon_in(std::string_view node, const Env& env,
                                    const std::vector<std::string>& extra_args = {}) const;

  // Runs `fn` on a thread that has joined `node`'s network namespace and
  // waits for it (exceptions are rethrown here). Sockets made there belong
  // to that namespace for good, whichever thread uses them later: a test can
  // make an Asio socket "in a1" and drive it from its own io_context.
  void in_node(std::string_view node, const std::function<void()>& fn) const;
  // A socket(2) made inside `node`'s namespace; the caller owns the fd.
  int socket_in(std::string_view node, int domain, int type) const;

  // natlab.sh move: plugs `host` ("a1", "a2", "b1") into `home`'s LAN
  // ("nat-a", "nat-b"), as a laptop that changes networks; throws
  // std::runtime_error with the script's message if it cannot.
  void move_host(std::string_view host, std::string_view home) const;

  // natlab.sh status: for failure messages.
  std::string status() const;

 private:
  std::string prefix_;
  std::map<std::string, std::string> info_;
};

// Path of scripts/natlab.sh in the source tree (from YONDER_SOURCE_DIR).
std::string natlab_script();
// Path of iproute2's `ip`.
std::string ip_program();

}  // namespace yonder::testing

// Skips the test, saying why, when the lab cannot be built here (not root);
// fails instead with YONDER_REQUIRE_NETNS=1 (support/netns_env.h).
#define YONDER_SKIP_WITHOUT_NAT_LAB() YONDER_REQUIRE_NETNS_OR_SKIP(::yonder::testing::NatLab::unavailable_reason())
