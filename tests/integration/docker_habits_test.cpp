// What a docker user types on day one, through the real `yonder` against a
// provider and a consumer (real yonderd each, paired over loopback TLS,
// jobs on the real dockerd): wait, inspect, logs --tail/-t/-f, ps -q,
// --filter and --format, run --name and --shm-size, stats.
#include <gtest/gtest.h>

#include <signal.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "support/docker_env.h"
#include "support/job_node.h"
#include "support/live_process.h"
#include "support/subprocess.h"
#include "support/temp_dir.h"
#include "support/wait_until.h"

namespace yonder::testing {
namespace {

using nlohmann::json;

constexpr const char* kImage = "yonder-test/busybox:1";

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

class DockerHabits : public ::testing::Test {
 protected:
  void SetUp() override {
    YONDER_REQUIRE_DOCKER_OR_SKIP();
    // Fake GPUs the jobs may lease on an engine without the NVIDIA runtime.
    // Both fake GPUs are lent as shares too: two at once, 1 GiB kept back.
    studio_ = std::make_unique<Node>(dir_, "studio", true,
                                     Env{{"YONDER_GPU_FAKE_WITHOUT_RUNTIME", "true"}, {"YONDER_GPU_SHARE", "all:2:1G"}});
    laptop_ = std::make_unique<Node>(dir_, "laptop", false);
    laptop_->pair_with(*studio_, {"--max-jobs", "4", "--scope", "run,files"});
  }
  // Submits `script` detached; returns the job id.
  std::string detached(const std::string& script) {
    auto d =
        laptop_->yonder({"run", "--on", "studio", "--image", kImage, "--no-upload", "-d", "--", "sh", "-c", script});
    EXPECT_EQ(d.exit_code, 0) << d.err;
    return d.out.substr(0, d.out.find('\n'));
  }
  Node& laptop() { return *laptop_; }

