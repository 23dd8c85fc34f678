#include "store/migrations.h"

#include <cstdint>
#include <iterator>
#include <string>

namespace yonder::store {
namespace {

// Tables are STRICT so that a value of the wrong type (text in a BLOB key
// column, say) is refused instead of silently stored. Times are unix seconds.
// *_json columns hold documents whose format belongs to the code that writes
// them; the store does not look inside.

// v1: who we are paired with, and the share links we have handed out.
// peers.via_link_id is not a foreign key: on the consumer's side the link
// belongs to the provider and has no row here.
constexpr std::string_view kV1 = R"sql(
CREATE TABLE peers (
  peer_id      TEXT PRIMARY KEY NOT NULL,
  public_key   BLOB NOT NULL,
  name         TEXT,
  scope_json   TEXT NOT NULL,
  paired_at    INTEGER NOT NULL,
  last_seen_at INTEGER,
  via_link_id  TEXT
) STRICT;

CREATE TABLE share_links (
  link_id     TEXT PRIMARY KEY NOT NULL,
  secret_hash BLOB NOT NULL,
  scope_json  TEXT NOT NULL,
  created_at  INTEGER NOT NULL,
  expires_at  INTEGER NOT NULL,
  uses_total  INTEGER NOT NULL,
  uses_left   INTEGER NOT NULL CHECK (uses_left >= 0),
  revoked_at  INTEGER
) STRICT;
)sql";

// v2: jobs on either side of a lease, the audit hash chain, and denial of a
// peer (a peer row is kept after denial so the audit log can name it).
// jobs.peer_id is not a foreign key, for the same reason: job history
// outlives a removed peer.
constexpr std::string_view kV2 = R"sql(
CREATE TABLE jobs (
  job_id      TEXT PRIMARY KEY NOT NULL,
  peer_id     TEXT NOT NULL,
  side        TEXT NOT NULL CHECK (side IN ('provider', 'consumer')),
  state       TEXT NOT NULL,
  spec_json   TEXT NOT NULL,
  handle_json TEXT,
  exit_code   INTEGER,
  created_at  INTEGER NOT NULL,
  updated_at  INTEGER NOT NULL
) STRICT;

CREATE INDEX jobs_by_state ON jobs (state);

-- Each row's hash covers prev_hash and the row's fields, so a rewritten or
-- deleted entry breaks the chain. AUTOINCREMENT: a seq is never reused, even
-- after the newest rows are deleted.
CREATE TABLE audit_log (
  seq         INTEGER PRIMARY KEY AUTOINCREMENT,
  at          INTEGER NOT NULL,
  actor       TEXT NOT NULL,
  action      TEXT NOT NULL,
  subject     TEXT,
  detail_json TEXT,
  prev_hash   BLOB,
  hash        BLOB NOT NULL
) STRICT;

ALTER TABLE peers ADD COLUMN denied_at INTEGER;
)sql";

// v3: the peer link. A peer row now says how to reach the peer (addresses
// from its share link) and what it granted us (scope_json stays what we grant
// it; an empty capability list means it may do nothing here). share_links
// gets the name the link was made with for `yonder links`.
constexpr std::string_view kV3 = R"sql(
ALTER TABLE peers ADD COLUMN addresses_json TEXT NOT NULL DEFAULT '[]';
ALTER TABLE peers ADD COLUMN granted_to_us_json TEXT;
ALTER TABLE share_links ADD COLUMN label TEXT;
)sql";

// v4: the provider executor. result_json holds how a job ended (reason,
// message, OOM flag, times); job_gpu_leases records which job holds which
// GPU, and its primary key makes a double lease impossible even if the
// scheduler were wrong.
constexpr std::string_view kV4 = R"sql(
ALTER TABLE jobs ADD COLUMN result_json TEXT;
CREATE TABLE job_gpu_leases (
  gpu_uuid TEXT PRIMARY KEY NOT NULL,
  job_id   TEXT NOT NULL REFERENCES jobs (job_id) ON DELETE CASCADE
) STRICT;
CREATE INDEX job_gpu_leases_by_job ON job_gpu_leases (job_id);
)sql";

