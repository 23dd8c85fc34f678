// Port forwarding end to end: a provider and a consumer, each a real yonderd,
// a job on the real dockerd serving HTTP with no network at all (egress
// off), and `yonder forward` carrying local TCP connections into it.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "support/docker_env.h"
#include "support/job_node.h"
#include "support/loopback_client.h"
#include "support/netns_env.h"
#include "support/subprocess.h"
#include "support/temp_dir.h"
#include "support/wait_until.h"

namespace yonder::testing {
namespace {

using nlohmann::json;


class Forward : public ::testing::Test {
 protected:
  void SetUp() override { YONDER_REQUIRE_DOCKER_OR_SKIP(); }
};

constexpr const char* kImage = "yonder-test/busybox:1";

// GET `path` through the forward; retried while the server in the job is
// still starting (the connection then closes with no answer).
std::string http_get(int port, const std::string& path) {
  std::string answer;
  wait_until(
      [&] {
        auto r = round_trip(port, "GET " + path + " HTTP/1.0\r\nHost: localhost\r\n\r\n");
        if (r && !r->empty()) answer = *r;
        return !answer.empty();
      },
      std::chrono::seconds(120), std::chrono::milliseconds(200));
  return answer;
}

std::string body_of(const std::string& response) {
  size_t at = response.find("\r\n\r\n");
  return at == std::string::npos ? std::string() : response.substr(at + 4);
}

TEST_F(Forward, HttpServerInAJobWithoutNetworkIsReachableThroughTheLink) {
  TempDir dir;
  Node studio(dir, "studio", true), laptop(dir, "laptop", false);
  laptop.pair_with(studio, {"--scope", "run,forward"});
  // No egress: the job has no network interface but loopback.
  auto d = laptop.yonder({"run", "--on", "studio", "--image", kImage, "--no-upload", "-d", "--", "sh", "-c",
                          "mkdir -p /tmp/www && echo hello through the link > /tmp/www/index.html && "
                          "seq 1 300000 > /tmp/www/big.txt && "
                          "ls /sys/class/net | tr '\\n' ' ' && echo && exec httpd -f -p 8080 -h /tmp/www"});
  ASSERT_EQ(d.exit_code, 0) << d.err;
  std::string id = d.out.substr(0, d.out.find('\n'));

  auto fwd = laptop.yonder_json({"forward", id, "0:8080"});
  ASSERT_TRUE(fwd.is_object()) << fwd.dump();
  int port = fwd.value("local_port", 0);
  ASSERT_GT(port, 0) << fwd.dump();
  EXPECT_EQ(fwd["address"], "127.0.0.1:" + std::to_string(port));

  auto small = http_get(port, "/index.html");
  EXPECT_NE(small.find("200 OK"), std::string::npos) << small;
  EXPECT_EQ(body_of(small), "hello through the link\n");

  // Several windows' worth, on parallel connections: flow control and
  // back-pressure, one stream per connection.
  std::string expected;
  for (int i = 1; i <= 300000; ++i) expected += std::to_string(i) + "\n";
  std::vector<std::string> bodies(3);
  std::vector<std::thread> clients;
  for (auto& b : bodies) clients.emplace_back([&b, port] { b = body_of(http_get(port, "/big.txt")); });
  for (auto& t : clients) t.join();
  for (const auto& b : bodies) {
    EXPECT_EQ(b.size(), expected.size());
    EXPECT_TRUE(b == expected);
  }

  // The job had no network of its own.
  auto logs = laptop.yonder({"logs", id});
  EXPECT_EQ(logs.out, "lo \n") << logs.out;

  // As root the provider connects from inside the job's namespace (no
  // process in the job relays); the audit log says which way.
  json audit = studio.yonder_json({"audit"});
  int direct = 0;
  for (const auto& e : audit["entries"]) direct += e["action"] == "forward.tcp" && e["detail"].value("via", "") == "netns";
  if (!netns_unavailable_reason()) {
    EXPECT_GE(direct, 4) << audit.dump();
  } else if (netns_required()) {
    ADD_FAILURE() << "YONDER_REQUIRE_NETNS=1 but " << *netns_unavailable_reason()
                  << ": the provider's forward from inside the job's namespace went unchecked";
  }

  // Listed, then stopped: the port no longer answers.
  auto list = laptop.yonder_json({"forward", "--list"});
  ASSERT_EQ(list["forwards"].size(), 1u) << list.dump();
  EXPECT_EQ(list["forwards"][0]["job_id"], id);
  EXPECT_GE(list["forwards"][0]["accepted"].get<int>(), 4);
  auto stop = laptop.yonder({"forward", "--stop", fwd["forward_id"].get<std::string>()});
  EXPECT_EQ(stop.exit_code, 0) << stop.err;
  EXPECT_FALSE(round_trip(port, "GET / HTTP/1.0\r\n\r\n").has_value());
  EXPECT_EQ(laptop.yonder_json({"forward", "--list"})["forwards"].size(), 0u);
  EXPECT_EQ(laptop.yonder({"stop", id}).exit_code, 0);
}

TEST_F(Forward, WithoutDirectForwardingAnNcInTheJobRelays) {
  TempDir dir;
  Node studio(dir, "studio", true, {{"YONDER_FORWARD_DIRECT", "false"}}), laptop(dir, "laptop", false);
  laptop.pair_with(studio, {"--scope", "run,forward"});
  auto d = laptop.yonder({"run", "--on", "studio", "--image", kImage, "--no-upload", "-d", "--", "sh", "-c",
                          "mkdir -p /tmp/www && echo relayed > /tmp/www/index.html && exec httpd -f -p 8080 -h /tmp/www"});
  ASSERT_EQ(d.exit_code, 0) << d.err;
  std::string id = d.out.substr(0, d.out.find('\n'));
  auto fwd = laptop.yonder_json({"forward", id, "0:8080"});
  int port = fwd.value("local_port", 0);
  ASSERT_GT(port, 0) << fwd.dump();
  EXPECT_EQ(body_of(http_get(port, "/index.html")), "relayed\n");
  // (The audit entry is written just after the connection is answered.)
  json audit;
  bool relayed = wait_until(
      [&] {
        audit = studio.yonder_json({"audit"});
        for (const auto& e : audit["entries"]) {
          if (e["action"] == "forward.tcp" && e["detail"].value("via", "") == "exec") return true;
        }
        return false;
      },
      std::chrono::seconds(120), std::chrono::milliseconds(50));
  EXPECT_TRUE(relayed) << audit.dump();
  EXPECT_EQ(laptop.yonder({"stop", id}).exit_code, 0);
}

TEST_F(Forward, RefusedAtOnceWithoutTheCapabilityOrForAJobThatIsNotRunning) {
  TempDir dir;
  Node studio(dir, "studio", true), laptop(dir, "laptop", false);
  laptop.pair_with(studio, {"--scope", "run"});
  auto d = laptop.yonder({"run", "--on", "studio", "--image", kImage, "--no-upload", "-d", "--", "sleep", "60"});
  ASSERT_EQ(d.exit_code, 0) << d.err;
  std::string id = d.out.substr(0, d.out.find('\n'));

  // The scope has no "forward": refused before any listener opens (it used
  // to open one whose every connection the provider then refused).
  auto fwd = laptop.yonder({"forward", id, "0:8080"});
  EXPECT_EQ(fwd.exit_code, 5) << fwd.out << fwd.err;
  EXPECT_NE(fwd.err.find("forward"), std::string::npos) << fwd.err;
  auto listed = laptop.yonder_json({"forward", "--list"});
  EXPECT_TRUE(listed.value("forwards", json::array()).empty()) << listed.dump();

  EXPECT_EQ(laptop.yonder({"stop", id}).exit_code, 0);
  (void)laptop.yonder({"logs", "-f", id});  // until it has ended
  ASSERT_EQ(studio.yonder({"allow", "laptop", "forward"}).exit_code, 0);
  auto ended = laptop.yonder({"forward", id, "0:8080"});
  EXPECT_NE(ended.exit_code, 0);
  EXPECT_NE(ended.err.find("only a pending or running job"), std::string::npos) << ended.err;

  auto usage = laptop.yonder({"forward", id, "80:x"});
  EXPECT_EQ(usage.exit_code, 2) << usage.err;
}

// `yonder exec`: stdin in, stdout and stderr apart, the exit code back; with
// -t a real PTY of the size asked for; refused without the capability.
TEST_F(Forward, ExecRunsInsideTheJobWithStdinAPtyAndTheExitCode) {
  TempDir dir;
  Node studio(dir, "studio", true), laptop(dir, "laptop", false);
  laptop.pair_with(studio, {"--scope", "run,exec"});
  auto d = laptop.yonder({"run", "--on", "studio", "--image", kImage, "--no-upload", "-d", "--", "sleep", "120"});
  ASSERT_EQ(d.exit_code, 0) << d.err;
  std::string id = d.out.substr(0, d.out.find('\n'));
  // Wait until it runs (exec needs a running job).
  json ps;
  EXPECT_TRUE(wait_until(
      [&] {
        ps = laptop.yonder_json({"ps"});
        return ps.is_object() && !ps["jobs"].empty() && ps["jobs"][0]["state"] == "running";
      },
      std::chrono::seconds(120), std::chrono::milliseconds(100)))
      << ps.dump();

  auto piped =
      run({program_path("yonder"), "exec", "-i", id, "--", "sh", "-c", "read x; echo got $x; echo oops >&2; exit 3"},
          laptop.env(), "hello\n");
  EXPECT_EQ(piped.exit_code, 3) << piped.err;
  EXPECT_EQ(piped.out, "got hello\n");
  EXPECT_EQ(piped.err, "oops\n");

  // A PTY without a local terminal: the default size, a /dev/pts device.
  // (The engine sets the size just after the process starts: poll for it.)
  auto tty = laptop.yonder({"exec", "-t", id, "--", "sh", "-c",
                            "for i in $(seq 50); do s=$(stty size); [ \"$s\" = \"24 80\" ] && break; "
                            "sleep 0.1; done; echo $s; tty; exit 4"});
  EXPECT_EQ(tty.exit_code, 4) << tty.err;
  EXPECT_NE(tty.out.find("24 80"), std::string::npos) << tty.out;
  EXPECT_NE(tty.out.find("/dev/pts/"), std::string::npos) << tty.out;

  // Interactive through a real local terminal (script(1)): raw mode, the
  // typed line reaches the remote shell, its exit code comes back.
  if (std::filesystem::exists("/usr/bin/script")) {
    std::string cmd = program_path("yonder") + " exec -it " + id + " -- sh -c 'read x; echo typed:$x; exit 6'";
    auto s = run({"/usr/bin/script", "-qec", cmd, "/dev/null"}, laptop.env(), "abc\n");
    EXPECT_EQ(s.exit_code, 6) << s.out << s.err;
    EXPECT_NE(s.out.find("typed:abc"), std::string::npos) << s.out;
  }
  EXPECT_EQ(laptop.yonder({"stop", id}).exit_code, 0);
}

TEST_F(Forward, ExecIsRefusedWithoutTheExecCapability) {
  TempDir dir;
  Node studio(dir, "studio", true), laptop(dir, "laptop", false);
  laptop.pair_with(studio, {"--scope", "run"});
  auto d = laptop.yonder({"run", "--on", "studio", "--image", kImage, "--no-upload", "-d", "--", "sleep", "60"});
  ASSERT_EQ(d.exit_code, 0) << d.err;
  std::string id = d.out.substr(0, d.out.find('\n'));
  auto r = laptop.yonder({"exec", id, "--", "true"});
  EXPECT_EQ(r.exit_code, 125) << r.err;
  EXPECT_NE(r.err.find("does not include \"exec\""), std::string::npos) << r.err;
  EXPECT_EQ(laptop.yonder({"stop", id}).exit_code, 0);
}


// A small HTTP-ish server on the test machine's loopback (standing in for
// an Ollama the provider runs outside Yonder): answers each request with
// its first line. Port 0: the system picks one.
class LoopbackEcho {
 public:
  LoopbackEcho() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(fd_, 16) != 0 ||
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      return;
    }
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~LoopbackEcho() {
    stop_ = true;
    ::shutdown(fd_, SHUT_RDWR);
    if (thread_.joinable()) thread_.join();
    ::close(fd_);
  }
  int port() const { return port_; }

