#include "mesh/groups/group_store.h"

#include <chrono>

#include "base/clock.h"

namespace yonder::mesh {

Result<std::unique_ptr<GroupStore>> GroupStore::open(const std::string& db_path) {
  auto db = store::Database::open(db_path);
  if (!db) return std::move(db).error().with_context("groups");
  return std::unique_ptr<GroupStore>(new GroupStore(std::move(*db)));
}

Status GroupStore::put(const GroupRow& row) {
  std::lock_guard lock(mutex_);
  auto st = db_.prepare(
      "INSERT INTO groups (group_id, name, owner_id, version, membership_json, joined_at, updated_at) "
      "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6) ON CONFLICT(group_id) DO UPDATE SET name = ?2, owner_id = ?3, "
      "version = ?4, membership_json = ?5, updated_at = ?6");
  if (!st) return std::move(st).error();
  YONDER_TRY(st->bind(1, row.group_id));
  YONDER_TRY(st->bind(2, row.name));
  YONDER_TRY(st->bind(3, row.owner_id));
  YONDER_TRY(st->bind(4, static_cast<int64_t>(row.version)));
  YONDER_TRY(st->bind(5, row.membership_json));
  YONDER_TRY(st->bind(6, unix_now_s()));
  auto done = st->step();
  if (!done) return std::move(done).error().with_context("storing group " + row.name);
  return ok_status();
}

Status GroupStore::remove(const std::string& group_id) {
  std::lock_guard lock(mutex_);
  for (const char* sql : {"DELETE FROM groups WHERE group_id = ?1", "DELETE FROM group_invites WHERE group_id = ?1"}) {
    auto st = db_.prepare(sql);
    if (!st) return std::move(st).error();
    YONDER_TRY(st->bind(1, group_id));
    auto done = st->step();
    if (!done) return std::move(done).error().with_context("removing group " + group_id);
  }
  return ok_status();
}

Result<std::vector<GroupRow>> GroupStore::list() {
  std::lock_guard lock(mutex_);
  auto st = db_.prepare(
      "SELECT group_id, name, owner_id, version, membership_json, joined_at FROM groups ORDER BY joined_at, group_id");
  if (!st) return std::move(st).error();
  std::vector<GroupRow> out;
  for (;;) {
    auto row = st->step();
    if (!row) return std::move(row).error();
    if (!*row) break;
    GroupRow g;
    g.group_id = st->column_text(0);
    g.name = st->column_text(1);
    g.owner_id = st->column_text(2);
    g.version = static_cast<uint64_t>(st->column_int64(3));
    g.membership_json = st->column_text(4);
    g.joined_at = st->column_int64(5);
    out.push_back(std::move(g));
  }
  return out;
}

Status GroupStore::add_invite(const std::string& link_id, const std::string& group_id) {
  std::lock_guard lock(mutex_);
  auto st = db_.prepare("INSERT OR REPLACE INTO group_invites (link_id, group_id, created_at) VALUES (?1, ?2, ?3)");
  if (!st) return std::move(st).error();
  YONDER_TRY(st->bind(1, link_id));
  YONDER_TRY(st->bind(2, group_id));
  YONDER_TRY(st->bind(3, unix_now_s()));
  auto done = st->step();
  if (!done) return std::move(done).error().with_context("storing a group invite");
  return ok_status();
}

Result<std::optional<std::string>> GroupStore::invite_group(const std::string& link_id) {
  std::lock_guard lock(mutex_);
  auto st = db_.prepare("SELECT group_id FROM group_invites WHERE link_id = ?1");
  if (!st) return std::move(st).error();
  YONDER_TRY(st->bind(1, link_id));
  auto row = st->step();
  if (!row) return std::move(row).error();
  if (!*row) return std::optional<std::string>();
  return std::optional<std::string>(st->column_text(0));
}

}  // namespace yonder::mesh