// v5: metering receipts, one per finished job, kept by both the
// provider and the consumer. receipt_json is the mesh receipt's wire form
// (mesh/core/receipt.h); state: 'signed' (provider-signed, the countersignature
// has not arrived), 'countersigned' (both signatures), 'refused' (did not
// verify; `problem` says why; never counted).
constexpr std::string_view kV5 = R"sql(
CREATE TABLE receipts (
  provider_id  TEXT NOT NULL,
  job_id       TEXT NOT NULL,
  consumer_id  TEXT NOT NULL,
  role         TEXT NOT NULL CHECK (role IN ('provider', 'consumer')),
  state        TEXT NOT NULL CHECK (state IN ('signed', 'countersigned', 'refused')),
  receipt_json TEXT NOT NULL,
  problem      TEXT,
  created_at   INTEGER NOT NULL,
  updated_at   INTEGER NOT NULL,
  PRIMARY KEY (provider_id, job_id)
) STRICT;
)sql";

// v6: groups. One row per group this node belongs to, holding
// the newest membership list it accepted (mesh/core/membership.h wire form) and
// the owner key pinned when it joined; group_invites remembers which share
// links are invites into which group (mesh/groups/groups.h).
constexpr std::string_view kV6 = R"sql(
CREATE TABLE groups (
  group_id        TEXT PRIMARY KEY,
  name            TEXT NOT NULL,
  owner_id        TEXT NOT NULL,
  version         INTEGER NOT NULL,
  membership_json TEXT NOT NULL,
  joined_at       INTEGER NOT NULL,
  updated_at      INTEGER NOT NULL
) STRICT;
CREATE TABLE group_invites (
  link_id    TEXT PRIMARY KEY,
  group_id   TEXT NOT NULL,
  created_at INTEGER NOT NULL
) STRICT;
)sql";

// v7: mesh jobs on the consumer that submits them: the job as
// asked (spec: request, upload folder, needs, retries, replicas), where it
// stands, and one row per attempt on a provider (mesh/jobs/mesh_jobs.h). A job is
// written here before its id is handed back, so a restarted daemon picks it
// up again.
constexpr std::string_view kV7 = R"sql(
CREATE TABLE mesh_jobs (
  mesh_job_id TEXT PRIMARY KEY,
  state       TEXT NOT NULL,
  spec_json   TEXT NOT NULL,
  result_json TEXT,
  created_at  INTEGER NOT NULL,
  updated_at  INTEGER NOT NULL
) STRICT;
CREATE TABLE mesh_job_attempts (
  mesh_job_id   TEXT NOT NULL,
  attempt       INTEGER NOT NULL,
  replica       INTEGER NOT NULL,
  provider_id   TEXT NOT NULL,
  provider_name TEXT NOT NULL,
  job_id        TEXT,
  state         TEXT NOT NULL,
  why           TEXT,
  exit_code     INTEGER,
  started_at    INTEGER NOT NULL,
  ended_at      INTEGER,
  PRIMARY KEY (mesh_job_id, attempt)
) STRICT;
)sql";

// v8: verification outcomes: one row per check this node made
// of a provider (jobs/metering/verifications.h): a replica compared by quorum or a
// known-answer benchmark. signed_json is the row signed by this node
// (mesh/core/verification.h), handed to peers as evidence for reputation.
constexpr std::string_view kV8 = R"sql(
CREATE TABLE verifications (
  id           INTEGER PRIMARY KEY,
  provider_id  TEXT NOT NULL,
  kind         TEXT NOT NULL CHECK (kind IN ('replica', 'known_answer')),
  subject      TEXT NOT NULL,
  outcome      TEXT NOT NULL CHECK (outcome IN ('agreed', 'outvoted', 'passed', 'failed')),
  details_json TEXT NOT NULL,
  signed_json  TEXT NOT NULL,
  at_ms        INTEGER NOT NULL
) STRICT;
CREATE INDEX verifications_by_provider ON verifications (provider_id, at_ms);
CREATE INDEX verifications_by_time ON verifications (at_ms);
)sql";

// v9: array jobs: one row per array on the consumer
// (mesh/jobs/mesh_array_store.h): the request, the tasks' states
// (mesh::ArrayRun as JSON) and the mesh jobs running its attempts.
constexpr std::string_view kV9 = R"sql(
CREATE TABLE mesh_arrays (
  array_id   TEXT PRIMARY KEY,
  state      TEXT NOT NULL,
  spec_json  TEXT NOT NULL,
  run_json   TEXT NOT NULL,
  tasks_json TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL
) STRICT;
)sql";

