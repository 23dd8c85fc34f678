#include "cli/job_status_commands.h"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>

#include "base/clock.h"
#include "base/terminal_text.h"
#include "cli/daemon_api.h"
#include "cli/exit_codes.h"
#include "cli/job_listing.h"
#include "cli/job_logs.h"
#include "cli/job_stats.h"
#include "cli/signal_pipe.h"
#include "cli/shown.h"

namespace yonder::cli {
namespace {

using nlohmann::json;

std::string status_short_id(const std::string& id) {
  return id.substr(0, 12);
}

bool job_has_ended(const json& view) {
  std::string s = view.value("state", "");
  return s == "exited" || s == "stopped" || s == "failed";
}

Result<json> inspect_job(const Context& ctx, const std::string& job) {
  return api(ctx, "GET", "/v1/jobs/inspect?id=" + job);
}

// Follows the job's log from where it is now, printing nothing, until the
// provider says the job ended: the log's long poll wakes on the end, so
// nothing here polls on a timer. Returns the job's view once it ended.
Result<json> wait_for_end(const Context& ctx, const std::string& job) {
  auto view = inspect_job(ctx, job);
  if (!view) return view;
  while (!job_has_ended(*view)) {
    LogFollower logs(ctx, view->value("job_id", job));
    logs.set_quiet(true);
    // From the log's end as last seen, so a long log is not read again.
    if ((*view)["log_bytes"].is_number_unsigned()) logs.set_offset((*view)["log_bytes"].get<uint64_t>());
    Status followed = ok_status();
    while (true) {
      auto step = logs.next(kFollowWait, true);
      if (!step) {
        followed = std::move(step).error();
        break;
      }
      if (step->ended) break;
    }
    auto now = inspect_job(ctx, job);
    if (!now) return now;
    // A job that ended before it had a log to read (refused at start) ends
    // the follow with an error: its view says what happened.
    if (!followed && !job_has_ended(*now)) return followed.error();
    view = std::move(now);
  }
  return view;
}

}  // namespace

int exit_code_of_ended(const json& view) {
  std::string id = status_short_id(view.value("job_id", ""));
  if (view.contains("exit_code") && view["exit_code"].is_number_integer()) {
    if (view.value("state", "") == "stopped") {
      std::fprintf(stderr, "yonder: job %s was stopped: %s\n", id.c_str(), shown(view, "message", "").c_str());
    }
    if (view.value("oom_killed", false)) std::fprintf(stderr, "yonder: job %s ran out of memory\n", id.c_str());
    return view["exit_code"].get<int>();
  }
  std::string why = shown(view, "reason", "");
  std::string message = shown(view, "message", "");
  if (!why.empty() && !message.empty()) why += ": ";
  why += message;
  std::fprintf(stderr, "yonder: job %s %s without running to an end%s%s; `yonder inspect %s` shows all that is known\n",
               id.c_str(), view.value("state", "ended").c_str(), why.empty() ? "" : ": ", why.c_str(), id.c_str());
  return kExitCouldNotRun;
}

int cmd_wait(const Context& ctx, const std::vector<std::string>& jobs) {
  int code = kExitOk;
  for (const auto& job : jobs) {
    auto view = wait_for_end(ctx, job);
    if (!view) {
      code = fail(ctx, view.error());
      continue;
    }
    code = exit_code_of_ended(*view);
    if ((*view)["exit_code"].is_number_integer()) std::printf("%d\n", code);
    std::fflush(stdout);
  }
  return code;
}

int cmd_inspect(const Context& ctx, const std::string& job) {
  auto view = inspect_job(ctx, job);
  if (!view && view.error().code() == ErrorCode::kUnavailable && !no_daemon(view.error())) {
    // The provider does not answer: what this node saw last, said so.
    auto all = api(ctx, "GET", "/v1/jobs?all=1");
    if (all) {
      for (const auto& j : (*all)["jobs"]) {
        std::string id = j.value("job_id", "");
        if (job.size() >= 4 && id.rfind(job, 0) == 0) {
          json last = j;
          last["provider_reachable"] = false;
          std::fprintf(stderr, "yonder: the provider did not answer (%s); this is the job as last seen\n",
                       terminal_safe(view.error().message()).c_str());
          std::printf("%s\n", inspect_view(last).dump(2).c_str());
          return kExitOk;
        }
      }
    }
  }
  if (!view) return fail(ctx, view.error());
  std::printf("%s\n", inspect_view(*view).dump(2).c_str());
  return kExitOk;
}

int cmd_ps(const Context& ctx, const PsArgs& args) {
  auto filter = parse_ps_filters(args.filters);
  if (!filter) return print_error(filter.error(), kExitUsage);
  auto format = parse_ps_format(args.format);
  if (!format) return print_error(format.error(), kExitUsage);
  if (!args.since.empty()) {
    auto since = parse_since(args.since);
    if (!since) return print_error(since.error(), kExitUsage);
    filter->since_s = std::max<int64_t>(1, *since / 1'000'000'000);
  }
  bool all = args.all || filter->wants_ended();
  auto r = api(ctx, "GET", std::string("/v1/jobs") + (all ? "?all=1" : ""));
  if (!r) return fail(ctx, r.error());
  if (ctx.json && args.filters.empty()) {
    std::printf("%s\n", r->dump(2).c_str());
    return kExitOk;
  }
  auto rows = ps_rows(*r, *filter);
  if (ctx.json) {  // the daemon's answer, with only the jobs that pass the filters
    json out = *r;
    out["jobs"] = rows;
    std::printf("%s\n", out.dump(2).c_str());
    return kExitOk;
  }
  if (args.quiet) {
    for (const auto& j : rows) std::printf("%s\n", j.value("job_id", "").c_str());
    return kExitOk;
  }
  int64_t now = unix_now_s();
  if (*format == PsFormat::kJson) {
    for (auto j : rows) {
      j["gpu_seconds"] = gpu_seconds(j, now) < 0 ? json(nullptr) : json(gpu_seconds(j, now));
      std::printf("%s\n", j.dump().c_str());
    }
    return kExitOk;
  }
  // A NAME column only when a job has a name, so a table of unnamed jobs stays narrow.
  bool named = std::any_of(rows.begin(), rows.end(), [](const json& j) { return j.contains("name"); });
  std::printf("%-12s  %s%-16s  %-24s  %-9s  %-4s  %-22s  %-8s  %-8s  %s\n", "JOB", named ? "NAME              " : "",
              "PROVIDER", "IMAGE", "STATE", "EXIT", "CREATED", "DURATION", "GPU-TIME", "COMMAND");
  int64_t total_run = 0, total_gpu = 0;
  bool cleaned = false;
  for (const auto& j : rows) {
    std::string cmd;
    for (const auto& a : j.value("command", json::array())) {
      if (a.is_string()) cmd += (cmd.empty() ? "" : " ") + a.get<std::string>();
    }
    if (cmd.size() > 40) cmd = cmd.substr(0, 37) + "...";
    std::string state = j.value("state", "");
    if (!j.value("provider_reachable", true)) state += "?";
    if (j.contains("workspace_removed_at") || j.contains("log_removed_at")) {
      state += "*";
      cleaned = true;
    }
    std::string exit = j["exit_code"].is_number_integer() ? std::to_string(j["exit_code"].get<int>()) : "-";
    std::string created =
        j["submitted_at"].is_number_integer() ? ago_text(now - j["submitted_at"].get<int64_t>()) : "-";
    char name[24] = "";
    if (named) std::snprintf(name, sizeof name, "%-16s  ", shown(j, "name", "-").substr(0, 16).c_str());
    int64_t gpu_s = gpu_seconds(j, now);
    total_run += std::max<int64_t>(0, run_seconds(j, now));
    total_gpu += std::max<int64_t>(0, gpu_s);
    std::string gpu_time = gpu_s < 0 ? "?" : gpu_s == 0 ? "-" : span_text(gpu_s);
    std::printf("%-12s  %s%-16s  %-24s  %-9s  %-4s  %-22s  %-8s  %-8s  %s\n", status_short_id(j.value("job_id", "")).c_str(),
                name, shown(j, "provider_name", "").substr(0, 16).c_str(), shown(j.value("image", "")).substr(0, 24).c_str(),
                state.c_str(), exit.c_str(), created.c_str(), duration_text(j, now).c_str(), gpu_time.c_str(),
                shown(cmd).c_str());
  }
  if (!args.since.empty()) {  // a period's account, as sacct's
    std::printf("%zu job(s) since %s: %s run, %s GPU time\n", rows.size(), args.since.c_str(),
                span_text(total_run).c_str(), span_text(total_gpu).c_str());
  }
  if (cleaned) {
    std::printf(
        "* cleaned: the provider removed the ended job's workspace, so its outputs can no longer be fetched "
        "(and, past its logs cap, the log; `yonder logs` says so)\n");
  }
  // A provider that did not answer: its jobs are shown as last seen ("?").
  for (const auto& u : r->value("unanswered", json::array())) {
    std::fprintf(stderr, "yonder: %s; its jobs are shown as last seen (marked ?)\n",
                 terminal_safe(u.value("why", "")).c_str());
  }
  if (!args.filters.empty()) return kExitOk;  // mesh jobs are not filtered: leave them out
  // Mesh jobs run as the jobs above, one attempt at a time: say which is which.
  if (auto mesh = api(ctx, "GET", std::string("/v1/mesh/jobs") + (all ? "?all=1" : "")); mesh) {
    for (const auto& m : (*mesh)["jobs"]) {
      std::string attempts;
      for (const auto& a : m["attempts"]) {
        attempts += (attempts.empty() ? "" : ", ") + status_short_id(a.value("job_id", "")) + " on " +
                    shown(a, "provider_name", "") + " (" + a.value("state", "") + ")";
      }
      std::printf("mesh job %s: %s; attempts: %s\n", status_short_id(m.value("mesh_job_id", "")).c_str(),
                  m.value("state", "").c_str(), attempts.empty() ? "none yet" : attempts.c_str());
    }
  }
  return kExitOk;
}

int cmd_stats(const Context& ctx, const std::vector<std::string>& jobs, bool no_stream, const std::string& format) {
  if (!format.empty() && format != "table" && format != "json") {
    return print_error(make_error(ErrorCode::kInvalidArgument, "--format takes table or json, not \"" + format + "\""),
                       kExitUsage);
  }
  bool as_json = format == "json" || ctx.json;
  // Each job's name as given (a name, or its id's start) and its last sample.
  std::map<std::string, json> last;
  auto installed = SignalPipe::install();
  if (!installed) return fail(ctx, installed.error());
  SignalPipe& sig = **installed;
  bool redraw = !as_json && !no_stream && isatty(STDOUT_FILENO) != 0;
  for (int round = 0;; ++round) {
    std::vector<StatsRow> rows;
    int running = 0;
    for (const auto& job : jobs) {
      auto now = api(ctx, "GET", "/v1/jobs/stats?id=" + query_escape(job), nullptr, std::chrono::seconds(30), sig.fd());
      if (sig.take() != 0) return kExitOk;
      if (!now) {
        if (no_daemon(now.error())) return fail(ctx, now.error());
        if (round == 0 && now.error().code() == ErrorCode::kNotFound) return fail(ctx, now.error());
        StatsRow r;
        r.label = job;
        r.note = now.error().message();
        rows.push_back(std::move(r));
        continue;
      }
      ++running;
      std::string label = job.size() > 12 ? job.substr(0, 12) : job;
      rows.push_back(stats_row(label, last[job], *now));
      last[job] = *now;
    }
    // The first round only primes the CPU rate (two samples make one).
    if (round > 0 || running == 0) {
      if (as_json) {
        for (const auto& r : rows) std::printf("%s\n", stats_json(r).dump().c_str());
      } else {
        if (redraw) std::printf("\x1b[2J\x1b[H");
        std::fputs(stats_table(rows).c_str(), stdout);
      }
      std::fflush(stdout);
      if (no_stream || running == 0) return running == 0 ? kExitError : kExitOk;
    }
    // Once a second, or at once for Ctrl-C.
    struct pollfd p = {sig.fd(), POLLIN, 0};
    if (::poll(&p, 1, 1000) > 0) return kExitOk;
  }
}

}  // namespace yonder::cli
