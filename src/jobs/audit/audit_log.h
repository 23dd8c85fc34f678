// The provider's audit log: one row per request a peer made that was acted
// on or refused (run.*, and every refusal of the link's authorisation), plus
// one row when a remote job ends. Append-only and hash-chained in the
// `audit_log` table:
//
//   hash(n) = SHA-256( prev_hash || canonical(seq, at, actor, action, subject, detail_json) )
//
// where prev_hash is hash(n-1) (empty for the first row) and canonical()
// writes each field as an 8-byte big-endian length and its bytes (integers
// in decimal). detail_json is hashed exactly as stored. verify() walks the
// chain and names the first row that does not match, so an edited, inserted
// or deleted row is found; deleting the newest rows is found through
// SQLite's AUTOINCREMENT counter (a seq is never reused).
//
// This is tamper *evidence* against edits of the database file, not proof
// against someone who can rewrite the whole chain; `yonder audit --verify`
// is meant to be compared with an earlier head hash.
//
// No silent loss. An entry SQLite cannot take (a full disk) is kept, in
// order, in memory and in a small journal beside the database whose space
// is allocated when the log opens (`<db>.audit-pending`, kPendingBytes), so
// writing it needs no new blocks; the next append, or the next open after
// a restart, writes the kept entries first (detail "written_late": the time
// it happened stays in `at`). What cannot be kept (the journal full, or
// unreadable at open) becomes an "audit.gap" entry saying how many were
// lost, and verify() names every gap.
//
// Threading: every method blocks (SQLite) and may be called from any
// worker thread; a mutex serialises them. Never from the event loop.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/bytes.h"
#include "base/error.h"
#include "store/database.h"

namespace yonder::audit {

struct AuditEntry {
  int64_t seq = 0;
  int64_t at = 0;         // unix seconds
  std::string actor;      // the peer's node id, or "local"
  std::string action;     // the method ("run.submit"), "run.end", ...
  std::string subject;    // a job id, or ""
  std::string detail_json = "{}";
  Bytes prev_hash;
  Bytes hash;

  nlohmann::json to_json() const;
};

struct VerifyReport {
  int64_t entries = 0;
  std::vector<int64_t> gaps;             // seq of each "audit.gap" entry: entries recorded as lost
  std::optional<int64_t> first_bad_seq;  // unset: the chain is intact
  std::string problem;                   // what is wrong with first_bad_seq
  std::string head_hash;                 // hex of the newest hash (for comparing later)
};

// The hash of an entry given its fields and prev_hash (the chain rule above).
Bytes entry_hash(const AuditEntry& e);

class AuditLog {
 public:
  // Opens the (migrated) state database, and writes the entries a
  // previous run kept in its pending journal.
  static Result<std::unique_ptr<AuditLog>> open(const std::string& db_path);
  static constexpr size_t kPendingBytes = 256 * 1024;

  // Appends one entry; `at` in unix seconds. `detail` is an object. On a
  // failure the entry is kept for a later append (see above) and the error
  // says so.
  Result<AuditEntry> append(int64_t at, const std::string& actor, const std::string& action,
                            const std::string& subject, const nlohmann::json& detail);
  // Entries kept, not yet in the database.
  size_t pending();
  // The newest `limit` entries, oldest first.
  Result<std::vector<AuditEntry>> list(int64_t limit);
  Result<VerifyReport> verify();

 private:
  struct Pending {
    int64_t at = 0;
    std::string actor, action, subject, detail_json;
  };
  AuditLog(store::Database db, std::string pending_path) : db_(std::move(db)), pending_path_(std::move(pending_path)) {}
  Result<AuditEntry> insert_locked(int64_t at, const std::string& actor, const std::string& action,
                                   const std::string& subject, const std::string& detail_json);
  // Writes the kept entries (and a gap entry for those lost), oldest first.
  Status flush_pending_locked(int64_t now);
  void save_pending_locked();
  void load_pending_locked();

  std::mutex mutex_;  // guards everything below
  store::Database db_;
  std::string pending_path_;
  std::vector<Pending> pending_;
  int64_t lost_ = 0;            // entries neither written nor kept (the journal was full or unreadable)
  std::string lost_why_;
};

}  // namespace yonder::audit
