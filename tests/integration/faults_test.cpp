// Faults (issue 11), with real daemons, the real dockerd and SIGKILL:
//  - the provider's yonderd killed mid-job and restarted: the provider keeps
//    each job's final state and whole log, and the consumer's `yonder run`
//    and `yonder logs -f` ride it out, ending with every line once, in order,
//    and the job's true exit code;
//  - the consumer (its `yonder run` and its yonderd) killed mid-upload: the
//    next run sends only what had not arrived, and the job sees the right bytes;
//  - a daemon killed again and again while it writes (share links, jobs,
//    audit entries): the database passes SQLite's checks, and everything it
//    acknowledged is there, in a state it can be in;
//  - the provider's state folder full: clear errors naming the folder,
//    nothing acknowledged that was not written, and all well once there is space.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "base/bytes.h"
#include "os/unix_http.h"
#include "store/database.h"
#include "support/api_token.h"
#include "support/docker_env.h"
#include "support/job_node.h"
#include "support/subprocess.h"
#include "support/temp_dir.h"
#include "support/wait_until.h"

namespace yonder::testing {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

class Faults : public ::testing::Test {
 protected:
  void SetUp() override { YONDER_REQUIRE_DOCKER_OR_SKIP(); }
};

constexpr const char* kImage = "yonder-test/busybox:1";

// A child whose stdout and stderr the test reads as they come (stdin is
// /dev/null); killed with SIGKILL if still running at the end.
class Child {
 public:
  Child(std::vector<std::string> args, const Env& env) {
    std::vector<std::string> envs = merged_env(env);
    std::vector<char*> argv, envp;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    for (auto& e : envs) envp.push_back(e.data());
    envp.push_back(nullptr);
    int out[2], err[2];
    if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) return;
    pid_ = ::fork();
    if (pid_ == 0) {
      int null = ::open("/dev/null", O_RDONLY);
      ::dup2(null, 0);
      ::dup2(out[1], 1);
      ::dup2(err[1], 2);
      ::execve(argv[0], argv.data(), envp.data());
      ::_exit(127);
    }
    ::close(out[1]);
    ::close(err[1]);
    fds_[0] = out[0];
    fds_[1] = err[0];
  }
  ~Child() {
    kill();
    for (int fd : fds_) {
      if (fd >= 0) ::close(fd);
    }
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  int pid() const { return pid_; }
  // Reads until stdout holds `text`; false if it did not within `timeout`.
  bool read_until(const std::string& text, std::chrono::milliseconds timeout) {
    auto deadline = Clock::now() + timeout;
    while (out_.find(text) == std::string::npos) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0 || !read_some(static_cast<int>(left.count()))) return out_.find(text) != std::string::npos;
    }
    return true;
  }
  // Reads both streams to their end and collects the exit status (-1 when
  // killed by a signal, or killed here after `timeout`).
  RunResult wait(std::chrono::milliseconds timeout) {
    auto deadline = Clock::now() + timeout;
    while (true) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0 || !read_some(static_cast<int>(left.count()))) break;
    }
    if (Clock::now() >= deadline) kill();
    int status = 0;
    if (pid_ > 0 && ::waitpid(pid_, &status, 0) == pid_) exit_ = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    pid_ = -1;
    return {exit_, out_, err_};
  }
  void kill() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
  }
  const std::string& out() const { return out_; }
  const std::string& err() const { return err_; }

 private:
  // One poll of both pipes; false once both are at their end (or on timeout).
  bool read_some(int timeout_ms) {
    pollfd p[2] = {{fds_[0], POLLIN, 0}, {fds_[1], POLLIN, 0}};
    if (fds_[0] < 0 && fds_[1] < 0) return false;
    int n = ::poll(p, 2, timeout_ms);
    if (n < 0 && errno == EINTR) return true;
    if (n <= 0) return false;
    for (int i = 0; i < 2; ++i) {
      if (p[i].revents == 0 || fds_[i] < 0) continue;
      char buf[8192];
      ssize_t got = ::read(fds_[i], buf, sizeof buf);
      if (got > 0) {
        (i == 0 ? out_ : err_).append(buf, static_cast<size_t>(got));
      } else if (got == 0 || errno != EINTR) {
        ::close(fds_[i]);
        fds_[i] = -1;
      }
    }
    return fds_[0] >= 0 || fds_[1] >= 0;
  }

  pid_t pid_ = -1;
  int fds_[2] = {-1, -1};
  int exit_ = -1;
  std::string out_, err_;
};

