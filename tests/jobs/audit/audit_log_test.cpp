#include "jobs/audit/audit_log.h"

#include <gtest/gtest.h>

#include <cstdio>

#include "store/migrations.h"
#include "support/temp_dir.h"

namespace yonder::audit {
namespace {

std::unique_ptr<AuditLog> open_log(const std::string& path) {
  auto db = store::Database::open(path);
  EXPECT_TRUE(db.ok());
  EXPECT_TRUE(store::migrate(*db).ok());
  auto log = AuditLog::open(path);
  EXPECT_TRUE(log.ok());
  return std::move(*log);
}

void append_three(AuditLog& log) {
  ASSERT_TRUE(log.append(100, "peer-a", "run.submit", "job-1", {{"image", "busybox"}}).ok());
  ASSERT_TRUE(log.append(101, "peer-b", "run.submit", "", {{"refused", "not permitted"}}).ok());
  ASSERT_TRUE(log.append(102, "peer-a", "run.end", "job-1", {{"exit_code", 0}}).ok());
}

void exec_sql(const std::string& path, const std::string& sql) {
  auto db = store::Database::open(path);
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(db->exec(sql).ok());
}

void write_file(const std::string& path, const std::string& text) {
  FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(std::fwrite(text.data(), 1, text.size(), f), text.size());
  std::fclose(f);
}

// A previous run kept two entries it could not write (a full disk) and
// stopped: the next open writes them, in order, marked as written late.
TEST(AuditLog, EntriesKeptInThePendingJournalAreWrittenAtTheNextOpen) {
  testing::TempDir dir;
  std::string db = dir / "state.db";
  { append_three(*open_log(db)); }
  std::string body =
      R"({"pending":[{"at":200,"actor":"peer-a","action":"run.submit","subject":"job-2","detail":"{\"image\":\"x\"}"},)"
      R"({"at":201,"actor":"peer-a","action":"run.end","subject":"job-2","detail":"{}"}],"lost":0,"why":""})";
  write_file(db + ".audit-pending", std::to_string(body.size()) + "\n" + body);
  auto log = open_log(db);
  EXPECT_EQ(log->pending(), 0u);
  auto entries = log->list(10);
  ASSERT_TRUE(entries.ok());
  ASSERT_EQ(entries->size(), 5u);
  EXPECT_EQ((*entries)[3].action, "run.submit");
  EXPECT_EQ((*entries)[3].at, 200);
  EXPECT_NE((*entries)[3].detail_json.find("\"written_late\":true"), std::string::npos) << (*entries)[3].detail_json;
  EXPECT_EQ((*entries)[4].action, "run.end");
  auto report = log->verify();
  ASSERT_TRUE(report.ok());
  EXPECT_FALSE(report->first_bad_seq.has_value());
  EXPECT_TRUE(report->gaps.empty());
  // Written once: a second open adds nothing.
  log.reset();
  EXPECT_EQ(open_log(db)->list(10)->size(), 5u);
}

// What a previous run kept but cannot be read back is not passed over in
// silence: an audit.gap entry says so, and verify names it.
TEST(AuditLog, AnUnreadablePendingJournalIsRecordedAsAGapThatVerifyNames) {
  testing::TempDir dir;
  std::string db = dir / "state.db";
  { append_three(*open_log(db)); }
  write_file(db + ".audit-pending", "40\n{\"pending\": [ {\"at\": 1, \"act");
  auto log = open_log(db);
  auto report = log->verify();
  ASSERT_TRUE(report.ok());
  EXPECT_FALSE(report->first_bad_seq.has_value()) << "the chain itself is intact";
  ASSERT_EQ(report->gaps.size(), 1u);
  EXPECT_EQ(report->gaps[0], 4);
  auto entries = log->list(10);
  ASSERT_EQ(entries->size(), 4u);
  EXPECT_EQ((*entries)[3].action, "audit.gap");
  EXPECT_NE((*entries)[3].detail_json.find("could not be read"), std::string::npos) << (*entries)[3].detail_json;
}

TEST(AuditLog, ChainsEntriesAndVerifies) {
  testing::TempDir dir;
  auto log = open_log(dir / "state.db");
  append_three(*log);
  auto entries = log->list(10);
  ASSERT_TRUE(entries.ok());
  ASSERT_EQ(entries->size(), 3u);
  EXPECT_EQ((*entries)[0].seq, 1);
  EXPECT_TRUE((*entries)[0].prev_hash.empty());
  EXPECT_EQ((*entries)[1].prev_hash, (*entries)[0].hash);
  EXPECT_EQ((*entries)[2].prev_hash, (*entries)[1].hash);
  EXPECT_EQ((*entries)[0].to_json()["detail"]["image"], "busybox");
  auto newest = log->list(1);
  ASSERT_TRUE(newest.ok());
  ASSERT_EQ(newest->size(), 1u);
  EXPECT_EQ((*newest)[0].seq, 3);
  auto report = log->verify();
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(report->entries, 3);
  EXPECT_FALSE(report->first_bad_seq.has_value()) << report->problem;
  EXPECT_EQ(report->head_hash, hex_encode((*entries)[2].hash));
}

TEST(AuditLog, VerifyNamesAnEditedRow) {
  testing::TempDir dir;
  auto log = open_log(dir / "state.db");
  append_three(*log);
  exec_sql(dir / "state.db", "UPDATE audit_log SET detail_json = '{\"refused\":\"nothing\"}' WHERE seq = 2");
  auto report = log->verify();
  ASSERT_TRUE(report.ok());
  ASSERT_TRUE(report->first_bad_seq.has_value());
  EXPECT_EQ(*report->first_bad_seq, 2);
}

TEST(AuditLog, VerifyNamesARehashedRowByItsSuccessor) {
  // Someone who edits a row and recomputes its hash still breaks the link
  // from the next row.
  testing::TempDir dir;
  auto log = open_log(dir / "state.db");
  append_three(*log);
  auto entries = log->list(10);
  ASSERT_TRUE(entries.ok());
  AuditEntry forged = (*entries)[0];
  forged.actor = "someone-else";
  Bytes h = entry_hash(forged);
  exec_sql(dir / "state.db", "UPDATE audit_log SET actor = 'someone-else', hash = x'" + hex_encode(h) + "' WHERE seq = 1");
  auto report = log->verify();
  ASSERT_TRUE(report.ok());
  ASSERT_TRUE(report->first_bad_seq.has_value());
  EXPECT_EQ(*report->first_bad_seq, 2);
}

TEST(AuditLog, VerifyNamesDeletedRows) {
  testing::TempDir dir;
  auto log = open_log(dir / "state.db");
  append_three(*log);
  exec_sql(dir / "state.db", "DELETE FROM audit_log WHERE seq = 2");
  auto middle = log->verify();
  ASSERT_TRUE(middle.ok());
  ASSERT_TRUE(middle->first_bad_seq.has_value());
  EXPECT_EQ(*middle->first_bad_seq, 2);

  testing::TempDir dir2;
  auto log2 = open_log(dir2 / "state.db");
  append_three(*log2);
  exec_sql(dir2 / "state.db", "DELETE FROM audit_log WHERE seq = 3");
  auto tail = log2->verify();
  ASSERT_TRUE(tail.ok());
  ASSERT_TRUE(tail->first_bad_seq.has_value());
  EXPECT_EQ(*tail->first_bad_seq, 3);
  // Appending after the deletion does not hide it.
  ASSERT_TRUE(log2->append(200, "peer-a", "run.stop", "job-1", nlohmann::json::object()).ok());
  auto after = log2->verify();
  ASSERT_TRUE(after.ok());
  ASSERT_TRUE(after->first_bad_seq.has_value());
  EXPECT_EQ(*after->first_bad_seq, 3);
}

}  // namespace
}  // namespace yonder::audit
