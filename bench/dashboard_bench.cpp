// The dashboard's cost on yonderd with a long job history: a
// consumer node whose job store holds --jobs finished jobs (default 1,000,
// written through ConsumerJobStore, the store the daemon reads), then
// --cycles refreshes of the Jobs tab as web/dashboard/app.js makes them
// (GET /v1/gpus, GET /v1/jobs?all=1, GET /v1/provider/jobs, in that order,
// over one keep-alive TCP connection with the token). Prints the daemon's
// RSS before and after, its CPU time per refresh (/proc/PID/stat), the
// latency of a refresh and of GET /v1/jobs?all=1 and GET /v1/status
// (p50/p99), and the size of the jobs reply.
//
// Needs the yonder and yonderd programs (YONDER_BIN_YONDER/_YONDERD, as the
// integration tests). No network beyond loopback, no docker.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "bench_http.h"
#include "jobs/consumer/consumer_jobs.h"
#include "support/subprocess.h"
#include "support/temp_dir.h"

namespace {

using Clock = std::chrono::steady_clock;
using yonder::testing::Env;

long rss_kib(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
  }
  return -1;
}

// utime + stime of the process, in seconds.
double cpu_s(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::istringstream rest(stat.substr(stat.rfind(')') + 2));
  std::string field;
  unsigned long long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && rest >> field; ++i) {
    if (i == 14) utime = std::stoull(field);
    if (i == 15) stime = std::stoull(field);
  }
  return static_cast<double>(utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

std::string first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

}  // namespace

int main(int argc, char** argv) {
  int jobs = 1000;
  int cycles = 200;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--jobs=", 0) == 0) jobs = std::max(0, std::atoi(a.c_str() + 7));
    if (a.rfind("--cycles=", 0) == 0) cycles = std::max(1, std::atoi(a.c_str() + 9));
  }
  yonder::testing::TempDir dir;
  std::string home = dir / "home";
  Env env = {{"YONDER_HOME", home},           {"YONDER_CONFIG", ""},          {"YONDER_LINK_LISTEN", "127.0.0.1:0"},
             {"YONDER_API_LISTEN", "127.0.0.1:0"}, {"YONDER_GPU_INVENTORY", "fake:2"}, {"YONDER_PASSPHRASE", ""},
             {"YONDER_PASSPHRASE_FILE", ""}};
  auto init = yonder::testing::run({yonder::testing::program_path("yonder"), "init", "--name", "bench"}, env);
  if (init.exit_code != 0) {
    std::fprintf(stderr, "yonder init failed: %s\n", init.err.c_str());
    return 1;
  }
  yonder::testing::Daemon daemon(env);
  if (!daemon.ready()) {
    std::fprintf(stderr, "yonderd did not start: %s\n", daemon.log().c_str());
    return 1;
  }

  // The history, through the store yonderd reads (SQLite; the daemon has it open too).
  {
    auto store = yonder::jobs::consumer::ConsumerJobStore::open(home + "/state.db");
    if (!store) {
      std::fprintf(stderr, "cannot open the job store: %s\n", store.error().to_string().c_str());
      return 1;
    }
    for (int i = 0; i < jobs; ++i) {
      yonder::jobs::consumer::ConsumerJob j;
      char id[32];
      std::snprintf(id, sizeof id, "bench%08d", i);
      j.job_id = id;
      j.provider_id = "ABCDEFG-HJKMNPQ-RSTVWXY-Z012345-6789ABC-DEFGHJK-MNPQRST-VWXYZ01";
      j.state = "exited";
      j.exit_code = 0;
      j.spec = {{"request", {{"image", "debian:12-slim"}, {"command", {"python3", "train.py", "--epoch", i}}}},
                {"provider_name", "gpu-box"}};
      j.last = {{"job_id", j.job_id}, {"state", "exited"}, {"exit_code", 0}};
      j.created_at = 1700000000 + i;
      j.updated_at = j.created_at + 60;
      if (auto st = (*store)->save(j); !st) {
        std::fprintf(stderr, "saving a job failed: %s\n", st.error().to_string().c_str());
        return 1;
      }
    }
  }

  std::string token = first_line(home + "/api-token");
  std::string url = first_line(home + "/api-url");
  int port = std::atoi(url.substr(url.rfind(':') + 1).c_str());
  yonder::bench::KeepAliveClient client(port, token);
  std::string body;
  if (client.get("/v1/jobs?all=1", &body) != 200 || body.find("bench") == std::string::npos) {
    std::fprintf(stderr, "GET /v1/jobs?all=1 did not list the jobs: %s\n", body.substr(0, 300).c_str());
    return 1;
  }
  size_t jobs_bytes = body.size();

  std::vector<double> status_ms;
  for (int i = 0; i < cycles; ++i) {
    auto t = Clock::now();
    if (client.get("/v1/status") != 200) return 1;
    status_ms.push_back(ms_since(t));
  }

  long rss_before = rss_kib(daemon.pid());
  double cpu_before = cpu_s(daemon.pid());
  std::vector<double> refresh_ms, jobs_ms;
  auto start = Clock::now();
  for (int i = 0; i < cycles; ++i) {
    auto t = Clock::now();
    if (client.get("/v1/gpus") != 200) return 1;
    auto tj = Clock::now();
    if (client.get("/v1/jobs?all=1") != 200) return 1;
    jobs_ms.push_back(ms_since(tj));
    if (client.get("/v1/provider/jobs") != 200) return 1;
    refresh_ms.push_back(ms_since(t));
  }
  double wall_s = ms_since(start) / 1000;
  double cpu = cpu_s(daemon.pid()) - cpu_before;
  long rss_after = rss_kib(daemon.pid());

  using yonder::bench::quantile;
  std::printf("yonderd with %d jobs in its history; %d Jobs-tab refreshes (gpus, jobs?all=1, provider/jobs)\n", jobs,
              cycles);
  std::printf("GET /v1/status        p50 %7.2f ms  p99 %7.2f ms\n", quantile(status_ms, 0.5),
              quantile(status_ms, 0.99));
  std::printf("GET /v1/jobs?all=1    p50 %7.2f ms  p99 %7.2f ms  (%zu bytes)\n", quantile(jobs_ms, 0.5),
              quantile(jobs_ms, 0.99), jobs_bytes);
  std::printf("one refresh           p50 %7.2f ms  p99 %7.2f ms\n", quantile(refresh_ms, 0.5),
              quantile(refresh_ms, 0.99));
  std::printf("yonderd CPU           %.2f ms per refresh (%.2f s over %.2f s wall; %.1f%% of a core at one "
              "refresh per 2 s)\n",
              1000 * cpu / cycles, cpu, wall_s, 100 * (cpu / cycles) / 2.0);
  std::printf("yonderd RSS           %ld KiB before, %ld KiB after\n", rss_before, rss_after);
  return 0;
}
