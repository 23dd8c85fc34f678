// The yonder-relay program: prints its key and bound ports, creates its key
// once and keeps it across restarts, registers a real client, serves
// /metrics, and exits 0 on SIGTERM.
#include <gtest/gtest.h>

#include <utility>  // before Boost.Asio (GCC 12)

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>

#include "crypto/identity.h"
#include "relay/client.h"
#include "support/live_process.h"
#include "support/subprocess.h"
#include "support/temp_dir.h"

namespace yonder::relay {
namespace {

using namespace std::chrono_literals;
using yonder::testing::line_value;
using testing::LiveProcess;
using testing::TempDir;

std::string http_get(uint16_t port, const std::string& path) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return "connect failed";
  std::string req = "GET " + path + " HTTP/1.1\r\nHost: relay\r\n\r\n";
  [[maybe_unused]] auto w = ::write(fd, req.data(), req.size());
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  ::close(fd);
  return out;
}

struct Started {
  std::unique_ptr<LiveProcess> process;
  std::string node, listen;
  uint16_t metrics_port = 0;
};

Started start_relay(const std::string& key_file) {
  Started s;
  s.process = std::make_unique<LiveProcess>(
      std::vector<std::string>{testing::program_path("yonder-relay"), "--key-file", key_file, "--listen", "127.0.0.1:0",
                               "--metrics", "127.0.0.1:0", "--node-rate", "0"},
      testing::Env{});
  // The three lines go out in one flush; the last one ends with a newline.
  EXPECT_TRUE(s.process->wait_for("\nmetrics 127.0.0.1:", 10s)) << s.process->output();
  size_t at = s.process->out().find("\nmetrics ");
  EXPECT_TRUE(s.process->wait_for("\n", 5s, at + 1));
  s.node = line_value(s.process->out(), "node");
  s.listen = line_value(s.process->out(), "listen");
  std::string metrics = line_value(s.process->out(), "metrics");
  s.metrics_port = static_cast<uint16_t>(std::stoi(metrics.substr(metrics.rfind(':') + 1)));
  return s;
}

TEST(RelayApp, ServesNodesAndMetricsAndStopsOnSigterm) {
  TempDir dir;
  std::string key_file = dir / "relay.key";
  Started relay = start_relay(key_file);
  auto relay_id = NodeId::parse(relay.node);
  ASSERT_TRUE(relay_id) << relay.process->output();
  struct stat st {};
  ASSERT_EQ(::stat(key_file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);

  boost::asio::io_context io;
  auto me = Identity::generate().value();
  RelayClientConfig cfg;
  cfg.address = relay.listen;
  cfg.relay_key = relay_id->public_key();
  auto client = RelayClient::create(io, me, cfg).value();
  std::optional<Result<Registration>> reg;
  client->connect({}, [&](Result<Registration> r) {
    reg = std::move(r);
    io.stop();
  });
  io.run_for(10s);
  ASSERT_TRUE(reg.has_value());
  ASSERT_TRUE(*reg) << reg->error().to_string();
  EXPECT_EQ((*reg)->nat.observed.ip, "127.0.0.1");

  std::string page = http_get(relay.metrics_port, "/metrics");
  EXPECT_NE(page.find("yonder_relay_registrations_total 1\n"), std::string::npos) << page;
  EXPECT_NE(page.find("yonder_relay_nodes 1\n"), std::string::npos) << page;

  relay.process->signal(SIGTERM);
  EXPECT_EQ(relay.process->wait(10s), 0) << relay.process->output();
  EXPECT_NE(relay.process->err().find("stopped"), std::string::npos);

  // Clean restart: nothing but the key persists, and it is the same key.
  Started again = start_relay(key_file);
  EXPECT_EQ(again.node, relay.node);
  again.process->signal(SIGINT);
  EXPECT_EQ(again.process->wait(10s), 0) << again.process->output();
}

TEST(RelayApp, RefusesBadArguments) {
  TempDir dir;
  auto r = testing::run({testing::program_path("yonder-relay"), "--listen", "127.0.0.1:0"});
  EXPECT_EQ(r.exit_code, 2) << r.err;  // no --key-file
  r = testing::run({testing::program_path("yonder-relay"), "--key-file", dir / "k", "--node-rate", "fast"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--node-rate"), std::string::npos) << r.err;
  r = testing::run({testing::program_path("yonder-relay"), "--key-file", dir / "k", "--listen", "nowhere"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--listen"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace yonder::relay
