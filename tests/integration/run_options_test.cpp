// `yonder run`'s options end to end: a provider and a consumer, each a real
// yonderd, jobs on the real dockerd, driven through the CLI as people use
// it: --env-file, -w, -f job.toml, -t, -p while attached, and Ctrl-C or
// SIGTERM with and without a terminal (a real pseudo-terminal).
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "support/docker_env.h"
#include "support/job_node.h"
#include "support/loopback_client.h"
#include "support/live_process.h"
#include "support/subprocess.h"
#include "support/temp_dir.h"
#include "support/wait_until.h"

namespace yonder::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

constexpr const char* kImage = "yonder-test/busybox:1";

class RunOptions : public ::testing::Test {
 protected:
  void SetUp() override { YONDER_REQUIRE_DOCKER_OR_SKIP(); }
};

std::vector<std::string> yonder_args(std::vector<std::string> args) {
  args.insert(args.begin(), program_path("yonder"));
  return args;
}

// The state of the consumer's only job that runs `marker` (from ps --all).
json job_running(const Node& node, const std::string& marker) {
  json ps = node.yonder_json({"ps", "--all"});
  for (const auto& j : ps["jobs"]) {
    std::string cmd;
    for (const auto& a : j.value("command", json::array())) cmd += a.get<std::string>() + " ";
    if (cmd.find(marker) != std::string::npos) return j;
  }
  return nullptr;
}