// The node's local API, as the CLI would call it (for what it has no command for).
struct ApiResult {
  int status = 0;
  json body;
};
ApiResult api(const Node& node, const std::string& method, const std::string& target, const json& body = nullptr) {
  os::HttpRequestOptions o;
  o.timeout = 60s;
  o.bearer_token = api_token(node.home());
  auto r = os::unix_http_request(node.home() + "/yonderd.sock", method, target, body.is_null() ? "" : body.dump(), o);
  if (!r) return {0, {{"error", r.error().to_string()}}};
  return {r->status, json::parse(r->body, nullptr, false)};
}

// A provider job's stdout as the provider kept it (the job has ended).
std::string provider_stdout(const Node& provider, const std::string& id) {
  std::string out;
  uint64_t offset = 0;
  for (int i = 0; i < 10000; ++i) {
    auto r = api(provider, "GET", "/v1/provider/jobs/logs?id=" + id + "&offset=" + std::to_string(offset) + "&wait_ms=0");
    EXPECT_EQ(r.status, 200) << r.body.dump();
    if (r.status != 200 || r.body["records"].empty()) break;
    for (const auto& rec : r.body["records"]) {
      if (rec["stream"] != "stdout") continue;
      auto bytes = base64_decode(rec["data"].get<std::string>());
      if (bytes) out.append(bytes->begin(), bytes->end());
    }
    offset = r.body["next_offset"];
  }
  return out;
}

// "line FROM\n" ... "line TO-1\n".
std::string numbered(int from, int to) {
  std::string s;
  for (int i = from; i < to; ++i) s += "line " + std::to_string(i) + "\n";
  return s;
}
// Shell that prints numbered(from, to), a line every 20 ms.
std::string print_lines(int from, int to) {
  return "i=" + std::to_string(from) + "; while [ $i -lt " + std::to_string(to) +
         " ]; do echo line $i; i=$((i+1)); sleep 0.02; done; ";
}
// Shell that waits for a file the test creates.
std::string wait_for_file(const std::string& path) { return "while [ ! -e " + path + " ]; do sleep 0.05; done; "; }

std::string workspace_of(const Node& provider, const std::string& job) { return provider.home() + "/jobs/" + job + "/workspace"; }
void touch(const std::string& path) { std::ofstream(path) << "go"; }

// ---- 1. the provider killed mid-job

