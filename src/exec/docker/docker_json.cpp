#include "exec/docker/docker_json.h"

#include <nlohmann/json.hpp>

#include "exec/docker/log_frames.h"

namespace yonder::exec::docker {
namespace {

using json = nlohmann::json;
constexpr size_t kMaxString = 64 * 1024;
constexpr size_t kMaxItems = 10000;

Error shape(const char* what, const std::string& why) {
  return make_error(ErrorCode::kInternal, std::string("unexpected Docker reply to ") + what + ": " + why);
}

Result<json> parse_body(std::string_view body, const char* what) {
  if (body.size() > kMaxJsonBody) return shape(what, "larger than " + std::to_string(kMaxJsonBody) + " bytes");
  json j = json::parse(body.begin(), body.end(), nullptr, false);
  if (j.is_discarded()) return shape(what, "not JSON");
  if (!j.is_object() && !j.is_array()) return shape(what, "not a JSON object");
  return j;
}

// Optional readers: absent or null gives the fallback; a wrong type is an error.
Result<std::string> str(const json& o, const char* key, const char* what, std::string fallback = {}) {
  auto it = o.find(key);
  if (it == o.end() || it->is_null()) return fallback;
  if (!it->is_string()) return shape(what, std::string(key) + " is not a string");
  const auto& s = it->get_ref<const std::string&>();
  if (s.size() > kMaxString) return shape(what, std::string(key) + " is too long");
  return s;
}

Result<int64_t> integer(const json& o, const char* key, const char* what, int64_t fallback = 0) {
  auto it = o.find(key);
  if (it == o.end() || it->is_null()) return fallback;
  if (it->is_number_unsigned()) {
    if (it->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) return shape(what, std::string(key) + " is out of range");
    return static_cast<int64_t>(it->get<uint64_t>());
  }
  if (!it->is_number_integer()) return shape(what, std::string(key) + " is not an integer");
  return it->get<int64_t>();
}

Result<bool> boolean(const json& o, const char* key, const char* what) {
  auto it = o.find(key);
  if (it == o.end() || it->is_null()) return false;
  if (!it->is_boolean()) return shape(what, std::string(key) + " is not a boolean");
  return it->get<bool>();
}

const json* object(const json& o, const char* key) {
  auto it = o.find(key);
  if (it == o.end() || !it->is_object()) return nullptr;
  return &*it;
}

Result<std::map<std::string, std::string>> labels(const json& o, const char* what) {
  std::map<std::string, std::string> out;
  auto it = o.find("Labels");
  if (it == o.end() || it->is_null()) return out;
  if (!it->is_object()) return shape(what, "Labels is not an object");
  if (it->size() > kMaxItems) return shape(what, "too many labels");
  for (const auto& [k, v] : it->items()) {
    if (!v.is_string()) return shape(what, "label " + k.substr(0, 64) + " is not a string");
    out[k] = v.get<std::string>();
  }
  return out;
}

int clamp_int(int64_t v) {
  return static_cast<int>(std::max<int64_t>(INT32_MIN, std::min<int64_t>(INT32_MAX, v)));
}

#define YONDER_ASSIGN(lhs, expr)                          \
  do {                                                    \
    auto yonder_r_ = (expr);                              \
    if (!yonder_r_) return std::move(yonder_r_).error();  \
    lhs = std::move(*yonder_r_);                          \
  } while (0)

}  // namespace

std::string parse_error_message(std::string_view body) {
  if (body.size() <= kMaxJsonBody) {
    json j = json::parse(body.begin(), body.end(), nullptr, false);
    if (j.is_object()) {
      auto it = j.find("message");
      if (it != j.end() && it->is_string()) return it->get<std::string>().substr(0, 2048);
    }
  }
  std::string text(body.substr(0, 512));
  for (char& c : text) {
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) c = '?';
  }
  return text;
}

Result<std::string> parse_create_response(std::string_view body) {
  constexpr const char* what = "container create";
  json j;
  YONDER_ASSIGN(j, parse_body(body, what));
  if (!j.is_object()) return shape(what, "not an object");
  std::string id;
  YONDER_ASSIGN(id, str(j, "Id", what));
  if (id.empty() || id.size() > 128) return shape(what, "no container Id");
  return id;
}

