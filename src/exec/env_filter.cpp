#include "exec/env_filter.h"

#include <algorithm>
#include <array>
#include <cctype>

namespace yonder::exec {
namespace {

// Whole names. Each one selects devices or changes what the runtime mounts.
constexpr std::array<std::string_view, 8> kReservedNames = {
    "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "CUDA_MPS_PIPE_DIRECTORY", "GPU_DEVICE_ORDINAL",
    "HIP_VISIBLE_DEVICES",  "ROCR_VISIBLE_DEVICES", "LD_PRELOAD_NVIDIA", "DOCKER_HOST",
};
// Prefixes: every NVIDIA_* variable is read by the NVIDIA container runtime
// (VISIBLE_DEVICES, DRIVER_CAPABILITIES, REQUIRE_*, DISABLE_REQUIRE,
// MIG_CONFIG_DEVICES, ...); YONDER_* is ours.
constexpr std::array<std::string_view, 2> kReservedPrefixes = {"NVIDIA_", "YONDER_"};
constexpr std::string_view kArrayPrefix = "YONDER_ARRAY_";

std::string upper(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::toupper(c); });
  return out;
}

}  // namespace

bool is_valid_env_name(std::string_view name) {
  if (name.empty() || name.size() > kMaxEnvNameBytes) return false;
  if (std::isdigit(static_cast<unsigned char>(name[0]))) return false;
  return std::all_of(name.begin(), name.end(),
                     [](unsigned char c) { return std::isalnum(c) || c == '_'; });
}

bool is_reserved_env(std::string_view name) {
  std::string u = upper(name);
  // An array task's index and parameter line are the consumer's
  // to give: they select nothing on the provider.
  if (u.rfind(kArrayPrefix, 0) == 0) return false;
  for (auto n : kReservedNames) {
    if (u == n) return true;
  }
  for (auto p : kReservedPrefixes) {
    if (u.rfind(p, 0) == 0) return true;
  }
  return false;
}

Status check_consumer_env(const std::map<std::string, std::string>& env) {
  if (env.size() > kMaxEnvVars) {
    return make_error(ErrorCode::kInvalidArgument, "a job may set at most " + std::to_string(kMaxEnvVars) +
                                                       " environment variables, not " + std::to_string(env.size()));
  }
  for (const auto& [name, value] : env) {
    if (!is_valid_env_name(name)) {
      return make_error(ErrorCode::kInvalidArgument,
                        "environment variable name '" + name.substr(0, 64) +
                            "' is not valid: use letters, digits and '_', not starting with a digit");
    }
    if (is_reserved_env(name)) {
      if (upper(name).rfind("YONDER_", 0) == 0) {
        return make_error(ErrorCode::kPermissionDenied,
                          "environment variable " + name +
                              " is set by the provider and cannot be set by a job (only YONDER_ARRAY_* can); rename it");
      }
      return make_error(ErrorCode::kPermissionDenied,
                        "environment variable " + name +
                            " is set by the provider from the job's GPU lease and cannot be set by a job; remove it "
                            "(ask for GPUs with \"gpus\" instead)");
    }
    if (value.size() > kMaxEnvValueBytes || value.find('\0') != std::string::npos) {
      return make_error(ErrorCode::kInvalidArgument, "environment variable " + name + " has a value longer than " +
                                                         std::to_string(kMaxEnvValueBytes) + " bytes or a NUL byte");
    }
  }
  return ok_status();
}

}  // namespace yonder::exec
