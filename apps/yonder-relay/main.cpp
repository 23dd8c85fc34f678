// yonder-relay: the self-hostable rendezvous and blind relay. Parses
// arguments and runs src/relay (docs/cli.md, src/relay/README.md).
#include <CLI/CLI.hpp>

#include "crypto/node_id.h"
#include "crypto/scope.h"
#include "relay/run.h"
#include "release/app_flags.h"

namespace {

using yonder::relay::RelayOptions;

// "50M" (bytes a second, binary units) or "0" for no limit.
bool parse_rate(const std::string& text, double& out, std::string& why) {
  auto v = yonder::parse_size(text);
  if (!v) {
    why = v.error().message();
    return false;
  }
  out = static_cast<double>(*v);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "yonder-relay: rendezvous and blind relay for Yonder nodes. Nodes register with their key, learn "
      "their public address, signal their peers and get byte pipes carrying their own end-to-end TLS."};
  RelayOptions o;
  auto& c = o.config;
  std::string node_rate = "50M", node_burst = "4M", total_rate = "0", total_burst = "4M";
  std::vector<std::string> rate_for;
  uint32_t handshake_s = 10, idle_s = 90, pipe_idle_s = 300, pipe_request_s = 30;
  std::string handshake_text, idle_text, pipe_idle_text, pipe_request_text;
  app.add_option("--listen", o.listen, "IP:PORT for nodes (port 0 picks one; the bound address is printed)")
      ->capture_default_str();
  app.add_option("--metrics", o.metrics, "IP:PORT for GET /metrics (Prometheus text), or off")->capture_default_str();
  app.add_option("--key-file", o.key_file, "the relay's Ed25519 key (crypto key file); created 0600 when missing")
      ->required();
  app.add_option("--ready-fd", o.ready_fd, "Write \"ready\\n\" to this file descriptor once both ports accept");
  app.add_option("--log-level", o.log_level, "trace, debug, info, warn, error")->capture_default_str();
  app.add_option("--max-connections", c.max_connections, "open TCP connections in all")->capture_default_str();
  app.add_option("--max-conns-per-node", c.registry.max_connections_per_node,
                 "control and probe connections of one node key")
      ->capture_default_str();
  app.add_option("--max-pipes", c.registry.max_pipes, "pipes in all")->capture_default_str();
  app.add_option("--max-pipes-per-node", c.registry.max_pipes_per_node, "pipes with one node key at either end")
      ->capture_default_str();
  app.add_option("--max-peers", c.registry.max_peers, "peers one node may declare (at most 1024)")
      ->capture_default_str()
      ->check(CLI::Range(size_t{0}, yonder::relay::kMaxPeers));
  app.add_option("--node-rate", node_rate, "bytes a second each node may send through pipes, like 50M; 0: no limit")
      ->capture_default_str();
  app.add_option("--node-burst", node_burst, "bytes a node may send at once before --node-rate applies")
      ->capture_default_str();
  app.add_option("--total-rate", total_rate,
                 "bytes a second all nodes together may send through pipes, like 100M (each node stays under "
                 "--node-rate within it); 0: no limit")
      ->capture_default_str();
  app.add_option("--total-burst", total_burst, "bytes all nodes may send at once before --total-rate applies")
      ->capture_default_str();
  app.add_option("--node-rate-for", rate_for, "NODE_ID=RATE: another rate for one node (0: no limit); repeatable");
  app.add_option("--message-rate", c.message_rate, "control messages a second per connection")->capture_default_str();
  app.add_option("--max-signal-bytes", c.max_signal_bytes, "payload of one signal (at most 4096)")
      ->capture_default_str()
      ->check(CLI::Range(size_t{1}, yonder::relay::kMaxSignalBytes));
  app.add_option("--handshake-timeout", handshake_text, "TLS handshake + register, or pipe preface (default 10s)");
  app.add_option("--idle-timeout", idle_text, "close a control connection silent this long (default 90s)");
  app.add_option("--pipe-idle-timeout", pipe_idle_text, "close a pipe without a byte this long (default 5m)");
  app.add_option("--pipe-request-timeout", pipe_request_text,
                 "how long a pipe request waits for the peer's (default 30s)");
  app.add_option("--dump", o.dump_file, "debugging: append every relayed pipe byte to this file");
  yonder::release::ManPageInfo man;
  man.section = 8;
  man.summary = "rendezvous and blind relay for Yonder nodes";
  man.extra = {
      {"Files", "The key file (--key-file) is the relay's identity: nodes pin the relay by the node id it prints "
                "at start. The Debian package's yonder-relay.service runs it as a dynamic user "
                "(systemd DynamicUser=, no Docker access) with --key-file /var/lib/yonder-relay/relay.key, "
                "listening on 0.0.0.0:7851, metrics on 127.0.0.1:7852."},
      {"Signals", "SIGTERM and SIGINT stop the relay; nodes reconnect to it when it is back."}};
  man.see_also = {"yonder(1)", "yonderd(8)"};
  yonder::release::add_release_flags(app, "yonder-relay", man);
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  }
  auto bad = [](const std::string& what) {
    std::fprintf(stderr, "yonder-relay: %s\n", what.c_str());
    return 2;
  };
  std::string why;
  if (!parse_rate(node_rate, c.node_rate, why)) return bad("--node-rate: " + why);
  if (!parse_rate(node_burst, c.node_burst, why)) return bad("--node-burst: " + why);
  if (!parse_rate(total_rate, c.total_rate, why)) return bad("--total-rate: " + why);
  if (!parse_rate(total_burst, c.total_burst, why)) return bad("--total-burst: " + why);
  for (const auto& item : rate_for) {
    size_t eq = item.find('=');
    if (eq == std::string::npos) return bad("--node-rate-for wants NODE_ID=RATE, not " + item);
    auto id = yonder::NodeId::parse(item.substr(0, eq));
    if (!id) return bad("--node-rate-for: " + id.error().message());
    double rate = 0;
    if (!parse_rate(item.substr(eq + 1), rate, why)) return bad("--node-rate-for: " + why);
    c.node_rate_overrides[id->public_key()] = rate;
  }
  struct Duration {
    const std::string& text;
    uint32_t& seconds;
    const char* flag;
  };
  for (Duration d :
       {Duration{handshake_text, handshake_s, "--handshake-timeout"}, Duration{idle_text, idle_s, "--idle-timeout"},
        Duration{pipe_idle_text, pipe_idle_s, "--pipe-idle-timeout"},
        Duration{pipe_request_text, pipe_request_s, "--pipe-request-timeout"}}) {
    if (d.text.empty()) continue;
    auto v = yonder::parse_duration_s(d.text);
    if (!v || *v == 0) return bad(std::string(d.flag) + ": " + (v ? "must be at least 1s" : v.error().message()));
    d.seconds = *v;
  }
  c.handshake_timeout = std::chrono::seconds(handshake_s);
  c.idle_timeout = std::chrono::seconds(idle_s);
  c.pipe_idle_timeout = std::chrono::seconds(pipe_idle_s);
  c.registry.pipe_request_timeout = std::chrono::seconds(pipe_request_s);
  return yonder::relay::run_relay(o);
}