TEST_F(Faults, ProviderKilledMidJobAndRestarted) {
  TempDir dir;
  Node studio(dir, "studio", true), laptop(dir, "laptop", false);
  laptop.pair_with(studio, {"--max-jobs", "4"});
  // A, under an attached `yonder run`: prints, and at the test's word prints
  // the rest and ends, while the provider is down.
  std::string a_script = print_lines(0, 40) + wait_for_file("/workspace/go") + print_lines(40, 80) + "exit 7";
  // B, followed with `yonder logs -f`: prints part of the rest while the
  // provider is down, and the last part after it is back.
  std::string b_script = print_lines(0, 40) + wait_for_file("/workspace/go") + print_lines(40, 60) +
                         "touch /workspace/half; " + wait_for_file("/workspace/go2") + print_lines(60, 80) + "exit 3";
  auto d = laptop.yonder({"run", "--on", "studio", "--image", kImage, "--no-upload", "-d", "--", "sh", "-c", b_script});
  ASSERT_EQ(d.exit_code, 0) << d.err;
  std::string b = d.out.substr(0, d.out.find('\n'));
  Child attached({program_path("yonder"), "run", "--on", "studio", "--image", kImage, "--no-upload", "--", "sh", "-c", a_script},
            laptop.env());
  Child follow({program_path("yonder"), "logs", "-f", b}, laptop.env());
  ASSERT_TRUE(attached.read_until("line 39\n", 60s)) << attached.out() << attached.err();
  ASSERT_TRUE(follow.read_until("line 39\n", 60s)) << follow.out() << follow.err();
  std::string a;
  json ps = laptop.yonder_json({"ps", "--all"});
  for (const auto& j : ps["jobs"]) {
    if (j["job_id"] != b) a = j["job_id"];
  }
  ASSERT_FALSE(a.empty()) << b << " " << ps.dump();
  ASSERT_TRUE(std::filesystem::is_directory(workspace_of(studio, a)));

  studio.crash_and_restart([&] {
    touch(workspace_of(studio, a) + "/go");
    touch(workspace_of(studio, b) + "/go");
    // A ends while nobody watches (Docker's wait is the event), B gets to its second wait.
    auto waited = run({"/usr/bin/env", "docker", "wait", "yonder-" + a});
    EXPECT_EQ(waited.out, "7\n") << waited.err;
    EXPECT_TRUE(wait_until([&] { return std::filesystem::exists(workspace_of(studio, b) + "/half"); }, 120s));
  });
  touch(workspace_of(studio, b) + "/go2");

  // The consumer: every line once, in order, and the true exit code.
  auto ra = attached.wait(180s);
  EXPECT_EQ(ra.exit_code, 7) << ra.err;
  EXPECT_EQ(ra.out, numbered(0, 80)) << ra.err;
  auto rb = follow.wait(180s);
  EXPECT_EQ(rb.exit_code, 3) << rb.err;  // `logs -f` exits as the job did
  EXPECT_EQ(rb.out, numbered(0, 80)) << rb.err;
  // (Held in a variable: a range-for over a member of a temporary reads
  // freed memory, which ASan caught here.)
  json after = laptop.yonder_json({"ps", "--all"});
  for (const auto& j : after["jobs"]) {
    EXPECT_EQ(j["state"], "exited") << j.dump();
    EXPECT_EQ(j["exit_code"], j["job_id"] == a ? 7 : 3) << j.dump();
  }
  // The provider's own record: the final state and the whole log.
  for (const auto& [id, code] : {std::pair{a, 7}, std::pair{b, 3}}) {
    auto view = api(studio, "GET", "/v1/provider/jobs?id=" + id);
    EXPECT_EQ(view.body["state"], "exited") << view.body.dump();
    EXPECT_EQ(view.body["exit_code"], code) << view.body.dump();
    EXPECT_EQ(provider_stdout(studio, id), numbered(0, 80)) << id;
  }
  EXPECT_EQ(laptop.yonder({"logs", a}).out, numbered(0, 80));
}

// ---- 2. the consumer killed mid-upload

// `bytes` of a fixed pseudo-random pattern (incompressible, reproducible).
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

std::string sha256_of(const std::string& path) { return run({"/usr/bin/env", "sha256sum", path}).out.substr(0, 64); }

// Bytes the node's daemon has sent of its (one) upload in progress; 0 if none.
uint64_t upload_sent(const Node& node) {
  auto t = json::parse(node.yonder({"transfers", "--json"}).out, nullptr, false);
  if (!t.is_object() || !t.contains("transfers") || t["transfers"].empty()) return 0;
  return t["transfers"][0].value("sent_bytes", uint64_t{0});
}