 private:
  void serve() {
    while (!stop_) {
      int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) return;
      std::string req;
      char buf[4096];
      while (req.find("\r\n\r\n") == std::string::npos) {
        ssize_t n = ::recv(c, buf, sizeof buf, 0);
        if (n <= 0) break;
        req.append(buf, static_cast<size_t>(n));
      }
      std::string reply = "HTTP/1.0 200 OK\r\n\r\nhost says: " + req.substr(0, req.find("\r\n")) + "\n";
      [[maybe_unused]] auto n = ::send(c, reply.data(), reply.size(), MSG_NOSIGNAL);
      if (req.rfind("GET /reset", 0) == 0) {
        // Ends with a reset after the answer (as a server does that closes
        // with unread bytes): the answer must still reach the client.
        linger l{1, 0};
        ::setsockopt(c, SOL_SOCKET, SO_LINGER, &l, sizeof l);
      }
      ::close(c);
    }
  }
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// The provider's audit entries (bounded wait until `want` matches one).
json find_audit(const Node& provider, const std::function<bool(const json&)>& want) {
  json found = nullptr;
  wait_until(
      [&] {
        json audit = provider.yonder_json({"audit"});
        for (const auto& e : audit["entries"]) {
          if (want(e)) {
            found = e;
            return true;
          }
        }
        return false;
      },
      std::chrono::seconds(120), std::chrono::milliseconds(100));
  return found;
}

TEST_F(Forward, APortOnTheProviderHostOnlyWhereTheProviderOpenedIt) {
  LoopbackEcho echo;
  ASSERT_GT(echo.port(), 0);
  std::string port = std::to_string(echo.port());
  TempDir dir;
  Node studio(dir, "studio", true, {{"YONDER_FORWARD_HOST_PORTS", port}});
  Node laptop(dir, "laptop", false), tablet(dir, "tablet", false);
  laptop.pair_with(studio, {"--scope", "run,forward"});
  tablet.pair_with(studio, {"--scope", "run"});
  std::string laptop_id = laptop.yonder_json({"status"})["node_id"];
  std::string tablet_id = tablet.yonder_json({"status"})["node_id"];

  auto fwd = laptop.yonder_json({"forward", "studio", "0:" + port});
  ASSERT_EQ(fwd.value("to", ""), "host") << fwd.dump();
  int local = fwd.value("local_port", 0);
  ASSERT_GT(local, 0) << fwd.dump();
  auto r = round_trip(local, "GET /api/tags HTTP/1.0\r\n\r\n");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(body_of(*r), "host says: GET /api/tags HTTP/1.0\n") << *r;
  // The server resets the connection right after its answer: what it sent
  // first still arrives, then the connection ends (as with plain TCP).
  for (int i = 0; i < 20; ++i) {
    auto reset = round_trip(local, "GET /reset HTTP/1.0\r\n\r\n");
    ASSERT_TRUE(reset.has_value());
    EXPECT_EQ(body_of(*reset), "host says: GET /reset HTTP/1.0\n") << "attempt " << i << ": " << *reset;
  }
  auto text = laptop.yonder({"forward", "--list"});
  EXPECT_NE(text.out.find("-> host:" + port), std::string::npos) << text.out;

  // A port the provider did not open: refused up front, naming the setting.
  int closed_port = echo.port() == 65535 ? echo.port() - 1 : echo.port() + 1;
  auto closed = laptop.yonder({"forward", "studio", "0:" + std::to_string(closed_port)});
  EXPECT_EQ(closed.exit_code, 5) << closed.err;
  EXPECT_NE(closed.err.find("forward.host_ports"), std::string::npos) << closed.err;
  // A peer without `forward`: refused by its scope.
  auto no_cap = tablet.yonder({"forward", "studio", "0:" + port});
  EXPECT_EQ(no_cap.exit_code, 5) << no_cap.err;
  EXPECT_NE(no_cap.err.find("does not include \"forward\""), std::string::npos) << no_cap.err;
  // Neither a job nor a peer.
  auto nothing = laptop.yonder({"forward", "nosuchthing", "0:" + port});
  EXPECT_NE(nothing.exit_code, 0);
  EXPECT_NE(nothing.err.find("no job and no paired peer"), std::string::npos) << nothing.err;

  // All of it audited on the provider: both refusals and the connection.
  EXPECT_FALSE(find_audit(studio, [&](const json& e) {
                 return e["actor"] == laptop_id && e["action"] == "forward.host" && e["detail"].contains("refused") &&
                        e["detail"]["refused"].get<std::string>().find("forward.host_ports") != std::string::npos;
               }).is_null());
  EXPECT_FALSE(find_audit(studio, [&](const json& e) {
                 return e["actor"] == tablet_id && e["action"] == "forward.host_check" &&
                        e["detail"].value("refused", "").find("\"forward\"") != std::string::npos;
               }).is_null());
  EXPECT_FALSE(find_audit(studio, [&](const json& e) {
                 return e["actor"] == laptop_id && e["action"] == "forward.host" && !e["detail"].contains("refused") &&
                        e["detail"].value("port", 0) == echo.port() && e["detail"].value("bytes_in", 0) > 0 &&
                        e["detail"].value("bytes_out", 0) > 0;
               }).is_null());
  EXPECT_EQ(laptop.yonder({"forward", "--stop", fwd["forward_id"].get<std::string>()}).exit_code, 0);
}

// Reads the PTY master into `out` until `text` appears (or `timeout`).
bool read_until(int master, std::string& out, const std::string& text, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (out.find(text) == std::string::npos) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{master, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    char buf[4096];
    ssize_t n = ::read(master, buf, sizeof buf);
    if (n <= 0) return out.find(text) != std::string::npos;
    out.append(buf, static_cast<size_t>(n));
  }
  return true;
}

// `yonder exec -it` from a real terminal (a PTY pair made here): the
// remote PTY starts at our size, follows a window resize (TIOCSWINSZ on the
// master, then SIGWINCH), and `exit 7` comes back as the exit code.
TEST_F(Forward, ExecTtyFollowsWindowResizesAndReturnsTheExitCode) {
  TempDir dir;
  Node studio(dir, "studio", true), laptop(dir, "laptop", false);
  laptop.pair_with(studio, {"--scope", "run,exec"});
  auto d = laptop.yonder({"run", "--on", "studio", "--image", kImage, "--no-upload", "-d", "--", "sleep", "120"});
  ASSERT_EQ(d.exit_code, 0) << d.err;
  std::string id = d.out.substr(0, d.out.find('\n'));
  json ps;
  EXPECT_TRUE(wait_until(
      [&] {
        ps = laptop.yonder_json({"ps"});
        return ps.is_object() && !ps["jobs"].empty() && ps["jobs"][0]["state"] == "running";
      },
      std::chrono::seconds(120), std::chrono::milliseconds(100)))
      << ps.dump();

  // Everything the child needs, made before fork().
  std::vector<std::string> args = {program_path("yonder"), "exec", "-it", id, "--", "sh"};
  std::vector<std::string> envs;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string kv = *e;
    if (!laptop.env().count(kv.substr(0, kv.find('=')))) envs.push_back(kv);
  }
  for (const auto& [k, v] : laptop.env()) {
    if (!v.empty()) envs.push_back(k + "=" + v);
  }
  envs.push_back("TERM=xterm");
  std::vector<char*> argv, envp;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (auto& e : envs) envp.push_back(e.data());
  envp.push_back(nullptr);

