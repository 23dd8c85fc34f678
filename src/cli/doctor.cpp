#include "cli/doctor.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <utility>
#include <nlohmann/json.hpp>

#include "cli/daemon_api.h"
#include "cli/exit_codes.h"
#include "crypto/identity.h"
#include "exec/docker/docker_json.h"
#include "gpu/inventory.h"
#include "os/files.h"
#include "os/process.h"
#include "os/unix_http.h"

namespace yonder::cli {
namespace {

CheckResult pass(std::string name, std::string summary) {
  return {std::move(name), CheckState::kPass, std::move(summary), ""};
}
CheckResult fail(std::string name, std::string summary, std::string fix) {
  return {std::move(name), CheckState::kFail, std::move(summary), std::move(fix)};
}
CheckResult warn(std::string name, std::string summary, std::string fix) {
  return {std::move(name), CheckState::kWarn, std::move(summary), std::move(fix)};
}
CheckResult skip(std::string name, std::string summary) {
  return {std::move(name), CheckState::kSkip, std::move(summary), ""};
}

bool has_capabilities(const nlohmann::json& row, const char* key) {
  auto s = row.find(key);
  if (s == row.end() || !s->is_object()) return false;
  auto c = s->find("capabilities");
  return c != s->end() && c->is_string() && !c->get_ref<const std::string&>().empty();
}

// A row of GET /v1/peers that counts: an object, and not denied.
bool live_peer(const nlohmann::json& row) {
  if (!row.is_object()) return false;
  auto d = row.find("denied");
  return d == row.end() || !d->is_boolean() || !d->get<bool>();
}

std::string text_of(const nlohmann::json& j, const char* key) {
  auto v = j.is_object() ? j.find(key) : j.end();
  return v != j.end() && v->is_string() ? v->get<std::string>() : "";
}

CheckResult check_key(const Context& ctx) {
  auto st = check_key_file_permissions(ctx.paths.key_file());
  if (st) return pass("identity key", ctx.paths.key_file() + " is private (0600)");
  // Another user's node, e.g. the .deb's service (the user yonder) checked
  // by a member of its group: right when the key is private and belongs to
  // the owner of the node's folder, not to whoever runs doctor.
  struct stat key {}, home {};
  if (::stat(ctx.paths.key_file().c_str(), &key) == 0 && ::stat(ctx.paths.home.c_str(), &home) == 0 &&
      key.st_uid == home.st_uid && key.st_uid != ::geteuid() && (key.st_mode & 077) == 0) {
    return pass("identity key", ctx.paths.key_file() + " is private (0600) to the node's user (uid " +
                                    std::to_string(key.st_uid) + ")");
  }
  if (st.error().code() == ErrorCode::kNotFound) {
    return fail("identity key", "no identity at " + ctx.paths.key_file(), "run `yonder init`");
  }
  return fail("identity key", st.error().message(), "chmod 600 " + ctx.paths.key_file());
}

CheckResult check_api(const Context& ctx) {
  os::HttpRequestOptions opts;
  opts.timeout = std::chrono::seconds(3);
  opts.bearer_token = ctx.api_token;
  auto r = os::unix_http_request(ctx.socket_path(), "GET", "/v1/status", {}, opts);
  if (!r) {
    return fail("local API", "yonderd is not answering on " + ctx.socket_path(), "start it with `yonderd &`");
  }
  auto j = nlohmann::json::parse(r->body, nullptr, false);
  if (r->status != 200 || !j.is_object()) {
    return fail("local API", "something answers on " + ctx.socket_path() + " but not as yonderd expects",
                "stop the process that owns the socket, then start `yonderd`");
  }
  return pass("local API", "yonderd " + j.value("version", std::string("?")) + " answers on " + ctx.socket_path());
}

// Where Podman's Init=true looks for its init (containers.conf init_path
// default), then Debian's copy on PATH.
std::string find_podman_init() {
  for (const char* p : {"/usr/libexec/podman/catatonit", "/usr/bin/catatonit"}) {
    if (::access(p, X_OK) == 0) return p;
  }
  return "";
}

EngineFacts probe_engine(const std::string& socket) {
  EngineFacts f;
  f.socket = socket;
  f.runsc_path = os::find_in_path("runsc");
  f.nvidia_ctk_path = os::find_in_path("nvidia-ctk");
  os::HttpRequestOptions opts;
  opts.timeout = std::chrono::seconds(5);
  auto v = os::unix_http_request(socket, "GET", "/version", {}, opts);
  if (!v || v->status != 200) {
    f.error = v ? "HTTP " + std::to_string(v->status) : v.error().message();
    return f;
  }
  f.reachable = true;
  auto version = exec::docker::parse_version(v->body);
  if (!version) return f;
  f.answered_like_docker = true;
  f.podman = version->podman;
  f.version = version->version.empty() ? "?" : version->version;
  f.api_version = version->api_version.empty() ? "?" : version->api_version;
  if (f.podman) f.podman_init_path = find_podman_init();
  auto info = os::unix_http_request(socket, "GET", "/info", {}, opts);
  if (info && info->status == 200) {
    if (auto parsed = exec::docker::parse_info(info->body)) f.runtimes = parsed->runtimes;
  }
  return f;
}

CheckResult check_nvml(const Context& ctx) {
  const std::string name = "nvidia driver (NVML)";
  auto inventory = gpu::make_inventory(ctx.cfg.get("gpu.inventory"));
  if (!inventory) return fail(name, inventory.error().message(), "fix gpu.inventory: `yonder config show`");
  auto report = (*inventory)->probe();
  // nvidia-smi on WSL states the block more plainly than NVML does.
  std::string smi = os::find_in_path("nvidia-smi");
  if (!smi.empty()) {
    auto out = os::run_capture({smi, "-L"});
    if (out) {
      std::string why = explain_nvidia_smi(out->output);
      if (!why.empty()) return fail(name, "nvidia-smi: GPU access blocked by the operating system", why);
    }
  }
  if (report.state == gpu::InventoryState::kOk) {
    std::string fake = report.source == "fake" ? " (FAKE inventory for tests)" : "";
    return pass(name, std::to_string(report.devices.size()) + " GPU(s), driver " + report.driver_version + fake);
  }
  return fail(name, std::string(gpu::state_name(report.state)) + ": " +
                        (report.detail.empty() ? "see the fix" : report.detail),
              gpu::state_message(report));
}

const char* state_word(CheckState s) {
  switch (s) {
    case CheckState::kPass: return "pass";
    case CheckState::kWarn: return "warn";
    case CheckState::kFail: return "FAIL";
    case CheckState::kSkip: return "skip";
  }
  return "?";
}

}  // namespace

std::string explain_nvidia_smi(const std::string& output) {
  if (!gpu::mentions_blocked_by_os(output)) return "";
  return "Windows blocks GPU access from WSL: update the Windows NVIDIA driver (it provides WSL support), run "
         "`wsl --update` in Windows, restart WSL with `wsl --shutdown`, and do not install a Linux NVIDIA driver "
         "inside WSL";
}

std::vector<CheckResult> engine_checks(const EngineFacts& f) {
  std::vector<CheckResult> out;
  const std::string engine = "docker engine", init = "podman init (catatonit)",
                    nvidia = "nvidia container runtime", gvisor = "gvisor (runsc, optional)";
  if (!f.reachable || !f.answered_like_docker) {
    if (!f.reachable) {
      out.push_back(fail(engine, "not reachable at " + f.socket + " (" + f.error + ")",
                         "install and start Docker: `apt-get install docker.io && systemctl start docker` (or "
                         "`dockerd &`), or point docker.socket at Podman's socket (`podman system service`)"));
    } else {
      out.push_back(fail(engine, f.socket + " did not answer like the Docker Engine API", "check docker.socket"));
    }
    out.push_back(fail(nvidia, "cannot check: the container engine is not reachable", "fix the docker engine check first"));
    out.push_back(warn(gvisor, "cannot check: the container engine is not reachable", "fix the docker engine check first"));
    return out;
  }
  auto registered = [&](const char* name) {
    return std::find(f.runtimes.begin(), f.runtimes.end(), name) != f.runtimes.end();
  };
  if (f.podman) {
    out.push_back(pass(engine, "Podman " + f.version + " (API " + f.api_version + ") at " + f.socket));
    if (f.podman_init_path.empty()) {
      out.push_back(fail(init, "Podman runs every job with an init process (catatonit) and it is not installed: no job "
                               "can start",
                         "apt-get install catatonit"));
    } else {
      out.push_back(pass(init, "catatonit at " + f.podman_init_path));
    }
    // Podman's compatible API drops DeviceRequests and Runtime without an
    // error, so the executor refuses GPU and gVisor jobs on it: say so.
    out.push_back(fail(nvidia, "Podman's Docker-compatible API ignores GPU requests, so GPU jobs are refused on it",
                       "to share GPUs, run Docker with the NVIDIA Container Toolkit (`apt-get install docker.io "
                       "nvidia-container-toolkit`, `nvidia-ctk runtime configure --runtime=docker`, restart dockerd) "
                       "and point docker.socket at /var/run/docker.sock"));
    out.push_back(warn(gvisor, "Podman ignores the runtime a container asks for, so gVisor jobs are refused on it"
                                   " (jobs run with the standard isolation only)",
                       "for gVisor isolation use Docker: `apt-get install docker.io runsc`, `runsc install`, restart "
                       "dockerd, and point docker.socket at it"));
    return out;
  }
  out.push_back(pass(engine, "Docker " + f.version + " (API " + f.api_version + ") at " + f.socket));
  if (registered("nvidia")) {
    out.push_back(pass(nvidia, "the `nvidia` runtime is registered with Docker"));
  } else {
    std::string fix = f.nvidia_ctk_path.empty()
                          ? "install the NVIDIA Container Toolkit (nvidia-container-toolkit), then run "
                            "`nvidia-ctk runtime configure --runtime=docker` and restart dockerd"
                          : "run `nvidia-ctk runtime configure --runtime=docker` and restart dockerd";
    out.push_back(fail(nvidia, "Docker has no `nvidia` runtime, so containers cannot see GPUs", fix));
  }
  if (f.runsc_path.empty()) {
    out.push_back(warn(gvisor, "runsc is not installed; jobs run with runc only",
                       "for a user-space kernel around untrusted jobs: `apt-get install runsc`, then `runsc install` "
                       "and restart dockerd"));
  } else if (!registered("runsc")) {
    out.push_back(warn(gvisor, "runsc is at " + f.runsc_path + " but not registered with Docker",
                       "run `runsc install` and restart dockerd"));
  } else {
    out.push_back(pass(gvisor, "runsc at " + f.runsc_path + ", registered with Docker"));
  }
  return out;
}

std::string DoctorRole::text() const {
  if (provides && consumes) return "provider and consumer";
  if (provides) return "provider";
  if (consumes) return "consumer";
  return "new (shares and uses nothing yet)";
}

DoctorRole doctor_role(const nlohmann::json& peers, const nlohmann::json& links) {
  DoctorRole role;
  auto list = [](const nlohmann::json& answer, const char* key) {
    auto a = answer.is_object() ? answer.find(key) : answer.end();
    return a != answer.end() && a->is_array() ? *a : nlohmann::json::array();
  };
  for (const auto& p : list(peers, "peers")) {
    if (!live_peer(p)) continue;
    role.provides = role.provides || has_capabilities(p, "grant");
    role.consumes = role.consumes || has_capabilities(p, "granted_to_us");
  }
  for (const auto& l : list(links, "links")) role.provides = role.provides || text_of(l, "state") == "active";
  return role;
}

CheckResult peer_check(const nlohmann::json& row, const std::string& ping_error) {
  std::string name = "peer " + text_of(row, "name");
  if (!ping_error.empty()) {
    return fail(name, "not reachable: " + ping_error,
                "it may be off, or its addresses changed: `yonder peers " + text_of(row, "name") +
                    "` shows the addresses tried; its owner can run `yonder doctor` and `yonder netcheck` there, and "
                    "send a new link if it moved");
  }
  std::string path = text_of(row, "path");
  if (path.empty()) return pass(name, "answered");
  return pass(name, "reachable, " + path);
}

CheckResult relay_check(const nlohmann::json& relay) {
  std::string name = "relay " + text_of(relay, "address");
  std::string state = text_of(relay, "state");
  if (state == "registered") {
    std::string seen = text_of(relay, "observed_addr");
    return pass(name, "registered" + (seen.empty() ? "" : ", it sees this node as " + seen));
  }
  std::string why = text_of(relay, "error");
  return fail(name, state.empty() ? "no state" : state + (why.empty() ? "" : ": " + why),
              "check that yonder-relay runs there and that link.relays names it with its key (`yonder netcheck` shows "
              "what this node sees)");
}

std::vector<CheckResult> run_doctor_checks(const Context& ctx) {
  std::vector<CheckResult> out;
  out.push_back(check_key(ctx));
  out.push_back(check_api(ctx));
  // The node's role, when its daemon answers: a node that only uses other
  // nodes' GPUs needs no engine or driver of its own, and needs its
  // providers (and relays) to answer instead.
  DoctorRole role;
  bool role_known = false;
  nlohmann::json peers;
  if (out.back().state == CheckState::kPass) {
    auto p = api(ctx, "GET", "/v1/peers", nullptr, std::chrono::seconds(10));
    auto l = api(ctx, "GET", "/v1/links", nullptr, std::chrono::seconds(10));
    if (p && l) {
      peers = *p;
      role = doctor_role(*p, *l);
      role_known = true;
      out.push_back(pass("role", role.text()));
    }
  }
  auto engine = engine_checks(probe_engine(ctx.cfg.get("docker.socket")));
  // The NVML check sits between the engine's own and gVisor's, as before.
  std::vector<CheckResult> provider(engine.begin(), engine.end() - 1);
  provider.push_back(check_nvml(ctx));
  provider.push_back(engine.back());
  for (auto& c : provider) {
    if (role_known && role.consumer_only()) {
      c = skip(c.name, "not needed: this node only uses other nodes' GPUs (it shares nothing). Was: " + c.summary);
    }
    out.push_back(std::move(c));
  }
  if (!role_known || !role.consumes) return out;
  // Each provider that granted us something, asked now (one ping each).
  std::vector<std::pair<std::string, std::string>> asked;  // node id, ping error
  for (const auto& p : peers.value("peers", nlohmann::json::array())) {
    if (!live_peer(p) || !has_capabilities(p, "granted_to_us")) continue;
    std::string id = text_of(p, "node_id");
    auto ping = api(ctx, "POST", "/v1/peers/ping", {{"peer", id}, {"count", 1}}, std::chrono::seconds(20));
    asked.emplace_back(id, ping ? "" : ping.error().message());
  }
  auto after = api(ctx, "GET", "/v1/peers", nullptr, std::chrono::seconds(10));
  const nlohmann::json& rows = after ? *after : peers;
  for (const auto& [id, error] : asked) {
    for (const auto& p : rows.value("peers", nlohmann::json::array())) {
      if (text_of(p, "node_id") == id) out.push_back(peer_check(p, error));
    }
  }
  auto net = api(ctx, "GET", "/v1/netcheck", nullptr, std::chrono::seconds(20));
  if (net && net->contains("relays") && (*net)["relays"].is_array()) {
    for (const auto& r : (*net)["relays"]) out.push_back(relay_check(r));
  }
  return out;
}

int cmd_doctor(const Context& ctx) {
  auto checks = run_doctor_checks(ctx);
  bool failed = false;
  for (const auto& c : checks) failed = failed || c.state == CheckState::kFail;
  if (ctx.json) {
    nlohmann::json arr = nlohmann::json::array();
    for (const auto& c : checks) {
      arr.push_back({{"check", c.name}, {"state", c.state == CheckState::kFail ? "fail" : state_word(c.state)},
                     {"summary", c.summary}, {"fix", c.fix}});
    }
    std::printf("%s\n", nlohmann::json({{"ok", !failed}, {"checks", arr}}).dump(2).c_str());
    return failed ? kExitError : kExitOk;
  }
  for (const auto& c : checks) {
    std::printf("[%s] %-26s %s\n", state_word(c.state), c.name.c_str(), c.summary.c_str());
    if (!c.fix.empty()) std::printf("       %-26s fix: %s\n", "", c.fix.c_str());
  }
  int fails = 0;
  for (const auto& c : checks) fails += c.state == CheckState::kFail;
  std::printf("\n%s\n", failed ? (std::to_string(fails) + " check(s) failed: apply the fixes above and run `yonder doctor` again").c_str()
                               : "All required checks passed.");
  return failed ? kExitError : kExitOk;
}

}  // namespace yonder::cli