TEST_F(Faults, ConsumerKilledMidUploadResumes) {
  TempDir dir;
  Node studio(dir, "studio", true), laptop(dir, "laptop", false);
  laptop.pair_with(studio, {"--max-jobs", "4"});
  std::string work = dir / "work";
  std::filesystem::create_directories(work);
  constexpr uint64_t kSize = 384u << 20;
  write_pattern(work + "/big.bin", kSize, 23);
  std::string want = sha256_of(work + "/big.bin");
  std::vector<std::string> args = {program_path("yonder"), "run", "--on", "studio", "--image", kImage, "--disk", "1G",
                                   "--upload", work, "--", "sh", "-c", "sha256sum big.bin; exit 5"};

  // The first run: killed (its CLI and then its daemon) once part of the folder is across.
  uint64_t sent = 0;
  {
    BackgroundProcess first(args, laptop.env());
    ASSERT_TRUE(wait_until([&] { return (sent = upload_sent(laptop)) >= kSize / 4; }, 120s))
        << "the upload never got going";
    ::kill(first.pid(), SIGKILL);
    laptop.crash_and_restart();
    first.wait();
  }
  ASSERT_LT(sent, kSize) << "the upload finished before the consumer could be killed";
  EXPECT_EQ(api(studio, "GET", "/v1/provider/jobs").body.size(), 0u) << "a job from the killed run";

  // Again: only the rest crosses, the job sees the right bytes, its exit code comes home.
  auto r = laptop.yonder(std::vector<std::string>(args.begin() + 1, args.end()));
  EXPECT_EQ(r.exit_code, 5) << r.err;
  EXPECT_EQ(r.out.substr(0, 64), want) << r.out << r.err;
  uint64_t resumed = 0;
  int uploads = 0;
  json audit = studio.yonder_json({"audit"});
  for (const auto& e : audit["entries"]) {
    if (e["action"] != "run.upload" || !e["detail"].contains("sent_files")) continue;
    resumed = e["detail"].value("bytes_in", uint64_t{0});
    ++uploads;
  }
  EXPECT_EQ(uploads, 1) << "only the second upload completed: " << audit.dump() << "\n" << studio.daemon().log();
  EXPECT_GT(resumed, 0u);
  EXPECT_LT(resumed, kSize - sent / 2) << "the second run sent the whole file again (" << sent << " bytes had been sent)";
}

// ---- 3. SQLite: a daemon killed during writes, again and again

// Rows of a query's first column, as text.
std::vector<std::string> column(store::Database& db, const std::string& sql, const std::string& bind = "") {
  std::vector<std::string> out;
  auto st = db.prepare(sql);
  EXPECT_TRUE(st.ok()) << sql << ": " << st.error().to_string();
  if (!st.ok()) return out;
  if (!bind.empty()) {
    EXPECT_TRUE(st->bind(1, std::string_view(bind)).ok());
  }
  while (true) {
    auto row = st->step();
    EXPECT_TRUE(row.ok()) << sql << ": " << row.error().to_string();
    if (!row.ok() || !*row) break;
    out.push_back(st->column_text(0));
  }
  return out;
}

struct Acknowledged {
  std::mutex mutex;
  std::set<std::string> links, local_jobs, remote_jobs;
};

// What must hold of the state database after any crash.
void check_database(const std::string& path, Acknowledged& acked) {
  auto db = store::Database::open(path);
  ASSERT_TRUE(db.ok()) << db.error().to_string();
  EXPECT_EQ(column(*db, "PRAGMA integrity_check"), std::vector<std::string>{"ok"});
  EXPECT_EQ(column(*db, "PRAGMA foreign_key_check"), std::vector<std::string>{});
  std::lock_guard lock(acked.mutex);
  const std::set<std::string> states = {"pending", "starting", "running", "exited", "stopped", "failed"};
  for (const auto* ids : {&acked.local_jobs, &acked.remote_jobs}) {
    for (const auto& id : *ids) {
      auto state = column(*db, "SELECT state FROM jobs WHERE job_id = ?1 AND side = 'provider'", id);
      ASSERT_EQ(state.size(), 1u) << "acknowledged job " << id << " is missing";
      EXPECT_TRUE(states.count(state[0])) << id << ": " << state[0];
    }
  }
  for (const auto& id : acked.remote_jobs) {
    EXPECT_EQ(column(*db, "SELECT seq FROM audit_log WHERE action = 'run.submit' AND subject = ?1", id).size(), 1u)
        << "acknowledged job " << id << " has no audit entry";
  }
  for (const auto& id : acked.links) {
    EXPECT_EQ(column(*db, "SELECT link_id FROM share_links WHERE link_id = ?1", id).size(), 1u)
        << "acknowledged share link " << id << " is missing";
  }
  // Settled jobs hold no GPUs and have their exit status when they exited.
  EXPECT_EQ(column(*db, "SELECT l.job_id FROM job_gpu_leases l JOIN jobs j USING (job_id) "
                        "WHERE j.state IN ('exited', 'stopped', 'failed')"),
            std::vector<std::string>{});
  EXPECT_EQ(column(*db, "SELECT job_id FROM jobs WHERE state = 'exited' AND exit_code IS NULL"), std::vector<std::string>{});
}

