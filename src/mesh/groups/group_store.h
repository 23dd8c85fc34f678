// Groups in SQLite (the v6 tables `groups` and `group_invites`): the newest
// membership list this node accepted for each group it is in, with the
// owner pinned when it joined, and the share links that are invites into a
// group. A list is written here before this node acts on it or passes it on.
//
// Threading: one connection, guarded inside; blocking (disk). Rows are
// small and written rarely (a group change), so mesh/groups/groups.cpp calls it
// on the event loop, like the trust store.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "store/database.h"

namespace yonder::mesh {

struct GroupRow {
  std::string group_id;  // 32 hex
  std::string name;
  std::string owner_id;  // node id, display form (pinned at join)
  uint64_t version = 0;
  std::string membership_json;  // mesh::encode_membership's form
  int64_t joined_at = 0;        // unix seconds; kept on update
};

class GroupStore {
 public:
  static Result<std::unique_ptr<GroupStore>> open(const std::string& db_path);

  // Inserts or replaces the row of row.group_id (joined_at kept when it exists).
  Status put(const GroupRow& row);
  // Drops the group and its invites.
  Status remove(const std::string& group_id);
  Result<std::vector<GroupRow>> list();

  Status add_invite(const std::string& link_id, const std::string& group_id);
  // The group a share link (32 hex id) invites into, if it is an invite.
  Result<std::optional<std::string>> invite_group(const std::string& link_id);

 private:
  explicit GroupStore(store::Database db) : db_(std::move(db)) {}
  std::mutex mutex_;
  store::Database db_;
};

}  // namespace yonder::mesh
