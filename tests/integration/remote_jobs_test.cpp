// Remote jobs end to end: a provider and consumers, each a real yonderd in
// its own YONDER_HOME, paired over loopback TLS, jobs run by the real
// dockerd, driven through the CLI as people use it.
#include <gtest/gtest.h>

#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "os/loop_mount.h"
#include "os/unix_http.h"
#include "support/api_token.h"
#include "support/docker_env.h"
#include "support/job_node.h"
#include "support/live_process.h"
#include "support/read_file.h"
#include "support/subprocess.h"
#include "support/temp_dir.h"
#include "support/wait_until.h"

namespace yonder::testing {
namespace {

using nlohmann::json;


class RemoteJobs : public ::testing::Test {
 protected:
  void SetUp() override { YONDER_REQUIRE_DOCKER_OR_SKIP(); }
};

constexpr const char* kImage = "yonder-test/busybox:1";

TEST_F(RemoteJobs, RunUploadsStreamsOutputAndPropagatesTheExitCode) {
  TempDir dir;
  Node studio(dir, "studio", true), laptop(dir, "laptop", false);
  laptop.pair_with(studio, {"--max-jobs", "2"});
  std::string work = dir / "work";
  std::filesystem::create_directories(work + "/data");
  std::filesystem::create_directories(work + "/.git");
  std::ofstream(work + "/data/input.txt") << "uploaded payload\n";
  std::ofstream(work + "/.git/HEAD") << "ref: refs/heads/main\n";
  std::ofstream(work + "/.gitignore") << "*.log\n";
  std::ofstream(work + "/debug.log") << "not wanted\n";
  std::ofstream(work + "/.yonderignore") << "secret/\n";
  std::filesystem::create_directories(work + "/secret");
  std::ofstream(work + "/secret/key") << "nope\n";

  auto r = laptop.yonder({"run", "--on", "studio", "--image", kImage, "--upload", work, "--",
                          "sh", "-c", "cat data/input.txt; ls -a | tr '\\n' ' '; echo; echo to-stderr >&2; exit 7"});
  EXPECT_EQ(r.exit_code, 7) << r.err;
  EXPECT_NE(r.out.find("uploaded payload\n"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("to-stderr"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("to-stderr"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("data"), std::string::npos);
  EXPECT_EQ(r.out.find(".git "), std::string::npos) << r.out;      // never sent
  EXPECT_EQ(r.out.find("lost+found"), std::string::npos) << r.out;  // the workspace file system's, not the job's
  EXPECT_EQ(r.out.find("debug.log"), std::string::npos) << r.out;  // .gitignore
  EXPECT_EQ(r.out.find("secret"), std::string::npos) << r.out;     // .yonderignore

  // The consumer remembers the job and where it ran.
  auto ps = laptop.yonder_json({"ps", "--all"});
  ASSERT_EQ(ps["jobs"].size(), 1u) << ps.dump();
  EXPECT_EQ(ps["jobs"][0]["state"], "exited");
  EXPECT_EQ(ps["jobs"][0]["exit_code"], 7);
  EXPECT_EQ(ps["jobs"][0]["provider_name"], "studio");
  EXPECT_EQ(laptop.yonder_json({"ps"})["jobs"].size(), 0u);  // finished jobs only with --all

  // Detached: prints the id; logs -f follows to the end; logs re-reads it all.
  auto d = laptop.yonder({"run", "--on", "studio", "--image", kImage, "--no-upload", "-d", "--",
                          "sh", "-c", "for i in 1 2 3; do echo line $i; sleep 0.2; done"});
  ASSERT_EQ(d.exit_code, 0) << d.err;
  std::string id = d.out.substr(0, d.out.find('\n'));
  ASSERT_EQ(id.size(), 16u) << d.out;
  auto follow = laptop.yonder({"logs", "-f", id.substr(0, 6)});
  EXPECT_EQ(follow.exit_code, 0) << follow.err;
  EXPECT_EQ(follow.out, "line 1\nline 2\nline 3\n");
  EXPECT_EQ(laptop.yonder({"logs", id}).out, "line 1\nline 2\nline 3\n");
}

TEST_F(RemoteJobs, OutOfScopeRequestsAreRefusedWithTheReason) {
  TempDir dir;
  Node studio(dir, "studio", true), laptop(dir, "laptop", false), tablet(dir, "tablet", false);
  laptop.pair_with(studio, {"--gpus", "1"});
  tablet.pair_with(studio, {"--scope", "exec"});

  auto gpus = laptop.yonder({"run", "--on", "studio", "--image", kImage, "--no-upload", "--gpus", "2", "--", "true"});
  EXPECT_EQ(gpus.exit_code, 125) << gpus.err;
  EXPECT_NE(gpus.err.find("allows at most 1"), std::string::npos) << gpus.err;

  auto no_run = tablet.yonder({"run", "--on", "studio", "--image", kImage, "--", "true"});
  EXPECT_EQ(no_run.exit_code, 125) << no_run.err;
  EXPECT_NE(no_run.err.find("does not include \"run\""), std::string::npos) << no_run.err;

  auto image = laptop.yonder({"run", "--on", "studio", "--image", "busybox", "--no-upload", "--", "true"});
  EXPECT_EQ(image.exit_code, 125);
  EXPECT_NE(image.err.find("executor.image_allowlist"), std::string::npos) << image.err;
  EXPECT_EQ(laptop.yonder_json({"ps", "--all"})["jobs"].size(), 0u);
}

TEST_F(RemoteJobs, AJobPastTheScopesJobsAtOnceWaitsInTheQueueAndStartsWhenOneEnds) {
  TempDir dir;
  Node studio(dir, "studio", true), laptop(dir, "laptop", false);
  laptop.pair_with(studio, {"--max-jobs", "1"});
  auto first = laptop.yonder({"run", "--on", "studio", "--image", kImage, "--no-upload", "-d", "--", "sleep", "300"});
  ASSERT_EQ(first.exit_code, 0) << first.err;
  std::string a = first.out.substr(0, first.out.find('\n'));
  // The second is accepted and waits, saying why, instead of being refused.
  auto second = laptop.yonder({"run", "--on", "studio", "--image", kImage, "--no-upload", "-d", "--", "echo", "second"});
  ASSERT_EQ(second.exit_code, 0) << second.err;
  std::string b = second.out.substr(0, second.out.find('\n'));
  EXPECT_NE(second.err.find("is pending"), std::string::npos) << second.err;
  EXPECT_NE(second.err.find("--max-jobs"), std::string::npos) << second.err;
  json waiting = laptop.yonder_json({"ps"});
  bool seen = false;
  for (const auto& j : waiting["jobs"]) {
    if (j["job_id"] != b) continue;
    seen = true;
    EXPECT_EQ(j["state"], "pending") << j.dump();
    EXPECT_NE(j.value("waiting_for", "").find("the most your scope on this provider allows at once (1)"),
              std::string::npos)
        << j.dump();
    EXPECT_EQ(j.value("queue_position", -1), 0) << j.dump();
  }
  EXPECT_TRUE(seen) << waiting.dump();
  // The first ends: the second runs to its end.
  ASSERT_EQ(laptop.yonder({"stop", a}).exit_code, 0);
  auto logs = laptop.yonder({"logs", "-f", b});
  EXPECT_EQ(logs.exit_code, 0) << logs.err;
  EXPECT_EQ(logs.out, "second\n");
}

TEST_F(RemoteJobs, OnlyTheSubmitterSeesStopsOrReadsItsJob) {
  TempDir dir;
  Node studio(dir, "studio", true), laptop(dir, "laptop", false), intruder(dir, "intruder", false);
  laptop.pair_with(studio, {});
  intruder.pair_with(studio, {});
  auto d = laptop.yonder({"run", "--on", "studio", "--image", kImage, "--no-upload", "-d", "--",
                          "sh", "-c", "echo started; sleep 60"});
  ASSERT_EQ(d.exit_code, 0) << d.err;
  std::string id = d.out.substr(0, d.out.find('\n'));

  json param = {{"job_id", id}};
  for (const char* method : {"run.inspect", "run.stop", "run.logs"}) {
    auto r = intruder.yonder({"call", "studio", method, param.dump()});
    EXPECT_NE(r.exit_code, 0) << method << ": " << r.out;
    EXPECT_NE(r.err.find("no job " + id + " of yours"), std::string::npos) << method << ": " << r.err;
  }
  auto list = intruder.yonder({"call", "studio", "run.list"});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  EXPECT_EQ(json::parse(list.out)["jobs"].size(), 0u) << list.out;
  EXPECT_NE(intruder.yonder({"stop", id}).exit_code, 0);  // its daemon does not even know the id

  // The owner still can: the job kept running through all that.
  auto ps = laptop.yonder_json({"ps"});
  ASSERT_EQ(ps["jobs"].size(), 1u) << ps.dump();
  EXPECT_EQ(ps["jobs"][0]["job_id"], id);
  auto stop = laptop.yonder({"stop", id});
  EXPECT_EQ(stop.exit_code, 0) << stop.err;
  auto logs = laptop.yonder({"logs", "-f", id});
  EXPECT_EQ(logs.out, "started\n");
  auto after = laptop.yonder_json({"ps", "--all"});
  EXPECT_EQ(after["jobs"][0]["state"], "stopped") << after.dump();
}

// A follower of a job on a provider that then denies this node stops with
// exit 5 and the provider's refusal, instead of retrying for ever.
TEST_F(RemoteJobs, AfterADenyLogsFollowStopsWithExit5) {
  TempDir dir;
  Node studio(dir, "studio", true), laptop(dir, "laptop", false);
  laptop.pair_with(studio, {});
  auto d = laptop.yonder({"run", "--on", "studio", "--image", kImage, "--no-upload", "-d", "--", "sh", "-c",
                          "echo up; sleep 120"});
  ASSERT_EQ(d.exit_code, 0) << d.err;
  std::string id = d.out.substr(0, d.out.find('\n'));
  LiveProcess follow({program_path("yonder"), "logs", "-f", id}, laptop.env());
  ASSERT_TRUE(follow.wait_for("up", std::chrono::seconds(60))) << follow.output();
  ASSERT_EQ(studio.yonder({"deny", "laptop"}).exit_code, 0);
  EXPECT_EQ(follow.wait(std::chrono::seconds(90)), 5) << follow.output();
  EXPECT_NE(follow.err().find("refused the connection"), std::string::npos) << follow.err();
  ASSERT_EQ(studio.yonder({"allow", "laptop"}).exit_code, 0);
  EXPECT_EQ(laptop.yonder({"stop", id}).exit_code, 0);
}

// An upload is on the provider's disk before it is acknowledged: the
// provider's state folder is an ext4 file system in an image file, and
// right after `run -d` returns (the upload's final reply came before the
// submit), the uploaded bytes are in the image itself, not only in the
// mounted file system's cache (ext4 would write them back 5 to 30 s
// later). A kill -9 cannot show this (the page cache outlives the process);
// reading the image under the mount can.
TEST_F(RemoteJobs, AnAcknowledgedUploadIsOnTheProvidersDiskNotOnlyInItsCache) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to loop-mount an ext4 image";
  TempDir dir;
  std::string image = dir / "studio.img", home = dir / "studio";
  std::filesystem::create_directories(home);
  ASSERT_TRUE(os::create_ext4_image(image, 512ll << 20, 0, 0).ok());
  ASSERT_TRUE(os::mount_loop(image, home).ok());
  struct Unmount {
    std::string dir;
    ~Unmount() { (void)os::unmount(dir); }
  } unmount{home};
  std::string payload;
  {
    std::ifstream random("/dev/urandom", std::ios::binary);
    payload.resize(1 << 20);
    random.read(payload.data(), static_cast<std::streamsize>(payload.size()));
  }
  std::string work = dir / "work";
  std::filesystem::create_directories(work);
  std::ofstream(work + "/weights.bin", std::ios::binary) << payload;
  {
    Node studio(dir, "studio", true), laptop(dir, "laptop", false);
    laptop.pair_with(studio, {});
    auto d = laptop.yonder({"run", "--on", "studio", "--image", kImage, "--upload", work, "-d", "--", "true"});
    ASSERT_EQ(d.exit_code, 0) << d.err;
    // Read the image file, not the mounted folder, for 4 KiB of the
    // payload from its middle (a block of the file: block-aligned there).
    std::string want = payload.substr(512 << 10, 4096);
    std::ifstream raw(image, std::ios::binary);
    std::string block(4096, '\0');
    bool found = false;
    while (!found && raw.read(block.data(), static_cast<std::streamsize>(block.size()))) found = block == want;
    EXPECT_TRUE(found) << "the acknowledged upload is not in the file system's image yet";
  }
}

// An ended job whose workspace the provider removed later (its retention
// passed) is marked cleaned by `ps --all` without the consumer having asked
// about that job again; what the consumer saw of it stays.
TEST_F(RemoteJobs, PsAllMarksAJobWhoseWorkspaceTheProviderRemovedSince) {
  TempDir dir;
  Node studio(dir, "studio", true, {}, "workspace_retention_s = 1\n"), laptop(dir, "laptop", false);
  laptop.pair_with(studio, {});
  auto r = laptop.yonder({"run", "--on", "studio", "--image", kImage, "--no-upload", "--", "sh", "-c", "exit 3"});
  ASSERT_EQ(r.exit_code, 3) << r.err;
  json job;
  bool cleaned = wait_until([&] {
    json ps = laptop.yonder_json({"ps", "--all"});
    if (!ps.contains("jobs") || ps["jobs"].size() != 1) return false;
    job = ps["jobs"][0];
    return job.contains("workspace_removed_at");
  });
  EXPECT_TRUE(cleaned) << job.dump();
  EXPECT_EQ(job.value("exit_code", 0), 3) << job.dump();
  auto table = laptop.yonder({"ps", "--all"});
  EXPECT_NE(table.out.find("exited*"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("* cleaned"), std::string::npos) << table.out;
}

// A provider that stops answering (SIGSTOP keeps its connections open) is
// named, not waited for: `ps` shows its jobs as last seen and says which
// provider did not answer; `run` says so while it waits to resume its
// upload, and carries on when the provider does.
TEST_F(RemoteJobs, AStoppedProviderIsNamedInsteadOfWaitedFor) {
  TempDir dir;
  Node studio(dir, "studio", true), laptop(dir, "laptop", false);
  laptop.pair_with(studio, {"--max-jobs", "4"});
  auto d = laptop.yonder({"run", "--on", "studio", "--image", kImage, "--no-upload", "-d", "--", "sleep", "60"});
  ASSERT_EQ(d.exit_code, 0) << d.err;
  std::string id = d.out.substr(0, d.out.find('\n'));
  ASSERT_EQ(::kill(studio.daemon().pid(), SIGSTOP), 0);
  struct Resume {
    int pid;
    ~Resume() { ::kill(pid, SIGCONT); }
  } resume{studio.daemon().pid()};

  auto ps = laptop.yonder({"ps"});
  EXPECT_EQ(ps.exit_code, 0) << ps.err;
  EXPECT_NE(ps.out.find(id.substr(0, 12)), std::string::npos) << ps.out;
  EXPECT_NE(ps.err.find("\"studio\" did not answer run.list"), std::string::npos) << ps.err;
  // Reading its job's log is bounded too, and names it.
  auto logs = laptop.yonder({"logs", id});
  EXPECT_NE(logs.exit_code, 0);
  EXPECT_NE(logs.err.find("\"studio\" did not answer run.logs"), std::string::npos) << logs.err;

  std::string work = dir / "work";
  std::filesystem::create_directories(work);
  std::ofstream(work + "/in.txt") << "payload\n";
  LiveProcess run({program_path("yonder"), "run", "--on", "studio", "--image", kImage, "--upload", work, "--", "cat",
                   "in.txt"},
                  laptop.env(), true);
  ASSERT_TRUE(run.wait_for("did not answer the upload's file list", std::chrono::seconds(90))) << run.output();
  ::kill(studio.daemon().pid(), SIGCONT);
  EXPECT_EQ(run.wait(std::chrono::seconds(120)), 0) << run.output();
  EXPECT_NE(run.output().find("payload"), std::string::npos) << run.output();
  EXPECT_EQ(laptop.yonder({"stop", id}).exit_code, 0);
}

// Someone leaves: `deny --stop-jobs` ends their access and their jobs here,
// and leaves other peers' jobs alone.
TEST_F(RemoteJobs, DenyWithStopJobsEndsThePeersJobsAndOnlyTheirs) {
  TempDir dir;
  Node studio(dir, "studio", true), leaver(dir, "leaver", false), stayer(dir, "stayer", false);
  leaver.pair_with(studio, {"--max-jobs", "4"});
  stayer.pair_with(studio, {});
  auto start = [&](Node& n) {
    auto d = n.yonder({"run", "--on", "studio", "--image", kImage, "--no-upload", "-d", "--", "sh", "-c",
                       "trap 'exit 143' TERM; echo up; sleep 120 & wait"});
    EXPECT_EQ(d.exit_code, 0) << d.err;
    return d.out.substr(0, d.out.find('\n'));
  };
  std::string a = start(leaver), b = start(leaver), kept = start(stayer);
  std::string leaver_id = leaver.node_id();
  auto deny = studio.yonder({"deny", "leaver", "--stop-jobs", "--json"});
  ASSERT_EQ(deny.exit_code, 0) << deny.err;
  json reply = json::parse(deny.out);
  EXPECT_EQ(reply["peer"], leaver_id);
  std::set<std::string> stopped(reply["stopped_jobs"].begin(), reply["stopped_jobs"].end());
  EXPECT_EQ(stopped, (std::set<std::string>{a, b})) << deny.out;

  // Stops are asynchronous (SIGTERM, then the grace): wait for the leaver's
  // jobs to end, and check the stayer's job is untouched.
  os::HttpRequestOptions o;
  o.bearer_token = api_token(studio.home());
  json jobs;
  std::string unlisted;  // why the provider's jobs could not be listed: stops the wait
  bool settled = wait_until(
      [&] {
        auto listed = os::unix_http_request(studio.home() + "/yonderd.sock", "GET", "/v1/provider/jobs", "", o);
        if (!listed.ok()) {
          unlisted = listed.error().to_string();
          return true;
        }
        jobs = json::parse(listed->body, nullptr, false);
        if (!jobs.is_array()) {
          unlisted = listed->body;
          return true;
        }
        bool all_ended = true;
        for (const auto& j : jobs) {
          std::string state = j["state"];
          bool live = state == "pending" || state == "starting" || state == "running";
          if (j["job_id"] == kept) {
            EXPECT_TRUE(live && !j.contains("stopping")) << j.dump();
          } else if (live) {
            all_ended = false;
          }
        }
        return all_ended;
      },
      std::chrono::seconds(120), std::chrono::milliseconds(50));
  ASSERT_TRUE(unlisted.empty()) << unlisted;
  EXPECT_TRUE(settled) << jobs.dump();
  // The leaver's pin is gone: its next request is refused.
  EXPECT_NE(leaver.yonder({"run", "--on", "studio", "--image", kImage, "--no-upload", "--", "true"}).exit_code, 0);
  EXPECT_EQ(stayer.yonder({"stop", kept}).exit_code, 0);
}

TEST_F(RemoteJobs, TheAuditLogRecordsRefusedAndCompletedRuns) {
  TempDir dir;
  Node studio(dir, "studio", true), laptop(dir, "laptop", false), tablet(dir, "tablet", false);
  laptop.pair_with(studio, {});
  tablet.pair_with(studio, {"--scope", "exec"});
  std::string laptop_id = laptop.yonder_json({"status"})["node_id"];
  std::string tablet_id = tablet.yonder_json({"status"})["node_id"];

  EXPECT_EQ(tablet.yonder({"run", "--on", "studio", "--image", kImage, "--no-upload", "--", "true"}).exit_code, 125);
  auto ok = laptop.yonder({"run", "--on", "studio", "--image", kImage, "--no-upload", "--", "sh", "-c", "exit 3"});
  ASSERT_EQ(ok.exit_code, 3) << ok.err;

  // Entries are written on the provider's pool after the reply; the job's
  // end a moment after the consumer saw it. Bounded wait for both.
  json refused, ended, submitted;
  EXPECT_TRUE(wait_until(
      [&] {
        auto audit = studio.yonder_json({"audit", "--verify"});
        EXPECT_TRUE(audit["verify"]["ok"].get<bool>()) << audit.dump();
        for (const auto& e : audit["entries"]) {
          if (e["actor"] == tablet_id && e["detail"].contains("refused")) refused = e;
          if (e["actor"] == laptop_id && e["action"] == "run.submit") submitted = e;
          if (e["actor"] == laptop_id && e["action"] == "run.end") ended = e;
        }
        return !ended.is_null();
      },
      std::chrono::seconds(120), std::chrono::milliseconds(100)))
      << "no run.end entry for the laptop's job";
  ASSERT_FALSE(refused.is_null());
  EXPECT_EQ(refused["action"], "run.submit");
  EXPECT_NE(refused["detail"]["refused"].get<std::string>().find("does not include \"run\""), std::string::npos);
  ASSERT_FALSE(submitted.is_null());
  EXPECT_EQ(submitted["detail"]["image"], kImage);
  ASSERT_FALSE(ended.is_null());
  EXPECT_EQ(ended["subject"], submitted["subject"]);
  EXPECT_EQ(ended["detail"]["exit_code"], 3);
  EXPECT_EQ(ended["detail"]["state"], "exited");
  EXPECT_TRUE(ended["detail"].contains("gpu_seconds"));
  // The image by its digest too: a name can be re-tagged later.
  std::string want_id = run({"/usr/bin/env", "docker", "image", "inspect", "-f", "{{.Id}}", kImage}).out;
  EXPECT_EQ(ended["detail"].value("image_id", "") + "\n", want_id) << ended.dump();
  EXPECT_EQ(ended["detail"].value("image_id", "").rfind("sha256:", 0), 0u);
  auto text = studio.yonder({"audit", "--verify"});
  EXPECT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("audit chain intact"), std::string::npos) << text.out;
}

// Writes `bytes` of reproducible, incompressible-looking data.
void write_pattern(const std::string& path, size_t bytes, uint32_t seed) {
  std::ofstream out(path, std::ios::binary);
  std::vector<uint32_t> buf(1 << 16);
  uint32_t x = seed;
  for (size_t done = 0; done < bytes;) {
    for (auto& w : buf) {
      x ^= x << 13;
      x ^= x >> 17;
      x ^= x << 5;
      w = x;
    }
    size_t n = std::min(bytes - done, buf.size() * sizeof(uint32_t));
    out.write(reinterpret_cast<const char*>(buf.data()), static_cast<std::streamsize>(n));
    done += n;
  }
}

std::string sha256_of(const std::string& path) {
  auto r = run({"/usr/bin/env", "sha256sum", path});
  return r.out.substr(0, 64);
}

TEST_F(RemoteJobs, UploadsAreContentAddressedAndTheBytesSurviveTheRoundTrip) {
  TempDir dir;
  Node studio(dir, "studio", true), laptop(dir, "laptop", false);
  laptop.pair_with(studio, {"--max-jobs", "4"});
  std::string work = dir / "work";
  std::filesystem::create_directories(work + "/src");
  write_pattern(work + "/weights.bin", 100u << 20, 7);
  std::ofstream(work + "/src/train.py") << "print('train')\n";
  std::string want = sha256_of(work + "/weights.bin");
  ASSERT_EQ(want.size(), 64u);

  // 100 MB up, its digest computed in the job, a copy of it home again.
  auto r = laptop.yonder({"run", "--on", "studio", "--image", kImage, "--disk", "512M", "--upload", work, "--",
                          "sh", "-c", "sha256sum weights.bin && cp weights.bin copy.bin"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.substr(0, 64), want) << r.out;
  EXPECT_EQ(sha256_of(work + "/copy.bin"), want);

  // Again, unchanged (and copy.bin is the same content as weights.bin):
  // nothing crosses the link, yet the job sees every file.
  auto again = laptop.yonder({"run", "--on", "studio", "--image", kImage, "--disk", "512M", "--upload", work, "-d",
                              "--json", "--", "sh", "-c", "cmp weights.bin copy.bin && cat src/train.py"});
  ASSERT_EQ(again.exit_code, 0) << again.err;
  json up = json::parse(again.out, nullptr, false)["upload"];
  ASSERT_TRUE(up.is_object()) << again.out;
  EXPECT_EQ(up["files"], 3);
  EXPECT_EQ(up["sent_files"], 0) << up.dump();
  EXPECT_EQ(up["sent_bytes"], 0) << up.dump();
  EXPECT_EQ(up["reused_files"], 3);
  std::string id = json::parse(again.out)["job_id"];
  auto logs = laptop.yonder({"logs", "-f", id});
  EXPECT_EQ(logs.out, "print('train')\n") << logs.err;

  // One changed file: only it is sent.
  std::ofstream(work + "/src/train.py") << "print('train v2')\n";
  auto third = laptop.yonder({"run", "--on", "studio", "--image", kImage, "--disk", "512M", "--upload", work, "-d",
                              "--json", "--", "true"});
  ASSERT_EQ(third.exit_code, 0) << third.err;
  up = json::parse(third.out, nullptr, false)["upload"];
  EXPECT_EQ(up["sent_files"], 1) << up.dump();
  EXPECT_EQ(up["sent_bytes"], 18) << up.dump();  // "print('train v2')\n"

  // The provider's audit log has each upload with the bytes that came in.
  json audit = studio.yonder_json({"audit"});
  int uploads = 0;
  for (const auto& e : audit["entries"]) uploads += e["action"] == "run.upload" && e["detail"].contains("sent_files");
  EXPECT_EQ(uploads, 3) << audit.dump();
}

TEST_F(RemoteJobs, AnUploadCutByACrashResumesWhereItStopped) {
  TempDir dir;
  Node studio(dir, "studio", true), laptop(dir, "laptop", false);
  laptop.pair_with(studio, {"--max-jobs", "4"});
  std::string work = dir / "work";
  std::filesystem::create_directories(work);
  constexpr size_t kSize = 512u << 20;
  write_pattern(work + "/big.bin", kSize, 11);
  std::string want = sha256_of(work + "/big.bin");

  // Start the upload in the background, wait until part of it has arrived,
  // then kill the provider (no clean shutdown) and bring it back.
  std::string out_path = dir / "run.out";
  std::vector<std::string> args = {program_path("yonder"), "run", "--on", "studio", "--image", kImage, "--disk", "1G",
                                   "--upload", work, "--", "sha256sum", "big.bin"};
  BackgroundProcess bg(args, laptop.env());
  uint64_t sent = 0;
  // Asked often (every 5 ms) so the provider is killed well before the upload ends.
  wait_until(
      [&] {
        auto t = laptop.yonder({"transfers", "--json"});
        auto j = json::parse(t.out, nullptr, false);
        if (j.is_object() && j.contains("transfers") && !j["transfers"].empty()) {
          sent = j["transfers"][0].value("sent_bytes", uint64_t{0});
        }
        return sent >= kSize / 4;
      },
      std::chrono::seconds(120), std::chrono::milliseconds(5));
  ASSERT_GE(sent, kSize / 4) << "the upload never got going";
  ASSERT_LT(sent, kSize) << "the upload finished before the provider could be stopped";
  studio.crash_and_restart();

  // The same `yonder run` resumes on its own once the provider is back.
  auto r = bg.wait();
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.substr(0, 64), want) << r.out;
  json audit = studio.yonder_json({"audit"});
  uint64_t second = 0;
  for (const auto& e : audit["entries"]) {
    if (e["action"] == "run.upload" && e["detail"].contains("sent_files")) second = e["detail"].value("bytes_in", uint64_t{0});
  }
  EXPECT_GT(second, 0u) << audit.dump();
  EXPECT_LT(second, kSize - kSize / 5) << "the resumed upload sent the whole file again";
}

TEST_F(RemoteJobs, LogsSinceLeavesOutEarlierOutput) {
  TempDir dir;
  Node studio(dir, "studio", true), laptop(dir, "laptop", false);
  laptop.pair_with(studio, {"--scope", "run,files"});
  // The job prints "early", then waits for a file the test copies in, then "late".
  auto d = laptop.yonder({"run", "--on", "studio", "--image", kImage, "--no-upload", "-d", "--", "sh", "-c",
                          "echo early; while [ ! -f go ]; do sleep 0.05; done; echo late"});
  ASSERT_EQ(d.exit_code, 0) << d.err;
  std::string id = d.out.substr(0, d.out.find('\n'));
  std::string early;
  EXPECT_TRUE(wait_until(
      [&] {
        early = laptop.yonder({"logs", id}).out;
        return early == "early\n";
      },
      std::chrono::seconds(120), std::chrono::milliseconds(50)))
      << early;
  ASSERT_EQ(laptop.yonder({"logs", id}).out, "early\n");
  // --since has whole seconds: start from the next one, and let it begin
  // before the job goes on.
  auto next_second = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count() + 1;
  std::this_thread::sleep_until(std::chrono::system_clock::time_point(std::chrono::seconds(next_second)));
  std::string go = dir / "go";
  std::ofstream(go) << "";
  ASSERT_EQ(laptop.yonder({"cp", go, id + ":."}).exit_code, 0);
  EXPECT_EQ(laptop.yonder({"logs", "-f", id}).out, "early\nlate\n");
  EXPECT_EQ(laptop.yonder({"logs", "--since", std::to_string(next_second), id}).out, "late\n");
  EXPECT_EQ(laptop.yonder({"logs", "--since", "1h", id}).out, "early\nlate\n");
  auto bad = laptop.yonder({"logs", "--since", "yesterday", id});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--since takes"), std::string::npos) << bad.err;
}

// A follower's log is pushed to its daemon over one stream as it grows
// (run.logs.follow), not fetched one reply per round trip: a job that
// prints 20,000 lines at once comes home whole and in order, and a
// follower that starts again later resumes by offset. (20,000 lines are
// about seven pushed replies.)
TEST_F(RemoteJobs, AFastLogIsPushedOverOneStreamAndComesHomeWholeAndInOrder) {
  TempDir dir;
  Node studio(dir, "studio", true), laptop(dir, "laptop", false);
  laptop.pair_with(studio, {});
  std::string expected;
  for (int i = 1; i <= 20000; ++i) expected += std::to_string(i) + "\n";
  auto r = laptop.yonder({"run", "--on", "studio", "--image", kImage, "--no-upload", "--", "seq", "1", "20000"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.size(), expected.size());
  EXPECT_TRUE(r.out == expected) << "the lines came home changed, missing or out of order";
  std::string log = laptop.daemon().log();
  EXPECT_NE(log.find("over a stream"), std::string::npos) << log;
  // Detached, then followed while it prints, then again from the start.
  auto d = laptop.yonder({"run", "--on", "studio", "--image", kImage, "--no-upload", "-d", "--", "sh", "-c",
                          "sleep 1; seq 1 20000"});
  ASSERT_EQ(d.exit_code, 0) << d.err;
  std::string id = d.out.substr(0, d.out.find('\n'));
  EXPECT_TRUE(laptop.yonder({"logs", "-f", id}).out == expected) << "following while it prints";
  EXPECT_TRUE(laptop.yonder({"logs", "-f", id}).out == expected) << "following again from the start";
}

TEST_F(RemoteJobs, RunBringsTheJobsOutputsHome) {
  TempDir dir;
  Node studio(dir, "studio", true), laptop(dir, "laptop", false);
  laptop.pair_with(studio, {"--max-jobs", "4"});
  std::string work = dir / "work";
  std::filesystem::create_directories(work + "/data");
  std::ofstream(work + "/data/input.txt") << "uploaded payload\n";
  std::ofstream(work + "/data/same.txt") << "untouched\n";

  // Default: what changed comes home (new files, changed files), into the
  // folder that was uploaded.
  auto r = laptop.yonder({"run", "--on", "studio", "--image", kImage, "--upload", work, "--", "sh", "-c",
                          "mkdir -p results && echo computed > results/out.txt && echo changed > data/input.txt"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(read_file(work + "/results/out.txt"), "computed\n");
  EXPECT_EQ(read_file(work + "/data/input.txt"), "changed\n");
  EXPECT_EQ(read_file(work + "/data/same.txt"), "untouched\n");
  EXPECT_NE(r.err.find("brought home 2 file(s)"), std::string::npos) << r.err;  // same.txt was not sent back
  for (const auto& e : std::filesystem::directory_iterator(work)) {
    EXPECT_EQ(e.path().filename().string().rfind(".yonder-fetch-", 0), std::string::npos) << e.path();
  }

  // --out: only what is asked for.
  std::string work2 = dir / "work2";
  std::filesystem::create_directories(work2);
  auto o = laptop.yonder({"run", "--on", "studio", "--image", kImage, "--upload", work2, "--out", "results", "--",
                          "sh", "-c", "mkdir results && echo a > results/a && echo b > other"});
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_EQ(read_file(work2 + "/results/a"), "a\n");
  EXPECT_FALSE(std::filesystem::exists(work2 + "/other"));

  // cp out of the ended job; never outside the target folder.
  auto ps = laptop.yonder_json({"ps", "--all"});
  std::string id;
  for (const auto& j : ps["jobs"]) {
    if (j["command"].dump().find("echo b > other") != std::string::npos) id = j["job_id"];
  }
  ASSERT_FALSE(id.empty()) << ps.dump();
  std::string dest = dir / "dest";
  std::filesystem::create_directories(dest);
  auto cp = laptop.yonder({"cp", id + ":other", dest});
  ASSERT_EQ(cp.exit_code, 0) << cp.err;
  EXPECT_EQ(read_file(dest + "/other"), "b\n");
  auto escape = laptop.yonder({"cp", id + ":../../etc/passwd", dest});
  EXPECT_NE(escape.exit_code, 0);
  EXPECT_NE(escape.err.find("not a path inside the job's workspace"), std::string::npos) << escape.err;
  auto absolute = laptop.yonder({"cp", id + ":/etc/passwd", dest});
  EXPECT_NE(absolute.exit_code, 0);
  EXPECT_FALSE(std::filesystem::exists(dest + "/etc"));
  auto missing = laptop.yonder({"cp", id + ":nope", dest});
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_NE(missing.err.find("has no \"nope\""), std::string::npos) << missing.err;

  // The fetches are audited, with the bytes sent.
  json audit;
  bool fetched = wait_until(
      [&] {
        audit = studio.yonder_json({"audit"});
        for (const auto& e : audit["entries"]) {
          if (e["action"] == "run.fetch" && e["subject"] == id && e["detail"].value("bytes_out", 0) == 2) return true;
        }
        return false;
      },
      std::chrono::seconds(120), std::chrono::milliseconds(100));
  EXPECT_TRUE(fetched) << audit.dump();
}

}  // namespace
}  // namespace yonder::testing
