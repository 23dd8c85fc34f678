#include "jobs/metering/verifications.h"

#include <chrono>

#include "crypto/node_id.h"

namespace yonder::jobs::metering {
namespace {

constexpr const char* kColumns = "id, provider_id, kind, subject, outcome, details_json, signed_json, at_ms";
constexpr size_t kMaxListRows = 100'000;

mesh::UnixMs verifications_wall_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

VerificationRow read_row(store::Statement& st) {
  VerificationRow r;
  r.id = st.column_int64(0);
  r.provider_id = st.column_text(1);
  r.kind = mesh::parse_check_kind(st.column_text(2)).value_or(mesh::CheckKind::kReplica);
  r.subject = st.column_text(3);
  r.outcome = mesh::parse_check_outcome(st.column_text(4)).value_or(mesh::CheckOutcome::kAgreed);
  r.details = nlohmann::json::parse(st.column_text(5), nullptr, false);
  if (!r.details.is_object()) r.details = nlohmann::json::object();
  r.signed_json = st.column_text(6);
  r.at_ms = st.column_int64(7);
  return r;
}

}  // namespace

nlohmann::json VerificationRow::to_json() const {
  return {{"id", id},
          {"provider_id", provider_id},
          {"kind", mesh::check_kind_name(kind)},
          {"subject", subject},
          {"outcome", mesh::check_outcome_name(outcome)},
          {"details", details},
          {"at_ms", at_ms}};
}

Result<std::unique_ptr<Verifications>> Verifications::open(const std::string& db_path, const Identity& self) {
  auto db = store::Database::open(db_path);
  if (!db) return std::move(db).error().with_context("verifications");
  return std::unique_ptr<Verifications>(new Verifications(std::move(*db), self));
}

Result<VerificationRow> Verifications::record(const std::string& provider_id, mesh::CheckKind kind,
                                              const std::string& subject, mesh::CheckOutcome outcome,
                                              const nlohmann::json& details, mesh::UnixMs at_ms) {
  auto id = NodeId::parse(provider_id);
  if (!id) {
    return make_error(ErrorCode::kInvalidArgument, "\"" + provider_id + "\" is not a node id; pass the provider's id");
  }
  // `{}` in a call builds a JSON null: take it as no details.
  if (!details.is_object() && !details.is_null()) {
    return make_error(ErrorCode::kInvalidArgument, "a verification's details must be a JSON object");
  }
  const nlohmann::json& shown = details.is_null() ? nlohmann::json::object() : details;
  mesh::Verification v;
  v.provider = id->public_key();
  v.kind = kind;
  v.subject = subject;
  v.outcome = outcome;
  v.at_ms = at_ms == 0 ? verifications_wall_ms() : at_ms;
  // ASCII only, so the signed text is the same on every node.
  v.details = shown.dump(-1, ' ', true, nlohmann::json::error_handler_t::replace);
  mesh::sign_verification(v, self_);
  // The decoder is the one judge of what is well formed: record nothing a peer would drop.
  std::string text = mesh::encode_verification(v);
  auto check = mesh::decode_verification(text);
  if (!check) return std::move(check).error().with_context("recording a verification of " + provider_id);
  if (auto st = mesh::verify_verification(*check); !st) return std::move(st).error();

  std::lock_guard lock(mutex_);
  auto st = db_.prepare(
      "INSERT INTO verifications (provider_id, kind, subject, outcome, details_json, signed_json, at_ms) "
      "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) RETURNING id");
  if (!st) return std::move(st).error();
  VerificationRow row;
  row.provider_id = id->to_string();
  row.kind = kind;
  row.subject = subject;
  row.outcome = outcome;
  row.details = shown;
  row.at_ms = v.at_ms;
  row.signed_json = text;
  YONDER_TRY(st->bind(1, std::string_view(row.provider_id)));
  YONDER_TRY(st->bind(2, std::string_view(mesh::check_kind_name(kind))));
  YONDER_TRY(st->bind(3, std::string_view(subject)));
  YONDER_TRY(st->bind(4, std::string_view(mesh::check_outcome_name(outcome))));
  YONDER_TRY(st->bind(5, std::string_view(v.details)));
  YONDER_TRY(st->bind(6, std::string_view(text)));
  YONDER_TRY(st->bind(7, static_cast<int64_t>(v.at_ms)));
  auto done = st->step();
  if (!done) return std::move(done).error().with_context("storing a verification of " + provider_id);
  if (*done) row.id = st->column_int64(0);
  return row;
}

Result<std::vector<VerificationRow>> Verifications::list(const std::string& provider_id, size_t limit) {
  std::string provider = provider_id;
  if (!provider.empty()) {
    auto id = NodeId::parse(provider_id);
    if (!id) return make_error(ErrorCode::kInvalidArgument, "\"" + provider_id + "\" is not a node id");
    provider = id->to_string();
  }
  std::lock_guard lock(mutex_);
  std::string sql = std::string("SELECT ") + kColumns + " FROM verifications";
  if (!provider.empty()) sql += " WHERE provider_id = ?1";
  sql += " ORDER BY at_ms DESC, id DESC LIMIT " + std::to_string(std::min(limit, kMaxListRows));
  auto st = db_.prepare(sql);
  if (!st) return std::move(st).error();
  if (!provider.empty()) {
    YONDER_TRY(st->bind(1, std::string_view(provider)));
  }
  std::vector<VerificationRow> out;
  for (;;) {
    auto row = st->step();
    if (!row) return std::move(row).error();
    if (!*row) break;
    out.push_back(read_row(*st));
  }
  return out;
}

}  // namespace yonder::jobs::metering
