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

// Recognises nvidia-smi / NVML output that means WSL blocks GPU access, and
// returns the explanation, or "" when the text does not say so.
std::string explain_nvidia_smi(const std::string& output);

// Exit code: kExitOk when nothing failed (warnings allowed), kExitError otherwise.
int cmd_doctor(const Context& ctx);

}  // namespace yonder::cli