TEST_F(RunOptions, EnvFileWorkdirAndJobFile) {
  TempDir dir;
  Node studio(dir, "studio", true), laptop(dir, "laptop", false);
  laptop.pair_with(studio, {"--max-jobs", "2"});
  std::string work = dir / "work";
  std::filesystem::create_directories(work + "/src");
  std::ofstream(work + "/src/input.txt") << "from the upload\n";
  std::ofstream(work + "/vars.env") << "# settings\nA=from-file\n\nB=file loses to -e\nFROM_SHELL\nNOT_SET\n";

  // --env-file with a bare name from our environment; -e wins over the file.
  Env env = laptop.env();
  env["FROM_SHELL"] = "taken from here";
  auto r = run(yonder_args({"run", "--on", "studio", "--image", kImage, "--no-upload", "--env-file", work + "/vars.env",
                            "-e", "B=from -e", "--", "sh", "-c",
                            "echo \"A=$A\"; echo \"B=$B\"; echo \"S=$FROM_SHELL\"; echo \"N=${NOT_SET-unset}\""}),
               env);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "A=from-file\nB=from -e\nS=taken from here\nN=unset\n");

  // A default provider instead of --on, and -e KEY from our environment.
  Env with_default = laptop.env();
  with_default["YONDER_ON"] = "studio";
  with_default["MY_TOKEN"] = "from-here";
  auto defaulted = run(yonder_args({"run", "--image", kImage, "--no-upload", "-e", "MY_TOKEN", "--", "sh", "-c",
                                    "echo \"T=$MY_TOKEN\""}),
                       with_default);
  EXPECT_EQ(defaulted.exit_code, 0) << defaulted.err;
  EXPECT_EQ(defaulted.out, "T=from-here\n");
  auto no_default = laptop.yonder({"run", "--image", kImage, "--no-upload", "--", "true"});
  EXPECT_EQ(no_default.exit_code, 2);
  EXPECT_NE(no_default.err.find("run.default_on"), std::string::npos) << no_default.err;

  // A size without a unit is refused with the fix, not read as bytes.
  auto bare = laptop.yonder({"run", "--on", "studio", "--image", kImage, "--no-upload", "--vram", "20", "--", "true"});
  EXPECT_EQ(bare.exit_code, 2) << bare.err;
  EXPECT_NE(bare.err.find("--vram 20 has no unit: write 20G"), std::string::npos) << bare.err;
  auto scope = studio.yonder({"scope", "laptop", "--memory", "16"});
  EXPECT_NE(scope.exit_code, 0);
  EXPECT_NE(scope.err.find("--memory 16 has no unit"), std::string::npos) << scope.err;

  // A bad line is named by file and line, before anything runs.
  std::ofstream(work + "/bad.env") << "A=1\nMY VAR=2\n";
  auto bad = laptop.yonder(
      {"run", "--on", "studio", "--image", kImage, "--no-upload", "--env-file", work + "/bad.env", "--", "true"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find(work + "/bad.env:2: `MY VAR` is not a variable name"), std::string::npos) << bad.err;

  // -w: an uploaded folder, and one the job's user gets made for it (Docker
  // would make it root's); what the job writes there comes home.
  auto in_src = laptop.yonder({"run", "--on", "studio", "--image", kImage, "--upload", work, "-w", "src", "--", "sh",
                               "-c", "pwd; cat input.txt"});
  EXPECT_EQ(in_src.exit_code, 0) << in_src.err;
  EXPECT_EQ(in_src.out, "/workspace/src\nfrom the upload\n");
  auto made = laptop.yonder({"run", "--on", "studio", "--image", kImage, "--upload", work, "-w", "/workspace/out/run1",
                             "--", "sh", "-c", "pwd; echo result > result.txt"});
  EXPECT_EQ(made.exit_code, 0) << made.err;
  EXPECT_EQ(made.out, "/workspace/out/run1\n");
  std::ifstream result(work + "/out/run1/result.txt");
  std::string line;
  std::getline(result, line);
  EXPECT_EQ(line, "result");
  auto escape = laptop.yonder({"run", "--on", "studio", "--image", kImage, "--no-upload", "-w", "../etc", "--", "pwd"});
  EXPECT_EQ(escape.exit_code, 125);
  EXPECT_NE(escape.err.find("'workdir' must not contain \"..\""), std::string::npos) << escape.err;

  // A job file with every common field; its command stands in for the one after --.
  std::ofstream(work + "/job.toml") << "# the nightly job\n"
                                       "on = \"studio\"\n"
                                       "image = \""
                                    << kImage
                                    << "\"\n"
                                       "command = [\"sh\", \"-c\", \"pwd; echo \\\"$GREETING $A $B\\\"; exit 3\"]\n"
                                       "memory = \"64M\"\n"
                                       "time = \"10m\"\n"
                                       "workdir = \"src\"\n"
                                       "env_file = \"vars.env\"\n"
                                       "upload = \".\"\n"
                                       "out = [\"src/input.txt\"]\n"
                                       "[env]\n"
                                       "GREETING = \"hello\"\n"
                                       "B = \"table wins over env_file\"\n";
  auto from_file = laptop.yonder({"run", "-f", work + "/job.toml"});
  EXPECT_EQ(from_file.exit_code, 3) << from_file.err;
  EXPECT_EQ(from_file.out, "/workspace/src\nhello from-file table wins over env_file\n");
  // Flags given on the command line win over the file.
  auto overridden = laptop.yonder(
      {"run", "-f", work + "/job.toml", "-w", ".", "-e", "GREETING=hi", "--", "sh", "-c", "pwd; echo $GREETING"});
  EXPECT_EQ(overridden.exit_code, 0) << overridden.err;
  EXPECT_EQ(overridden.out, "/workspace\nhi\n");
  // A typo is an error naming the key and the line, not a silent default.
  std::ofstream(work + "/typo.toml") << "on = \"studio\"\nimage = \"" << kImage << "\"\ncomand = [\"true\"]\n";
  auto typo = laptop.yonder({"run", "-f", work + "/typo.toml"});
  EXPECT_EQ(typo.exit_code, 2);
  EXPECT_NE(typo.err.find(work + "/typo.toml:3: unknown key `comand`"), std::string::npos) << typo.err;
  auto no_command = laptop.yonder({"run", "--on", "studio", "--image", kImage});
  EXPECT_EQ(no_command.exit_code, 2);
  EXPECT_NE(no_command.err.find("give the command after --"), std::string::npos) << no_command.err;
}

TEST_F(RunOptions, TtyGivesTheJobATerminal) {
  TempDir dir;
  Node studio(dir, "studio", true), laptop(dir, "laptop", false);
  laptop.pair_with(studio, {});
  const std::string check = "if test -t 1; then echo tty; else echo no tty; fi; echo err >&2";
  auto with = laptop.yonder({"run", "--on", "studio", "--image", kImage, "--no-upload", "-t", "--", "sh", "-c", check});
  EXPECT_EQ(with.exit_code, 0) << with.err;
  EXPECT_EQ(with.out, "tty\r\nerr\r\n");  // one stream, the terminal's line ends
  auto without = laptop.yonder({"run", "--on", "studio", "--image", kImage, "--no-upload", "--", "sh", "-c", check});
  EXPECT_EQ(without.exit_code, 0) << without.err;
  EXPECT_EQ(without.out, "no tty\n");
  EXPECT_NE(without.err.find("err\n"), std::string::npos);
}

