#include "peers/trust_store.h"

#include <nlohmann/json.hpp>
#include <openssl/crypto.h>

namespace yonder::peers {
namespace {

std::string addresses_to_json(const std::vector<std::string>& a) { return nlohmann::json(a).dump(); }

std::vector<std::string> addresses_from_json(const std::string& text) {
  auto j = nlohmann::json::parse(text, nullptr, false);
  std::vector<std::string> out;
  if (!j.is_array()) return out;
  for (const auto& a : j) {
    if (a.is_string()) out.push_back(a.get<std::string>());
  }
  return out;
}

Result<Scope> scope_from_text(const std::string& text) {
  auto j = nlohmann::json::parse(text, nullptr, false);
  return scope_from_json(j);
}

PeerRecord read_peer(const store::Statement& st) {
  PeerRecord p;
  Bytes key = st.column_blob(0);
  if (key.size() == p.key.size()) std::copy(key.begin(), key.end(), p.key.begin());
  p.name = st.column_optional_text(1).value_or("");
  auto grant = scope_from_text(st.column_text(2));
  if (grant) p.grant = *grant;
  else p.grant.capabilities = 0;  // unreadable scope: grant nothing
  p.paired_at = st.column_int64(3);
  p.last_seen_at = st.column_optional_int64(4);
  p.via_link_id = st.column_optional_text(5).value_or("");
  p.denied_at = st.column_optional_int64(6);
  p.addresses = addresses_from_json(st.column_text(7));
  if (auto g = st.column_optional_text(8)) {
    auto s = scope_from_text(*g);
    if (s) p.granted_to_us = *s;
  }
  p.provider_notice = st.column_optional_text(9).value_or("");
  p.check_digits = st.column_optional_text(10).value_or("");
  return p;
}

constexpr const char* kPeerColumns =
    "public_key, name, scope_json, paired_at, last_seen_at, via_link_id, denied_at, addresses_json, "
    "granted_to_us_json, provider_notice, check_digits";

}  // namespace

std::string LinkRecord::id_text() const { return hex_encode(id); }

std::string LinkRecord::state(int64_t now) const {
  if (revoked_at) return "revoked";
  if (uses_left <= 0) return "used";
  if (now >= expires_at) return "expired";
  return "active";
}

Result<TrustStore> TrustStore::open(const std::string& db_path) {
  auto db = store::Database::open(db_path);
  if (!db) return std::move(db).error();
  TrustStore ts(std::move(*db));
  YONDER_TRY(ts.load());
  return ts;
}

Status TrustStore::load() {
  auto st = db_.prepare(std::string("SELECT ") + kPeerColumns + " FROM peers");
  if (!st) return std::move(st).error();
  peers_.clear();
  while (true) {
    auto row = st->step();
    if (!row) return std::move(row).error();
    if (!*row) break;
    PeerRecord p = read_peer(*st);
    peers_[p.key] = p;
  }
  return ok_status();
}

const PeerRecord* TrustStore::find(const PublicKeyBytes& key) const {
  auto it = peers_.find(key);
  if (it == peers_.end() || it->second.denied()) return nullptr;
  return &it->second;
}

const PeerRecord* TrustStore::find_by_text(const std::string& text) const {
  auto id = NodeId::parse(text);
  if (id) return find(id->public_key());
  const PeerRecord* match = nullptr;
  for (const auto& [key, p] : peers_) {
    if (p.denied()) continue;
    // A name, or the first group of the id as `yonder peers` shows it.
    if (p.name == text || p.id().short_form() == text) {
      if (match != nullptr) return nullptr;  // ambiguous
      match = &p;
    }
  }
  return match;
}

std::vector<PeerRecord> TrustStore::peers() const {
  std::vector<PeerRecord> out;
  for (const auto& [key, p] : peers_) out.push_back(p);
  return out;
}

Status TrustStore::upsert(const PeerRecord& p) {
  auto st = db_.prepare(
      "INSERT INTO peers (peer_id, public_key, name, scope_json, paired_at, last_seen_at, via_link_id, denied_at, "
      "addresses_json, granted_to_us_json, provider_notice, check_digits) "
      "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12) "
      "ON CONFLICT(peer_id) DO UPDATE SET public_key = ?2, name = ?3, scope_json = ?4, paired_at = ?5, "
      "last_seen_at = ?6, via_link_id = ?7, denied_at = ?8, addresses_json = ?9, granted_to_us_json = ?10, "
      "provider_notice = ?11, check_digits = ?12");
  if (!st) return std::move(st).error();
  std::string granted = p.granted_to_us ? scope_to_json(*p.granted_to_us).dump() : std::string();
  YONDER_TRY(st->bind(1, p.id().to_string()));
  YONDER_TRY(st->bind(2, ByteView(p.key)));
  YONDER_TRY(st->bind(3, std::string_view(p.name)));
  YONDER_TRY(st->bind(4, scope_to_json(p.grant).dump()));
  YONDER_TRY(st->bind(5, p.paired_at));
  YONDER_TRY(st->bind(6, p.last_seen_at));
  YONDER_TRY(st->bind(7, std::string_view(p.via_link_id)));
  YONDER_TRY(st->bind(8, p.denied_at));
  YONDER_TRY(st->bind(9, addresses_to_json(p.addresses)));
  if (p.granted_to_us) YONDER_TRY(st->bind(10, std::string_view(granted)));
  else YONDER_TRY(st->bind(10, nullptr));
  if (p.provider_notice.empty()) YONDER_TRY(st->bind(11, nullptr));
  else YONDER_TRY(st->bind(11, std::string_view(p.provider_notice)));
  if (p.check_digits.empty()) YONDER_TRY(st->bind(12, nullptr));
  else YONDER_TRY(st->bind(12, std::string_view(p.check_digits)));
  auto done = st->step();
  if (!done) return std::move(done).error();
  peers_[p.key] = p;
  return ok_status();
}

Status TrustStore::set_grant(const PublicKeyBytes& key, const Scope& scope) {
  auto it = peers_.find(key);
  if (it == peers_.end()) return make_error(ErrorCode::kNotFound, "no such peer; `yonder peers` lists them");
  PeerRecord p = it->second;
  p.grant = scope;
  return upsert(p);
}

Status TrustStore::deny(const PublicKeyBytes& key, int64_t now) {
  auto it = peers_.find(key);
  if (it == peers_.end()) return make_error(ErrorCode::kNotFound, "no such peer; `yonder peers` lists them");
  PeerRecord p = it->second;
  p.denied_at = now;
  Status status = db_.transaction([&]() -> Status {
    // The link the peer redeemed goes too: with uses left, it would pair the
    // denied key (or whoever holds a copy) again.
    if (!p.via_link_id.empty()) {
      auto st = db_.prepare("UPDATE share_links SET revoked_at = ?2 WHERE link_id = ?1 AND revoked_at IS NULL");
      if (!st) return std::move(st).error();
      YONDER_TRY(st->bind(1, std::string_view(p.via_link_id)));
      YONDER_TRY(st->bind(2, now));
      auto done = st->step();
      if (!done) return std::move(done).error();
    }
    return upsert(p);
  });
  if (!status) {
    YONDER_TRY(load());
    return status;
  }
  return ok_status();
}

Status TrustStore::allow(const PublicKeyBytes& key) {
  auto it = peers_.find(key);
  if (it == peers_.end()) return make_error(ErrorCode::kNotFound, "no such peer; `yonder peers` lists them");
  if (!it->second.denied()) return ok_status();
  PeerRecord p = it->second;
  p.denied_at.reset();
  if (auto st = upsert(p); !st) {
    YONDER_TRY(load());
    return st;
  }
  return ok_status();
}

const PeerRecord* TrustStore::find_any_by_text(const std::string& text) const {
  if (auto id = NodeId::parse(text)) {
    auto it = peers_.find(id->public_key());
    return it == peers_.end() ? nullptr : &it->second;
  }
  const PeerRecord* match = nullptr;
  for (const auto& [key, p] : peers_) {
    if (p.name == text || p.id().short_form() == text) {
      if (match != nullptr) return nullptr;  // ambiguous
      match = &p;
    }
  }
  return match;
}

Status TrustStore::touch(const PublicKeyBytes& key, int64_t now) {
  auto it = peers_.find(key);
  if (it == peers_.end()) return ok_status();
  // last_seen is advisory: keep it in memory and write it at most once a minute.
  bool write = !it->second.last_seen_at || now - *it->second.last_seen_at >= 60;
  it->second.last_seen_at = now;
  return write ? upsert(it->second) : ok_status();
}

Status TrustStore::add_link(const LinkRecord& l) {
  auto st = db_.prepare(
      "INSERT INTO share_links (link_id, secret_hash, scope_json, created_at, expires_at, uses_total, uses_left, "
      "revoked_at, label, replaces_scope) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, NULL, ?8, ?9)");
  if (!st) return std::move(st).error();
  YONDER_TRY(st->bind(1, l.id_text()));
  YONDER_TRY(st->bind(2, ByteView(l.secret_hash)));
  YONDER_TRY(st->bind(3, scope_to_json(l.scope).dump()));
  YONDER_TRY(st->bind(4, l.created_at));
  YONDER_TRY(st->bind(5, l.expires_at));
  YONDER_TRY(st->bind(6, l.uses_total));
  YONDER_TRY(st->bind(7, l.uses_left));
  YONDER_TRY(st->bind(8, std::string_view(l.label)));
  YONDER_TRY(st->bind(9, int64_t{l.replaces_scope ? 1 : 0}));
  auto done = st->step();
  if (!done) return std::move(done).error();
  return ok_status();
}

Result<std::vector<LinkRecord>> TrustStore::links() const {
  auto st = db_.prepare(
      "SELECT link_id, secret_hash, scope_json, created_at, expires_at, uses_total, uses_left, revoked_at, label, "
      "replaces_scope "
      "FROM share_links ORDER BY created_at DESC, link_id");
  if (!st) return std::move(st).error();
  std::vector<LinkRecord> out;
  while (true) {
    auto row = st->step();
    if (!row) return std::move(row).error();
    if (!*row) break;
    LinkRecord l;
    auto id = parse_link_id(st->column_text(0));
    if (!id) continue;  // not one of ours
    l.id = *id;
    l.secret_hash = st->column_blob(1);
    auto scope = scope_from_text(st->column_text(2));
    if (scope) l.scope = *scope;
    l.created_at = st->column_int64(3);
    l.expires_at = st->column_int64(4);
    l.uses_total = static_cast<int>(st->column_int64(5));
    l.uses_left = static_cast<int>(st->column_int64(6));
    l.revoked_at = st->column_optional_int64(7);
    l.label = st->column_optional_text(8).value_or("");
    l.replaces_scope = st->column_int64(9) != 0;
    out.push_back(std::move(l));
  }
  return out;
}

Status TrustStore::revoke_link(const LinkIdBytes& id, int64_t now) {
  auto st = db_.prepare("UPDATE share_links SET revoked_at = ?2 WHERE link_id = ?1 AND revoked_at IS NULL");
  if (!st) return std::move(st).error();
  YONDER_TRY(st->bind(1, hex_encode(id)));
  YONDER_TRY(st->bind(2, now));
  auto done = st->step();
  if (!done) return std::move(done).error();
  if (db_.changes() == 0) {
    return make_error(ErrorCode::kNotFound, "no active link " + hex_encode(id) + "; `yonder links` lists them");
  }
  return ok_status();
}

bool TrustStore::any_redeemable(int64_t now) const {
  auto st = db_.prepare(
      "SELECT count(*) FROM share_links WHERE expires_at > ?1");
  if (!st || !st->bind(1, now)) return false;
  auto row = st->step();
  return row && *row && st->column_int64(0) > 0;
}

Result<PeerRecord> TrustStore::redeem(const LinkIdBytes& id, const LinkSecret& secret, PeerRecord peer, int64_t now) {
  std::optional<PeerRecord> pinned;
  Status status = db_.transaction([&]() -> Status {
    auto st = db_.prepare(
        "SELECT secret_hash, scope_json, expires_at, uses_left, revoked_at, created_at, replaces_scope FROM share_links "
        "WHERE link_id = ?1");
    if (!st) return std::move(st).error();
    YONDER_TRY(st->bind(1, hex_encode(id)));
    auto row = st->step();
    if (!row) return std::move(row).error();
    Bytes want = hash_link_secret(secret);
    Bytes have = *row ? st->column_blob(0) : Bytes{};
    if (!*row || have.size() != want.size() || CRYPTO_memcmp(have.data(), want.data(), want.size()) != 0) {
      return make_error(ErrorCode::kNotFound, "no such link");
    }
    auto scope = scope_from_text(st->column_text(1));
    if (!scope) return std::move(scope).error();
    if (st->column_optional_int64(4)) {
      return make_error(ErrorCode::kFailedPrecondition, "this share link was revoked by the provider; ask for a new one");
    }
    if (now >= st->column_int64(2)) {
      return make_error(ErrorCode::kFailedPrecondition, "this share link has expired; ask the provider for a new one");
    }
    if (st->column_int64(3) <= 0) {
      return make_error(ErrorCode::kFailedPrecondition,
                        "this share link has been used already (it allowed a limited number of pairings); ask the "
                        "provider for a new one");
    }
    const PeerRecord* known = nullptr;
    if (auto it = peers_.find(peer.key); it != peers_.end()) known = &it->second;
    // A denied key pairs again only with a link made after the deny: the
    // operator's explicit choice, not a copy of an old link it kept.
    if (known && known->denied() && st->column_int64(5) <= *known->denied_at) {
      return make_error(ErrorCode::kPermissionDenied,
                        "this node was denied by the provider; only a share link it creates from now on can pair it again");
    }
    auto spend = db_.prepare("UPDATE share_links SET uses_left = uses_left - 1 WHERE link_id = ?1");
    if (!spend) return std::move(spend).error();
    YONDER_TRY(spend->bind(1, hex_encode(id)));
    auto spent = spend->step();
    if (!spent) return std::move(spent).error();
    // Keep what we may already know about this peer (addresses, what it granted us).
    if (auto it = peers_.find(peer.key); it != peers_.end()) {
      peer.addresses = it->second.addresses;
      peer.granted_to_us = it->second.granted_to_us;
    }
    // Redeeming never widens what a pinned peer may do: a narrowed scope
    // (`yonder scope PEER --remove run`) stays narrowed, unless the operator
    // made this link to replace it.
    bool replaces = st->column_int64(6) != 0;
    peer.grant = known && !known->denied() && !replaces ? narrower_of(known->grant, *scope) : *scope;
    peer.paired_at = now;
    peer.denied_at.reset();
    peer.via_link_id = hex_encode(id);
    YONDER_TRY(upsert(peer));
    pinned = peer;
    return ok_status();
  });
  if (!status) {
    YONDER_TRY(load());  // the in-memory pins follow the rolled-back database
    return std::move(status).error();
  }
  return *pinned;
}

}  // namespace yonder::peers