  TempDir dir_;
  std::unique_ptr<Node> studio_, laptop_;
};

TEST_F(DockerHabits, WaitExitsWithTheJobsExitCode) {
  std::string id = detached("sleep 1; exit 3");
  auto w = laptop().yonder({"wait", id});
  EXPECT_EQ(w.exit_code, 3) << w.err;
  EXPECT_EQ(w.out, "3\n");
  // Already ended: answers at once, the same.
  EXPECT_EQ(laptop().yonder({"wait", id.substr(0, 6)}).out, "3\n");
}

TEST_F(DockerHabits, WaitPrintsEachJobsExitCodeAndExitsWithTheLastOnes) {
  std::string a = detached("exit 0"), b = detached("sleep 1; exit 5");
  auto w = laptop().yonder({"wait", b, a});
  EXPECT_EQ(w.exit_code, 0) << w.err;
  EXPECT_EQ(w.out, "5\n0\n");
}

TEST_F(DockerHabits, WaitOnAJobThatFailedToStartSaysWhyAndExitsNonZero) {
  // An allowed image that is not on the provider, which may not pull it.
  auto d =
      laptop().yonder({"run", "--on", "studio", "--image", "yonder-test/absent:1", "--no-upload", "-d", "--", "true"});
  ASSERT_EQ(d.exit_code, 0) << d.err;
  std::string id = d.out.substr(0, d.out.find('\n'));
  auto w = laptop().yonder({"wait", id});
  EXPECT_EQ(w.exit_code, 125) << w.out << w.err;
  EXPECT_EQ(w.out, "");
  EXPECT_NE(w.err.find("failed without running to an end: start_failed"), std::string::npos) << w.err;
  EXPECT_NE(w.err.find("yonder inspect"), std::string::npos) << w.err;
}

TEST_F(DockerHabits, WaitOnAMissingJobSaysHowToListJobs) {
  auto w = laptop().yonder({"wait", "abcd1234"});
  EXPECT_NE(w.exit_code, 0);
  EXPECT_NE(w.err.find("yonder ps --all"), std::string::npos) << w.err;
}

TEST_F(DockerHabits, InspectShowsTheJobAsJsonStateFirst) {
  std::string id = detached("echo hello; exit 2");
  ASSERT_EQ(laptop().yonder({"wait", id}).exit_code, 2);
  auto r = laptop().yonder({"inspect", id.substr(0, 8)});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto v = json::parse(r.out, nullptr, false);
  ASSERT_TRUE(v.is_object()) << r.out;
  EXPECT_EQ(v["job_id"], id);
  EXPECT_EQ(v["state"], "exited");
  EXPECT_EQ(v["exit_code"], 2);
  EXPECT_EQ(v["image"], kImage);
  EXPECT_EQ(v["command"], json({"sh", "-c", "echo hello; exit 2"}));
  EXPECT_EQ(v["provider_name"], "studio");
  EXPECT_TRUE(v["started_at"].is_number_integer()) << r.out;
  EXPECT_TRUE(v["finished_at"].is_number_integer()) << r.out;
  EXPECT_EQ(v["log_bytes"], 16 + 6) << r.out;  // one record: "hello\n"
  // What a person looks for first comes first.
  EXPECT_EQ(r.out.find("\"job_id\""), r.out.find('"'));
  EXPECT_LT(r.out.find("\"state\""), r.out.find("\"image\""));
  EXPECT_LT(r.out.find("\"exit_code\""), r.out.find("\"image\""));
}

TEST_F(DockerHabits, InspectShowsTheJobAsLastSeenWhenItsProviderDoesNotAnswer) {
  std::string id = detached("exit 6");
  ASSERT_EQ(laptop().yonder({"wait", id}).exit_code, 6);
  // SIGSTOP keeps the provider's connections open but answers nothing.
  ASSERT_EQ(::kill(studio_->daemon().pid(), SIGSTOP), 0);
  struct Resume {
    int pid;
    ~Resume() { ::kill(pid, SIGCONT); }
  } resume{studio_->daemon().pid()};
  auto r = laptop().yonder({"inspect", id});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto v = json::parse(r.out, nullptr, false);
  EXPECT_EQ(v["state"], "exited") << r.out;
  EXPECT_EQ(v["exit_code"], 6) << r.out;
  EXPECT_EQ(v["provider_reachable"], false) << r.out;
  EXPECT_NE(r.err.find("did not answer"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("as last seen"), std::string::npos) << r.err;
}

TEST_F(DockerHabits, InspectOfAMissingJobSaysHowToListJobs) {
  auto r = laptop().yonder({"inspect", "abcd1234"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("yonder ps --all"), std::string::npos) << r.err;
}

TEST_F(DockerHabits, LogsTailPrintsOnlyTheLastLines) {
  std::string id = detached("for i in 1 2 3 4 5; do echo line $i; done");
  ASSERT_EQ(laptop().yonder({"wait", id}).exit_code, 0);
  auto two = laptop().yonder({"logs", "--tail", "2", id});
  EXPECT_EQ(two.exit_code, 0) << two.err;
  EXPECT_EQ(two.out, "line 4\nline 5\n");
  EXPECT_EQ(laptop().yonder({"logs", "-n", "3", id}).out, "line 3\nline 4\nline 5\n");
  EXPECT_EQ(laptop().yonder({"logs", "-n", "0", id}).out, "");
  EXPECT_EQ(laptop().yonder({"logs", "-n", "all", id}).out, "line 1\nline 2\nline 3\nline 4\nline 5\n");
  auto bad = laptop().yonder({"logs", "-n", "x", id});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--tail 20"), std::string::npos) << bad.err;
}

TEST_F(DockerHabits, LogsTailWithFollowPrintsTheLastLinesThenWhatComesAfter) {
  // The job prints three lines, then waits for a file we put into its workspace.
  std::string id = detached("echo a; echo b; echo c; until [ -e go ]; do sleep 0.1; done; echo d; exit 2");
  ASSERT_TRUE(wait_until([&] {
    return laptop().yonder({"logs", id}).out == "a\nb\nc\n";
  })) << laptop().yonder({"logs", id}).out;
  LiveProcess follow({program_path("yonder"), "logs", "-f", "-n", "1", id}, laptop().env());
  ASSERT_TRUE(follow.wait_for("c\n", std::chrono::seconds(30))) << follow.output();
  std::string go = dir_ / "go";
  std::ofstream(go) << "";
  auto cp = laptop().yonder({"cp", go, id + ":"});
  ASSERT_EQ(cp.exit_code, 0) << cp.err;
  EXPECT_EQ(follow.wait(std::chrono::seconds(60)), 2) << follow.output();
  EXPECT_EQ(follow.out(), "c\nd\n");
}

TEST_F(DockerHabits, LogsTimestampsPutEachLinesTimeBeforeIt) {
  std::string id = detached("echo one; echo two");
  ASSERT_EQ(laptop().yonder({"wait", id}).exit_code, 0);
  auto r = laptop().yonder({"logs", "-t", id});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto lines = lines_of(r.out);
  ASSERT_EQ(lines.size(), 2u) << r.out;
  std::regex stamped(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z (one|two))");
  for (const auto& l : lines) EXPECT_TRUE(std::regex_match(l, stamped)) << l;
  EXPECT_LE(lines[0].substr(0, 30), lines[1].substr(0, 30));
  auto tail = laptop().yonder({"logs", "-t", "-n", "1", id});
  ASSERT_EQ(lines_of(tail.out).size(), 1u) << tail.out;
  EXPECT_TRUE(std::regex_match(lines_of(tail.out)[0], std::regex(R"(\S+Z two)"))) << tail.out;
}

TEST_F(DockerHabits, LogsFollowExitsWithTheJobsExitCode) {
  std::string id = detached("echo hi; sleep 1; echo bye; exit 4");
  auto r = laptop().yonder({"logs", "-f", id});
  EXPECT_EQ(r.exit_code, 4) << r.err;
  EXPECT_EQ(r.out, "hi\nbye\n");
  // Without -f it prints what there is and succeeds, as docker's does.
  EXPECT_EQ(laptop().yonder({"logs", id}).exit_code, 0);
}

TEST_F(DockerHabits, PsQuietListsIdsNewestFirst) {
  std::string a = detached("exit 0");
  std::string b = detached("exit 0");
  ASSERT_EQ(laptop().yonder({"wait", a, b}).exit_code, 0);
  auto r = laptop().yonder({"ps", "-a", "-q"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, b + "\n" + a + "\n");
  EXPECT_EQ(laptop().yonder({"ps", "-q"}).out, "");  // both ended
}

TEST_F(DockerHabits, PsFilterByStateShowsOnlyThoseJobs) {
  std::string done = detached("exit 1");
  ASSERT_EQ(laptop().yonder({"wait", done}).exit_code, 1);
  std::string running = detached("echo up; sleep 60");
  ASSERT_TRUE(wait_until([&] {
    return laptop().yonder({"ps", "-q", "--filter", "state=running"}).out == running + "\n";
  })) << laptop().yonder({"ps", "-a"}).out;
  // An ended state lists ended jobs without -a, as docker's does.
  EXPECT_EQ(laptop().yonder({"ps", "-q", "--filter", "status=exited"}).out, done + "\n");
  EXPECT_EQ(laptop().yonder({"ps", "-q", "--filter", "state=exited", "--filter", "state=running"}).out,
            running + "\n" + done + "\n");
  EXPECT_EQ(laptop().yonder({"ps", "-q", "--filter", "state=running", "--filter", "provider=elsewhere"}).out, "");
  auto bad = laptop().yonder({"ps", "--filter", "color=red"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("state=running"), std::string::npos) << bad.err;
  EXPECT_EQ(laptop().yonder({"stop", running}).exit_code, 0);
}

TEST_F(DockerHabits, PsFormatJsonIsOneJobALineAndTheTableHasCreatedAndDuration) {
  std::string id = detached("exit 0");
  ASSERT_EQ(laptop().yonder({"wait", id}).exit_code, 0);
  auto r = laptop().yonder({"ps", "-a", "--format", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto lines = lines_of(r.out);
  ASSERT_EQ(lines.size(), 1u) << r.out;
  auto j = json::parse(lines[0], nullptr, false);
  EXPECT_EQ(j["job_id"], id);
  EXPECT_EQ(j["state"], "exited");
  auto table = lines_of(laptop().yonder({"ps", "-a"}).out);
  ASSERT_GE(table.size(), 2u);
  EXPECT_NE(table[0].find("CREATED"), std::string::npos) << table[0];
  EXPECT_NE(table[0].find("DURATION"), std::string::npos) << table[0];
  EXPECT_NE(table[1].find(" ago"), std::string::npos) << table[1];
  EXPECT_TRUE(std::regex_search(table[1], std::regex(R"(\s\d+s\s)"))) << table[1];
}

TEST_F(DockerHabits, PsSinceListsThePeriodsJobsEndedOnesTooWithGpuTimeAndATotal) {
  auto gpu = laptop().yonder(
      {"run", "--on", "studio", "--image", kImage, "--no-upload", "--gpus", "1", "--", "sh", "-c", "sleep 1"});
  ASSERT_EQ(gpu.exit_code, 0) << gpu.err;
  std::string cpu = detached("exit 0");
  ASSERT_EQ(laptop().yonder({"wait", cpu}).exit_code, 0);
  auto table = lines_of(laptop().yonder({"ps", "--since", "1h"}).out);  // ended, without -a
  ASSERT_EQ(table.size(), 4u) << laptop().yonder({"ps", "-a"}).out;     // header, two jobs, the total
  EXPECT_NE(table[0].find("GPU-TIME"), std::string::npos) << table[0];
  EXPECT_TRUE(std::regex_search(table[1], std::regex(R"(\s-\s+sh -c exit 0$)"))) << table[1];
  EXPECT_TRUE(std::regex_search(table[2], std::regex(R"(\s[1-9]\d*s\s+sh -c sleep 1$)"))) << table[2];
  EXPECT_TRUE(std::regex_search(table[3], std::regex(R"(^2 job\(s\) since 1h: \d+s run, [1-9]\d*s GPU time$)")))
      << table[3];
  auto rows = lines_of(laptop().yonder({"ps", "--since", "1h", "--format", "json"}).out);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(json::parse(rows[0])["gpu_seconds"], 0);
  EXPECT_GE(json::parse(rows[1])["gpu_seconds"].get<int>(), 1);
  EXPECT_EQ(laptop().yonder({"ps", "-q", "--since", "2099-01-01T00:00:00Z"}).out, "");
  auto bad = laptop().yonder({"ps", "--since", "soon"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--since takes a duration"), std::string::npos) << bad.err;
}

TEST_F(DockerHabits, StatsShowsARunningJobsCpuMemoryAndProcessesAndSaysWhenItEnded) {
  auto r = laptop().yonder({"run", "--on", "studio", "--image", kImage, "--no-upload", "-d", "--name", "busy", "--",
                            "sh", "-c", "echo up; while :; do :; done"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_TRUE(wait_until([&] { return laptop().yonder({"logs", "busy"}).out == "up\n"; }));
  auto table = laptop().yonder({"stats", "--no-stream", "busy"});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  auto lines = lines_of(table.out);
  ASSERT_EQ(lines.size(), 2u) << table.out;
  EXPECT_NE(lines[0].find("MEM USAGE / LIMIT"), std::string::npos) << lines[0];
  EXPECT_TRUE(std::regex_search(lines[1], std::regex(R"(^busy\s+\d+\.\d\d%\s+\S+ / 64\.0MiB\s+\d+\.\d\d%\s+\d+\s+-)")))
      << lines[1];
  auto j = lines_of(laptop().yonder({"stats", "--no-stream", "--format", "json", "busy"}).out);
  ASSERT_EQ(j.size(), 1u);
  auto row = json::parse(j[0], nullptr, false);
  EXPECT_GT(row["cpu_percent"].get<double>(), 1.0) << row;  // a busy loop, sampled a second apart
  EXPECT_EQ(row["memory_limit_bytes"], 64 << 20) << row;
  EXPECT_GE(row["pids"].get<int>(), 1) << row;
  ASSERT_EQ(laptop().yonder({"stop", "busy"}).exit_code, 0);
  laptop().yonder({"wait", "busy"});
  auto ended = laptop().yonder({"stats", "--no-stream", "busy"});
  EXPECT_EQ(ended.exit_code, 1);
  EXPECT_NE(ended.out.find("stats are for a running job"), std::string::npos) << ended.out << ended.err;
  auto missing = laptop().yonder({"stats", "--no-stream", "nosuchjob"});
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_NE(missing.err.find("yonder ps --all"), std::string::npos) << missing.err;
}

TEST_F(DockerHabits, RunNameIsUsableWhereverAJobIdGoes) {
  auto r = laptop().yonder({"run", "--on", "studio", "--image", kImage, "--no-upload", "-d", "--name", "train", "--",
                            "sh", "-c", "echo hello; sleep 60"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string first = r.out.substr(0, r.out.find('\n'));
  ASSERT_TRUE(wait_until([&] { return laptop().yonder({"logs", "train"}).out == "hello\n"; }))
      << laptop().yonder({"logs", "train"}).err;
  auto table = lines_of(laptop().yonder({"ps"}).out);
  ASSERT_EQ(table.size(), 2u);
  EXPECT_NE(table[0].find("NAME"), std::string::npos) << table[0];
  EXPECT_NE(table[1].find("  train  "), std::string::npos) << table[1];
  // Taken while its job runs: refused with the job that has it and the way out.
  auto again = laptop().yonder({"run", "--on", "studio", "--image", kImage, "--no-upload", "-d", "--name", "train",
                                "--", "true"});
  EXPECT_NE(again.exit_code, 0);
  EXPECT_NE(again.err.find("taken by job " + first), std::string::npos) << again.err;
  EXPECT_NE(again.err.find("yonder stop train"), std::string::npos) << again.err;
  EXPECT_EQ(laptop().yonder({"ps", "-q"}).out, first + "\n");  // nothing was submitted
  ASSERT_EQ(laptop().yonder({"stop", "train"}).exit_code, 0);
  EXPECT_NE(laptop().yonder({"wait", "train"}).exit_code, 0);
  // Free again once its job ended; the name now means the newer job.
  auto second = laptop().yonder({"run", "--on", "studio", "--image", kImage, "--no-upload", "-d", "--name", "train",
                                 "--", "sh", "-c", "exit 4"});
  ASSERT_EQ(second.exit_code, 0) << second.err;
  std::string id = second.out.substr(0, second.out.find('\n'));
  EXPECT_EQ(laptop().yonder({"wait", "train"}).exit_code, 4);
  auto v = json::parse(laptop().yonder({"inspect", "train"}).out, nullptr, false);
  EXPECT_EQ(v["job_id"], id);
  EXPECT_EQ(v["name"], "train");
  EXPECT_EQ(laptop().yonder({"ps", "-a", "-q", "--filter", "name=rai"}).out, id + "\n" + first + "\n");
  auto bad = laptop().yonder({"run", "--on", "studio", "--image", kImage, "--no-upload", "--name", "a b", "--", "true"});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("1 to 64 letters, digits and _.-"), std::string::npos) << bad.err;
}

// Ray's num_gpus=0.5, held: `--gpus 0.5` and `--vram 8G` alone run as shares
// of one GPU, the provider's VRAM guard preloaded with the job's ledger
// (the guard itself is exercised against the driver's test double in
// docker_executor_test; this image is static, so here it is the setting
// the job sees), `inspect` says where and how much, and `yonder gpu` shows
// what the provider's shared GPUs hold.
TEST_F(DockerHabits, AFractionOfAGpuOrVramAloneRunsAsAShareWithTheGuardPreloaded) {
  auto half = laptop().yonder({"run", "--on", "studio", "--image", kImage, "--no-upload", "--gpus", "0.5", "--",
                               "sh", "-c", "echo $LD_PRELOAD; echo $YONDER_VRAM_LEDGER; ls /run/yonder-vram"});
  ASSERT_EQ(half.exit_code, 0) << half.err;
  EXPECT_EQ(half.out, "/usr/lib/yonder/libyonder-vram-guard.so\n/run/yonder-vram/ledger\nledger\n");
  auto d = laptop().yonder({"run", "--on", "studio", "--image", kImage, "--no-upload", "--vram", "8G", "-d", "--",
                            "sleep", "60"});
  ASSERT_EQ(d.exit_code, 0) << d.err;
  std::string id = d.out.substr(0, d.out.find('\n'));
  json share;
  ASSERT_TRUE(wait_until([&] {
    auto v = json::parse(laptop().yonder({"inspect", id}).out, nullptr, false);
    if (v.is_object() && v.value("state", "") == "running" && v.contains("share")) share = v["share"];
    return share.contains("gpu");
  })) << laptop().yonder({"inspect", id}).out;
  EXPECT_EQ(share["vram_bytes"], 8ULL << 30);
  EXPECT_EQ(share["permille"], 334);  // 8 of the fake GPU's 24 GiB
  // Asked again if the link was being replaced just then (seen once: "the
  // peer closed the link"); what it shows is checked either way.
  RunResult gpu;
  EXPECT_TRUE(wait_until([&] {
    gpu = laptop().yonder({"gpu", "studio"});
    return gpu.exit_code == 0;
  })) << gpu.err;
  EXPECT_NE(gpu.out.find("shared: 1 of 2 jobs, 8.0 of 23.0 GiB"), std::string::npos) << gpu.out;
  ASSERT_EQ(laptop().yonder({"stop", id}).exit_code, 0);
  // More than a shared GPU can ever hold: refused at once, saying the most.
  auto big = laptop().yonder({"run", "--on", "studio", "--image", kImage, "--no-upload", "--vram", "30G", "--", "true"});
  EXPECT_NE(big.exit_code, 0);
  EXPECT_NE(big.err.find("the most a shared GPU here holds is 23552 MiB"), std::string::npos) << big.err;
}

// The issue's acceptance run: `--vram 4G` twice at once on one shareable
// fake GPU both run, a third waits for room, and a job past its budget gets
// CUDA_ERROR_OUT_OF_MEMORY from the provider's VRAM guard. The CUDA driver
// is the TEST DOUBLE (tests/gpu/vram_guard/fake_libcuda.c) and its client
// vram_probe, uploaded with the job's files as a consumer's program would
// be, in an image with a C library to preload into.
TEST(SharedGpu, TwoFourGigabyteSharesRunAtOnceOnOneGpuAThirdWaitsAndAllocationsPastTheBudgetFail) {
  YONDER_REQUIRE_DOCKER_OR_SKIP();
  const char* src = std::getenv("YONDER_SOURCE_DIR");
  auto built = run({std::string(src != nullptr ? src : ".") + "/scripts/build-torch-double-image.sh"});
  ASSERT_EQ(built.exit_code, 0) << built.out << built.err;
  TempDir dir;
  std::string upload = dir / "program";
  std::filesystem::create_directories(upload);
  for (auto [from, to] : {std::pair{std::string(YONDER_VRAM_PROBE_PATH), "vram_probe"},
                          std::pair{std::string(YONDER_FAKE_CUDA_DIR) + "/libcuda.so.1", "libcuda.so.1"}}) {
    std::filesystem::copy_file(from, upload + "/" + to);
  }
  Node studio(dir, "studio", true,
              Env{{"YONDER_GPU_INVENTORY", "fake:1"}, {"YONDER_GPU_FAKE_WITHOUT_RUNTIME", "true"},
                  {"YONDER_GPU_SHARE", "0:2"}});
  Node laptop(dir, "laptop", false);
  laptop.pair_with(studio, {"--max-jobs", "4", "--scope", "run,files"});
  auto share = [&](const std::string& name) {
    auto r = laptop.yonder({"run", "--on", "studio", "--image", "yonder-test/torch-double:1", "--upload", upload,
                            "--name", name, "--vram", "4G", "-e", "LD_LIBRARY_PATH=/workspace", "-d", "--", "sh",
                            "-c",
                            "/workspace/vram_probe info alloc 3000 alloc 2000; "
                            "python3 -c 'import time; time.sleep(120)'"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
  };
  auto view = [&](const std::string& name) {
    return json::parse(laptop.yonder({"inspect", name}).out, nullptr, false);
  };
  share("one");
  share("two");
  share("three");
  ASSERT_TRUE(wait_until([&] {
    return view("one").value("state", "") == "running" && view("two").value("state", "") == "running";
  })) << view("one").dump() << view("two").dump();
  EXPECT_EQ(view("one")["share"]["gpu"], view("two")["share"]["gpu"]) << "both on the one GPU";
  json third = view("three");
  EXPECT_EQ(third["state"], "pending") << third.dump();
  EXPECT_NE(third.value("waiting_for", "").find("as many jobs at once as the provider shares them with"),
            std::string::npos)
      << third.dump();
  for (const char* name : {"one", "two"}) {
    std::string out;
    ASSERT_TRUE(wait_until([&] {
      out = laptop.yonder({"logs", name}).out;
      return out.find("alloc 2000") != std::string::npos;
    })) << out;
    EXPECT_NE(out.find("info free=4096 total=4096"), std::string::npos) << "the budget is the GPU's size: " << out;
    EXPECT_NE(out.find("alloc 3000 ok"), std::string::npos) << out;
    EXPECT_NE(out.find("alloc 2000 error 2"), std::string::npos) << "past 4 GiB: CUDA_ERROR_OUT_OF_MEMORY: " << out;
  }
  ASSERT_EQ(laptop.yonder({"stop", "one"}).exit_code, 0);
  EXPECT_TRUE(wait_until([&] { return view("three").value("state", "") == "running"; })) << view("three").dump();
  for (const char* name : {"two", "three"}) EXPECT_EQ(laptop.yonder({"stop", name}).exit_code, 0);
}

// The last line: a job that gets past the guard (here a static program,
// which ld.so never preloads into) and holds more GPU memory than its share
// is stopped by the VRAM watch. NVML is its TEST DOUBLE (tests/gpu/
// nvml_stub.c), told through a file which host process holds what, as the
// real one would report the job's process.
TEST(SharedGpu, AShareThatGetsPastTheGuardIsStoppedByTheVramWatch) {
  YONDER_REQUIRE_DOCKER_OR_SKIP();
  TempDir dir;
  std::string held = dir / "nvml-processes";
  std::ofstream(held) << "";
  Node studio(dir, "studio", true,
              Env{{"YONDER_GPU_INVENTORY", std::string("nvml:") + YONDER_NVML_STUB_PATH},
                  {"YONDER_GPU_FAKE_WITHOUT_RUNTIME", "true"},
                  {"YONDER_GPU_SHARE", "0:2"},
                  {"YONDER_NVML_STUB_PROCESSES", held}},
              "[gpu]\nvram_check_interval_ms = 200\n");
  Node laptop(dir, "laptop", false);
  laptop.pair_with(studio, {"--max-jobs", "2", "--scope", "run"});
  auto d = laptop.yonder({"run", "--on", "studio", "--image", kImage, "--no-upload", "--vram", "1G", "-d", "--",
                          "sleep", "120"});
  ASSERT_EQ(d.exit_code, 0) << d.err;
  std::string id = d.out.substr(0, d.out.find('\n'));
  auto view = [&] { return json::parse(laptop.yonder({"inspect", id}).out, nullptr, false); };
  ASSERT_TRUE(wait_until([&] { return view().value("state", "") == "running"; })) << view().dump();
  // The job's container is yonder-<id>; its first process, as the host sees it.
  auto pid = run({"/usr/bin/env", "docker", "inspect", "-f", "{{.State.Pid}}", "yonder-" + id});
  ASSERT_EQ(pid.exit_code, 0) << pid.err;
  std::ofstream(held) << "0 99999 8589934592\n"                                    // another tenant's 8 GiB
                      << "0 " << pid.out.substr(0, pid.out.find('\n')) << " 3221225472\n";  // the job's 3 GiB
  json ended;
  ASSERT_TRUE(wait_until([&] {
    ended = view();
    return ended.value("state", "") == "stopped";
  })) << ended.dump();
  EXPECT_EQ(ended["reason"], "vram_exceeded") << ended.dump();
  EXPECT_NE(ended.value("message", "").find("used 3072 MiB of GPU memory on GPU-5a1b0000-0000-4000-8000-000000000001, "
                                            "over its limit of 1024 MiB"),
            std::string::npos)
      << ended.dump();
}

TEST_F(DockerHabits, ShmSizeSetsTheJobsDevShmUpToHalfItsMemory) {
  // busybox df -k: "Filesystem 1K-blocks Used Available Use% Mounted on", then /dev/shm's line.
  auto r = laptop().yonder({"run", "--on", "studio", "--image", kImage, "--no-upload", "--memory", "64M",
                            "--shm-size", "24M", "--", "sh", "-c", "df -k /dev/shm | tail -n 1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(std::regex_search(r.out, std::regex(R"(\s24576\s)"))) << r.out;
  auto over = laptop().yonder({"run", "--on", "studio", "--image", kImage, "--no-upload", "--memory", "64M",
                               "--shm-size", "40M", "--", "true"});
  EXPECT_NE(over.exit_code, 0);
  EXPECT_NE(over.err.find("at most half its memory (32 MiB of 64)"), std::string::npos) << over.err;
}

}  // namespace
}  // namespace yonder::testing