TEST_F(Faults, SqliteSurvivesKillsDuringWrites) {
  TempDir dir;
  Node studio(dir, "studio", true), laptop(dir, "laptop", false);
  laptop.pair_with(studio, {"--max-jobs", "100"});
  Acknowledged acked;
  constexpr int kRounds = 12;
  for (int round = 0; round < kRounds; ++round) {
    std::atomic<bool> stop{false};
    std::atomic<int> acks{0};
    auto ack = [&](std::set<std::string>& to, const std::string& id) {
      ASSERT_FALSE(id.empty());
      std::lock_guard lock(acked.mutex);
      to.insert(id);
      ++acks;
    };
    std::vector<std::thread> writers;
    // Share links (the trust store), local jobs (the job store) and remote
    // jobs (the job store and the audit chain), all at once.
    writers.emplace_back([&] {
      while (!stop) {
        auto r = api(studio, "POST", "/v1/share", {{"label", "round " + std::to_string(round)}});
        if (r.status == 200) ack(acked.links, r.body.value("id", ""));
      }
    });
    writers.emplace_back([&] {
      while (!stop) {
        auto r = api(studio, "POST", "/v1/provider/jobs", {{"image", kImage}, {"command", {"sh", "-c", "exit 3"}}});
        if (r.status == 200) ack(acked.local_jobs, r.body.value("job_id", ""));
      }
    });
    writers.emplace_back([&] {
      while (!stop) {
        auto r = laptop.yonder({"run", "--on", "studio", "--image", kImage, "--no-upload", "-d", "--json", "--", "true"});
        if (r.exit_code == 0) ack(acked.remote_jobs, json::parse(r.out, nullptr, false).value("job_id", ""));
      }
    });
    // Killed at a different point each round: after 2 to 10 acknowledged writes.
    int target = 2 + (round * 5) % 9;
    EXPECT_TRUE(wait_until([&] { return acks >= target; }, 120s)) << "round " << round;
    studio.crash_and_restart([&] {
      stop = true;
      for (auto& w : writers) w.join();
      check_database(studio.home() + "/state.db", acked);
    });
    auto verify = studio.yonder({"audit", "--verify"});
    EXPECT_EQ(verify.exit_code, 0) << "round " << round << ": " << verify.out << verify.err;
    if (HasFatalFailure()) return;
  }
  std::lock_guard lock(acked.mutex);
  std::printf("acknowledged across %d crashes: %zu share links, %zu local jobs, %zu remote jobs\n", kRounds,
              acked.links.size(), acked.local_jobs.size(), acked.remote_jobs.size());
  EXPECT_FALSE(acked.remote_jobs.empty());
  EXPECT_FALSE(acked.local_jobs.empty());
  EXPECT_FALSE(acked.links.empty());
  // After the last restart every job settles: none stays queued, starting or running.
  for (const auto* ids : {&acked.local_jobs, &acked.remote_jobs}) {
    for (const auto& id : *ids) {
      json view;
      EXPECT_TRUE(wait_until(
          [&] {
            view = api(studio, "GET", "/v1/provider/jobs?id=" + id).body;
            std::string s = view.value("state", "");
            return s == "exited" || s == "stopped" || s == "failed";
          },
          120s))
          << view.dump();
      if (view.value("state", "") == "exited") {
        EXPECT_EQ(view["exit_code"], ids == &acked.local_jobs ? 3 : 0) << view.dump();
      }
    }
  }
}

