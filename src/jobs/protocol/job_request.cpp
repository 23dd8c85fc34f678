#include "jobs/protocol/job_request.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "exec/env_filter.h"
#include "exec/image_policy.h"

namespace yonder::jobs::protocol {
namespace {

using nlohmann::json;
constexpr size_t kMaxArgs = 256;
constexpr size_t kMaxArgBytes = 64 * 1024;
constexpr size_t kMaxCommandBytes = 256 * 1024;

Error bad(const std::string& field, const std::string& why) {
  return make_error(ErrorCode::kInvalidArgument, "job request: '" + field + "' " + why);
}

Result<int64_t> read_int(const json& j, const char* key, int64_t min, int64_t max) {
  const json& v = j.at(key);
  if (!v.is_number_integer()) return bad(key, "must be an integer");
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(max)) {
    return bad(key, "must be at most " + std::to_string(max));
  }
  int64_t x = v.get<int64_t>();
  if (x < min || x > max) return bad(key, "must be from " + std::to_string(min) + " to " + std::to_string(max));
  return x;
}

// The path's components without "" and "."; nullopt when one is "..".
std::optional<std::vector<std::string>> path_parts(std::string_view path) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (start <= path.size()) {
    size_t slash = path.find('/', start);
    if (slash == std::string_view::npos) slash = path.size();
    std::string_view part = path.substr(start, slash - start);
    if (part == "..") return std::nullopt;
    if (!part.empty() && part != ".") parts.emplace_back(part);
    start = slash + 1;
  }
  return parts;
}

// A provider's job id as it names them (and a prefix could not be): 1 to
// 64 of [A-Za-z0-9._-].
bool valid_job_id(const std::string& id) {
  if (id.empty() || id.size() > 64) return false;
  return std::all_of(id.begin(), id.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '.' || c == '_' || c == '-';
  });
}

Status check_workdir(const std::string& w) {
  if (w.size() > kMaxWorkdirBytes) return bad("workdir", "is longer than 1024 bytes");
  for (char c : w) {
    if (static_cast<unsigned char>(c) < 0x20) return bad("workdir", "has a NUL or control character");
  }
  auto parts = path_parts(w);
  if (!parts) return bad("workdir", "must not contain \"..\" (it stays inside the workspace)");
  if (!w.empty() && w.front() == '/' && (parts->empty() || (*parts)[0] != "workspace")) {
    return bad("workdir", "must be relative to the workspace or a path under /workspace");
  }
  return ok_status();
}

}  // namespace

std::string job_workdir(const std::string& workdir) {
  auto parts = path_parts(workdir).value_or(std::vector<std::string>{});
  // An absolute path starts with "workspace", already checked.
  size_t first = !workdir.empty() && workdir.front() == '/' ? 1 : 0;
  std::string out = kWorkspaceMount;
  for (size_t i = first; i < parts.size(); ++i) out += "/" + parts[i];
  return out;
}

json JobRequest::to_json() const {
  json j = {{"image", image},       {"command", command},         {"env", env},
            {"gpus", gpus},         {"vram_mib", vram_mib},       {"cpus", cpus},
            {"memory_mib", memory_mib}, {"disk_mib", disk_mib},   {"wall_time_s", wall_time_s},
            {"isolation", exec::isolation_name(isolation)}, {"network", egress ? "egress" : "none"},
            {"workdir", workdir},   {"tty", tty}};
  // Only when set: a provider older than these fields refuses a request
  // that has them (an unknown field) rather than run it without them.
  if (!after.empty()) j["after"] = after;
  if (!after_ok.empty()) j["after_ok"] = after_ok;
  if (hold) j["hold"] = true;
  if (shm_mib > 0) j["shm_mib"] = shm_mib;
  if (share_vram_mib > 0) j["share_vram_mib"] = share_vram_mib;
  if (share_permille > 0) j["share_permille"] = share_permille;
  return j;
}

