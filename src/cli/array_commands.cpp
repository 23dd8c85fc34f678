#include "cli/array_commands.h"

#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>

#include "cli/daemon_api.h"
#include "cli/exit_codes.h"
#include "cli/signal_pipe.h"
#include "cli/shown.h"

namespace yonder::cli {
namespace {

using nlohmann::json;

constexpr size_t kMaxLineBytes = 32 * 1024;  // an environment value's limit on the provider
// The array travels in one API request (1 MiB); leave room for the job.
constexpr size_t kMaxFileBytes = 900 * 1024;
constexpr int kRedrawMs = 500;

std::string array_short_id(const std::string& id) { return id.substr(0, 12); }

std::string duration(int64_t s) {
  char buf[32];
  if (s >= 3600) {
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", static_cast<long long>(s / 3600), static_cast<long long>(s / 60 % 60));
  } else if (s >= 60) {
    std::snprintf(buf, sizeof buf, "%lldm%02llds", static_cast<long long>(s / 60), static_cast<long long>(s % 60));
  } else {
    std::snprintf(buf, sizeof buf, "%llds", static_cast<long long>(s));
  }
  return buf;
}

uint64_t count(const json& status, const char* key) {
  const json& c = status.contains("counts") ? status["counts"] : json();
  return c.is_object() && c.contains(key) && c[key].is_number_unsigned() ? c[key].get<uint64_t>() : 0;
}

void print_failed(const json& status) {
  for (const auto& f : status.value("failed", json::array())) {
    std::fprintf(stderr, "  task %llu failed: %s (job %s; `yonder logs %s`)\n",
                 static_cast<unsigned long long>(f.value("task", uint64_t{0})), f.value("why", "").c_str(),
                 array_short_id(f.value("job_id", "")).c_str(), array_short_id(f.value("job_id", "")).c_str());
  }
}

}  // namespace

Result<std::vector<std::string>> read_array_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(ErrorCode::kInvalidArgument, "cannot read the array file " + path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (text.size() > kMaxFileBytes) {
    return make_error(ErrorCode::kInvalidArgument, "the array file " + path + " is over 900 KiB; split it into several arrays, "
                                                   "or keep the inputs in files and give each task an index (--array 0-N)");
  }
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t nl = text.find('\n', start);
    std::string line = text.substr(start, nl == std::string::npos ? std::string::npos : nl - start);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.size() > kMaxLineBytes || line.find('\0') != std::string::npos) {
      return make_error(ErrorCode::kInvalidArgument, path + ":" + std::to_string(lines.size() + 1) +
                                                         ": a line must be text of at most 32 KiB");
    }
    lines.push_back(std::move(line));
    if (nl == std::string::npos) break;
    start = nl + 1;
  }
  if (lines.empty()) return make_error(ErrorCode::kInvalidArgument, "the array file " + path + " has no lines: one task per line");
  return lines;
}

std::string array_progress_line(const json& s) {
  uint64_t tasks = s.value("tasks", uint64_t{0}), done = count(s, "done"), failed = count(s, "failed"),
           running = count(s, "attempts_running");
  constexpr int kWidth = 24;
  int filled = tasks == 0 ? 0 : static_cast<int>(static_cast<double>(done + failed) * kWidth / static_cast<double>(tasks));
  std::string bar(static_cast<size_t>(filled), '#');
  bar += std::string(static_cast<size_t>(kWidth - filled), '.');
  char buf[256];
  std::snprintf(buf, sizeof buf, "array %s [%s] %llu/%llu done, %llu failed, %llu running, %.1f/min",
                array_short_id(s.value("array_id", "")).c_str(), bar.c_str(), static_cast<unsigned long long>(done),
                static_cast<unsigned long long>(tasks), static_cast<unsigned long long>(failed),
                static_cast<unsigned long long>(running), s.value("throughput_per_min", 0.0));
  std::string line = buf;
  int64_t eta = s.value("eta_s", int64_t{0});
  if (eta > 0 && s.value("state", "") == "running") line += ", ~" + duration(eta) + " left";
  return line;
}

