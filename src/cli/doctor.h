// `yonder doctor`: one line per check, pass/warn/fail, and the fix for each
// failure. The checks are independent of the daemon so they also diagnose a
// daemon that will not start.
#pragma once

#include <string>
#include <vector>

#include "cli/context.h"

namespace yonder::cli {

enum class CheckState { kPass, kWarn, kFail };

struct CheckResult {
  std::string name;
  CheckState state = CheckState::kFail;
  std::string summary;  // what was found
  std::string fix;      // what to do, for warn and fail
};

std::vector<CheckResult> run_doctor_checks(const Context& ctx);

// What doctor learned about the container engine at docker.socket (and the
// host's tools around it); engine_checks judges it without any I/O.
struct EngineFacts {
  std::string socket;
  bool reachable = false;
  bool answered_like_docker = false;  // the reply parsed as the Engine API's /version
  std::string error;                  // when !reachable
  bool podman = false;
  std::string version;
  std::string api_version;
  std::vector<std::string> runtimes;  // registered with the engine (Podman lists configured ones, installed or not)
  std::string runsc_path;             // runsc on PATH, "" if none
  std::string nvidia_ctk_path;        // nvidia-ctk on PATH, "" if none
  std::string podman_init_path;       // catatonit where Podman looks for it, "" if none
};

// The engine's checks, in order: "docker engine" (the engine, named as it
// is), "podman init (catatonit)" (Podman only), "nvidia container runtime",
// "gvisor (runsc, optional)". Pure.
std::vector<CheckResult> engine_checks(const EngineFacts& facts);

// Recognises nvidia-smi / NVML output that means WSL blocks GPU access, and
// returns the explanation, or "" when the text does not say so.
std::string explain_nvidia_smi(const std::string& output);

// Exit code: kExitOk when nothing failed (warnings allowed), kExitError otherwise.
int cmd_doctor(const Context& ctx);

}  // namespace yonder::cli