// Forwards while attached: the job's state must be running first (run
// waits for it), the address is printed once the forward is up, and the
// forward goes when the job ends.
TEST_F(RunOptions, ForwardWhileAttachedAndRemovedWhenTheJobEnds) {
  TempDir dir;
  Node studio(dir, "studio", true), laptop(dir, "laptop", false);
  laptop.pair_with(studio, {"--scope", "run,forward"});
  // The job answers one connection, then ends.
  LiveProcess run_cli(yonder_args({"run", "--on", "studio", "--image", kImage, "--no-upload", "-p", "0:8080", "--",
                                   "sh", "-c", "nc -l -p 8080 -e echo hello from the job; echo finished"}),
                      laptop.env());
  ASSERT_TRUE(run_cli.wait_for("to port 8080 of the job", 90s)) << run_cli.output();
  // (No std::regex: GCC 12 warns falsely inside <regex> under ASan.)
  std::string err = run_cli.err();
  const std::string lead = "forwarding 127.0.0.1:";
  size_t at = err.find(lead);
  ASSERT_NE(at, std::string::npos) << err;
  int port = std::atoi(err.c_str() + at + lead.size());
  ASSERT_GT(port, 0) << err;
  ASSERT_NE(err.find(" to port 8080", at), std::string::npos) << err;
  ASSERT_EQ(laptop.yonder_json({"forward", "--list"})["forwards"].size(), 1u);

  // nc may not listen yet: a connection made before is closed unanswered.
  std::string answer;
  EXPECT_TRUE(wait_until(
      [&] {
        answer = round_trip(port, "hi\n").value_or("");
        return !answer.empty();
      },
      120s, 100ms))
      << "the job's nc never answered";
  EXPECT_EQ(answer, "hello from the job\n");

  EXPECT_EQ(run_cli.wait(60s), 0) << run_cli.output();
  EXPECT_NE(run_cli.out().find("finished"), std::string::npos) << run_cli.output();
  EXPECT_EQ(laptop.yonder_json({"forward", "--list"})["forwards"].size(), 0u);  // gone with the job
  EXPECT_FALSE(round_trip(port, "GET / HTTP/1.0\r\n\r\n").has_value());

  auto with_detach = laptop.yonder({"run", "--on", "studio", "--image", kImage, "-d", "-p", "8080", "--", "true"});
  EXPECT_EQ(with_detach.exit_code, 2);
  EXPECT_NE(with_detach.err.find("yonder forward JOB LOCAL:REMOTE"), std::string::npos) << with_detach.err;
}

// Without a terminal (scripts, CI), SIGINT and SIGTERM stop the job; run
// waits for its end and exits 128 + the signal.
TEST_F(RunOptions, SigintOrSigtermWithoutATerminalStopsTheJob) {
  TempDir dir;
  Node studio(dir, "studio", true), laptop(dir, "laptop", false);
  laptop.pair_with(studio, {"--max-jobs", "2"});
  for (int sig : {SIGINT, SIGTERM}) {
    std::string marker = "job-" + std::to_string(sig);
    LiveProcess run_cli(yonder_args({"run", "--on", "studio", "--image", kImage, "--no-upload", "--", "sh", "-c",
                                     "echo " + marker + " started; sleep 120"}),
                        laptop.env());
    ASSERT_TRUE(run_cli.wait_for(marker + " started", 90s)) << run_cli.output();
    auto t0 = std::chrono::steady_clock::now();
    run_cli.signal(sig);
    EXPECT_EQ(run_cli.wait(60s), 128 + sig) << run_cli.output();
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 30s);  // the long poll did not hold us
    EXPECT_NE(run_cli.err().find("stopping job"), std::string::npos) << run_cli.err();
    auto job = job_running(laptop, marker);
    ASSERT_TRUE(job.is_object()) << run_cli.output();
    EXPECT_EQ(job["state"], "stopped") << job.dump();  // ended, not left running
  }
}