// v10: disputed receipts (mesh/core/metering.h): a receipt may be 'disputed' (the
// provider's signed claim disagrees with what the consumer saw), and a
// verification may record it (kind 'receipt', outcome 'disputed',
// mesh/core/verification.h). SQLite cannot change a CHECK, so both tables are
// copied into ones with the wider checks.
constexpr std::string_view kV10 = R"sql(
CREATE TABLE receipts_v10 (
  provider_id  TEXT NOT NULL,
  job_id       TEXT NOT NULL,
  consumer_id  TEXT NOT NULL,
  role         TEXT NOT NULL CHECK (role IN ('provider', 'consumer')),
  state        TEXT NOT NULL CHECK (state IN ('signed', 'countersigned', 'refused', 'disputed')),
  receipt_json TEXT NOT NULL,
  problem      TEXT,
  created_at   INTEGER NOT NULL,
  updated_at   INTEGER NOT NULL,
  PRIMARY KEY (provider_id, job_id)
) STRICT;
INSERT INTO receipts_v10 (provider_id, job_id, consumer_id, role, state, receipt_json, problem, created_at, updated_at)
  SELECT provider_id, job_id, consumer_id, role, state, receipt_json, problem, created_at, updated_at FROM receipts;
DROP TABLE receipts;
ALTER TABLE receipts_v10 RENAME TO receipts;

CREATE TABLE verifications_v10 (
  id           INTEGER PRIMARY KEY,
  provider_id  TEXT NOT NULL,
  kind         TEXT NOT NULL CHECK (kind IN ('replica', 'known_answer', 'receipt')),
  subject      TEXT NOT NULL,
  outcome      TEXT NOT NULL CHECK (outcome IN ('agreed', 'outvoted', 'passed', 'failed', 'disputed')),
  details_json TEXT NOT NULL,
  signed_json  TEXT NOT NULL,
  at_ms        INTEGER NOT NULL
) STRICT;
INSERT INTO verifications_v10 (id, provider_id, kind, subject, outcome, details_json, signed_json, at_ms)
  SELECT id, provider_id, kind, subject, outcome, details_json, signed_json, at_ms FROM verifications;
DROP TABLE verifications;
ALTER TABLE verifications_v10 RENAME TO verifications;
CREATE INDEX verifications_by_provider ON verifications (provider_id, at_ms);
CREATE INDEX verifications_by_time ON verifications (at_ms);
)sql";

// v11: a share link may be made to replace the scope of a peer that is
// paired already (`yonder share --replace-scope`); by default redeeming
// keeps the narrower of the peer's grant and the link's. A peer row keeps
// what its provider said about how its jobs run (a Slurm cluster without
// containers), shown with the scope it granted us.
constexpr std::string_view kV11 = R"sql(
ALTER TABLE share_links ADD COLUMN replaces_scope INTEGER NOT NULL DEFAULT 0;
ALTER TABLE peers ADD COLUMN provider_notice TEXT;
)sql";

// v12: a peer row keeps the check digits (short authentication string) of
// its latest pairing, so either side can compare them later (`yonder peers
// PEER`), not only the one that ran `pair` at that moment.
constexpr std::string_view kV12 = R"sql(
ALTER TABLE peers ADD COLUMN check_digits TEXT;
)sql";

// v13: the node's measurements over time (GPU use, link throughput per
// peer, the use of jobs it runs), for the dashboard's charts; pruned by age
// and a row cap (history/history_store.h).
constexpr std::string_view kV13 = R"sql(
CREATE TABLE history_samples (
  series TEXT NOT NULL,
  at_ms  INTEGER NOT NULL,
  value  REAL NOT NULL
) STRICT;
CREATE INDEX history_by_series ON history_samples (series, at_ms);
CREATE INDEX history_by_time ON history_samples (at_ms);
)sql";

// v14: a job waiting in a provider's queue is `pending` (Slurm's word, and
// what `ps --filter state=` takes), no longer `queued`.
constexpr std::string_view kV14 = R"sql(
UPDATE jobs SET state = 'pending' WHERE state = 'queued';
)sql";

constexpr Migration kMigrations[] = {
    {1, "peers and share links", kV1},
    {2, "jobs, audit log, peer denial", kV2},
    {3, "peer addresses and granted scopes", kV3},
    {4, "provider job results and GPU leases", kV4},
    {5, "metering receipts", kV5},
    {6, "groups and group invites", kV6},
    {7, "mesh jobs and their attempts", kV7},
    {8, "verification outcomes", kV8},
    {9, "array jobs", kV9},
    {10, "disputed receipts as verifications", kV10},
    {11, "share links that replace a scope, providers' notices", kV11},
    {12, "the check digits of a peer's pairing", kV12},
    {13, "measurements over time for the dashboard", kV13},
    {14, "waiting jobs are pending", kV14},
};
static_assert(std::size(kMigrations) == kSchemaVersion, "add a step when raising kSchemaVersion");

