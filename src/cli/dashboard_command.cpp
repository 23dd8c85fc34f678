#include "cli/dashboard_command.h"

#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/daemon_api.h"
#include "cli/exit_codes.h"

namespace yonder::cli {

int cmd_dashboard(const Context& ctx) {
  auto r = api(ctx, "POST", "/v1/dashboard/login", nlohmann::json::object());
  if (!r) return fail(ctx, r.error());
  std::string url = r->value("url", "");
  if (ctx.json) {
    std::printf("%s\n", r->dump(2).c_str());
    return kExitOk;
  }
  std::printf("Open this in a browser on this computer (it works once, for %lld s):\n\n  %s\n",
              static_cast<long long>(r->value("expires_in_s", 60)), url.c_str());
  return kExitOk;
}

}  // namespace yonder::cli
