#include "cli/forward_commands.h"

#include <charconv>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/daemon_api.h"
#include "cli/exit_codes.h"

namespace yonder::cli {
namespace {

using nlohmann::json;

bool parse_port(std::string_view text, int min, int& out) {
  int v = -1;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || ptr != text.data() + text.size() || v < min || v > 65535) return false;
  out = v;
  return true;
}

void print_forward(const json& f) {
  bool host = f.value("to", "job") == "host";
  std::printf("%s  %s -> %s:%d  (%s)\n", f.value("forward_id", "").c_str(), f.value("address", "").c_str(),
              host ? "host" : f.value("job_id", "").c_str(), f.value("remote_port", 0),
              f.value("provider", "").c_str());
}

}  // namespace

int cmd_forward(const Context& ctx, const std::string& job, const std::string& ports) {
  // LOCAL:REMOTE, or REMOTE alone (the same port locally).
  size_t colon = ports.find(':');
  int local = 0, remote = 0;
  bool ok = colon == std::string::npos ? parse_port(ports, 1, remote) && parse_port(ports, 1, local)
                                       : parse_port(std::string_view(ports).substr(0, colon), 0, local) &&
                                             parse_port(std::string_view(ports).substr(colon + 1), 1, remote);
  if (!ok) {
    return print_error(make_error(ErrorCode::kInvalidArgument,
                                  "ports must be LOCAL:REMOTE (e.g. 8080:80; LOCAL 0 picks a free port) or REMOTE"),
                       kExitUsage);
  }
  auto r = api(ctx, "POST", "/v1/forwards", {{"target", job}, {"local_port", local}, {"remote_port", remote}});
  if (!r) return fail(ctx, r.error());
  if (ctx.json) {
    std::printf("%s\n", r->dump(2).c_str());
  } else if (r->value("to", "job") == "host") {
    std::printf("%s\n", r->value("address", "").c_str());
    std::fprintf(stderr, "forwarding %s to 127.0.0.1:%d on provider %s (stop with: yonder forward --stop %s)\n",
                 r->value("address", "").c_str(), remote, r->value("provider", job).c_str(),
                 r->value("forward_id", "").c_str());
  } else {
    std::printf("%s\n", r->value("address", "").c_str());
    std::fprintf(stderr, "forwarding %s to port %d of job %s (stop with: yonder forward --stop %s)\n",
                 r->value("address", "").c_str(), remote, r->value("job_id", job).c_str(),
                 r->value("forward_id", "").c_str());
  }
  return kExitOk;
}

int cmd_forward_list(const Context& ctx) {
  auto r = api(ctx, "GET", "/v1/forwards", nullptr);
  if (!r) return fail(ctx, r.error());
  if (ctx.json) {
    std::printf("%s\n", r->dump(2).c_str());
    return kExitOk;
  }
  for (const auto& f : r->value("forwards", json::array())) print_forward(f);
  return kExitOk;
}

int cmd_forward_stop(const Context& ctx, const std::string& forward_id) {
  auto r = api(ctx, "POST", "/v1/forwards/stop", {{"forward_id", forward_id}});
  if (!r) return fail(ctx, r.error());
  if (ctx.json) {
    std::printf("%s\n", r->dump(2).c_str());
  } else {
    std::printf("%s stopped\n", forward_id.c_str());
  }
  return kExitOk;
}

}  // namespace yonder::cli
