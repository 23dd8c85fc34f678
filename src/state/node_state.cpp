#include "state/node_state.h"

#include <unistd.h>

#include <fstream>

#include "api/auth.h"
#include "os/files.h"
#include "os/terminal.h"
#include "store/database.h"
#include "store/migrations.h"

namespace yonder::state {

Result<NodeId> read_node_id(const config::Paths& paths) {
  auto text = read_key_file(paths.key_file());
  if (!text) return std::move(text).error();
  auto file = parse_key_file(*text);
  if (!file) return Error(file.error()).with_context(paths.key_file());
  return NodeId(file->public_key);
}

Status prepare_database(const std::string& path) {
  auto db = store::Database::open(path);
  if (!db) return std::move(db).error();
  return store::migrate(*db);
}

Result<InitResult> init_node(const config::Paths& paths, config::Config& cfg, const InitOptions& options) {
  YONDER_TRY(os::make_dirs(paths.home, 0700));
  if (::access(paths.key_file().c_str(), F_OK) == 0) {
    auto existing = read_node_id(paths);
    std::string which = existing ? " (node id " + existing->to_string() + ")" : "";
    return make_error(ErrorCode::kAlreadyExists,
                      "an identity already exists at " + paths.key_file() + which +
                          "; yonder never replaces one. To start over, stop yonderd and move that folder away");
  }
  auto identity = Identity::generate();
  if (!identity) return std::move(identity).error();
  auto text = encode_key_file(*identity, options.passphrase, options.kdf);
  if (!text) return std::move(text).error();
  YONDER_TRY(write_key_file(paths.key_file(), *text));
  if (options.name) {
    YONDER_TRY(cfg.set("node.name", *options.name));
    YONDER_TRY(cfg.save(paths.config_file));
  }
  YONDER_TRY(prepare_database(paths.database()));
  // The local API's token (api/auth.h): every client of yonderd sends it.
  if (auto token = api::ensure_api_token(paths.api_token_file(), api::system_random); !token) {
    return std::move(token).error();
  }
  return InitResult{identity->node_id(), paths.key_file(), options.passphrase.has_value()};
}

Result<std::optional<std::string>> find_passphrase(const config::EnvFn& env, bool may_prompt) {
  if (auto p = env("YONDER_PASSPHRASE")) return std::optional<std::string>(*p);
  if (auto file = env("YONDER_PASSPHRASE_FILE")) {
    std::ifstream in(*file);
    if (!in) {
      return make_error(ErrorCode::kNotFound, "cannot read YONDER_PASSPHRASE_FILE " + *file);
    }
    std::string line;
    std::getline(in, line);
    return std::optional<std::string>(line);
  }
  if (!may_prompt) return std::optional<std::string>();
  auto p = os::read_secret("Passphrase for the Yonder identity key: ");
  if (!p) return std::optional<std::string>();
  return std::optional<std::string>(*p);
}

Result<Identity> load_identity(const config::Paths& paths, const config::EnvFn& env, bool may_prompt) {
  auto text = read_key_file(paths.key_file());
  if (!text) return std::move(text).error();
  auto file = parse_key_file(*text);
  if (!file) return Error(file.error()).with_context(paths.key_file());
  std::optional<std::string> passphrase;
  if (file->encrypted) {
    auto p = find_passphrase(env, may_prompt);
    if (!p) return std::move(p).error();
    passphrase = *p;
  }
  return open_key_file(*file, passphrase);
}

}  // namespace yonder::state
