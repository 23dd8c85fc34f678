#include "jobs/receipts/receipt_store.h"

#include <algorithm>
#include <chrono>

#include "base/clock.h"

namespace yonder::jobs::receipts {
namespace {

constexpr const char* kColumns =
    "provider_id, job_id, consumer_id, role, state, receipt_json, problem, created_at, updated_at";

ReceiptState state_from(const std::string& s) {
  if (s == "countersigned") return ReceiptState::kCountersigned;
  if (s == "refused") return ReceiptState::kRefused;
  if (s == "disputed") return ReceiptState::kDisputed;
  return ReceiptState::kSigned;
}

StoredReceipt read_row(store::Statement& st) {
  StoredReceipt r;
  r.provider_id = st.column_text(0);
  r.job_id = st.column_text(1);
  r.consumer_id = st.column_text(2);
  r.we_provided = st.column_text(3) == "provider";
  r.state = state_from(st.column_text(4));
  r.receipt_json = st.column_text(5);
  r.problem = st.column_text(6);
  r.created_at = st.column_int64(7);
  r.updated_at = st.column_int64(8);
  return r;
}

}  // namespace

const char* receipt_state_name(ReceiptState s) {
  switch (s) {
    case ReceiptState::kSigned: return "signed";
    case ReceiptState::kCountersigned: return "countersigned";
    case ReceiptState::kRefused: return "refused";
    case ReceiptState::kDisputed: return "disputed";
  }
  return "signed";
}

Result<std::unique_ptr<ReceiptStore>> ReceiptStore::open(const std::string& db_path) {
  auto db = store::Database::open(db_path);
  if (!db) return std::move(db).error().with_context("receipts");
  return std::unique_ptr<ReceiptStore>(new ReceiptStore(std::move(*db)));
}

Status ReceiptStore::put(const StoredReceipt& r) {
  std::lock_guard lock(mutex_);
  auto st = db_.prepare(std::string("INSERT INTO receipts (") + kColumns +
                        ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) ON CONFLICT(provider_id, job_id) DO UPDATE SET "
                        "consumer_id = ?3, role = ?4, state = ?5, receipt_json = ?6, problem = ?7, updated_at = ?9");
  if (!st) return std::move(st).error();
  int64_t now = unix_now_s();
  YONDER_TRY(st->bind(1, r.provider_id));
  YONDER_TRY(st->bind(2, r.job_id));
  YONDER_TRY(st->bind(3, r.consumer_id));
  YONDER_TRY(st->bind(4, std::string_view(r.we_provided ? "provider" : "consumer")));
  YONDER_TRY(st->bind(5, std::string_view(receipt_state_name(r.state))));
  YONDER_TRY(st->bind(6, r.receipt_json));
  if (r.problem.empty()) {
    YONDER_TRY(st->bind(7, nullptr));
  } else {
    YONDER_TRY(st->bind(7, r.problem));
  }
  YONDER_TRY(st->bind(8, r.created_at == 0 ? now : r.created_at));
  YONDER_TRY(st->bind(9, now));
  auto done = st->step();
  if (!done) return std::move(done).error().with_context("storing the receipt of job " + r.job_id);
  return ok_status();
}

Result<std::optional<StoredReceipt>> ReceiptStore::get(const PeerId& provider_id, const JobId& job_id) {
  std::lock_guard lock(mutex_);
  auto st = db_.prepare(std::string("SELECT ") + kColumns + " FROM receipts WHERE provider_id = ?1 AND job_id = ?2");
  if (!st) return std::move(st).error();
  YONDER_TRY(st->bind(1, provider_id.value()));
  YONDER_TRY(st->bind(2, job_id.value()));
  auto row = st->step();
  if (!row) return std::move(row).error();
  if (!*row) return std::optional<StoredReceipt>();
  return std::optional<StoredReceipt>(read_row(*st));
}

Result<std::vector<StoredReceipt>> ReceiptStore::list() {
  std::lock_guard lock(mutex_);
  auto st = db_.prepare(std::string("SELECT ") + kColumns + " FROM receipts ORDER BY created_at, job_id");
  if (!st) return std::move(st).error();
  std::vector<StoredReceipt> out;
  for (;;) {
    auto row = st->step();
    if (!row) return std::move(row).error();
    if (!*row) break;
    out.push_back(read_row(*st));
  }
  return out;
}

Result<std::vector<StoredReceipt>> ReceiptStore::newest_countersigned(size_t limit) {
  std::lock_guard lock(mutex_);
  auto st = db_.prepare(std::string("SELECT ") + kColumns +
                        " FROM receipts WHERE state = 'countersigned' ORDER BY created_at DESC, job_id DESC LIMIT ?1");
  if (!st) return std::move(st).error();
  YONDER_TRY(st->bind(1, static_cast<int64_t>(std::min<size_t>(limit, 1'000'000))));
  std::vector<StoredReceipt> out;
  for (;;) {
    auto row = st->step();
    if (!row) return std::move(row).error();
    if (!*row) break;
    out.push_back(read_row(*st));
  }
  return out;
}

}  // namespace yonder::jobs::receipts
