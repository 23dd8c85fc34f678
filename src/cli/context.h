// What every command needs: where the node's state is, its configuration,
// and how to reach its daemon.
#pragma once

#include <string>

#include "base/error.h"
#include "config/config.h"
#include "os/unix_http.h"
#include <nlohmann/json_fwd.hpp>

namespace yonder::cli {

struct Context {
  config::Paths paths;
  config::Config cfg;
  config::EnvFn env;
  bool json = false;
  // $YONDER_HOME/api-token, sent with every request to yonderd; empty when
  // the file does not exist yet (yonderd then answers 401 with what to do).
  std::string api_token;

  std::string socket_path() const;
};

Result<Context> make_context();

// Prints an error the way every command does: "yonder: <message>".
int print_error(const Error& e, int exit_code);

// Calls the daemon; a connection failure becomes the "not running" message.
struct DaemonReply {
  int status = 0;
  std::string body;
};
Result<DaemonReply> call_daemon(const Context& ctx, std::string_view method, std::string_view path,
                                std::string_view body = {});
// Exit code and message for a failed call_daemon.
int report_daemon_error(const Context& ctx, const Error& e);
// A daemon reply that is an {"error": ...} body, as an Error.
Error daemon_error(const DaemonReply& reply);

}  // namespace yonder::cli
