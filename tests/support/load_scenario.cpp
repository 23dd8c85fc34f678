#include "support/load_scenario.h"

#include <signal.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <memory>
#include <mutex>
#include <thread>

#include <nlohmann/json.hpp>

#include "support/subprocess.h"
#include "support/temp_dir.h"

namespace yonder::testing {

using nlohmann::json;

std::string chatty_line(int i) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "chatty %06d the quick brown fox jumps over the lazy dog\n", i);
  return buf;
}

namespace {

// Runs `sample` every `period` on its own thread until stopped.
class Sampler {
 public:
  Sampler(std::chrono::milliseconds period, std::function<void()> sample)
      : thread_([this, period, sample = std::move(sample)] {
          std::unique_lock lock(mutex_);
          while (!stop_) {
            lock.unlock();
            sample();
            lock.lock();
            cv_.wait_for(lock, period, [this] { return stop_; });
          }
        }) {}
  ~Sampler() { stop(); }
  void stop() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;  // last: starts after the fields it uses
};

std::string tail(const std::string& text, size_t n) { return text.size() > n ? text.substr(text.size() - n) : text; }

}  // namespace

LoadReport run_load(const LoadOptions& o) {
  LoadReport report;
  TempDir dir;
  const std::string home = dir / "provider";
  Env env = {{"YONDER_HOME", home},
             {"YONDER_CONFIG", ""},
             {"YONDER_LINK_LISTEN", "127.0.0.1:0"},
             {"YONDER_LINK_LAN_DISCOVERY", "false"},
             {"YONDER_LINK_PORT_MAPPING", "false"},
             {"YONDER_GPU_INVENTORY", "fake:2"},
             {"YONDER_PASSPHRASE", ""},
             {"YONDER_PASSPHRASE_FILE", ""},
             {"YONDER_MESH_BENCHMARK_INTERVAL_S", "0"},
             {"YONDER_IMAGE_ALLOWLIST", "yonder-test/*"},
             {"YONDER_PULL_POLICY", "never"}};
  auto yonder = [&](std::vector<std::string> args) {
    args.insert(args.begin(), program_path("yonder"));
    return run(args, env);
  };
  auto init = yonder({"init", "--name", "provider", "--json"});
  if (init.exit_code != 0) return report.setup_error = "yonder init: " + init.err, report;
  std::string node_id = json::parse(init.out, nullptr, false).value("node_id", "");
  int per_session = (o.jobs + o.sessions - 1) / o.sessions;
  std::ofstream(home + "/config.toml", std::ios::app)
      << "[jobs]\ndefault_memory_mib = 64\ndefault_disk_mib = 16\nshm_mib = 8\npids_limit = 64\nstop_grace_s = 1\n"
      << "max_concurrent = " << o.max_concurrent << "\nmax_per_peer = " << o.max_concurrent
      << "\nmax_queued = " << o.jobs + 100 << "\n";

  auto daemon = std::make_unique<Daemon>(env);
  // Whatever happens below: the daemon goes (by PID), then its containers
  // (by owner label); TempDir unmounts workspaces and removes the folder.
  struct Cleanup {
    std::unique_ptr<Daemon>& daemon;
    std::string owner;
    ~Cleanup() {
      daemon.reset();
      if (owner.empty()) return;
      auto ids = run({"/usr/bin/env", "docker", "ps", "-aq", "--filter", "label=yonder.owner=" + owner});
      std::vector<std::string> rm = {"/usr/bin/env", "docker", "rm", "-f"};
      for (size_t at = 0; at < ids.out.size();) {
        size_t nl = ids.out.find('\n', at);
        if (nl == std::string::npos) nl = ids.out.size();
        if (nl > at) rm.push_back(ids.out.substr(at, nl - at));
        at = nl + 1;
      }
      if (rm.size() > 4) run(rm);
    }
  } cleanup{daemon, node_id};
  if (!daemon->ready()) return report.setup_error = "yonderd did not start: " + daemon->log(), report;
  const int pid = daemon->pid();

  auto share = yonder({"share", "--scope", "run", "--uses", std::to_string(o.sessions + 2), "--max-jobs",
                       std::to_string(per_session + 1), "--max-time", "1h", "--no-qr", "--json"});
  if (share.exit_code != 0) return report.setup_error = "yonder share: " + share.err, report;
  std::string link = json::parse(share.out, nullptr, false).value("link", "");

  Swarm swarm(o.sessions), observer(1), slow(1);
  for (Swarm* s : {&swarm, &observer, &slow}) {
    if (auto paired = s->pair_all(link); !paired) return report.setup_error = paired.error().to_string(), report;
  }

  // Another peer, idle.
  auto time_call = [&](const std::string& method, std::vector<std::chrono::nanoseconds>& into) {
    auto t0 = LoadClock::now();
    auto r = observer.call(0, method, json::object());
    if (!r) {
      if (report.observer_failures++ == 0) report.observer_error = method + ": " + r.error().to_string();
      return;
    }
    into.push_back(LoadClock::now() - t0);
  };
  for (int i = 0; i < o.idle_samples; ++i) {
    time_call("node.info", report.info_idle);
    time_call("run.list", report.list_idle);
  }

  // The chatty job goes first, so it runs while the queue is full.
  std::string awk = "BEGIN{for(i=0;i<" + std::to_string(o.chatty_lines) +
                    ";i++) printf \"chatty %06d the quick brown fox jumps over the lazy dog\\n\", i}";
  auto chatty = slow.call(0, "run.submit", {{"job", {{"image", o.image}, {"command", {"awk", awk}}}}});
  if (!chatty) return report.setup_error = "submitting the chatty job: " + chatty.error().to_string(), report;
  report.chatty_job_id = chatty->value("job_id", "");

  report.memory_before = read_process_memory(pid);
  report.fds_before = count_open_fds(pid);
  report.rss_peak_kib = report.memory_before.rss_kib;
  report.fds_peak = report.fds_before;
  std::mutex peak_mutex;
  Sampler memory(std::chrono::milliseconds(100), [&] {
    auto m = read_process_memory(pid);
    int fds = count_open_fds(pid);
    std::lock_guard lock(peak_mutex);
    report.rss_peak_kib = std::max(report.rss_peak_kib, m.rss_kib);
    report.fds_peak = std::max(report.fds_peak, fds);
  });

  std::atomic<bool> loaded{true};
  std::atomic<uint64_t> slow_read{0};
  auto deadline = LoadClock::now() + o.deadline;
  std::thread reader([&] {
    auto t0 = LoadClock::now();
    auto text = slow.read_log(
        report.chatty_job_id, o.slow_pause, [&] { return loaded.load(); }, deadline,
        [&](uint64_t bytes) {
          if (loaded) slow_read = bytes;
        });
    report.slow_seconds = std::chrono::duration<double>(LoadClock::now() - t0).count();
    if (text) {
      report.slow_text = std::move(*text);
    } else {
      report.slow_error = text.error().to_string();
    }
  });
  {
    Sampler other_peer(std::chrono::milliseconds(100), [&] {
      time_call("node.info", report.info_load);
      time_call("run.list", report.list_load);
    });
    auto t0 = LoadClock::now();
    report.jobs = swarm.run_jobs(o.jobs, o.image, deadline);
    report.load_seconds = std::chrono::duration<double>(LoadClock::now() - t0).count();
  }
  loaded = false;
  reader.join();
  memory.stop();
  report.slow_bytes_during_load = slow_read;

  // The provider's own view: every session's jobs, nothing more.
  for (int s = 0; s < swarm.size(); ++s) {
    auto listed = swarm.call(s, "run.list", json::object());
    if (!listed) {
      if (report.listed_errors++ == 0) report.list_error = listed.error().to_string();
      continue;
    }
    report.listed_jobs += static_cast<int>((*listed)["jobs"].size());
  }
  report.memory_after = read_process_memory(pid);
  report.fds_after = count_open_fds(pid);
  report.provider_alive = ::kill(pid, 0) == 0 && yonder({"status", "--json"}).exit_code == 0;
  report.provider_log_tail = tail(daemon->log(), 4000);
  return report;
}

}  // namespace yonder::testing
