#include "mesh/core/verification.h"

#include "mesh/core/json_fields.h"

namespace yonder::mesh {
namespace {

using namespace detail;
constexpr std::string_view kVerificationWhat = "verification";
constexpr std::string_view kOpinionsWhat = "opinions";
constexpr std::string_view kVerificationLabel = "yonder-mesh-verification-v1";
constexpr uint64_t kVersion = 1;

json unsigned_json(const Verification& v) {
  return json{{"v", kVersion},
              {"reporter", peer_text(v.reporter)},
              {"provider", peer_text(v.provider)},
              {"kind", check_kind_name(v.kind)},
              {"subject", v.subject},
              {"outcome", check_outcome_name(v.outcome)},
              {"at_ms", static_cast<uint64_t>(v.at_ms)},
              {"details", v.details}};
}

// Bytes `s` takes as a JSON string in an array: quotes, escapes, comma.
size_t quoted_size(const std::string& s) {
  size_t n = s.size() + 3;
  for (char c : s) n += (c == '"' || c == '\\') ? 1 : 0;
  return n;
}

// An array of strings under `key` (absent: empty), at most kMaxOpinionItems.
Result<const json*> string_array(const json& j, const char* key) {
  const json* f = find(j, key);
  if (f == nullptr) return static_cast<const json*>(nullptr);
  if (!f->is_array() || f->size() > kMaxOpinionItems) {
    return bad(kOpinionsWhat, std::string("\"") + key + "\" must be an array of at most " +
                                  std::to_string(kMaxOpinionItems) + " strings");
  }
  return f;
}

}  // namespace

const char* check_kind_name(CheckKind k) {
  switch (k) {
    case CheckKind::kReplica: return "replica";
    case CheckKind::kKnownAnswer: return "known_answer";
    case CheckKind::kReceipt: return "receipt";
  }
  return "replica";
}

const char* check_outcome_name(CheckOutcome o) {
  switch (o) {
    case CheckOutcome::kAgreed: return "agreed";
    case CheckOutcome::kOutvoted: return "outvoted";
    case CheckOutcome::kPassed: return "passed";
    case CheckOutcome::kFailed: return "failed";
    case CheckOutcome::kDisputed: return "disputed";
  }
  return "agreed";
}

std::optional<CheckKind> parse_check_kind(std::string_view s) {
  if (s == "replica") return CheckKind::kReplica;
  if (s == "known_answer") return CheckKind::kKnownAnswer;
  if (s == "receipt") return CheckKind::kReceipt;
  return std::nullopt;
}

std::optional<CheckOutcome> parse_check_outcome(std::string_view s) {
  if (s == "agreed") return CheckOutcome::kAgreed;
  if (s == "outvoted") return CheckOutcome::kOutvoted;
  if (s == "passed") return CheckOutcome::kPassed;
  if (s == "failed") return CheckOutcome::kFailed;
  if (s == "disputed") return CheckOutcome::kDisputed;
  return std::nullopt;
}

bool outcome_fits(CheckKind k, CheckOutcome o) {
  switch (k) {
    case CheckKind::kReplica: return o == CheckOutcome::kAgreed || o == CheckOutcome::kOutvoted;
    case CheckKind::kKnownAnswer: return o == CheckOutcome::kPassed || o == CheckOutcome::kFailed;
    case CheckKind::kReceipt: return o == CheckOutcome::kDisputed;
  }
  return false;
}

Result<Verification> decode_verification(std::string_view text) {
  MESH_GET(j, parse_object(text, kMaxVerificationBytes, kVerificationWhat));
  MESH_GET(version, get_uint(j, "v", 1000, kVerificationWhat));
  if (version != kVersion) return bad(kVerificationWhat, "\"v\" is a version this node does not know (it knows 1)");
  Verification v;
  MESH_GET(reporter, get_peer(j, "reporter", kVerificationWhat));
  MESH_GET(provider, get_peer(j, "provider", kVerificationWhat));
  v.reporter = reporter;
  v.provider = provider;
  MESH_GET(kind, get_string(j, "kind", 1, 32, kVerificationWhat));
  auto k = parse_check_kind(kind);
  if (!k) return bad(kVerificationWhat, "\"kind\" must be replica, known_answer or receipt");
  v.kind = *k;
  MESH_GET(subject, get_string(j, "subject", 1, 64, kVerificationWhat));
  if (!token_chars(subject, false)) return bad(kVerificationWhat, "\"subject\" must be of [A-Za-z0-9._:/-]");
  v.subject = std::move(subject);
  MESH_GET(outcome, get_string(j, "outcome", 1, 32, kVerificationWhat));
  auto o = parse_check_outcome(outcome);
  if (!o || !outcome_fits(v.kind, *o)) return bad(kVerificationWhat, "\"outcome\" does not fit the kind of check");
  v.outcome = *o;
  MESH_GET(at, get_time(j, "at_ms", kVerificationWhat));
  v.at_ms = at;
  MESH_GET(details, get_string(j, "details", 2, kMaxVerificationDetailsBytes, kVerificationWhat));
  v.details = std::move(details);
  MESH_GET(sig, get_signature(j, "sig", kVerificationWhat));
  v.signature = std::move(sig);
  return v;
}

std::string encode_verification(const Verification& v) {
  json j = unsigned_json(v);
  j["sig"] = base64_encode(v.signature);
  return j.dump();
}

void sign_verification(Verification& v, const Identity& reporter) {
  v.reporter = reporter.public_key();
  v.signature = reporter.sign(signing_bytes(kVerificationLabel, unsigned_json(v)));
}

Status verify_verification(const Verification& v) {
  if (v.reporter == v.provider || !outcome_fits(v.kind, v.outcome)) {
    return make_error(ErrorCode::kInvalidArgument, "verification " + v.subject +
                                                       " names the same peer twice or an outcome that does not "
                                                       "fit its kind; it was not counted");
  }
  if (!verify_signature(v.reporter, signing_bytes(kVerificationLabel, unsigned_json(v)), v.signature)) {
    return make_error(ErrorCode::kPermissionDenied,
                      "verification " + v.subject + ": the reporter's signature does not verify; it was not counted");
  }
  return ok_status();
}

Result<Opinions> decode_opinions(std::string_view text) {
  MESH_GET(j, parse_object(text, kMaxOpinionsBytes, kOpinionsWhat));
  MESH_GET(version, get_uint(j, "v", 1000, kOpinionsWhat));
  if (version != kVersion) return bad(kOpinionsWhat, "\"v\" is a version this node does not know (it knows 1)");
  Opinions out;
  MESH_GET(receipts, string_array(j, "receipts"));
  MESH_GET(verifications, string_array(j, "verifications"));
  if (receipts != nullptr) {
    for (const auto& item : *receipts) {
      auto r = item.is_string() ? decode_receipt(item.get_ref<const std::string&>())
                                : Result<Receipt>(bad(kOpinionsWhat, "item"));
      if (r) {
        out.receipts.push_back(std::move(*r));
      } else {
        ++out.dropped;
      }
    }
  }
  if (verifications != nullptr) {
    for (const auto& item : *verifications) {
      auto v = item.is_string() ? decode_verification(item.get_ref<const std::string&>())
                                : Result<Verification>(bad(kOpinionsWhat, "item"));
      if (v) {
        out.verifications.push_back(std::move(*v));
      } else {
        ++out.dropped;
      }
    }
  }
  return out;
}

std::string encode_opinions(const Opinions& o) {
  json receipts = json::array(), verifications = json::array();
  size_t total = 64;  // the envelope
  // Alternate so that neither list can crowd the other out of the budget.
  size_t ri = 0, vi = 0;
  bool r_open = true, v_open = true;
  while (r_open || v_open) {
    if (r_open) {
      if (ri >= o.receipts.size() || receipts.size() >= kMaxOpinionItems) {
        r_open = false;
      } else {
        std::string s = encode_receipt(o.receipts[ri++]);
        if (s.size() > kMaxReceiptBytes || total + quoted_size(s) > kMaxOpinionsBytes) {
          r_open = false;
        } else {
          total += quoted_size(s);
          receipts.push_back(std::move(s));
        }
      }
    }
    if (v_open) {
      if (vi >= o.verifications.size() || verifications.size() >= kMaxOpinionItems) {
        v_open = false;
      } else {
        std::string s = encode_verification(o.verifications[vi++]);
        if (s.size() > kMaxVerificationBytes || total + quoted_size(s) > kMaxOpinionsBytes) {
          v_open = false;
        } else {
          total += quoted_size(s);
          verifications.push_back(std::move(s));
        }
      }
    }
  }
  std::string out = json{{"v", kVersion}, {"receipts", receipts}, {"verifications", verifications}}.dump();
  // A safety net: the sizes above are exact for printable ASCII.
  while (out.size() > kMaxOpinionsBytes && (!receipts.empty() || !verifications.empty())) {
    if (verifications.size() >= receipts.size()) {
      verifications.erase(verifications.end() - 1);
    } else {
      receipts.erase(receipts.end() - 1);
    }
    out = json{{"v", kVersion}, {"receipts", receipts}, {"verifications", verifications}}.dump();
  }
  return out;
}

Opinions verified_opinions(Opinions o, const PeerKey& sender) {
  Opinions out;
  out.dropped = o.dropped;
  for (auto& r : o.receipts) {
    if ((r.provider == sender || r.consumer == sender) && verify_receipt(r).ok()) {
      out.receipts.push_back(std::move(r));
    } else {
      ++out.dropped;
    }
  }
  for (auto& v : o.verifications) {
    if (v.reporter == sender && verify_verification(v).ok()) {
      out.verifications.push_back(std::move(v));
    } else {
      ++out.dropped;
    }
  }
  return out;
}

}  // namespace yonder::mesh