Result<ContainerInfo> parse_inspect(std::string_view body) {
  constexpr const char* what = "container inspect";
  json j;
  YONDER_ASSIGN(j, parse_body(body, what));
  if (!j.is_object()) return shape(what, "not an object");
  ContainerInfo info;
  YONDER_ASSIGN(info.id, str(j, "Id", what));
  const json* state = object(j, "State");
  if (state == nullptr) return shape(what, "no State object");
  YONDER_ASSIGN(info.status, str(*state, "Status", what));
  YONDER_ASSIGN(info.running, boolean(*state, "Running", what));
  int64_t v = 0;
  YONDER_ASSIGN(v, integer(*state, "Pid", what));
  info.pid = clamp_int(v);
  YONDER_ASSIGN(v, integer(*state, "ExitCode", what));
  info.exit_code = clamp_int(v);
  YONDER_ASSIGN(info.oom_killed, boolean(*state, "OOMKilled", what));
  YONDER_ASSIGN(info.error, str(*state, "Error", what));
  std::string t;
  YONDER_ASSIGN(t, str(*state, "StartedAt", what));
  if (!t.empty()) YONDER_ASSIGN(info.started_at_ns, parse_rfc3339_ns(t));
  YONDER_ASSIGN(t, str(*state, "FinishedAt", what));
  if (!t.empty()) YONDER_ASSIGN(info.finished_at_ns, parse_rfc3339_ns(t));
  if (const json* config = object(j, "Config")) {
    YONDER_ASSIGN(info.labels, labels(*config, what));
    YONDER_ASSIGN(info.tty, boolean(*config, "Tty", what));
  }
  if (const json* host = object(j, "HostConfig")) YONDER_ASSIGN(info.runtime, str(*host, "Runtime", what));
  return info;
}

Result<WaitResult> parse_wait(std::string_view body) {
  constexpr const char* what = "container wait";
  json j;
  YONDER_ASSIGN(j, parse_body(body, what));
  if (!j.is_object() || !j.contains("StatusCode")) return shape(what, "no StatusCode");
  WaitResult r;
  int64_t code = 0;
  YONDER_ASSIGN(code, integer(j, "StatusCode", what));
  r.status_code = clamp_int(code);
  if (const json* err = object(j, "Error")) YONDER_ASSIGN(r.error, str(*err, "Message", what));
  return r;
}

Result<EngineVersion> parse_version(std::string_view body) {
  constexpr const char* what = "version";
  json j;
  YONDER_ASSIGN(j, parse_body(body, what));
  if (!j.is_object()) return shape(what, "not an object");
  EngineVersion v;
  YONDER_ASSIGN(v.version, str(j, "Version", what));
  YONDER_ASSIGN(v.api_version, str(j, "ApiVersion", what));
  // Podman's compatible API names itself in Platform.Name and Components.
  if (const json* platform = object(j, "Platform")) {
    std::string name;
    YONDER_ASSIGN(name, str(*platform, "Name", what));
    if (name.find("Podman") != std::string::npos || name.find("podman") != std::string::npos) v.podman = true;
  }
  auto comps = j.find("Components");
  if (comps != j.end() && comps->is_array()) {
    if (comps->size() > kMaxItems) return shape(what, "too many components");
    for (const auto& c : *comps) {
      if (!c.is_object()) continue;
      std::string name;
      YONDER_ASSIGN(name, str(c, "Name", what));
      if (name.find("Podman") != std::string::npos) v.podman = true;
    }
  }
  return v;
}

Result<EngineInfo> parse_info(std::string_view body) {
  constexpr const char* what = "info";
  json j;
  YONDER_ASSIGN(j, parse_body(body, what));
  if (!j.is_object()) return shape(what, "not an object");
  EngineInfo info;
  if (const json* runtimes = object(j, "Runtimes")) {
    if (runtimes->size() > kMaxItems) return shape(what, "too many runtimes");
    for (const auto& [name, _] : runtimes->items()) info.runtimes.push_back(name.substr(0, 256));
  }
  YONDER_ASSIGN(info.default_runtime, str(j, "DefaultRuntime", what));
  std::string cg;
  YONDER_ASSIGN(cg, str(j, "CgroupVersion", what));
  info.cgroup_version = cg == "2" ? 2 : cg == "1" ? 1 : 0;
  return info;
}

