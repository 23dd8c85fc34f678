#include "mesh/consumer/mesh_opinions.h"

#include <utility>  // before Boost.Asio (GCC 12)

#include <spdlog/spdlog.h>
#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <set>

#include "crypto/node_id.h"
#include "mesh/groups/groups.h"

namespace yonder::mesh {
namespace asio = boost::asio;

namespace {

// How long one peer may take to answer mesh.opinions (dialling included).
constexpr std::chrono::seconds kMeshOpinionsAskTimeout{10};
// How much of our own evidence goes into our own computation (the RPC
// answer is bounded separately, by mesh::kMaxOpinionItems).
constexpr size_t kOwnEvidenceLimit = 20'000;

std::vector<mesh::VerificationOutcome> outcomes_of(const mesh::Opinions& o) {
  std::vector<mesh::VerificationOutcome> out;
  for (const auto& v : o.verifications) {
    mesh::VerificationOutcome x;
    x.judge = v.reporter;
    x.provider = v.provider;
    x.agreed = mesh::outcome_good(v.outcome);
    x.known_answer = v.kind == mesh::CheckKind::kKnownAnswer;
    out.push_back(x);
  }
  return out;
}

}  // namespace

Result<mesh::Opinions> own_opinions(jobs::receipts::ReceiptStore& receipts,
                                    jobs::metering::Verifications& verifications, size_t limit) {
  mesh::Opinions out;
  auto stored = receipts.newest_countersigned(limit);
  if (!stored) return std::move(stored).error().with_context("reading receipts for reputation");
  for (const auto& row : *stored) {
    auto r = mesh::decode_receipt(row.receipt_json);
    if (r) out.receipts.push_back(std::move(*r));
  }
  auto rows = verifications.list("", limit);
  if (!rows) return std::move(rows).error().with_context("reading verifications for reputation");
  for (const auto& row : *rows) {
    auto v = mesh::decode_verification(row.signed_json);
    if (v) out.verifications.push_back(std::move(*v));
  }
  return out;
}

std::vector<mesh::PeerKey> pre_trusted_peers(const mesh::PeerKey& self, const std::vector<mesh::Membership>& lists) {
  std::set<mesh::PeerKey> keys = {self};
  for (const auto& m : lists) {
    keys.insert(m.owner);
    for (const auto& member : m.members) {
      if (member.role == mesh::MemberRole::kAdmin) keys.insert(member.id);
    }
  }
  return {keys.begin(), keys.end()};
}

mesh::TrustResult trust_from(const mesh::Opinions& own, const std::map<mesh::PeerKey, mesh::Opinions>& fetched,
                             const std::vector<mesh::PeerKey>& pre_trusted, const mesh::TrustParams& params) {
  std::vector<mesh::Receipt> receipts = own.receipts;
  std::vector<mesh::VerificationOutcome> outcomes = outcomes_of(own);
  for (const auto& [peer, o] : fetched) {
    receipts.insert(receipts.end(), o.receipts.begin(), o.receipts.end());
    auto more = outcomes_of(o);
    outcomes.insert(outcomes.end(), more.begin(), more.end());
  }
  // A receipt both we and the provider hold is counted once (compute_trust
  // keys receipts by provider and job); an outcome comes only from its
  // reporter (verified_opinions), and we do not ask ourselves.
  return mesh::compute_trust(receipts, outcomes, pre_trusted, params);
}

MeshOpinions::MeshOpinions(asio::io_context& io, asio::thread_pool& pool, reach::Peers& link, const Identity& self,
                           jobs::receipts::ReceiptStore& receipts, jobs::metering::Verifications& verifications)
    : io_(io), pool_(pool), link_(link), self_(self), receipts_(receipts), verifications_(verifications) {}

MeshOpinions::~MeshOpinions() {
  *alive_ = false;
  if (timer_) timer_->cancel();
}

Status MeshOpinions::start() {
  schedule_refresh();
  return ok_status();
}

void MeshOpinions::schedule_refresh() {
  if (interval_.count() == 0) return;
  if (!timer_) timer_ = std::make_unique<asio::steady_timer>(io_);
  timer_->expires_after(interval_);
  timer_->async_wait([this, alive = alive_](boost::system::error_code ec) {
    if (ec || !*alive) return;
    refresh([this, alive] {
      if (*alive) schedule_refresh();
    });
  });
}

void MeshOpinions::register_methods() {
  link_.service().add_method("mesh.opinions", [this](const PublicKeyBytes&, const nlohmann::json&,
                                                     link::RpcReply reply) { serve(std::move(reply)); });
}

void MeshOpinions::serve(link::RpcReply reply) {
  // Bounded work per call: two indexed reads of at most kMaxOpinionItems rows.
  asio::post(pool_, [this, alive = alive_, reply = std::move(reply)]() mutable {
    auto own = own_opinions(receipts_, verifications_, mesh::kMaxOpinionItems);
    Result<std::string> text =
        own ? Result<std::string>(mesh::encode_opinions(*own)) : Result<std::string>(own.error());
    asio::post(io_, [alive, reply = std::move(reply), text = std::move(text)]() mutable {
      if (!*alive) return;
      if (!text) return reply(std::move(text).error());
      reply(nlohmann::json{{"opinions", *text}});
    });
  });
}

void MeshOpinions::add_routes(api::Router& router) {
  router.add("GET", "/v1/mesh/reputation", [this](const api::Request& req, api::Reply reply) {
    auto answer = [this, alive = alive_, reply] {
      if (*alive) reply(api::Response::json(200, report()));
    };
    if (api::parse_query(req.query)["refresh"] == "0") return answer();
    refresh(answer);
  });
}

void MeshOpinions::refresh(std::function<void()> done) {
  // Only peers that let this node ask (their grant to us has `mesh`): the
  // others would refuse, and each refusal is a row in their audit log.
  auto targets = link_.targets();
  targets.erase(std::remove_if(targets.begin(), targets.end(),
                               [](const reach::Peers::Target& t) {
                                 return !t.granted_to_us || !t.granted_to_us->allows(Capability::kMesh);
                               }),
                targets.end());
  for (auto it = sources_.begin(); it != sources_.end();) {
    bool still = std::any_of(targets.begin(), targets.end(), [&](const auto& t) { return t.key == it->first; });
    it = still ? std::next(it) : sources_.erase(it);
  }
  if (targets.empty()) return recompute(std::move(done));
  auto left = std::make_shared<size_t>(targets.size());
  auto one_done = [this, alive = alive_, left, done] {
    if (*alive && --*left == 0) recompute(done);
  };
  for (const auto& t : targets) {
    // call_within answers once: the reply or, past the deadline, an error.
    auto finish = [this, alive = alive_, key = t.key, name = t.name, one_done](Result<nlohmann::json> r) {
      if (!*alive) return;
      Source& s = sources_[key];
      auto decoded = [&]() -> Result<mesh::Opinions> {
        if (!r) return std::move(r).error();
        if (!r->is_object() || !r->contains("opinions") || !(*r)["opinions"].is_string()) {
          return make_error(ErrorCode::kInvalidArgument, "the peer's answer has no opinions");
        }
        return mesh::decode_opinions((*r)["opinions"].get_ref<const std::string&>());
      }();
      if (decoded) {
        s.opinions = mesh::verified_opinions(std::move(*decoded), key);
        s.error.clear();
        if (s.opinions.dropped > 0) {
          spdlog::info("mesh: dropped {} item(s) of {}'s opinions that did not verify", s.opinions.dropped, name);
        }
      } else {
        s.error = decoded.error().message();  // the last verified opinions stay
        spdlog::info("mesh: no opinions from {}: {}", name, s.error);
      }
      one_done();
    };
    link_.call_within(t, "mesh.opinions", nlohmann::json::object(), kMeshOpinionsAskTimeout, finish);
  }
}

void MeshOpinions::recompute(std::function<void()> done) {
  std::map<mesh::PeerKey, mesh::Opinions> fetched;
  for (const auto& [key, s] : sources_) fetched[key] = s.opinions;
  std::vector<mesh::Membership> lists = groups_ != nullptr ? groups_->memberships() : std::vector<mesh::Membership>{};
  auto pre = pre_trusted_peers(self_.public_key(), lists);
  asio::post(pool_, [this, alive = alive_, fetched = std::move(fetched), pre, done = std::move(done)]() mutable {
    auto own = own_opinions(receipts_, verifications_, kOwnEvidenceLimit);
    std::map<std::string, nlohmann::json> benchmarks;
    mesh::GpuClaims claims;
    if (auto rows = verifications_.list("", kOwnEvidenceLimit)) {
      for (const auto& row : *rows) {  // newest first: the first per provider wins
        if (row.kind == mesh::CheckKind::kKnownAnswer) benchmarks.emplace(row.provider_id, row.to_json());
        if (auto c = mesh::gpu_check_of(row.provider_id, row.kind, row.outcome, row.details, row.at_ms)) {
          claims.add(std::move(*c));
        }
      }
    }
    if (!own) spdlog::warn("mesh: reputation uses only peers' opinions: {}", own.error().to_string());
    mesh::TrustResult trust = trust_from(own ? *own : mesh::Opinions{}, fetched, pre);
    asio::post(io_, [this, alive, trust = std::move(trust), benchmarks = std::move(benchmarks),
                     claims = std::move(claims), pre, done = std::move(done)]() mutable {
      if (!*alive) return;
      reputation_.clear();
      trust_ = trust.global;
      for (const auto& [key, t] : trust.global) reputation_[key] = trust.normalised(key);
      latest_benchmark_ = std::move(benchmarks);
      gpu_claims_ = std::move(claims);
      pre_trusted_ = std::move(pre);
      done();
    });
  });
}

double MeshOpinions::reputation(const mesh::PeerKey& peer) const {
  auto it = reputation_.find(peer);
  return it == reputation_.end() ? 0.0 : it->second;
}

nlohmann::json MeshOpinions::provider_json(const mesh::PeerKey& peer) const {
  auto t = trust_.find(peer);
  auto b = latest_benchmark_.find(NodeId(peer).to_string());
  nlohmann::json out = {{"reputation", reputation(peer)},
                        {"trust", t == trust_.end() ? 0.0 : t->second},
                        {"benchmark", b == latest_benchmark_.end() ? nlohmann::json(nullptr) : b->second}};
  // What its own mesh.opinions answer held (kept after verification).
  if (auto s = sources_.find(peer); s != sources_.end()) {
    out["opinions"] = {{"receipts", s->second.opinions.receipts.size()},
                       {"verifications", s->second.opinions.verifications.size()},
                       {"dropped", s->second.opinions.dropped}};
    if (!s->second.error.empty()) out["opinions"]["error"] = s->second.error;
  }
  return out;
}

mesh::GpuClaim MeshOpinions::gpu_claim(const mesh::PeerKey& peer, const std::string& model) const {
  return gpu_claims_.claim(NodeId(peer).to_string(), model);
}

bool MeshOpinions::gpu_claims_verified(const mesh::Advertisement& ad) const {
  return gpu_claims_.verified(NodeId(ad.provider).to_string(), ad);
}

nlohmann::json MeshOpinions::report() const {
  nlohmann::json peers = nlohmann::json::array();
  for (const auto& [key, t] : trust_) {
    nlohmann::json p = provider_json(key);
    p["node_id"] = NodeId(key).to_string();
    p["self"] = key == self_.public_key();
    peers.push_back(std::move(p));
  }
  nlohmann::json pre = nlohmann::json::array();
  for (const auto& k : pre_trusted_) pre.push_back(NodeId(k).to_string());
  nlohmann::json sources = nlohmann::json::array();
  for (const auto& [key, s] : sources_) {
    nlohmann::json j = {{"node_id", NodeId(key).to_string()},
                        {"receipts", s.opinions.receipts.size()},
                        {"verifications", s.opinions.verifications.size()},
                        {"dropped", s.opinions.dropped}};
    if (!s.error.empty()) j["error"] = s.error;
    sources.push_back(std::move(j));
  }
  return {{"peers", peers}, {"pre_trusted", pre}, {"sources", sources}};
}

}  // namespace yonder::mesh
