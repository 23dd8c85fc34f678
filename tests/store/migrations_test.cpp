#include "store/migrations.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

namespace yonder::store {
namespace {

class TempDir {
 public:
  TempDir() {
    std::string pattern = "/tmp/yonder_migrations_test_XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr) std::abort();
    path_ = pattern;
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

Database open_or_die(const std::string& path) {
  Result<Database> db = Database::open(path);
  if (!db.ok()) {
    ADD_FAILURE() << db.error().to_string();
    std::abort();
  }
  return std::move(db).value();
}

int version_of(Database& db) {
  Result<int> version = schema_version(db);
  EXPECT_TRUE(version.ok()) << version.error().to_string();
  return version.ok() ? *version : -1;
}

// The schema as text, whitespace collapsed so that only real differences
// (columns, constraints, objects) count.
std::vector<std::string> schema_of(Database& db) {
  Result<Statement> stmt = db.prepare("SELECT type, name, sql FROM sqlite_schema ORDER BY name");
  EXPECT_TRUE(stmt.ok()) << stmt.error().to_string();
  std::vector<std::string> out;
  while (true) {
    Result<bool> row = stmt->step();
    EXPECT_TRUE(row.ok());
    if (!row.ok() || !*row) break;
    std::string sql;
    for (char c : stmt->column_text(2)) {
      const bool space = c == ' ' || c == '\n' || c == '\t';
      if (space && (sql.empty() || sql.back() == ' ')) continue;
      sql += space ? ' ' : c;
    }
    while (!sql.empty() && sql.back() == ' ') sql.pop_back();
    out.push_back(stmt->column_text(0) + " " + stmt->column_text(1) + ": " + sql);
  }
  return out;
}

std::string query_text(Database& db, std::string_view sql) {
  Result<Statement> stmt = db.prepare(sql);
  EXPECT_TRUE(stmt.ok()) << stmt.error().to_string();
  Result<bool> row = stmt->step();
  EXPECT_TRUE(row.ok() && *row) << sql;
  return row.ok() && *row ? stmt->column_text(0) : "<no row>";
}

// One representative row per table: inserted at the version that made the
// table, read back after upgrading to the latest. Add rows here when a
// migration adds a table.
struct SampleRow {
  int table_version;
  std::string_view insert;
  std::string_view check;  // a query that must return `expected`
  std::string_view expected;
};

constexpr SampleRow kSamples[] = {
    {1,
     "INSERT INTO peers (peer_id, public_key, name, scope_json, paired_at, last_seen_at, via_link_id) "
     "VALUES ('node-a', x'00ff0000', 'alice', '{\"gpus\":1}', 1700000000, NULL, 'link-1')",
     "SELECT hex(public_key) || '|' || name || '|' || scope_json || '|' || paired_at || '|' || "
     "ifnull(last_seen_at, 'null') || '|' || via_link_id FROM peers WHERE peer_id = 'node-a'",
     "00FF0000|alice|{\"gpus\":1}|1700000000|null|link-1"},
    {1,
     "INSERT INTO share_links (link_id, secret_hash, scope_json, created_at, expires_at, uses_total, uses_left, "
     "revoked_at) VALUES ('link-1', x'0102', '{}', 1700000000, 1700086400, 3, 2, NULL)",
     "SELECT hex(secret_hash) || '|' || expires_at || '|' || uses_total || '|' || uses_left || '|' || "
     "ifnull(revoked_at, 'null') FROM share_links",
     "0102|1700086400|3|2|null"},
    {2,
     "INSERT INTO jobs (job_id, peer_id, side, state, spec_json, handle_json, exit_code, created_at, updated_at) "
     "VALUES ('job-1', 'node-a', 'provider', 'running', '{}', '{\"id\":\"c1\"}', NULL, 1700000001, 1700000002)",
     "SELECT side || '|' || state || '|' || handle_json || '|' || updated_at FROM jobs",
     "provider|running|{\"id\":\"c1\"}|1700000002"},
    {2,
     "INSERT INTO audit_log (at, actor, action, subject, detail_json, prev_hash, hash) "
     "VALUES (1700000003, 'local', 'pair', 'node-a', '{}', NULL, x'aa')",
     "SELECT seq || '|' || action || '|' || hex(hash) FROM audit_log",
     "1|pair|AA"},
    {3,
     "INSERT INTO peers (peer_id, public_key, scope_json, paired_at, addresses_json, granted_to_us_json) "
     "VALUES ('node-b', x'01', '{}', 1700000004, '[\"127.0.0.1:7850\"]', '{\"gpus\":2}')",
     "SELECT addresses_json || '|' || granted_to_us_json FROM peers WHERE peer_id = 'node-b'",
     "[\"127.0.0.1:7850\"]|{\"gpus\":2}"},
    // v4 (provider executor): a GPU lease of job-1 (inserted by the v2 row).
    {4, "INSERT INTO job_gpu_leases (gpu_uuid, job_id) VALUES ('GPU-1', 'job-1')",
     "SELECT gpu_uuid || '|' || job_id FROM job_gpu_leases", "GPU-1|job-1"},
    // v5 (metering): a receipt the provider signed.
    {5,
     "INSERT INTO receipts (provider_id, job_id, consumer_id, role, state, receipt_json, problem, created_at, "
     "updated_at) VALUES ('node-b', 'job-1', 'node-a', 'consumer', 'signed', '{}', NULL, 1700000005, 1700000005)",
     "SELECT role || '|' || state || '|' || consumer_id FROM receipts", "consumer|signed|node-a"},
    // v7 (mesh jobs): a job and its first attempt.
    {7,
     "INSERT INTO mesh_jobs (mesh_job_id, state, spec_json, result_json, created_at, updated_at) "
     "VALUES ('mj-1', 'running', '{}', NULL, 1700000006, 1700000006)",
     "SELECT state || '|' || spec_json || '|' || ifnull(result_json, 'null') FROM mesh_jobs", "running|{}|null"},
    {7,
     "INSERT INTO mesh_job_attempts (mesh_job_id, attempt, replica, provider_id, provider_name, job_id, state, why, "
     "exit_code, started_at, ended_at) VALUES ('mj-1', 1, 0, 'node-b', 'bob', 'job-1', 'lost', 'silent', NULL, "
     "1700000006, 1700000007)",
     "SELECT provider_name || '|' || state || '|' || why FROM mesh_job_attempts", "bob|lost|silent"},
    // v8 (verification outcomes): one known-answer check.
    {8,
     "INSERT INTO verifications (provider_id, kind, subject, outcome, details_json, signed_json, at_ms) "
     "VALUES ('node-b', 'known_answer', 'bench-1', 'passed', '{}', '{}', 1700000008000)",
     "SELECT kind || '|' || subject || '|' || outcome FROM verifications", "known_answer|bench-1|passed"},
    // v9 (array jobs): one array, half done.
    {9,
     "INSERT INTO mesh_arrays (array_id, state, spec_json, run_json, tasks_json, created_at, updated_at) "
     "VALUES ('arr-1', 'running', '{}', '{}', '{}', 1700000009, 1700000010)",
     "SELECT array_id || '|' || state FROM mesh_arrays", "arr-1|running"},
};

std::vector<std::string> fresh_latest_schema() {
  TempDir dir;
  Database db = open_or_die(dir.file("fresh.db"));
  Status status = migrate(db);
  EXPECT_TRUE(status.ok()) << status.error().to_string();
  return schema_of(db);
}

TEST(Migrations, EmptyDatabaseMigratesToLatest) {
  TempDir dir;
  Database db = open_or_die(dir.file("state.db"));
  EXPECT_EQ(version_of(db), 0);
  EXPECT_TRUE(schema_of(db).empty());

  Status status = migrate(db);
  ASSERT_TRUE(status.ok()) << status.error().to_string();
  EXPECT_EQ(version_of(db), kSchemaVersion);
  EXPECT_EQ(kSchemaVersion, 14);
  for (const char* table : {"peers", "share_links", "jobs", "audit_log", "receipts", "groups", "group_invites", "mesh_jobs",
                            "mesh_job_attempts", "verifications", "mesh_arrays", "history_samples"}) {
    EXPECT_EQ(query_text(db, std::string("SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = '") +
                                 table + "'"),
              "1")
        << table;
  }
  EXPECT_EQ(query_text(db, "SELECT tbl_name FROM sqlite_schema WHERE name = 'jobs_by_state'"), "jobs");
  EXPECT_EQ(query_text(db, "SELECT count(*) FROM pragma_table_info('peers') WHERE name = 'denied_at'"), "1");
  for (const SampleRow& sample : kSamples) {
    ASSERT_TRUE(db.exec(sample.insert).ok()) << sample.insert;
    EXPECT_EQ(query_text(db, sample.check), sample.expected);
  }
}

TEST(Migrations, UpgradeFromEveryEarlierVersionKeepsRowsAndMatchesFreshSchema) {
  const std::vector<std::string> fresh = fresh_latest_schema();
  ASSERT_FALSE(fresh.empty());
  for (int from = 0; from < kSchemaVersion; ++from) {
    SCOPED_TRACE("upgrading from version " + std::to_string(from));
    TempDir dir;
    const std::string path = dir.file("state.db");
    {
      Database db = open_or_die(path);
      ASSERT_TRUE(migrate(db, from).ok());
      EXPECT_EQ(version_of(db), from);
      for (const SampleRow& sample : kSamples) {
        if (sample.table_version > from) continue;
        Status inserted = db.exec(sample.insert);
        ASSERT_TRUE(inserted.ok()) << inserted.error().to_string();
      }
    }
    // As after an upgrade of the binary: a new process opens the old file.
    Database db = open_or_die(path);
    Status status = migrate(db);
    ASSERT_TRUE(status.ok()) << status.error().to_string();
    EXPECT_EQ(version_of(db), kSchemaVersion);
    for (const SampleRow& sample : kSamples) {
      if (sample.table_version > from) continue;
      EXPECT_EQ(query_text(db, sample.check), sample.expected) << sample.check;
    }
    if (from >= 1) {
      EXPECT_EQ(query_text(db, "SELECT ifnull(denied_at, 'null') FROM peers"), "null");
      // v3's defaults for rows that existed before it.
      EXPECT_EQ(query_text(db, "SELECT addresses_json || '|' || ifnull(granted_to_us_json, 'null') FROM peers "
                               "WHERE peer_id = 'node-a'"),
                "[]|null");
    }
    if (from >= 2) {
      // v4: jobs from before it have no result yet.
      EXPECT_EQ(query_text(db, "SELECT ifnull(result_json, 'null') FROM jobs WHERE job_id = 'job-1'"), "null");
    }
    EXPECT_EQ(schema_of(db), fresh);
  }
}

TEST(Migrations, AGpuCannotBeLeasedTwice) {
  TempDir dir;
  Database db = open_or_die(dir.file("state.db"));
  ASSERT_TRUE(migrate(db).ok());
  ASSERT_TRUE(db.exec("INSERT INTO jobs VALUES ('a', 'p', 'provider', 'running', '{}', NULL, NULL, 1, 1, NULL);"
                      "INSERT INTO jobs VALUES ('b', 'p', 'provider', 'running', '{}', NULL, NULL, 1, 1, NULL);"
                      "INSERT INTO job_gpu_leases VALUES ('GPU-0', 'a')")
                  .ok());
  EXPECT_FALSE(db.exec("INSERT INTO job_gpu_leases VALUES ('GPU-0', 'b')").ok());
  // Removing the job frees its lease.
  ASSERT_TRUE(db.exec("DELETE FROM jobs WHERE job_id = 'a'").ok());
  EXPECT_TRUE(db.exec("INSERT INTO job_gpu_leases VALUES ('GPU-0', 'b')").ok());
}

TEST(Migrations, AWaitingJobStoredAsQueuedIsPendingAfterV14) {
  TempDir dir;
  Database db = open_or_die(dir.file("state.db"));
  ASSERT_TRUE(migrate(db, 13).ok());
  ASSERT_TRUE(db.exec("INSERT INTO jobs VALUES ('a', 'p', 'provider', 'queued', '{}', NULL, NULL, 1, 1, NULL);"
                      "INSERT INTO jobs VALUES ('b', 'p', 'consumer', 'queued', '{}', NULL, NULL, 1, 1, NULL);"
                      "INSERT INTO jobs VALUES ('c', 'p', 'provider', 'running', '{}', NULL, NULL, 1, 1, NULL)")
                  .ok());
  ASSERT_TRUE(migrate(db).ok());
  EXPECT_EQ(query_text(db, "SELECT group_concat(job_id || '=' || state, ',') FROM (SELECT * FROM jobs ORDER BY job_id)"),
            "a=pending,b=pending,c=running");
}

TEST(Migrations, MigratingTwiceChangesNothing) {
  TempDir dir;
  Database db = open_or_die(dir.file("state.db"));
  ASSERT_TRUE(migrate(db).ok());
  ASSERT_TRUE(db.exec(kSamples[0].insert).ok());
  const std::vector<std::string> before = schema_of(db);

  Status again = migrate(db);
  ASSERT_TRUE(again.ok()) << again.error().to_string();
  EXPECT_EQ(version_of(db), kSchemaVersion);
  EXPECT_EQ(schema_of(db), before);
  EXPECT_EQ(query_text(db, kSamples[0].check), kSamples[0].expected);
}

TEST(Migrations, NewerDatabaseIsRefusedUntouched) {
  TempDir dir;
  Database db = open_or_die(dir.file("state.db"));
  ASSERT_TRUE(migrate(db).ok());
  const int newer = kSchemaVersion + 1;
  ASSERT_TRUE(db.exec("PRAGMA user_version = " + std::to_string(newer)).ok());
  const std::vector<std::string> before = schema_of(db);

  Status status = migrate(db);
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.error().code(), ErrorCode::kFailedPrecondition);
  EXPECT_EQ(status.error().message(),
            "database schema version " + std::to_string(newer) + " is newer than this build supports (" +
                std::to_string(kSchemaVersion) + "); upgrade yonder or restore an older state folder");
  EXPECT_EQ(version_of(db), newer);
  EXPECT_EQ(schema_of(db), before);
}

TEST(Migrations, RefusesDowngradesAndBadTargets) {
  TempDir dir;
  Database db = open_or_die(dir.file("state.db"));
  ASSERT_TRUE(migrate(db).ok());
  Status down = migrate(db, kSchemaVersion - 1);
  ASSERT_FALSE(down.ok());
  EXPECT_EQ(down.error().code(), ErrorCode::kFailedPrecondition);
  EXPECT_EQ(version_of(db), kSchemaVersion);

  Status beyond = migrate(db, kSchemaVersion + 1);
  ASSERT_FALSE(beyond.ok());
  EXPECT_EQ(beyond.error().code(), ErrorCode::kInvalidArgument);
}

TEST(Migrations, RefusesAForeignDatabaseAtVersionZero) {
  TempDir dir;
  Database db = open_or_die(dir.file("state.db"));
  ASSERT_TRUE(db.exec("CREATE TABLE somebody_elses (x INTEGER)").ok());
  Status status = migrate(db);
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.error().code(), ErrorCode::kFailedPrecondition);
  EXPECT_NE(status.error().message().find("not a yonder state database"), std::string::npos);
  EXPECT_EQ(version_of(db), 0);
}

TEST(Migrations, SchemaEnforcesItsRules) {
  TempDir dir;
  Database db = open_or_die(dir.file("state.db"));
  ASSERT_TRUE(migrate(db).ok());
  Status negative = db.exec("INSERT INTO share_links (link_id, secret_hash, scope_json, created_at, expires_at, "
                            "uses_total, uses_left, revoked_at) VALUES ('l', x'01', '{}', 1, 2, 1, -1, NULL)");
  ASSERT_FALSE(negative.ok());
  EXPECT_EQ(negative.error().code(), ErrorCode::kInvalidArgument);
  Status side = db.exec("INSERT INTO jobs (job_id, peer_id, side, state, spec_json, handle_json, exit_code, "
                        "created_at, updated_at) VALUES ('j', 'p', 'bystander', 's', '{}', NULL, NULL, 1, 1)");
  ASSERT_FALSE(side.ok());
  EXPECT_EQ(side.error().code(), ErrorCode::kInvalidArgument);
  // STRICT: a key given as text is refused, not stored as text.
  Status text_key = db.exec("INSERT INTO peers (peer_id, public_key, scope_json, paired_at) "
                            "VALUES ('p', 'not bytes', '{}', 1)");
  ASSERT_FALSE(text_key.ok());
  Status no_key = db.exec("INSERT INTO peers (peer_id, public_key, scope_json, paired_at) "
                          "VALUES (NULL, x'01', '{}', 1)");
  ASSERT_FALSE(no_key.ok());
}

TEST(Migrations, FailingStepLeavesVersionAndTablesUnchanged) {
  const std::span<const Migration> real = schema_migrations();
  ASSERT_EQ(real.size(), static_cast<size_t>(kSchemaVersion));
  // Step 2 gets halfway (a new table, a changed one) and then fails.
  const Migration steps[] = {
      real[0],
      {2, "half done",
       "CREATE TABLE half_done (x INTEGER);"
       "ALTER TABLE peers ADD COLUMN oops INTEGER;"
       "INSERT INTO no_such_table VALUES (1);"},
  };
  TempDir dir;
  Database db = open_or_die(dir.file("state.db"));

  // Failing at the very first step leaves an empty version-0 file.
  const Migration broken_first[] = {{1, "broken", "CREATE TABLE a (x INTEGER); SELEC 1;"}};
  Status first = migrate_with_steps(db, broken_first, 1);
  ASSERT_FALSE(first.ok());
  EXPECT_EQ(version_of(db), 0);
  EXPECT_TRUE(schema_of(db).empty());

  ASSERT_TRUE(migrate_with_steps(db, steps, 1).ok());
  ASSERT_TRUE(db.exec(kSamples[0].insert).ok());
  const std::vector<std::string> before = schema_of(db);

  Status status = migrate_with_steps(db, steps, 2);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.error().to_string().find("schema version 2 (half done)"), std::string::npos)
      << status.error().to_string();
  EXPECT_NE(status.error().message().find("no_such_table"), std::string::npos);
  EXPECT_EQ(version_of(db), 1);
  EXPECT_EQ(schema_of(db), before);
  EXPECT_EQ(query_text(db, kSamples[0].check), kSamples[0].expected);

  // The next start, with a fixed build, picks up from version 1.
  ASSERT_TRUE(migrate(db).ok());
  EXPECT_EQ(version_of(db), kSchemaVersion);
  EXPECT_EQ(schema_of(db), fresh_latest_schema());
}

TEST(Migrations, VersionSurvivesReopen) {
  TempDir dir;
  const std::string path = dir.file("state.db");
  {
    Database db = open_or_die(path);
    ASSERT_TRUE(migrate(db, 1).ok());
  }
  Database db = open_or_die(path);
  EXPECT_EQ(version_of(db), 1);
}

}  // namespace
}  // namespace yonder::store
