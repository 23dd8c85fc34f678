// Creating and opening a node's state: identity, config, database. Used by
// `yonder init` (creation) and by the daemon (opening), so both agree on
// paths, modes and checks.
#pragma once

#include <optional>
#include <string>

#include "base/error.h"
#include "config/config.h"
#include "crypto/identity.h"

namespace yonder::state {

struct InitOptions {
  std::optional<std::string> name;
  std::optional<std::string> passphrase;  // encrypt the key at rest when set
  KdfStrength kdf = KdfStrength::kModerate;
};

struct InitResult {
  NodeId node_id;
  std::string key_file;
  bool encrypted = false;
};

// Creates the state folder (0700), the identity key (0600), the database, and
// records the name in the config. Never replaces an existing identity: that
// is kAlreadyExists, with the id of the one that is there.
Result<InitResult> init_node(const config::Paths& paths, config::Config& cfg, const InitOptions& options);

// The passphrase for an encrypted key, from YONDER_PASSPHRASE,
// YONDER_PASSPHRASE_FILE, or a terminal prompt, in that order.
Result<std::optional<std::string>> find_passphrase(const config::EnvFn& env, bool may_prompt);

// Reads and (if needed) decrypts the identity; checks the file's permissions.
Result<Identity> load_identity(const config::Paths& paths, const config::EnvFn& env, bool may_prompt);

// The node's id from the key file, without the passphrase.
Result<NodeId> read_node_id(const config::Paths& paths);

// Opens the database and brings its schema up to date.
Status prepare_database(const std::string& path);

}  // namespace yonder::state