// ---- 4. the provider's state folder full

// A small tmpfs mounted on `path` for the test's life (tests run as root).
class SmallDisk {
 public:
  SmallDisk(const std::string& path, const std::string& size) : path_(path) {
    std::filesystem::create_directories(path);
    mounted_ = ::mount("tmpfs", path.c_str(), "tmpfs", 0, ("size=" + size + ",mode=0700").c_str()) == 0;
    if (!mounted_) error_ = std::strerror(errno);
  }
  ~SmallDisk() {
    if (mounted_) ::umount2(path_.c_str(), MNT_DETACH);
  }
  bool mounted() const { return mounted_; }
  const std::string& error() const { return error_; }
  // Fills what is left with `file`; false if something other than ENOSPC stopped it.
  bool fill(const std::string& file) {
    int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return false;
    std::string chunk(1 << 20, 'x');
    bool full = true;
    for (size_t size = chunk.size(); size > 0 && full;) {
      ssize_t n = ::write(fd, chunk.data(), size);
      if (n < 0 && errno == ENOSPC) {
        size /= 2;  // smaller writes fill what is left
      } else if (n < 0 && errno != EINTR) {
        full = false;
      }
    }
    ::close(fd);
    return full;
  }

 private:
  std::string path_;
  bool mounted_ = false;
  std::string error_;
};

