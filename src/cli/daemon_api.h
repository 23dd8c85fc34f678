// JSON calls to the local daemon for the job commands (run, ps, logs, stop,
// cp and the attached part of run), with the daemon's {"error"} replies
// turned back into Errors with their codes.
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>

#include "base/error.h"
#include "cli/context.h"
#include "cli/exit_codes.h"

namespace yonder::cli {

// One call to the daemon; an {"error"} reply becomes the Error. With
// `interrupt_fd` >= 0 the call gives up as soon as that fd is readable (the
// self-pipe of run's signal handler): check the fd, not the error.
Result<nlohmann::json> api(const Context& ctx, const std::string& method, const std::string& path,
                           const nlohmann::json& body = nullptr,
                           std::chrono::milliseconds timeout = std::chrono::seconds(60), int interrupt_fd = -1);

// A value for a query string (RFC 3986 unreserved characters kept, the
// rest percent-encoded): peer, group and job names in GET paths.
std::string query_escape(const std::string& s);

// The daemon is not running (the connection was refused or the socket is missing).
bool no_daemon(const Error& e);

// Prints `e` and returns the exit code for it: kExitNoDaemon with the start
// hint when the daemon is down, kExitDenied for a refusal, else `code`.
int fail(const Context& ctx, const Error& e, int code = kExitError);

}  // namespace yonder::cli
