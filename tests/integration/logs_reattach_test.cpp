// Re-attaching to a job's output after the consumer was killed mid-stream:
// the provider keeps the log, so reading it again gives every line once, in
// order, and what the killed command had printed is a prefix of it.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "support/docker_env.h"
#include "support/job_node.h"
#include "support/subprocess.h"
#include "support/temp_dir.h"

namespace yonder::testing {
namespace {

using nlohmann::json;

class LogsReattach : public ::testing::Test {
 protected:
  void SetUp() override { YONDER_REQUIRE_DOCKER_OR_SKIP(); }
};

constexpr const char* kImage = "yonder-test/busybox:1";
constexpr int kLines = 400;

// A child process whose stdout we read as it comes (stdin and stderr are
// /dev/null); SIGKILLed by the test.
class Spawned {
 public:
  Spawned(std::vector<std::string> args, const Env& env) {
    std::vector<std::string> envs;
    for (char** e = environ; *e != nullptr; ++e) {
      std::string kv = *e;
      if (!env.count(kv.substr(0, kv.find('=')))) envs.push_back(kv);
    }
    for (const auto& [k, v] : env) {
      if (!v.empty()) envs.push_back(k + "=" + v);
    }
    std::vector<char*> argv, envp;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    for (auto& e : envs) envp.push_back(e.data());
    envp.push_back(nullptr);
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) return;
    pid_ = ::fork();
    if (pid_ == 0) {
      int null = ::open("/dev/null", O_RDWR);
      ::dup2(null, 0);
      ::dup2(fds[1], 1);
      ::dup2(null, 2);
      ::execve(argv[0], argv.data(), envp.data());
      ::_exit(127);
    }
    ::close(fds[1]);
    out_fd_ = fds[0];
  }
  ~Spawned() {
    kill();
    if (out_fd_ >= 0) ::close(out_fd_);
  }
  // Reads until the output contains `text` (or `timeout`); false if not.
  bool read_until(const std::string& text, std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (out_.find(text) == std::string::npos) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      pollfd p{out_fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
      char buf[4096];
      ssize_t n = ::read(out_fd_, buf, sizeof buf);
      if (n <= 0) return out_.find(text) != std::string::npos;
      out_.append(buf, static_cast<size_t>(n));
    }
    return true;
  }
  void kill() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
  }
  const std::string& out() const { return out_; }

 private:
  pid_t pid_ = -1;
  int out_fd_ = -1;
  std::string out_;
};

// "line 0\nline 1\n..." for [0, n).
std::string numbered(int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s += "line " + std::to_string(i) + "\n";
  return s;
}

// The numbers of "line N" lines, in order.
std::vector<int> numbers_of(const std::string& text) {
  std::vector<int> out;
  size_t at = 0;
  while ((at = text.find("line ", at)) != std::string::npos) {
    at += 5;
    out.push_back(std::atoi(text.c_str() + at));
  }
  return out;
}

void expect_whole_sequence(const std::string& text) {
  std::vector<int> got = numbers_of(text);
  std::vector<int> want(kLines);
  for (int i = 0; i < kLines; ++i) want[static_cast<size_t>(i)] = i;
  EXPECT_EQ(got, want) << text.substr(0, 2000);
  EXPECT_EQ(text, numbered(kLines));
}

const std::string kScript =
    "i=0; while [ $i -lt " + std::to_string(kLines) + " ]; do echo line $i; i=$((i+1)); sleep 0.01; done";

TEST_F(LogsReattach, KillingRunMidStreamThenLogsGivesEveryLineOnceInOrder) {
  TempDir dir;
  Node studio(dir, "studio", true), laptop(dir, "laptop", false);
  laptop.pair_with(studio, {});
  Spawned attached(
      {program_path("yonder"), "run", "--on", "studio", "--image", kImage, "--no-upload", "--", "sh", "-c", kScript},
      laptop.env());
  ASSERT_TRUE(attached.read_until("line 100\n", std::chrono::seconds(60))) << attached.out();
  attached.kill();  // SIGKILL: no chance to clean up or detach politely
  std::string partial = attached.out();
  EXPECT_EQ(numbered(kLines).rfind(partial, 0), 0u) << partial;  // a prefix, nothing out of order
  EXPECT_LT(numbers_of(partial).size(), static_cast<size_t>(kLines));

  auto ps = laptop.yonder_json({"ps", "--all"});
  ASSERT_EQ(ps["jobs"].size(), 1u) << ps.dump();
  std::string id = ps["jobs"][0]["job_id"];
  auto follow = laptop.yonder({"logs", "-f", id});
  EXPECT_EQ(follow.exit_code, 0) << follow.err;
  expect_whole_sequence(follow.out);
}

TEST_F(LogsReattach, KillingLogsFollowMidStreamThenFollowingAgainGivesEveryLineOnceInOrder) {
  TempDir dir;
  Node studio(dir, "studio", true), laptop(dir, "laptop", false);
  laptop.pair_with(studio, {});
  auto d = laptop.yonder({"run", "--on", "studio", "--image", kImage, "--no-upload", "-d", "--", "sh", "-c", kScript});
  ASSERT_EQ(d.exit_code, 0) << d.err;
  std::string id = d.out.substr(0, d.out.find('\n'));

  Spawned follower({program_path("yonder"), "logs", "-f", id}, laptop.env());
  ASSERT_TRUE(follower.read_until("line 150\n", std::chrono::seconds(60))) << follower.out();
  follower.kill();
  std::string partial = follower.out();
  EXPECT_EQ(numbered(kLines).rfind(partial, 0), 0u) << partial;

  // Again while the job still runs (it prints for about 4 s in all), to the end.
  auto again = laptop.yonder({"logs", "-f", id});
  EXPECT_EQ(again.exit_code, 0) << again.err;
  expect_whole_sequence(again.out);
  // And once it has ended, without -f: the same, whole.
  expect_whole_sequence(laptop.yonder({"logs", id}).out);
}

}  // namespace
}  // namespace yonder::testing
