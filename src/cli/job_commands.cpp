#include "cli/job_commands.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "base/bytes.h"
#include "cli/exit_codes.h"
#include "crypto/scope.h"
#include "os/unix_http.h"

namespace yonder::cli {
namespace {

using nlohmann::json;
constexpr int kFollowWaitMs = 15000;

ErrorCode code_from_name(const std::string& name) {
  if (name == "permission_denied") return ErrorCode::kPermissionDenied;
  if (name == "not_found") return ErrorCode::kNotFound;
  if (name == "invalid_argument") return ErrorCode::kInvalidArgument;
  if (name == "resource_exhausted") return ErrorCode::kResourceExhausted;
  if (name == "unavailable") return ErrorCode::kUnavailable;
  return ErrorCode::kFailedPrecondition;
}

// One call to the daemon; an {"error"} reply becomes the Error.
Result<json> api(const Context& ctx, const std::string& method, const std::string& path, const json& body = nullptr,
                 std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
  os::HttpRequestOptions opts;
  opts.timeout = timeout;
  auto r = os::unix_http_request(ctx.socket_path(), method, path, body.is_null() ? std::string() : body.dump(), opts);
  if (!r) return std::move(r).error();
  auto j = json::parse(r->body, nullptr, false);
  if (r->status != 200) {
    if (j.is_object() && j.contains("error") && j["error"].is_object()) {
      return make_error(code_from_name(j["error"].value("code", "")), j["error"].value("message", "yonderd refused the request"));
    }
    return make_error(ErrorCode::kInternal, "yonderd answered HTTP " + std::to_string(r->status));
  }
  if (!j.is_object()) return make_error(ErrorCode::kInternal, "yonderd sent a reply that is not JSON");
  return j;
}

bool no_daemon(const Error& e) {
  return e.code() == ErrorCode::kUnavailable && e.message().rfind("cannot connect to", 0) == 0;
}

int fail(const Context& ctx, const Error& e, int code = kExitError) {
  if (no_daemon(e)) return report_daemon_error(ctx, e);
  if (e.code() == ErrorCode::kPermissionDenied && code == kExitError) code = kExitDenied;
  return print_error(e, code);
}

void write_all(FILE* f, const std::string& s) {
  std::fwrite(s.data(), 1, s.size(), f);
  std::fflush(f);
}

// Prints the job's output from `offset` to our stdout/stderr. With `follow`,
// until the job ends (riding out short losses of the link: the provider
// keeps the log, so re-reading from the last offset loses and repeats
// nothing). Returns whether the end was seen.
Result<bool> print_logs(const Context& ctx, const std::string& job, bool follow) {
  uint64_t offset = 0;
  auto lost_since = std::chrono::steady_clock::time_point{};
  bool told = false;
  while (true) {
    std::string path = "/v1/jobs/logs?id=" + job + "&offset=" + std::to_string(offset) +
                       "&wait_ms=" + std::to_string(follow ? kFollowWaitMs : 0);
    auto r = api(ctx, "GET", path, nullptr, std::chrono::milliseconds(kFollowWaitMs + 30000));
    if (!r) {
      bool transient = r.error().code() == ErrorCode::kUnavailable && !no_daemon(r.error());
      if (!follow || !transient) return std::move(r).error();
      auto now = std::chrono::steady_clock::now();
      if (!told) {
        std::fprintf(stderr, "yonder: lost contact with the provider (%s); retrying\n", r.error().message().c_str());
        told = true;
        lost_since = now;
      }
      if (now - lost_since > std::chrono::minutes(2)) {
        return make_error(ErrorCode::kUnavailable, "the provider has been unreachable for 2 minutes; the job may "
                                                   "still run: `yonder logs -f " + job + "` re-attaches");
      }
      std::this_thread::sleep_for(std::chrono::seconds(1));
      continue;
    }
    if (told) {
      std::fprintf(stderr, "yonder: reconnected\n");
      told = false;
    }
    const json& records = (*r)["records"];
    for (const auto& rec : records) {
      auto bytes = base64_decode(rec.value("data", ""));
      if (!bytes) continue;
      std::string text(bytes->begin(), bytes->end());
      std::string stream = rec.value("stream", "stdout");
      if (stream == "stdout") {
        write_all(stdout, text);
      } else if (stream == "stderr") {
        write_all(stderr, text);
      } else {
        write_all(stderr, "yonder: " + text + (text.empty() || text.back() != '\n' ? "\n" : ""));
      }
    }
    offset = r->value("next_offset", offset);
    if (r->value("ended", false)) return true;
    if (!follow && records.empty()) return false;
  }
}

std::string short_id(const std::string& id) { return id.substr(0, 12); }

// Brings files of the job's workspace into `dir` (the daemon writes them;
// see node/fetch_consumer.h). `paths` empty: what differs from `dir`.
Result<json> fetch_files(const Context& ctx, const std::string& job, const std::string& dir,
                         const std::vector<std::string>& paths) {
  json body = {{"job_id", job}, {"dir", dir}};
  if (!paths.empty()) body["paths"] = paths;
  return api(ctx, "POST", "/v1/jobs/fetch", body, std::chrono::minutes(30));
}

}  // namespace

int cmd_run(const Context& ctx, const RunArgs& a) {
  if (a.image.empty()) {
    return print_error(make_error(ErrorCode::kInvalidArgument,
                                  "--image is required: the image to run, one the provider allows "
                                  "(its executor.image_allowlist)"),
                       kExitUsage);
  }
  json job = {{"image", a.image}, {"command", a.command}};
  json env = json::object();
  for (const auto& kv : a.env) {
    size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) {
      return print_error(make_error(ErrorCode::kInvalidArgument, "-e takes KEY=VALUE, not \"" + kv + "\""), kExitUsage);
    }
    env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  if (!env.empty()) job["env"] = env;
  if (a.gpus) job["gpus"] = *a.gpus;
  auto mib = [&](const std::optional<std::string>& v, const char* field, const char* flag) -> Status {
    if (!v) return ok_status();
    auto n = parse_size(*v);
    if (!n) return std::move(n).error().with_context(flag);
    job[field] = static_cast<int64_t>(*n >> 20);
    return ok_status();
  };
  Status st = mib(a.vram, "vram_mib", "--vram");
  if (st) st = mib(a.memory, "memory_mib", "--memory");
  if (st) st = mib(a.disk, "disk_mib", "--disk");
  if (!st) return print_error(st.error(), kExitUsage);
  if (a.time) {
    auto d = parse_duration_s(*a.time);
    if (!d) return print_error(Error(d.error()).with_context("--time"), kExitUsage);
    job["wall_time_s"] = *d;
  }
  if (a.cpus) {
    char* end = nullptr;
    double c = std::strtod(a.cpus->c_str(), &end);
    if (end == a.cpus->c_str() || *end != '\0' || c <= 0) {
      return print_error(make_error(ErrorCode::kInvalidArgument, "--cpus must be a number like 2 or 0.5"), kExitUsage);
    }
    job["cpus"] = c;
  }
  json body = {{"peer", a.peer}, {"job", job}};
  std::string home_dir;  // where the outputs come home to
  if (!a.no_upload && !a.upload_dir.empty()) {
    std::error_code ec;
    auto dir = std::filesystem::canonical(a.upload_dir, ec);
    if (ec || !std::filesystem::is_directory(dir)) {
      return print_error(make_error(ErrorCode::kInvalidArgument, "--upload " + a.upload_dir + " is not a folder"), kExitUsage);
    }
    body["dir"] = dir.string();
    home_dir = dir.string();
  } else if (!a.no_upload || !a.out.empty()) {
    std::error_code ec;
    auto cwd = std::filesystem::current_path(ec);
    if (ec) return print_error(make_error(ErrorCode::kFailedPrecondition, "cannot read the working directory"), kExitCouldNotRun);
    if (!a.no_upload) body["dir"] = cwd.string();
    home_dir = cwd.string();
  }
  auto submitted = api(ctx, "POST", "/v1/jobs", body, std::chrono::minutes(30));
  if (!submitted) {
    if (no_daemon(submitted.error())) return report_daemon_error(ctx, submitted.error());
    return print_error(Error(submitted.error()).with_context("the job could not run"), kExitCouldNotRun);
  }
  std::string id = submitted->value("job_id", "");
  if (a.detach) {
    if (ctx.json) {
      std::printf("%s\n", submitted->dump(2).c_str());
    } else {
      std::printf("%s\n", id.c_str());
    }
    return kExitOk;
  }
  if (isatty(STDERR_FILENO)) {
    const json& up = (*submitted)["upload"];
    std::string sent = up.is_object() ? ", uploaded " + std::to_string(up.value("files", 0)) + " file(s), " +
                                            format_size(up.value("bytes", uint64_t{0}))
                                      : "";
    std::fprintf(stderr, "yonder: job %s on %s%s\n", short_id(id).c_str(),
                 submitted->value("provider_name", a.peer).c_str(), sent.c_str());
  }
  auto ended = print_logs(ctx, id, true);
  if (!ended) return fail(ctx, ended.error());
  auto view = api(ctx, "GET", "/v1/jobs/inspect?id=" + id);
  if (!view) return fail(ctx, view.error());
  const json& code = (*view)["exit_code"];
  bool fetch_failed = false;
  if (code.is_number_integer() && !home_dir.empty()) {
    auto got = fetch_files(ctx, id, home_dir, a.out);
    if (!got) {
      std::fprintf(stderr, "yonder: could not bring the job's files home: %s\n", got.error().message().c_str());
      fetch_failed = true;
    } else if (!(*got)["files"].empty()) {
      std::fprintf(stderr, "yonder: brought home %zu file(s), %s\n", (*got)["files"].size(),
                   format_size(got->value("bytes", uint64_t{0})).c_str());
    }
  }
  if (code.is_number_integer()) {
    if (view->value("state", "") == "stopped") {
      std::fprintf(stderr, "yonder: job %s was stopped: %s\n", short_id(id).c_str(), view->value("message", "").c_str());
    }
    if (view->value("oom_killed", false)) std::fprintf(stderr, "yonder: job %s ran out of memory\n", short_id(id).c_str());
    // The job's own failure wins; a job that succeeded but whose files did
    // not come home is still a failure of the command.
    if (code.get<int>() == 0 && fetch_failed) return kExitError;
    return code.get<int>();
  }
  std::fprintf(stderr, "yonder: job %s %s without running to an end: %s\n", short_id(id).c_str(),
               view->value("state", "ended").c_str(), view->value("message", "").c_str());
  return kExitCouldNotRun;
}

int cmd_ps(const Context& ctx, bool all) {
  auto r = api(ctx, "GET", std::string("/v1/jobs") + (all ? "?all=1" : ""));
  if (!r) return fail(ctx, r.error());
  if (ctx.json) {
    std::printf("%s\n", r->dump(2).c_str());
    return kExitOk;
  }
  std::printf("%-12s  %-16s  %-24s  %-9s  %-4s  %s\n", "JOB", "PROVIDER", "IMAGE", "STATE", "EXIT", "COMMAND");
  for (const auto& j : (*r)["jobs"]) {
    std::string cmd;
    for (const auto& a : j.value("command", json::array())) cmd += (cmd.empty() ? "" : " ") + a.get<std::string>();
    if (cmd.size() > 40) cmd = cmd.substr(0, 37) + "...";
    std::string state = j.value("state", "");
    if (!j.value("provider_reachable", true)) state += "?";
    std::string exit = j["exit_code"].is_number_integer() ? std::to_string(j["exit_code"].get<int>()) : "-";
    std::printf("%-12s  %-16s  %-24s  %-9s  %-4s  %s\n", short_id(j.value("job_id", "")).c_str(),
                j.value("provider_name", "").substr(0, 16).c_str(), j.value("image", "").substr(0, 24).c_str(),
                state.c_str(), exit.c_str(), cmd.c_str());
  }
  return kExitOk;
}

int cmd_logs(const Context& ctx, const std::string& job, bool follow) {
  auto r = print_logs(ctx, job, follow);
  if (!r) return fail(ctx, r.error());
  return kExitOk;
}

int cmd_stop(const Context& ctx, const std::string& job) {
  auto r = api(ctx, "POST", "/v1/jobs/stop", {{"job_id", job}});
  if (!r) return fail(ctx, r.error());
  if (ctx.json) {
    std::printf("%s\n", r->dump(2).c_str());
  } else {
    std::printf("%s %s\n", r->value("job_id", job).c_str(), r->value("stopping", r->value("state", "")).c_str());
  }
  return kExitOk;
}

int cmd_cp(const Context& ctx, const std::string& from, const std::string& to) {
  size_t colon = from.find(':');
  if (colon == std::string::npos || colon == 0) {
    return print_error(make_error(ErrorCode::kInvalidArgument, "cp copies out of a job: yonder cp JOB:PATH [LOCAL]"),
                       kExitUsage);
  }
  std::string job = from.substr(0, colon);
  std::string path = from.substr(colon + 1);
  std::error_code ec;
  auto dir = std::filesystem::absolute(to.empty() ? std::string(".") : to, ec);
  if (ec || !std::filesystem::is_directory(dir, ec)) {
    return print_error(make_error(ErrorCode::kInvalidArgument, (to.empty() ? "." : to) + " is not a folder"), kExitUsage);
  }
  auto got = fetch_files(ctx, job, dir.lexically_normal().string(), {path.empty() ? "." : path});
  if (!got) return fail(ctx, got.error());
  if (ctx.json) {
    std::printf("%s\n", got->dump(2).c_str());
  } else {
    for (const auto& f : (*got)["files"]) std::printf("%s\n", f.get<std::string>().c_str());
  }
  return kExitOk;
}

}  // namespace yonder::cli
