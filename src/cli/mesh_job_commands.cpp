#include "cli/mesh_job_commands.h"

#include <poll.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <set>

#include "base/bytes.h"
#include "cli/daemon_api.h"
#include "cli/exit_codes.h"
#include "cli/job_logs.h"
#include "cli/progress.h"
#include "cli/signal_pipe.h"
#include "cli/fetched_files.h"
#include "cli/shown.h"
#include "crypto/scope.h"

namespace yonder::cli {
namespace {

using nlohmann::json;

std::string mesh_job_short_id(const std::string& id) {
  return id.substr(0, 12);
}

// How long one log step waits for output before the job's state is checked
// again (a requeue is noticed within this).
constexpr std::chrono::milliseconds kStepWait{1000};

const json* attempt_numbered(const json& m, int n) {
  for (const auto& a : m["attempts"]) {
    if (a.value("attempt", 0) == n) return &a;
  }
  return nullptr;
}

// What happened to the attempts before `n`, since `after`, in words.
void announce(const json& m, int after, int n) {
  const json* now = attempt_numbered(m, n);
  if (now == nullptr) return;
  std::string on = shown(*now, "provider_name", "");
  std::string note = now->value("why", "");
  for (int i = std::max(after, 1); i < n; ++i) {
    const json* a = attempt_numbered(m, i);
    if (a == nullptr) continue;
    std::string state = a->value("state", "");
    std::string why = a->value("why", "");
    if (state == "lost") {
      std::fprintf(stderr, "yonder: %s; requeued", why.c_str());
    } else if (state == "not started") {
      std::fprintf(stderr, "yonder: %s could not start it (%s); requeued", shown(*a, "provider_name", "").c_str(),
                   why.c_str());
    } else {
      std::fprintf(stderr, "yonder: attempt %d on %s ended (%s); retrying", i, shown(*a, "provider_name", "").c_str(),
                   why.empty() ? state.c_str() : why.c_str());
    }
    if (i == n - 1) {
      std::fprintf(stderr, " on %s%s\n", on.c_str(), note.rfind("from checkpoint", 0) == 0 ? (" " + note).c_str() : "");
    } else {
      std::fprintf(stderr, "\n");
    }
  }
  if (after == 0 && n == 1) std::fprintf(stderr, "yonder: mesh: attempt 1 on %s\n", on.c_str());
}

}  // namespace

int run_mesh_job(const Context& ctx, const MeshJobArgs& args) {
  json body = {{"job", args.job.to_json()}, {"needs", args.needs}, {"retries", args.retries}, {"replicas", args.replicas}};
  if (!args.validator.empty()) body["validator"] = args.validator;
  if (!args.dir.empty()) body["dir"] = args.dir;
  // The daemon's own fetches (the replicas' outputs it compares) may pass
  // the outputs caps only with the user's word, as `run` may.
  if (args.no_outputs_limit) body["outputs_limit"] = "off";
  auto created = api(ctx, "POST", "/v1/mesh/jobs", body);
  if (!created) {
    if (no_daemon(created.error())) return report_daemon_error(ctx, created.error());
    return print_error(Error(created.error()).with_context("the job could not run"), kExitCouldNotRun);
  }
  std::string id = created->value("mesh_job_id", "");
  if (args.detach) {
    if (ctx.json) {
      std::printf("%s\n", created->dump(2).c_str());
    } else {
      std::printf("%s\n", id.c_str());
    }
    return kExitOk;
  }
  std::fprintf(stderr, "yonder: mesh job %s%s\n", mesh_job_short_id(id).c_str(),
               args.replicas > 1 ? (", " + std::to_string(args.replicas) + " replicas").c_str() : "");
  std::set<int> announced;  // replicas: attempts said to be running
  auto installed = SignalPipe::install();
  std::unique_ptr<SignalPipe> signals = installed ? std::move(*installed) : nullptr;
  int sig_fd = signals ? signals->fd() : -1;
  int stopped_by = 0;
  int following = 0;  // the attempt whose output we print
  bool attempt_over = false;
  std::optional<LogFollower> follower;
  json m;
  for (;;) {
    if (signals) {
      if (int s = signals->take(); s != 0 && stopped_by == 0) {
        stopped_by = s;
        std::fprintf(stderr, "\nyonder: stopping mesh job %s...\n", mesh_job_short_id(id).c_str());
        auto st = api(ctx, "POST", "/v1/mesh/jobs/stop", {{"mesh_job_id", id}});
        if (!st) std::fprintf(stderr, "yonder: could not stop it: %s\n", st.error().message().c_str());
      }
    }
    auto r = api(ctx, "GET", "/v1/mesh/jobs/inspect?id=" + id);
    if (!r) return fail(ctx, r.error());
    m = *r;
    if (m.value("state", "") != "running" && (following == 0 || attempt_over)) break;
    if (args.replicas > 1) {
      // Replicas run side by side: say where, then wait for the quorum.
      if (m.value("state", "") != "running") break;
      for (const auto& a : m["attempts"]) {
        int n = a.value("attempt", 0);
        if (a.value("state", "") != "running" || announced.count(n) > 0) continue;
        announced.insert(n);
        std::fprintf(stderr, "yonder: mesh: replica %d on %s\n", a.value("replica", 0) + 1,
                     shown(a, "provider_name", "").c_str());
      }
      pollfd p{sig_fd, POLLIN, 0};
      ::poll(sig_fd >= 0 ? &p : nullptr, sig_fd >= 0 ? 1 : 0, 250);
      continue;
    }
    int current = m["current_attempt"].is_number_integer() ? m["current_attempt"].get<int>() : 0;
    const json* a = current > 0 ? attempt_numbered(m, current) : nullptr;
    if (a != nullptr && current != following && a->value("state", "") == "running" && !a->value("job_id", "").empty()) {
      announce(m, following, current);
      following = current;
      attempt_over = false;
      follower.emplace(ctx, a->value("job_id", ""));
    }
    if (follower && !attempt_over) {
      auto step = follower->next(kStepWait, true, sig_fd);
      if (!step) {
        // The provider went away for longer than the follower rides out:
        // the daemon's supervisor decides what happens next.
        attempt_over = true;
      } else if (step->ended) {
        attempt_over = true;
      }
      continue;
    }
    // Between attempts, or the attempt ended and the daemon has yet to say
    // what comes next: ask again shortly (or at once on a signal).
    if (sig_fd >= 0) {
      pollfd p{sig_fd, POLLIN, 0};
      ::poll(&p, 1, 250);
    } else {
      ::poll(nullptr, 0, 250);
    }
  }
  signals.reset();
  const json result = m.contains("result") && m["result"].is_object() ? m["result"] : json::object();
  std::string state = m.value("state", "");
  const json code = result.value("exit_code", json());
  std::string job_id = result.value("job_id", "");
  if (args.replicas > 1 && result.contains("quorum") && result["quorum"].is_object()) {
    const json& q = result["quorum"];
    // The accepted replica's output, as if it had been followed.
    if (q.value("decided", false) && !job_id.empty()) (void)print_logs(ctx, job_id, LogsOptions{});
    for (const auto& r : q["replicas"]) {
      std::string verdict = r.contains("valid") ? (r.value("valid", false) ? ", accepted" : ", rejected") : "";
      std::fprintf(stderr, "yonder: replica %d on %s: %s%s%s\n", r.value("replica", 0),
                   shown(r, "provider_name", "").c_str(), r.value("hash", "").substr(0, 12).c_str(), verdict.c_str(),
                   r.value("outvoted", false) ? " (outvoted)" : "");
    }
    if (q.value("decided", false)) {
      std::fprintf(stderr, "yonder: quorum: %d of %d replicas agree; outputs from %s\n", q.value("agreeing", 0),
                   q.value("asked", 0), shown(result, "provider_name", "").c_str());
    }
  }
  bool fetch_failed = false;
  if (code.is_number_integer() && !args.home_dir.empty() && !job_id.empty()) {
    json fetch = {{"job_id", job_id}, {"dir", args.home_dir}};
    if (!args.out.empty()) fetch["paths"] = args.out;
    if (args.no_outputs_limit) fetch["outputs_limit"] = "off";
    auto got = api(ctx, "POST", "/v1/jobs/fetch", fetch, std::chrono::minutes(30));
    if (!got && ask_past_outputs_budget(got.error())) {
      fetch["outputs_limit"] = "off";
      got = api(ctx, "POST", "/v1/jobs/fetch", fetch, std::chrono::minutes(30));
    }
    if (!got) {
      std::fprintf(stderr, "yonder: could not bring the job's files home: %s\n", got.error().message().c_str());
      fetch_failed = true;
    } else {
      report_fetched(*got);
    }
  }
  if (stopped_by != 0 && state == "stopped") return 128 + stopped_by;
  if (code.is_number_integer()) {
    if (state == "failed" && m["attempts"].size() > 1) {
      std::fprintf(stderr, "yonder: mesh job %s failed after %zu attempt(s)\n", mesh_job_short_id(id).c_str(),
                   m["attempts"].size());
    }
    if (code.get<int>() == 0 && fetch_failed) return kExitError;
    return code.get<int>();
  }
  std::string message = result.value("message", "");
  if (result.contains("quorum") && result["quorum"].is_object()) {
    // The replicas ran, but their answers do not make a majority.
    std::fprintf(stderr, "yonder: mesh job %s: %s\n", mesh_job_short_id(id).c_str(), message.c_str());
    return kExitError;
  }
  std::fprintf(stderr, "yonder: mesh job %s %s without running to an end: %s\n", mesh_job_short_id(id).c_str(), state.c_str(),
               message.c_str());
  return kExitCouldNotRun;
}

int cmd_mesh_jobs(const Context& ctx, bool all) {
  auto r = api(ctx, "GET", std::string("/v1/mesh/jobs") + (all ? "?all=1" : ""));
  if (!r) return fail(ctx, r.error());
  if (ctx.json) {
    std::printf("%s\n", r->dump(2).c_str());
    return kExitOk;
  }
  std::printf("%-12s  %-9s  %-4s  %-8s  %-16s  %s\n", "MESH JOB", "STATE", "EXIT", "ATTEMPTS", "PROVIDER", "COMMAND");
  for (const auto& j : (*r)["jobs"]) {
    std::string cmd;
    for (const auto& a : j["spec"]["job"].value("command", json::array()))
      cmd += (cmd.empty() ? "" : " ") + a.get<std::string>();
    if (cmd.size() > 40) cmd = cmd.substr(0, 37) + "...";
    const json& result = j["result"];
    std::string exit = result.is_object() && result["exit_code"].is_number_integer()
                           ? std::to_string(result["exit_code"].get<int>())
                           : "-";
    std::string provider = j["attempts"].empty() ? "-" : shown(j["attempts"].back(), "provider_name", "");
    std::printf("%-12s  %-9s  %-4s  %-8zu  %-16s  %s\n", mesh_job_short_id(j.value("mesh_job_id", "")).c_str(),
                j.value("state", "").c_str(), exit.c_str(), j["attempts"].size(), provider.substr(0, 16).c_str(),
                cmd.c_str());
  }
  return kExitOk;
}

}  // namespace yonder::cli
