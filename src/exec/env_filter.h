// The environment a consumer may give a job. Variables that steer the
// container runtime or GPU selection (NVIDIA_VISIBLE_DEVICES and the other
// NVIDIA_* controls, CUDA_VISIBLE_DEVICES, ...) are set by the provider from
// the job's lease and can never come from the consumer: a job asking for
// them is refused, with the variable named, rather than silently altered.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "base/error.h"

namespace yonder::exec {

constexpr size_t kMaxEnvVars = 256;
constexpr size_t kMaxEnvNameBytes = 256;
constexpr size_t kMaxEnvValueBytes = 32 * 1024;

// Letters, digits and '_', not starting with a digit, at most kMaxEnvNameBytes.
bool is_valid_env_name(std::string_view name);

// True for names the provider reserves (compared case-insensitively).
bool is_reserved_env(std::string_view name);

// kInvalidArgument naming the first bad or reserved variable.
Status check_consumer_env(const std::map<std::string, std::string>& env);

}  // namespace yonder::exec