int run_array(const Context& ctx, const ArrayArgs& a) {
  json body = {{"job", a.job.to_json()}, {"needs", a.needs}, {"out", a.out}, {"retries", a.retries}};
  if (!a.dir.empty()) body["dir"] = a.dir;
  if (a.replicas > 1) body["replicas"] = a.replicas;
  if (!a.validator.empty()) body["validator"] = a.validator;
  if (a.no_outputs_limit) body["outputs_limit"] = "off";
  if (a.range) body["array"] = *a.range;
  if (!a.file.empty()) {
    auto lines = read_array_file(a.file);
    if (!lines) return print_error(lines.error(), kExitUsage);
    body["params"] = *lines;
  }
  auto created = api(ctx, "POST", "/v1/mesh/arrays", body);
  if (!created) {
    if (no_daemon(created.error())) return report_daemon_error(ctx, created.error());
    int code = created.error().code() == ErrorCode::kInvalidArgument ? kExitUsage : kExitCouldNotRun;
    return print_error(Error(created.error()).with_context("--array"), code);
  }
  std::string id = created->value("array_id", "");
  if (a.detach) {
    std::printf("%s\n", ctx.json ? created->dump(2).c_str() : id.c_str());
    return kExitOk;
  }
  bool tty = isatty(STDERR_FILENO) != 0;
  std::fprintf(stderr, "yonder: array %s: %llu tasks, at most %llu at once; outputs in %s/<index>/ (`yonder array "
               "status %s`)\n",
               array_short_id(id).c_str(), static_cast<unsigned long long>(created->value("tasks", uint64_t{0})),
               static_cast<unsigned long long>(created->value("limit", uint64_t{0})), created->value("out", "").c_str(),
               array_short_id(id).c_str());
  // Ctrl-C leaves the array running in the daemon (it is not tied to this
  // terminal); `yonder array cancel` stops it.
  auto installed = SignalPipe::install();
  std::unique_ptr<SignalPipe> signals = installed ? std::move(*installed) : nullptr;
  json status = *created;
  uint64_t last_done = ~uint64_t{0};
  while (true) {
    auto r = api(ctx, "GET", "/v1/mesh/arrays/inspect?id=" + id);
    if (!r) {
      if (tty) std::fprintf(stderr, "\n");
      return fail(ctx, r.error());
    }
    status = *r;
    std::string line = array_progress_line(status);
    uint64_t done = count(status, "done") + count(status, "failed");
    if (tty) {
      std::fprintf(stderr, "\r\033[K%s", line.c_str());
    } else if (done != last_done && (done == 0 || done * 10 / std::max<uint64_t>(1, status.value("tasks", uint64_t{1})) !=
                                                     last_done * 10 / std::max<uint64_t>(1, status.value("tasks", uint64_t{1})))) {
      std::fprintf(stderr, "%s\n", line.c_str());  // no terminal: a line per tenth
    }
    last_done = done;
    if (status.value("state", "running") != "running") break;
    struct pollfd p = {signals ? signals->fd() : -1, POLLIN, 0};
    if (::poll(&p, 1, kRedrawMs) > 0 && signals && signals->take() != 0) {
      if (tty) std::fprintf(stderr, "\n");
      std::fprintf(stderr, "yonder: the array goes on in the daemon; `yonder array status %s` follows it, `yonder array "
                   "cancel %s` stops it\n",
                   array_short_id(id).c_str(), array_short_id(id).c_str());
      return 128 + SIGINT;
    }
  }
  if (tty) std::fprintf(stderr, "\n");
  std::string state = status.value("state", "");
  if (ctx.json) std::printf("%s\n", status.dump(2).c_str());
  std::fprintf(stderr, "yonder: array %s %s: %llu done, %llu failed (%llu retried, %llu lost provider(s), %llu duplicate(s) "
               "dropped)\n",
               array_short_id(id).c_str(), state.c_str(), static_cast<unsigned long long>(count(status, "done")),
               static_cast<unsigned long long>(count(status, "failed")),
               static_cast<unsigned long long>(count(status, "retried")), static_cast<unsigned long long>(count(status, "lost")),
               static_cast<unsigned long long>(count(status, "discarded")));
  if (state == "done") return kExitOk;
  if (!status.value("error", "").empty()) {
    std::fprintf(stderr, "yonder: the array stopped: %s\n", status.value("error", "").c_str());
    return kExitCouldNotRun;
  }
  print_failed(status);
  if (state == "failed") {
    std::fprintf(stderr, "yonder: run them again with `yonder array retry %s`\n", array_short_id(id).c_str());
  }
  return kExitError;
}

