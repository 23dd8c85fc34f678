#include "cli/doctor.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/exit_codes.h"
#include "crypto/identity.h"
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

struct DockerFacts {
  bool reachable = false;
  std::string error;
  nlohmann::json info;
};

DockerFacts docker_facts(const std::string& socket, CheckResult& out) {
  DockerFacts f;
  os::HttpRequestOptions opts;
  opts.timeout = std::chrono::seconds(5);
  auto v = os::unix_http_request(socket, "GET", "/version", {}, opts);
  if (!v || v->status != 200) {
    f.error = v ? "HTTP " + std::to_string(v->status) : v.error().message();
    out = fail("docker engine", "not reachable at " + socket + " (" + f.error + ")",
               "install and start Docker: `apt-get install docker.io && systemctl start docker` (or `dockerd &`), "
               "or point docker.socket at Podman's socket");
    return f;
  }
  auto j = nlohmann::json::parse(v->body, nullptr, false);
  if (!j.is_object()) {
    out = fail("docker engine", socket + " did not answer like the Docker Engine API", "check docker.socket");
    return f;
  }
  f.reachable = true;
  std::string version = j.value("Version", std::string("?"));
  std::string api = j.value("ApiVersion", std::string("?"));
  out = pass("docker engine", "Docker " + version + " (API " + api + ") at " + socket);
  auto info = os::unix_http_request(socket, "GET", "/info", {}, opts);
  if (info && info->status == 200) f.info = nlohmann::json::parse(info->body, nullptr, false);
  return f;
}

CheckResult check_nvidia_runtime(const DockerFacts& docker) {
  const std::string name = "nvidia container runtime";
  if (!docker.reachable) {
    return fail(name, "cannot check: the Docker engine is not reachable", "fix the docker engine check first");
  }
  bool registered = docker.info.is_object() && docker.info.contains("Runtimes") &&
                    docker.info["Runtimes"].is_object() && docker.info["Runtimes"].contains("nvidia");
  if (registered) return pass(name, "the `nvidia` runtime is registered with Docker");
  std::string ctk = os::find_in_path("nvidia-ctk");
  std::string fix = ctk.empty()
                        ? "install the NVIDIA Container Toolkit (nvidia-container-toolkit), then run "
                          "`nvidia-ctk runtime configure --runtime=docker` and restart dockerd"
                        : "run `nvidia-ctk runtime configure --runtime=docker` and restart dockerd";
  return fail(name, "Docker has no `nvidia` runtime, so containers cannot see GPUs", fix);
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

CheckResult check_runsc(const DockerFacts& docker) {
  const std::string name = "gvisor (runsc, optional)";
  std::string runsc = os::find_in_path("runsc");
  bool registered = docker.info.is_object() && docker.info.contains("Runtimes") &&
                    docker.info["Runtimes"].is_object() && docker.info["Runtimes"].contains("runsc");
  if (runsc.empty()) {
    return warn(name, "runsc is not installed; jobs run with runc only",
                "for a user-space kernel around untrusted jobs: `apt-get install runsc`, then `runsc install` "
                "and restart dockerd");
  }
  if (!registered) {
    return warn(name, "runsc is at " + runsc + " but not registered with Docker", "run `runsc install` and restart dockerd");
  }
  return pass(name, "runsc at " + runsc + ", registered with Docker");
}

const char* state_word(CheckState s) {
  switch (s) {
    case CheckState::kPass: return "pass";
    case CheckState::kWarn: return "warn";
    case CheckState::kFail: return "FAIL";
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

std::vector<CheckResult> run_doctor_checks(const Context& ctx) {
  std::vector<CheckResult> out;
  out.push_back(check_key(ctx));
  out.push_back(check_api(ctx));
  CheckResult docker_check;
  DockerFacts docker = docker_facts(ctx.cfg.get("docker.socket"), docker_check);
  out.push_back(docker_check);
  out.push_back(check_nvidia_runtime(docker));
  out.push_back(check_nvml(ctx));
  out.push_back(check_runsc(docker));
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
