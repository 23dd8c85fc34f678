#include "cli/audit_command.h"

#include <cstdio>
#include <ctime>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/exit_codes.h"
#include "os/unix_http.h"

namespace yonder::cli {
namespace {

using nlohmann::json;

std::string local_time(int64_t unix_s) {
  std::time_t t = static_cast<std::time_t>(unix_s);
  std::tm tm{};
  ::localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

// One line of what an entry says: the request's gist, or why it was refused.
std::string summary(const json& e) {
  const json& d = e.contains("detail") && e["detail"].is_object() ? e["detail"] : json::object();
  if (d.contains("refused")) return "REFUSED: " + d.value("refused", "");
  std::string out;
  if (d.contains("image")) out += d.value("image", "");
  if (d.contains("command") && d["command"].is_array()) {
    std::string cmd;
    for (const auto& a : d["command"]) cmd += (cmd.empty() ? "" : " ") + (a.is_string() ? a.get<std::string>() : a.dump());
    if (cmd.size() > 40) cmd = cmd.substr(0, 37) + "...";
    out += (out.empty() ? "" : " ") + cmd;
  }
  for (const char* key : {"gpus", "exit_code", "duration_s", "gpu_seconds", "bytes_in", "bytes_out", "files"}) {
    if (d.contains(key) && !d[key].is_null()) out += std::string(out.empty() ? "" : " ") + key + "=" + d[key].dump();
  }
  return out;
}

}  // namespace

int cmd_audit(const Context& ctx, bool verify, int64_t limit) {
  std::string path = "/v1/audit?limit=" + std::to_string(limit) + (verify ? "&verify=1" : "");
  os::HttpRequestOptions opts;
  opts.bearer_token = ctx.api_token;
  auto r = os::unix_http_request(ctx.socket_path(), "GET", path, "", opts);
  if (!r) return report_daemon_error(ctx, r.error());
  auto j = json::parse(r->body, nullptr, false);
  if (r->status != 200 || !j.is_object()) {
    std::string msg = j.is_object() && j.contains("error") && j["error"].is_object()
                          ? j["error"].value("message", "yonderd refused the request")
                          : "yonderd answered HTTP " + std::to_string(r->status);
    return print_error(make_error(ErrorCode::kFailedPrecondition, msg), kExitError);
  }
  bool broken = verify && !j["verify"].value("ok", false);
  if (ctx.json) {
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("%-6s  %-19s  %-8s  %-11s  %-12s  %s\n", "SEQ", "TIME", "PEER", "ACTION", "JOB", "DETAIL");
    for (const auto& e : j["entries"]) {
      std::printf("%-6lld  %-19s  %-8s  %-11s  %-12s  %s\n", static_cast<long long>(e.value("seq", int64_t{0})),
                  local_time(e.value("at", int64_t{0})).c_str(), e.value("actor", "").substr(0, 7).c_str(),
                  e.value("action", "").c_str(), e.value("subject", "").substr(0, 12).c_str(), summary(e).c_str());
    }
    if (verify) {
      const json& v = j["verify"];
      if (broken) {
        std::printf("audit chain BROKEN at entry %lld: %s\n", static_cast<long long>(v.value("first_bad_seq", int64_t{0})),
                    v.value("problem", "").c_str());
      } else {
        std::printf("audit chain intact: %lld entries, head %s\n", static_cast<long long>(v.value("entries", int64_t{0})),
                    v.value("head_hash", "").c_str());
      }
      // Intact is not complete: entries the node could not write are named.
      for (const auto& seq : v.value("gaps", json::array())) {
        std::printf("audit gap recorded at entry %lld: entries were lost (`yonder audit` shows why)\n",
                    static_cast<long long>(seq.is_number_integer() ? seq.get<int64_t>() : 0));
      }
    }
  }
  if (broken) {
    std::fprintf(stderr, "yonder: the audit log was changed after it was written (entry %lld)\n",
                 static_cast<long long>(j["verify"].value("first_bad_seq", int64_t{0})));
    return kExitAuditBroken;
  }
  return kExitOk;
}

}  // namespace yonder::cli
