// `yonder doctor`: one line per check, pass/warn/fail, and the fix for each
// failure. The checks are independent of the daemon so they also diagnose a
// daemon that will not start.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/context.h"

namespace yonder::cli {

// kSkip: a check this node does not need in its role (a consumer-only
// node's GPU and engine checks), reported with why, never a failure.
enum class CheckState { kPass, kWarn, kFail, kSkip };

struct CheckResult {
  std::string name;
  CheckState state = CheckState::kFail;
  std::string summary;  // what was found
  std::string fix;      // what to do, for warn and fail
};

std::vector<CheckResult> run_doctor_checks(const Context& ctx);

// What this node does, read from its daemon's GET /v1/peers and GET
// /v1/links answers: it provides when it grants a peer something or holds
// a link that can still be redeemed; it consumes when a peer granted it
// something. Denied peers count for neither. Pure.
struct DoctorRole {
  bool provides = false;
  bool consumes = false;
  bool consumer_only() const { return consumes && !provides; }
  std::string text() const;  // "provider", "consumer", "provider and consumer", "new (shares and uses nothing yet)"
};
DoctorRole doctor_role(const nlohmann::json& peers, const nlohmann::json& links);

// The check of one paired provider ("peer NAME"): `row` is its entry of GET
// /v1/peers after the ping, `ping_error` why a one-packet ping failed ("" if
// it answered). Pure.
CheckResult peer_check(const nlohmann::json& row, const std::string& ping_error);
// The check of one relay of this node ("relay ADDRESS"), from its entry of
// GET /v1/netcheck's "relays". Pure.
CheckResult relay_check(const nlohmann::json& relay);

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

// Exit code: kExitOk when nothing failed (warnings and skips allowed), kExitError otherwise.
int cmd_doctor(const Context& ctx);

}  // namespace yonder::cli