  winsize size{};
  size.ws_row = 30;
  size.ws_col = 100;
  int master = -1;
  pid_t pid = ::forkpty(&master, nullptr, nullptr, &size);
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  auto type = [&](const std::string& s) { [[maybe_unused]] auto n = ::write(master, s.data(), s.size()); };
  // Asks for the size until `want` comes back (the engine applies a size
  // just after the process starts, and a resize a moment after we ask).
  std::string out;
  auto size_becomes = [&](const std::string& want) {
    return wait_until(
        [&] {
          type("stty size\r");
          return read_until(master, out, want + "\r\n", std::chrono::milliseconds(500));
        },
        std::chrono::seconds(120), std::chrono::milliseconds(0));
  };
  EXPECT_TRUE(size_becomes("30 100")) << out;

  size.ws_row = 45;
  size.ws_col = 132;
  ASSERT_EQ(::ioctl(master, TIOCSWINSZ, &size), 0);
  ::kill(pid, SIGWINCH);
  EXPECT_TRUE(size_becomes("45 132")) << out;

  type("exit 7\r");
  int status = 0;
  bool exited = wait_until(
      [&] {
        // Keep the master drained so the child never blocks writing to it.
        read_until(master, out, "\x01never", std::chrono::milliseconds(50));
        return ::waitpid(pid, &status, WNOHANG) == pid;
      },
      std::chrono::seconds(10), std::chrono::milliseconds(0));
  if (!exited) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
  }
  ::close(master);
  ASSERT_TRUE(WIFEXITED(status)) << out;
  EXPECT_EQ(WEXITSTATUS(status), 7) << out;
  EXPECT_EQ(laptop.yonder({"stop", id}).exit_code, 0);
}

}  // namespace
}  // namespace yonder::testing