TEST_F(Faults, DiskFullOnTheStateFolder) {
  TempDir dir;
  SmallDisk disk(dir / "studio", "64m");
  if (!disk.mounted()) GTEST_SKIP() << "cannot mount a tmpfs (needs root): " << disk.error();
  Node studio(dir, "studio", true), laptop(dir, "laptop", false);
  laptop.pair_with(studio, {"--max-jobs", "8"});
  const std::string& home = studio.home();

  // A job that prints, and at the test's word prints more and ends, while the disk is full.
  // (More than a page after the word: a write that fits in a page tmpfs has already given the file succeeds.)
  std::string script = print_lines(0, 20) + wait_for_file("/dev/shm/go") +
                       "i=20; while [ $i -lt 400 ]; do echo line $i; i=$((i+1)); done; exit 4";
  auto d = laptop.yonder({"run", "--on", "studio", "--image", kImage, "--no-upload", "-d", "--", "sh", "-c", script});
  ASSERT_EQ(d.exit_code, 0) << d.err;
  std::string job = d.out.substr(0, d.out.find('\n'));
  ASSERT_TRUE(wait_until([&] { return provider_stdout(studio, job).find("line 19\n") != std::string::npos; }, 120s));

  ASSERT_TRUE(disk.fill(home + "/filler"));
  // Writes fail, each saying which folder is full and what to do; or, where
  // SQLite still had room in its journal, they succeeded and are kept.
  auto share = studio.yonder({"share", "--json"});
  auto local = api(studio, "POST", "/v1/provider/jobs", {{"image", kImage}, {"command", {"true"}}});
  auto remote = laptop.yonder({"run", "--on", "studio", "--image", kImage, "--no-upload", "-d", "--json", "--", "true"});
  int refused = 0;
  if (share.exit_code != 0) {
    ++refused;
    EXPECT_NE(share.err.find("disk full: free space in " + home), std::string::npos) << share.err;
  }
  // A job is refused before anything is written when its workspace cannot
  // fit beside the state folder's reserve (jobs/provider/disk_budget.h).
  const std::string no_room = "kept back for its own state";
  if (local.status != 200) {
    ++refused;
    std::string body = local.body.dump();
    EXPECT_TRUE(body.find("disk full: free space in " + home) != std::string::npos ||
                body.find(no_room) != std::string::npos)
        << body;
  }
  if (remote.exit_code != 0) {
    ++refused;
    // The peer learns the fact, not the provider's folders.
    EXPECT_TRUE(remote.err.find("run out of disk space") != std::string::npos ||
                remote.err.find(no_room) != std::string::npos)
        << remote.err;
    EXPECT_EQ(remote.err.find(home), std::string::npos) << remote.err;
  }
  EXPECT_GT(refused, 0) << "every write succeeded on a full disk";
  EXPECT_EQ(studio.yonder({"status"}).exit_code, 0) << "the daemon is still up";

  // The job prints the rest and ends while there is no room for its output.
  // Filled again first: the daemon's own writes since (a refused
  // transaction's journal, a WAL checkpoint) may have given pages back, and
  // the held-back output would then be written, full disk or not.
  ASSERT_TRUE(disk.fill(home + "/filler-again"));
  auto go = run({"/usr/bin/env", "docker", "exec", "yonder-" + job, "touch", "/dev/shm/go"});
  ASSERT_EQ(go.exit_code, 0) << go.err;
  auto waited = run({"/usr/bin/env", "docker", "wait", "yonder-" + job});
  EXPECT_EQ(waited.out, "4\n") << waited.err;
  // Only while the disk is still full does "nothing written" hold: under the
  // sanitizers the daemon's own writes were seen giving pages back inside
  // this window (a cause not yet found: see the closing note), and then the
  // output held back is rightly written.
  struct statvfs left {};
  bool still_full = ::statvfs(home.c_str(), &left) == 0 && left.f_bavail * left.f_frsize < (64u << 10);
  if (still_full) {
    EXPECT_EQ(provider_stdout(studio, job).find("line 399\n"), std::string::npos) << "written to a full disk?";
  } else {
    std::printf("note: %llu bytes came free on the full disk before the job's output; not checking that it was held\n",
                static_cast<unsigned long long>(left.f_bavail * left.f_frsize));
  }

  // Room again: the output held back is written, the job settles, nothing is lost.
  std::filesystem::remove(home + "/filler");
  std::filesystem::remove(home + "/filler-again");
  json view;
  ASSERT_TRUE(wait_until(
      [&] {
        view = api(studio, "GET", "/v1/provider/jobs?id=" + job).body;
        return view.value("state", "") == "exited";
      },
      60s))
      << view.dump();
  EXPECT_EQ(view["exit_code"], 4) << view.dump();
  EXPECT_FALSE(view.contains("log_lost")) << view.dump();
  EXPECT_EQ(provider_stdout(studio, job), numbered(0, 400));
  EXPECT_EQ(laptop.yonder({"logs", job}).out, numbered(0, 400));

  // Everything works again, and what was acknowledged while full is there.
  auto share2 = studio.yonder({"share", "--json"});
  EXPECT_EQ(share2.exit_code, 0) << share2.err;
  auto again = laptop.yonder({"run", "--on", "studio", "--image", kImage, "--no-upload", "--", "sh", "-c", "echo ok; exit 6"});
  EXPECT_EQ(again.exit_code, 6) << again.err;
  EXPECT_EQ(again.out, "ok\n");
  auto links = studio.yonder_json({"links"});
  size_t want_links = 2 + (share.exit_code == 0 ? 1 : 0);  // and the one the laptop paired with
  EXPECT_EQ(links["links"].size(), want_links) << links.dump();
  if (local.status == 200) {
    EXPECT_EQ(api(studio, "GET", "/v1/provider/jobs?id=" + local.body.value("job_id", "")).status, 200);
  }
  auto db = store::Database::open(home + "/state.db");
  ASSERT_TRUE(db.ok()) << db.error().to_string();
  EXPECT_EQ(column(*db, "PRAGMA integrity_check"), std::vector<std::string>{"ok"});
  EXPECT_EQ(studio.yonder({"audit", "--verify"}).exit_code, 0);
}

}  // namespace
}  // namespace yonder::testing
