// Versioned schema migrations. The schema version lives in SQLite's
// `PRAGMA user_version` (0 for a new, empty file). Each step moves it up by
// one inside its own transaction, so a crash or a failing step leaves the
// database at the previous version with its tables untouched, and the next
// start simply retries.
//
// Never edit a step that has shipped: databases in the field already ran it.
// Change the schema by appending a step and raising kSchemaVersion.
#pragma once

#include <span>
#include <string_view>

#include "base/error.h"
#include "store/database.h"

namespace yonder::store {

// The schema version this build writes and understands.
inline constexpr int kSchemaVersion = 14;

// One step: runs `sql` and sets user_version to `version`, which must be one
// more than the previous step's.
struct Migration {
  int version;
  std::string_view summary;  // for error messages
  std::string_view sql;      // one or more statements
};

// The shipped steps, versions 1..kSchemaVersion in order.
std::span<const Migration> schema_migrations();

// The database's schema version (user_version).
Result<int> schema_version(Database& db);

// Brings the schema up to `target` (0 <= target <= kSchemaVersion). Refuses,
// with kFailedPrecondition and no change, a database newer than this build,
// one newer than `target` (there are no downgrades), and a file at version
// 0 that already holds tables (not a yonder database). Running it on an
// up-to-date database changes nothing.
Status migrate(Database& db, int target = kSchemaVersion);

// migrate() with other steps; for tests that need a failing step. `steps`
// must be numbered 1, 2, ... in order.
Status migrate_with_steps(Database& db, std::span<const Migration> steps, int target);

}  // namespace yonder::store
