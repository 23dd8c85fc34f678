#include "jobs/audit/audit_log.h"

#include <fcntl.h>
#include <sodium.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

namespace yonder::audit {
namespace {

void warn_journal_unwritable(const std::string& path) {
  // This library logs nothing itself: stderr, as the daemon's log would.
  std::fprintf(stderr, "audit log: could not write the pending journal %s\n", path.c_str());
}

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
  std::string pending_path = db_path + ".audit-pending";
  auto log = std::unique_ptr<AuditLog>(new AuditLog(std::move(*db), pending_path));
  std::lock_guard lock(log->mutex_);
  log->load_pending_locked();
  // Its space allocated now, while there is room, so that keeping entries
  // on a full disk needs no new blocks.
  int fd = ::open(pending_path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  if (fd >= 0) {
    (void)::posix_fallocate(fd, 0, static_cast<off_t>(kPendingBytes));
    ::close(fd);
  }
  int64_t now = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  (void)log->flush_pending_locked(now);  // what stays pending is written by a later append
  return log;
}

Result<AuditEntry> AuditLog::append(int64_t at, const std::string& actor, const std::string& action,
                                    const std::string& subject, const nlohmann::json& detail) {
  std::lock_guard lock(mutex_);
  std::string detail_json = detail.is_object() ? detail.dump() : "{}";
  if (auto flushed = flush_pending_locked(at); !flushed) {
    // Still failing: this one waits behind the others, in order.
    pending_.push_back({at, actor, action, subject, detail_json});
    save_pending_locked();
    return std::move(flushed).error().with_context("audit log (the entry is kept and written when the disk has room)");
  }
  auto r = insert_locked(at, actor, action, subject, detail_json);
  if (!r) {
    pending_.push_back({at, actor, action, subject, detail_json});
    save_pending_locked();
    return std::move(r).error().with_context("audit log (the entry is kept and written when the disk has room)");
  }
  return r;
}

size_t AuditLog::pending() {
  std::lock_guard lock(mutex_);
  return pending_.size();
}

Status AuditLog::flush_pending_locked(int64_t now) {
  if (pending_.empty() && lost_ == 0) return ok_status();
  size_t written = 0;
  Status st = ok_status();
  for (const auto& p : pending_) {
    auto late = nlohmann::json::parse(p.detail_json, nullptr, false);
    if (!late.is_object()) late = nlohmann::json::object();
    late["written_late"] = true;
    if (auto r = insert_locked(p.at, p.actor, p.action, p.subject, late.dump()); !r) {
      st = std::move(r).error();
      break;
    }
    ++written;
  }
  pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(written));
  if (st && lost_ > 0) {
    nlohmann::json gap = {{"lost", lost_}, {"why", lost_why_}};
    if (auto r = insert_locked(now, "local", "audit.gap", "", gap.dump()); !r) {
      st = std::move(r).error();
    } else {
      lost_ = 0;
      lost_why_.clear();
    }
  }
  if (written > 0 || st) save_pending_locked();
  return st;
}

// The journal: a decimal length line, then {"pending": [...], "lost": N,
// "why": "..."}; the file keeps its allocated size.
void AuditLog::save_pending_locked() {
  if (pending_path_.empty()) return;
  nlohmann::json j = {{"pending", nlohmann::json::array()}, {"lost", lost_}, {"why", lost_why_}};
  std::string body;
  size_t kept = 0;
  for (const auto& p : pending_) {
    j["pending"].push_back({{"at", p.at}, {"actor", p.actor}, {"action", p.action}, {"subject", p.subject},
                            {"detail", p.detail_json}});
    body = j.dump();
    if (body.size() + 16 > kPendingBytes) {
      j["pending"].erase(j["pending"].size() - 1);
      break;
    }
    ++kept;
  }
  if (kept < pending_.size()) {
    // No room even in the journal: the newest go, counted.
    lost_ += static_cast<int64_t>(pending_.size() - kept);
    lost_why_ = "the disk was full and the pending journal could hold no more";
    pending_.resize(kept);
    j["lost"] = lost_;
    j["why"] = lost_why_;
  }
  body = j.dump();
  std::string text = std::to_string(body.size()) + "\n" + body;
  int fd = ::open(pending_path_.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return;
  bool ok = ::pwrite(fd, text.data(), text.size(), 0) == static_cast<ssize_t>(text.size()) && ::fdatasync(fd) == 0;
  ::close(fd);
  if (!ok) warn_journal_unwritable(pending_path_);
}

void AuditLog::load_pending_locked() {
  int fd = ::open(pending_path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;  // never needed
  std::string text(kPendingBytes, '\0');
  ssize_t n = ::pread(fd, text.data(), text.size(), 0);
  ::close(fd);
  if (n <= 0) return;
  text.resize(static_cast<size_t>(n));
  size_t nl = text.find('\n');
  size_t len = 0;
  bool framed = nl != std::string::npos && nl > 0 && nl < 12 &&
                std::all_of(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(nl), [](char c) { return c >= '0' && c <= '9'; });
  if (framed) len = std::stoul(text.substr(0, nl));
  if (framed && len == 0) return;
  nlohmann::json j = framed && nl + 1 + len <= text.size() ? nlohmann::json::parse(text.substr(nl + 1, len), nullptr, false)
                                                            : nlohmann::json();
  if (!framed && text.find_first_not_of('\0') == std::string::npos) return;  // allocated, never written
  if (!j.is_object() || !j.contains("pending") || !j["pending"].is_array()) {
    lost_ += 1;
    lost_why_ = "the pending journal of a previous run could not be read; at least one entry was lost";
    return;
  }
  for (const auto& p : j["pending"]) {
    if (!p.is_object()) continue;
    pending_.push_back({p.value("at", int64_t{0}), p.value("actor", ""), p.value("action", ""), p.value("subject", ""),
                        p.value("detail", "{}")});
  }
  lost_ += j.value("lost", int64_t{0});
  if (j.contains("why") && j["why"].is_string() && !j["why"].get<std::string>().empty()) lost_why_ = j["why"];
}

Result<AuditEntry> AuditLog::insert_locked(int64_t at, const std::string& actor, const std::string& action,
                                           const std::string& subject, const std::string& detail_json) {
  AuditEntry e;
  e.at = at;
  e.actor = actor;
  e.action = action;
  e.subject = subject;
  e.detail_json = detail_json;
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
  auto gaps = db_.prepare("SELECT seq FROM audit_log WHERE action = 'audit.gap' ORDER BY seq ASC");
  if (!gaps) return std::move(gaps).error();
  while (true) {
    auto row = gaps->step();
    if (!row) return std::move(row).error();
    if (!*row) break;
    report.gaps.push_back(gaps->column_int64(0));
  }
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