Result<JobRequest> parse_job_request(const json& j) {
  if (!j.is_object()) return make_error(ErrorCode::kInvalidArgument, "job request must be a JSON object");
  static const std::set<std::string> known = {"image", "command", "env", "gpus", "vram_mib", "cpus", "memory_mib",
                                              "disk_mib", "wall_time_s", "isolation", "network", "peer_id",
                                              "workdir", "tty", "after", "after_ok", "hold", "shm_mib",
                                              "share_vram_mib", "share_permille"};
  for (const auto& [key, _] : j.items()) {
    if (!known.count(key)) return bad(key.substr(0, 64), "is not a known field (check the spelling)");
  }
  JobRequest r;
  auto image = j.find("image");
  if (image == j.end() || !image->is_string()) return bad("image", "is required and must be a string");
  r.image = image->get<std::string>();
  auto ref = exec::parse_image_ref(r.image);
  if (!ref) return std::move(ref).error();
  if (auto c = j.find("command"); c != j.end()) {
    if (!c->is_array()) return bad("command", "must be an array of strings");
    if (c->size() > kMaxArgs) return bad("command", "has more than 256 arguments");
    size_t total = 0;
    for (const auto& a : *c) {
      if (!a.is_string()) return bad("command", "must be an array of strings");
      const auto& s = a.get_ref<const std::string&>();
      if (s.size() > kMaxArgBytes || s.find('\0') != std::string::npos) {
        return bad("command", "has an argument longer than 64 KiB or with a NUL byte");
      }
      total += s.size();
      r.command.push_back(s);
    }
    if (total > kMaxCommandBytes) return bad("command", "is longer than 256 KiB in all");
  }
  if (auto e = j.find("env"); e != j.end()) {
    if (!e->is_object()) return bad("env", "must be an object of strings");
    if (e->size() > exec::kMaxEnvVars) return bad("env", "has more than 256 variables");
    for (const auto& [k, v] : e->items()) {
      if (!v.is_string()) return bad("env." + k.substr(0, 64), "must be a string");
      r.env[k] = v.get<std::string>();
    }
    YONDER_TRY(exec::check_consumer_env(r.env));
  }
  struct IntField {
    const char* key;
    int64_t max;
    int64_t* out;
  };
  int64_t gpus = 0, permille = 0;
  for (auto f : {IntField{"gpus", 64, &gpus}, IntField{"vram_mib", 16 << 20, &r.vram_mib},
                 IntField{"memory_mib", 16 << 20, &r.memory_mib}, IntField{"disk_mib", 64 << 20, &r.disk_mib},
                 IntField{"wall_time_s", 365LL * 86400, &r.wall_time_s},
                 IntField{"shm_mib", 16 << 20, &r.shm_mib}, IntField{"share_vram_mib", 16 << 20, &r.share_vram_mib},
                 IntField{"share_permille", 999, &permille}}) {
    if (!j.contains(f.key)) continue;
    auto v = read_int(j, f.key, 0, f.max);
    if (!v) return std::move(v).error();
    *f.out = *v;
  }
  r.gpus = static_cast<int>(gpus);
  r.share_permille = static_cast<int32_t>(permille);
  if (r.share_vram_mib > 0 && r.share_permille > 0) {
    return bad("share_vram_mib", "and 'share_permille' both ask for a share: give one (--vram 8G or --gpus 0.5)");
  }
  if (r.share() && r.gpus > 0) {
    return bad("gpus", "must be 0 for a share of a GPU (--gpus 0.5 or --vram alone): ask for whole GPUs or a share");
  }
  if (r.share_vram_mib > 0 && r.vram_mib > 0) {
    return bad("vram_mib", "goes with whole GPUs or a fraction (its cap), not with 'share_vram_mib'");
  }
  if (auto c = j.find("cpus"); c != j.end()) {
    if (!c->is_number()) return bad("cpus", "must be a number");
    double v = c->get<double>();
    if (!std::isfinite(v) || v < 0 || v > 1024) return bad("cpus", "must be from 0 to 1024");
    r.cpus = v;
  }
  if (auto i = j.find("isolation"); i != j.end()) {
    if (!i->is_string()) return bad("isolation", "must be \"standard\" or \"gvisor\"");
    std::string v = i->get<std::string>();
    if (v == "gvisor") {
      r.isolation = exec::Isolation::kGvisor;
    } else if (v != "standard") {
      return bad("isolation", "must be \"standard\" or \"gvisor\"");
    }
  }
  if (auto n = j.find("network"); n != j.end()) {
    if (!n->is_string()) return bad("network", "must be \"none\" or \"egress\"");
    std::string v = n->get<std::string>();
    if (v == "egress") {
      r.egress = true;
    } else if (v != "none") {
      return bad("network", "must be \"none\" or \"egress\"");
    }
  }
  if (auto w = j.find("workdir"); w != j.end()) {
    if (!w->is_string()) return bad("workdir", "must be a string");
    r.workdir = w->get<std::string>();
    YONDER_TRY(check_workdir(r.workdir));
  }
  if (auto t = j.find("tty"); t != j.end()) {
    if (!t->is_boolean()) return bad("tty", "must be true or false");
    r.tty = t->get<bool>();
  }
  for (auto [key, out] : {std::pair{"after", &r.after}, std::pair{"after_ok", &r.after_ok}}) {
    auto a = j.find(key);
    if (a == j.end()) continue;
    if (!a->is_array() || a->size() > kMaxDependencies) return bad(key, "must be a list of at most 16 job ids");
    for (const auto& id : *a) {
      if (!id.is_string() || !valid_job_id(id.get<std::string>())) return bad(key, "must hold job ids");
      out->push_back(id.get<std::string>());
    }
  }
  if (r.after.size() + r.after_ok.size() > kMaxDependencies) return bad("after", "names more than 16 jobs in all");
  if (auto h = j.find("hold"); h != j.end()) {
    if (!h->is_boolean()) return bad("hold", "must be true or false");
    r.hold = h->get<bool>();
  }
  return r;
}

}  // namespace yonder::jobs::protocol