Result<int64_t> query_int(Database& db, std::string_view sql) {
  Result<Statement> stmt = db.prepare(sql);
  if (!stmt.ok()) return std::move(stmt).error();
  Result<bool> row = stmt->step();
  if (!row.ok()) return std::move(row).error();
  if (!*row) return make_error(ErrorCode::kInternal, std::string(sql) + " returned no row");
  return stmt->column_int64(0);
}

Status check_not_newer(int current, int latest) {
  if (current > latest) {
    return make_error(ErrorCode::kFailedPrecondition,
                      "database schema version " + std::to_string(current) +
                          " is newer than this build supports (" + std::to_string(latest) +
                          "); upgrade yonder or restore an older state folder");
  }
  return ok_status();
}

// Runs inside the step's transaction. The version is read again here, under
// the write lock, because another process may have migrated since we looked.
Status apply_step(Database& db, const Migration& step, int latest) {
  Result<int> current = schema_version(db);
  if (!current.ok()) return std::move(current).error();
  YONDER_TRY(check_not_newer(*current, latest));
  if (*current >= step.version) return ok_status();  // done by someone else
  if (*current != step.version - 1) {
    return make_error(ErrorCode::kInternal, "schema version " + std::to_string(*current) +
                                                " went backwards during migration");
  }
  if (*current == 0) {
    Result<int64_t> objects = query_int(db, "SELECT count(*) FROM sqlite_schema");
    if (!objects.ok()) return std::move(objects).error();
    if (*objects != 0) {
      return make_error(ErrorCode::kFailedPrecondition,
                        db.path() + " holds tables but no yonder schema version, so it is not a yonder "
                                    "state database; point yonder at another state folder or move the "
                                    "file aside");
    }
  }
  YONDER_TRY(db.exec(step.sql));
  // user_version lives in the file header, which is written as part of this
  // transaction: the new tables and the new version commit together.
  return db.exec("PRAGMA user_version = " + std::to_string(step.version));
}

}  // namespace

std::span<const Migration> schema_migrations() { return kMigrations; }

Result<int> schema_version(Database& db) {
  Result<int64_t> version = query_int(db, "PRAGMA user_version");
  if (!version.ok()) return std::move(version).error().with_context("reading the schema version");
  if (*version < 0) {
    return make_error(ErrorCode::kFailedPrecondition,
                      db.path() + " has schema version " + std::to_string(*version) +
                          ", which yonder never writes; it is not a yonder state database");
  }
  return static_cast<int>(*version);
}

Status migrate(Database& db, int target) { return migrate_with_steps(db, kMigrations, target); }

Status migrate_with_steps(Database& db, std::span<const Migration> steps, int target) {
  const int latest = static_cast<int>(steps.size());
  for (int i = 0; i < latest; ++i) {
    if (steps[static_cast<size_t>(i)].version != i + 1) {
      return make_error(ErrorCode::kInternal, "migration steps are not numbered 1, 2, ... in order");
    }
  }
  if (target < 0 || target > latest) {
    return make_error(ErrorCode::kInvalidArgument, "cannot migrate to schema version " + std::to_string(target) +
                                                       "; this build knows versions 0 to " +
                                                       std::to_string(latest));
  }
  Result<int> current = schema_version(db);
  if (!current.ok()) return std::move(current).error();
  YONDER_TRY(check_not_newer(*current, latest));
  if (*current > target) {
    return make_error(ErrorCode::kFailedPrecondition,
                      "database schema version " + std::to_string(*current) + " is newer than the requested " +
                          std::to_string(target) + "; yonder does not downgrade databases");
  }
  for (int version = *current + 1; version <= target; ++version) {
    const Migration& step = steps[static_cast<size_t>(version - 1)];
    Status status = db.transaction([&] { return apply_step(db, step, latest); });
    if (!status.ok()) {
      return std::move(status).error().with_context("migrating " + db.path() + " to schema version " +
                                                    std::to_string(version) + " (" + std::string(step.summary) +
                                                    ")");
    }
  }
  return ok_status();
}

}  // namespace yonder::store