Result<std::vector<ListedContainer>> parse_container_list(std::string_view body) {
  constexpr const char* what = "container list";
  json j;
  YONDER_ASSIGN(j, parse_body(body, what));
  if (!j.is_array()) return shape(what, "not an array");
  if (j.size() > kMaxItems) return shape(what, "too many containers");
  std::vector<ListedContainer> out;
  for (const auto& c : j) {
    if (!c.is_object()) return shape(what, "an entry is not an object");
    ListedContainer lc;
    YONDER_ASSIGN(lc.id, str(c, "Id", what));
    YONDER_ASSIGN(lc.state, str(c, "State", what));
    YONDER_ASSIGN(lc.labels, labels(c, what));
    out.push_back(std::move(lc));
  }
  return out;
}

Result<TaskStats> parse_stats(std::string_view body) {
  constexpr const char* what = "container stats";
  json j;
  YONDER_ASSIGN(j, parse_body(body, what));
  if (!j.is_object()) return shape(what, "not an object");
  TaskStats s;
  int64_t v = 0;
  if (const json* mem = object(j, "memory_stats")) {
    YONDER_ASSIGN(v, integer(*mem, "usage", what));
    s.memory_bytes = static_cast<uint64_t>(std::max<int64_t>(v, 0));
  }
  if (const json* cpu = object(j, "cpu_stats")) {
    if (const json* usage = object(*cpu, "cpu_usage")) {
      YONDER_ASSIGN(v, integer(*usage, "total_usage", what));
      s.cpu_total_ns = static_cast<uint64_t>(std::max<int64_t>(v, 0));
    }
  }
  if (const json* pids = object(j, "pids_stats")) {
    YONDER_ASSIGN(v, integer(*pids, "current", what));
    s.pids = static_cast<uint64_t>(std::max<int64_t>(v, 0));
  }
  return s;
}

Result<std::string> parse_exec_create(std::string_view body) {
  constexpr const char* what = "exec create";
  json j;
  YONDER_ASSIGN(j, parse_body(body, what));
  if (!j.is_object()) return shape(what, "not an object");
  std::string id;
  YONDER_ASSIGN(id, str(j, "Id", what));
  if (id.empty() || id.size() > 128) return shape(what, "no exec Id");
  return id;
}

Result<ExecInfo> parse_exec_inspect(std::string_view body) {
  constexpr const char* what = "exec inspect";
  json j;
  YONDER_ASSIGN(j, parse_body(body, what));
  if (!j.is_object()) return shape(what, "not an object");
  ExecInfo e;
  YONDER_ASSIGN(e.running, boolean(j, "Running", what));
  int64_t code = -1;
  YONDER_ASSIGN(code, integer(j, "ExitCode", what, -1));
  e.exit_code = clamp_int(code);
  return e;
}

Result<ImageInfo> parse_image_inspect(std::string_view body) {
  constexpr const char* what = "image inspect";
  json j;
  YONDER_ASSIGN(j, parse_body(body, what));
  if (!j.is_object()) return shape(what, "not an object");
  ImageInfo info;
  YONDER_ASSIGN(info.id, str(j, "Id", what));
  auto it = j.find("RepoDigests");
  if (it != j.end() && it->is_array()) {
    if (it->size() > kMaxItems) return shape(what, "too many RepoDigests");
    for (const auto& d : *it) {
      if (!d.is_string()) return shape(what, "a RepoDigest is not a string");
      info.repo_digests.push_back(d.get<std::string>().substr(0, 1024));
    }
  }
  return info;
}

std::string parse_pull_progress_error(std::string_view line) {
  if (line.size() > kMaxJsonBody) return "";
  json j = json::parse(line.begin(), line.end(), nullptr, false);
  if (!j.is_object()) return "";
  auto it = j.find("error");
  if (it != j.end() && it->is_string()) return it->get<std::string>().substr(0, 2048);
  if (const json* detail = object(j, "errorDetail")) {
    auto m = detail->find("message");
    if (m != detail->end() && m->is_string()) return m->get<std::string>().substr(0, 2048);
  }
  return "";
}

}  // namespace yonder::exec::docker