int cmd_array_status(const Context& ctx, const std::string& id) {
  auto r = api(ctx, "GET", "/v1/mesh/arrays/inspect?id=" + id);
  if (!r) return fail(ctx, r.error());
  if (ctx.json) {
    std::printf("%s\n", r->dump(2).c_str());
    return kExitOk;
  }
  const json& s = *r;
  std::printf("%s\n", array_progress_line(s).c_str());
  std::printf("state %s; pending %llu, running %llu, done %llu, failed %llu; retried %llu, lost %llu, duplicates dropped %llu\n",
              s.value("state", "").c_str(), static_cast<unsigned long long>(count(s, "pending")),
              static_cast<unsigned long long>(count(s, "running")), static_cast<unsigned long long>(count(s, "done")),
              static_cast<unsigned long long>(count(s, "failed")), static_cast<unsigned long long>(count(s, "retried")),
              static_cast<unsigned long long>(count(s, "lost")), static_cast<unsigned long long>(count(s, "discarded")));
  std::printf("outputs in %s/<index>/\n", s.value("out", "").c_str());
  uint64_t done = count(s, "done");
  for (const auto& p : s.value("providers", json::array())) {
    uint64_t n = p.value("done", uint64_t{0});
    std::string name = shown(p, "name", "");
    if (name.empty()) name = p.value("provider_id", "").substr(0, 15);
    std::printf("  %-20s %6llu tasks (%.0f%%)\n", name.c_str(), static_cast<unsigned long long>(n),
                done ? 100.0 * static_cast<double>(n) / static_cast<double>(done) : 0.0);
  }
  for (const auto& f : s.value("failed", json::array())) {
    std::printf("  task %llu failed: %s (job %s)\n", static_cast<unsigned long long>(f.value("task", uint64_t{0})),
                f.value("why", "").c_str(), array_short_id(f.value("job_id", "")).c_str());
  }
  return kExitOk;
}

int cmd_array_list(const Context& ctx, bool all) {
  auto r = api(ctx, "GET", std::string("/v1/mesh/arrays") + (all ? "?all=1" : ""));
  if (!r) return fail(ctx, r.error());
  if (ctx.json) {
    std::printf("%s\n", r->dump(2).c_str());
    return kExitOk;
  }
  std::printf("%-12s  %-9s  %7s  %7s  %7s\n", "ARRAY", "STATE", "TASKS", "DONE", "FAILED");
  for (const auto& s : (*r)["arrays"]) {
    std::printf("%-12s  %-9s  %7llu  %7llu  %7llu\n", array_short_id(s.value("array_id", "")).c_str(),
                s.value("state", "").c_str(), static_cast<unsigned long long>(s.value("tasks", uint64_t{0})),
                static_cast<unsigned long long>(count(s, "done")), static_cast<unsigned long long>(count(s, "failed")));
  }
  return kExitOk;
}

int cmd_array_retry(const Context& ctx, const std::string& id) {
  auto r = api(ctx, "POST", "/v1/mesh/arrays/retry", {{"array_id", id}});
  if (!r) return fail(ctx, r.error());
  if (ctx.json) {
    std::printf("%s\n", r->dump(2).c_str());
  } else {
    std::printf("%s\n", array_progress_line(*r).c_str());
  }
  return kExitOk;
}

int cmd_array_cancel(const Context& ctx, const std::string& id) {
  auto r = api(ctx, "POST", "/v1/mesh/arrays/cancel", {{"array_id", id}});
  if (!r) return fail(ctx, r.error());
  if (ctx.json) {
    std::printf("%s\n", r->dump(2).c_str());
  } else {
    std::printf("array %s cancelled; running tasks are being stopped\n", array_short_id(r->value("array_id", id)).c_str());
  }
  return kExitOk;
}

}  // namespace yonder::cli
