// The CLI's commands. Each returns the process exit code (exit_codes.h) and
// prints to stdout (results) and stderr (errors, with what to do next).
// Argument parsing lives in apps/yonder; these take parsed values.
#pragma once

#include <optional>
#include <string>

#include "cli/context.h"

namespace yonder::cli {

struct InitArgs {
  std::optional<std::string> name;
  bool passphrase = false;  // ask (or read YONDER_PASSPHRASE) and encrypt the key
};
int cmd_init(Context& ctx, const InitArgs& args);
int cmd_status(const Context& ctx);
// This node's GPUs; with `peer`, what that provider has and lets us do
// (GET /v1/peers/offer).
int cmd_gpu(const Context& ctx, const std::string& peer = "");

int cmd_shutdown(const Context& ctx);

int cmd_config_get(const Context& ctx, const std::string& key);
int cmd_config_set(Context& ctx, const std::string& key, const std::string& value);
int cmd_config_unset(Context& ctx, const std::string& key);
int cmd_config_show(const Context& ctx);
int cmd_config_docs();

}  // namespace yonder::cli