// Interrupted while the folder is still uploading: the daemon cancels the
// upload, nothing is submitted, and run says so (never a job left running
// that nobody knows about).
TEST_F(RunOptions, SigintDuringTheUploadCancelsAndSubmitsNothing) {
  TempDir dir;
  Node studio(dir, "studio", true), laptop(dir, "laptop", false);
  laptop.pair_with(studio, {"--max-jobs", "2"});
  std::string work = dir / "work";
  std::filesystem::create_directories(work);
  {
    // 768 MiB of varied bytes: long enough to be caught mid-way.
    std::ofstream big(work + "/big.bin", std::ios::binary);
    std::string block(1 << 20, '\0');
    for (int i = 0; i < 768; ++i) {
      for (size_t j = 0; j < block.size(); j += 4096) block[j] = static_cast<char>(i + j);
      big.write(block.data(), static_cast<std::streamsize>(block.size()));
    }
  }
  LiveProcess run_cli(yonder_args({"run", "--on", "studio", "--image", kImage, "--disk", "1G", "--upload", work, "--",
                                   "echo", "should-not-run"}),
                      laptop.env());
  // Wait (on the daemon's own report) until bytes are moving.
  bool sending = wait_until(
      [&] {
        auto t = laptop.yonder_json({"transfers"});
        for (const auto& x : t["transfers"]) {
          if (x.value("sent_bytes", uint64_t{0}) > 0) return true;
        }
        return false;
      },
      120s, 10ms);
  ASSERT_TRUE(sending) << run_cli.output();
  run_cli.signal(SIGINT);
  EXPECT_EQ(run_cli.wait(60s), 130) << run_cli.output();
  EXPECT_NE(run_cli.err().find("yonder: cancelled"), std::string::npos) << run_cli.err();
  auto ps = laptop.yonder_json({"ps", "--all"});
  for (const auto& j : ps["jobs"]) EXPECT_NE(j["state"], "running") << ps.dump();
  if (run_cli.err().find("nothing was submitted") != std::string::npos) {
    EXPECT_EQ(ps["jobs"].size(), 0u) << ps.dump();
  }
  EXPECT_EQ(run_cli.out().find("should-not-run"), std::string::npos);
  EXPECT_EQ(laptop.yonder_json({"transfers"})["transfers"].size(), 0u);
}

// On a terminal the first Ctrl-C asks: Enter keeps watching, d detaches
// (the job runs on), s or a second Ctrl-C stops it.
TEST_F(RunOptions, CtrlCOnATerminalAsksStopDetachOrKeepWatching) {
  TempDir dir;
  Node studio(dir, "studio", true), laptop(dir, "laptop", false);
  laptop.pair_with(studio, {"--max-jobs", "3"});
  const std::string prompt = "stop the job [s], detach [d], or keep watching [Enter]? (Ctrl-C again stops it)";
  auto start = [&](const std::string& marker) {
    return std::make_unique<LiveProcess>(
        yonder_args({"run", "--on", "studio", "--image", kImage, "--no-upload", "--", "sh", "-c",
                     "echo " + marker + " started; i=0; while true; do echo tick $i; i=$((i+1)); sleep 0.2; done"}),
        laptop.env(), true);
  };

  // Enter, then d.
  auto watch = start("watched");
  ASSERT_TRUE(watch->wait_for("watched started", 90s)) << watch->output();
  watch->write("\x03");
  ASSERT_TRUE(watch->wait_for(prompt, 20s)) << watch->output();
  size_t asked_at = watch->output().size();
  watch->write("\r");
  EXPECT_TRUE(watch->wait_for("tick", 20s, asked_at)) << "still watching: " << watch->output();
  watch->write("\x03");
  ASSERT_TRUE(watch->wait_for(prompt, 20s, asked_at)) << watch->output();
  watch->write("d");
  EXPECT_EQ(watch->wait(30s), 0) << watch->output();
  auto job = job_running(laptop, "watched");
  ASSERT_TRUE(job.is_object());
  std::string id = job["job_id"];
  EXPECT_NE(watch->output().find("yonder logs -f " + id), std::string::npos) << watch->output();
  EXPECT_NE(watch->output().find("yonder stop " + id), std::string::npos) << watch->output();
  EXPECT_EQ(job["state"], "running") << job.dump();
  EXPECT_EQ(laptop.yonder({"stop", id}).exit_code, 0);

  // s.
  auto by_key = start("by-key");
  ASSERT_TRUE(by_key->wait_for("by-key started", 90s)) << by_key->output();
  by_key->write("\x03");
  ASSERT_TRUE(by_key->wait_for(prompt, 20s)) << by_key->output();
  by_key->write("s");
  EXPECT_EQ(by_key->wait(60s), 130) << by_key->output();
  EXPECT_EQ(job_running(laptop, "by-key")["state"], "stopped");

  // Ctrl-C twice.
  auto twice = start("twice");
  ASSERT_TRUE(twice->wait_for("twice started", 90s)) << twice->output();
  twice->write("\x03");
  ASSERT_TRUE(twice->wait_for(prompt, 20s)) << twice->output();
  twice->write("\x03");
  EXPECT_EQ(twice->wait(60s), 130) << twice->output();
  EXPECT_EQ(job_running(laptop, "twice")["state"], "stopped");
}

}  // namespace
}  // namespace yonder::testing
