#include "jobs/audit/audit_log.h"

#include <sodium.h>

#include <algorithm>

namespace yonder::audit {
namespace {

void put_field(Bytes& out, std::string_view s) {
  uint64_t n = s.size();
  for (int i = 7; i >= 0; --i) out.push_back(static_cast<uint8_t>(n >> (8 * i)));
  out.insert(out.end(), s.begin(), s.end());
}

Result<AuditEntry> read_row(store::Statement& st) {
  AuditEntry e;
  e.seq = st.column_int64(0);
  e.at = st.column_int64(1);
  e.actor = st.column_text(2);
  e.action = st.column_text(3);
  e.subject = st.column_optional_text(4).value_or("");
  e.detail_json = st.column_optional_text(5).value_or("");
  if (!st.column_is_null(6)) e.prev_hash = st.column_blob(6);
  e.hash = st.column_blob(7);
  return e;
}

constexpr const char* kColumns = "seq, at, actor, action, subject, detail_json, prev_hash, hash";

}  // namespace

nlohmann::json AuditEntry::to_json() const {
  auto detail = nlohmann::json::parse(detail_json, nullptr, false);
  if (detail.is_discarded()) detail = detail_json;
  return {{"seq", seq}, {"at", at}, {"actor", actor}, {"action", action}, {"subject", subject},
          {"detail", detail}, {"hash", hex_encode(hash)}};
}

Bytes entry_hash(const AuditEntry& e) {
  Bytes msg = e.prev_hash;
  put_field(msg, std::to_string(e.seq));
  put_field(msg, std::to_string(e.at));
  put_field(msg, e.actor);
  put_field(msg, e.action);
  put_field(msg, e.subject);
  put_field(msg, e.detail_json);
  Bytes out(crypto_hash_sha256_BYTES);
  crypto_hash_sha256(out.data(), msg.data(), msg.size());
  return out;
}

Result<std::unique_ptr<AuditLog>> AuditLog::open(const std::string& db_path) {
  auto db = store::Database::open(db_path);
  if (!db) return std::move(db).error().with_context("audit log");
  return std::unique_ptr<AuditLog>(new AuditLog(std::move(*db)));
}

Result<AuditEntry> AuditLog::append(int64_t at, const std::string& actor, const std::string& action,
                                    const std::string& subject, const nlohmann::json& detail) {
  std::lock_guard lock(mutex_);
  AuditEntry e;
  e.at = at;
  e.actor = actor;
  e.action = action;
  e.subject = subject;
  e.detail_json = detail.is_object() ? detail.dump() : "{}";
  // BEGIN IMMEDIATE: the read of the head and the insert are one step, so
  // two writers (two connections) cannot both chain onto the same row.
  Status st = db_.transaction([&]() -> Status {
    auto last = db_.prepare("SELECT hash FROM audit_log ORDER BY seq DESC LIMIT 1");
    if (!last) return std::move(last).error();
    auto has = last->step();
    if (!has) return std::move(has).error();
    e.prev_hash = *has ? last->column_blob(0) : Bytes{};
    // The next seq, as AUTOINCREMENT would give it (never a reused one).
    auto next = db_.prepare("SELECT COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'audit_log'), 0) + 1");
    if (!next) return std::move(next).error();
    auto got = next->step();
    if (!got) return std::move(got).error();
    e.seq = next->column_int64(0);
    e.hash = entry_hash(e);
    auto ins = db_.prepare(std::string("INSERT INTO audit_log (") + kColumns + ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)");
    if (!ins) return std::move(ins).error();
    YONDER_TRY(ins->bind(1, e.seq));
    YONDER_TRY(ins->bind(2, e.at));
    YONDER_TRY(ins->bind(3, std::string_view(e.actor)));
    YONDER_TRY(ins->bind(4, std::string_view(e.action)));
    YONDER_TRY(ins->bind(5, std::string_view(e.subject)));
    YONDER_TRY(ins->bind(6, std::string_view(e.detail_json)));
    if (e.prev_hash.empty()) {
      YONDER_TRY(ins->bind(7, nullptr));
    } else {
      YONDER_TRY(ins->bind(7, ByteView(e.prev_hash)));
    }
    YONDER_TRY(ins->bind(8, ByteView(e.hash)));
    auto done = ins->step();
    if (!done) return std::move(done).error();
    return ok_status();
  });
  if (!st) return std::move(st).error().with_context("audit log");
  return e;
}

Result<std::vector<AuditEntry>> AuditLog::list(int64_t limit) {
  std::lock_guard lock(mutex_);
  auto st = db_.prepare(std::string("SELECT * FROM (SELECT ") + kColumns +
                        " FROM audit_log ORDER BY seq DESC LIMIT ?1) ORDER BY seq ASC");
  if (!st) return std::move(st).error();
  YONDER_TRY(st->bind(1, std::max<int64_t>(limit, 0)));
  std::vector<AuditEntry> out;
  while (true) {
    auto row = st->step();
    if (!row) return std::move(row).error();
    if (!*row) break;
    auto e = read_row(*st);
    if (!e) return std::move(e).error();
    out.push_back(std::move(*e));
  }
  return out;
}

Result<VerifyReport> AuditLog::verify() {
  std::lock_guard lock(mutex_);
  VerifyReport report;
  auto st = db_.prepare(std::string("SELECT ") + kColumns + " FROM audit_log ORDER BY seq ASC");
  if (!st) return std::move(st).error();
  Bytes prev;
  int64_t last_seq = 0;
  auto bad = [&](int64_t seq, std::string why) {
    if (report.first_bad_seq) return;
    report.first_bad_seq = seq;
    report.problem = std::move(why);
  };
  while (true) {
    auto row = st->step();
    if (!row) return std::move(row).error();
    if (!*row) break;
    auto e = read_row(*st);
    if (!e) return std::move(e).error();
    ++report.entries;
    if (e->seq != last_seq + 1) {
      bad(last_seq + 1, "entry " + std::to_string(last_seq + 1) + " is missing (deleted)");
    } else if (e->prev_hash != prev) {
      bad(e->seq, "its prev_hash does not match the hash of the entry before it");
    } else if (entry_hash(*e) != e->hash) {
      bad(e->seq, "its fields do not match its hash (edited after it was written)");
    }
    prev = e->hash;
    last_seq = e->seq;
  }
  report.head_hash = hex_encode(prev);
  auto top = db_.prepare("SELECT COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'audit_log'), 0)");
  if (!top) return std::move(top).error();
  auto got = top->step();
  if (!got) return std::move(got).error();
  int64_t issued = top->column_int64(0);
  if (issued > last_seq) bad(last_seq + 1, "entries " + std::to_string(last_seq + 1) + " to " + std::to_string(issued) +
                                               " were written and are gone (deleted)");
  return report;
}

}  // namespace yonder::audit
