#include "mesh/consumer/mesh_consumer.h"

#include <utility>  // before Boost.Asio (GCC 12)

#include <algorithm>
#include <set>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <spdlog/spdlog.h>

#include "api/answer.h"
#include "mesh/core/advertisement.h"
#include "mesh/core/capacity.h"
#include "mesh/consumer/mesh_opinions.h"
#include "mesh/groups/groups.h"
#include "mesh/core/lease.h"

namespace yonder::mesh {
namespace asio = boost::asio;
using api::Reply;
using api::Request;
using api::Response;

namespace {

// How long one provider may take to send its advertisement (dialling included).
constexpr std::chrono::seconds kAskTimeout{10};

mesh::UnixMs wall_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

double path_quality(const std::string& path) {
  int rank = link::path_rank(path);
  if (rank >= 4) return 0.5;  // relayed: every byte crosses a third machine
  if (rank == 3) return 0.9;  // punched: direct, but a NAT mapping may lapse
  return 1.0;
}

std::string refusal_text(const mesh::LeaseMessage& m) {
  switch (m.refuse_reason) {
    case mesh::RefuseReason::kBusy:
      return m.retry_after_ms > 0 ? "busy (try again in " + std::to_string((m.retry_after_ms + 999) / 1000) + " s)"
                                  : "busy";
    case mesh::RefuseReason::kInfeasible: return "cannot run it (too few or too small GPUs)";
    case mesh::RefuseReason::kNotAllowed: return "not allowed";
    case mesh::RefuseReason::kDraining: return "shutting down";
  }
  return "refused";
}

// Calls `method` on `t`, answering `done` once: the result, or a timeout
// error after `timeout`. `late` gets a result that came after the timeout.
void call_with_timeout(asio::io_context& io, reach::Peers& link, const reach::Peers::Target& t,
                       const std::string& method, const nlohmann::json& params, std::chrono::milliseconds timeout,
                       std::function<void(Result<nlohmann::json>)> done,
                       std::function<void(Result<nlohmann::json>)> late = nullptr) {
  struct Once {
    explicit Once(asio::io_context& io) : timer(io) {}
    asio::steady_timer timer;
    bool answered = false;
    std::function<void(Result<nlohmann::json>)> done;
  };
  auto once = std::make_shared<Once>(io);
  once->done = std::move(done);
  once->timer.expires_after(timeout);
  once->timer.async_wait([once, name = t.name, method, timeout](boost::system::error_code ec) {
    if (ec || once->answered) return;
    once->answered = true;
    once->done(make_error(ErrorCode::kUnavailable,
                          name + " did not answer " + method + " within " + std::to_string(timeout.count()) + " ms"));
  });
  link.service().call(t.key, t.addresses, method, params, [once, late = std::move(late)](Result<nlohmann::json> r) {
    if (once->answered) {
      if (late) late(std::move(r));
      return;
    }
    once->answered = true;
    once->timer.cancel();
    once->done(std::move(r));
  });
}

// The advertisement in a provider's message (a mesh.advertisement answer or
// an advertisement.push), checked: it decodes, names `from` (the peer's
// pinned key) and its signature verifies.
Result<mesh::Advertisement> verified_advertisement(const nlohmann::json& m, const PublicKeyBytes& from) {
  if (!m.is_object() || !m.contains("advertisement") || !m["advertisement"].is_string()) {
    return make_error(ErrorCode::kInvalidArgument, "the provider's answer has no advertisement");
  }
  auto ad = mesh::decode_advertisement(m["advertisement"].get_ref<const std::string&>());
  if (!ad) return std::move(ad).error();
  if (ad->provider != from) {
    return make_error(ErrorCode::kPermissionDenied, "the advertisement names another provider's key");
  }
  if (auto st = mesh::verify_advertisement(*ad); !st) return std::move(st).error();
  return ad;
}

}  // namespace

struct MeshConsumer::Held {
  explicit Held(asio::io_context& io) : timer(io) {}
  reach::Peers::Target target;
  uint64_t lease_id = 0;
  std::chrono::steady_clock::time_point since;
  asio::steady_timer timer;
};

MeshConsumer::MeshConsumer(asio::io_context& io, reach::Peers& link, MeshSettings settings)
    : io_(io), link_(link), settings_(std::move(settings)) {}

MeshConsumer::~MeshConsumer() {
  *alive_ = false;
  for (auto& [_, h] : held_) h->timer.cancel();
}

void MeshConsumer::add_routes(api::Router& router) {
  router.add("GET", "/v1/mesh", [this](const Request& req, Reply reply) {
    auto query = api::parse_query(req.query);
    std::optional<mesh::Membership> only;
    if (!query["group"].empty()) {
      auto g = group_list(query["group"]);
      if (!g) return reply(Response::error(g.error()));
      only = std::move(*g);
    }
    auto answer = [this, reply, only] {
      reply(Response::json(200, capacity_json(wall_ms(), only ? &*only : nullptr)));
    };
    if (query["refresh"] == "0") return answer();
    if (opinions_ == nullptr) return refresh(answer);
    // Opinions (reputation) are asked for alongside the advertisements.
    auto left = std::make_shared<int>(2);
    auto both = [left, answer] {
      if (--*left == 0) answer();
    };
    refresh(both);
    opinions_->refresh(both);
  });
  router.add("POST", "/v1/mesh/lease", [this](const Request& req, Reply reply) {
    lease_for(api::body_json(req), api::answer_with(std::move(reply)));
  });
  auto lease_route = [this](const char* method) {
    return [this, method](const Request& req, Reply reply) {
      auto b = nlohmann::json::parse(req.body, nullptr, false);
      if (!b.is_object() || !b.contains("provider") || !b["provider"].is_string() || !b.contains("lease_id") ||
          !b["lease_id"].is_number_unsigned()) {
        return reply(Response::error(make_error(ErrorCode::kInvalidArgument, "the body needs \"provider\" and \"lease_id\"")));
      }
      lease_call(b["provider"].get<std::string>(), b, api::answer_with(std::move(reply)), method);
    };
  };
  router.add("POST", "/v1/mesh/bind", lease_route("mesh.bind"));
  router.add("POST", "/v1/mesh/release", lease_route("mesh.release"));
}

void MeshConsumer::register_methods() {
  // Any pinned peer may call it (no `mesh.` prefix: the provider holds no
  // grant from us); only a provider we are paired with is heard.
  link_.service().add_method("advertisement.push", [this](const PublicKeyBytes& peer, const nlohmann::json& params,
                                                          link::RpcReply reply) {
    auto targets = link_.targets();
    auto t = std::find_if(targets.begin(), targets.end(), [&](const auto& x) { return x.key == peer; });
    if (t == targets.end()) {
      return reply(make_error(ErrorCode::kPermissionDenied, "this node is not paired with the sender"));
    }
    auto ad = verified_advertisement(params, peer);
    if (!ad) {
      spdlog::info("mesh: refused an advertisement pushed by {}: {}", t->name, ad.error().message());
      return reply(std::move(ad).error());
    }
    Known& k = known_[peer];
    k.target = *t;
    // The newest wins, pulled or pushed.
    if (!k.ad || ad->issued_at_ms >= k.ad->issued_at_ms) k.ad = std::move(*ad);
    k.error.clear();
    k.fetched_at_ms = wall_ms();
    k.pushed = true;
    if (k.path.empty()) {
      for (const auto& s : link_.service().sessions()) {
        if (s.peer == peer && s.established && !s.draining) k.path = s.path;
      }
    }
    reply(nlohmann::json{{"accepted", true}});
  });
}

void MeshConsumer::refresh(std::function<void()> done) {
  auto targets = link_.targets();
  // Providers no longer paired leave the snapshot.
  for (auto it = known_.begin(); it != known_.end();) {
    bool still = std::any_of(targets.begin(), targets.end(), [&](const auto& t) { return t.key == it->first; });
    it = still ? std::next(it) : known_.erase(it);
  }
  if (targets.empty()) return done();
  auto left = std::make_shared<size_t>(targets.size());
  for (const auto& t : targets) {
    auto started = std::chrono::steady_clock::now();
    call_with_timeout(
        io_, link_, t, "mesh.advertisement", nlohmann::json::object(),
        std::chrono::duration_cast<std::chrono::milliseconds>(kAskTimeout),
        [this, alive = alive_, t, started, left, done](Result<nlohmann::json> r) {
          if (!*alive) return;
          Known& k = known_[t.key];
          k.target = t;
          k.fetched_at_ms = wall_ms();
          k.pushed = false;
          k.rtt_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
          k.path.clear();
          // The link's own RTT and path, when it has measured them.
          int best = 99;
          for (const auto& s : link_.service().sessions()) {
            if (s.peer != t.key || !s.established || s.draining) continue;
            int rank = link::path_rank(s.path);
            if (rank >= best) continue;
            best = rank;
            k.path = s.path;
            if (s.rtt) k.rtt_ms = std::chrono::duration<double, std::milli>(*s.rtt).count();
          }
          bool answered = r.ok();
          auto verified = r ? verified_advertisement(*r, t.key) : Result<mesh::Advertisement>(r.error());
          if (verified) {
            // The newest wins; an older one (a reordered answer) is ignored.
            if (!k.ad || verified->issued_at_ms >= k.ad->issued_at_ms) k.ad = std::move(*verified);
            k.error.clear();
          } else {
            k.error = verified.error().message();
            spdlog::info("mesh: no advertisement from {}: {}", t.name, k.error);
          }
          if (!answered) {
            if (--*left == 0) done();
            return;
          }
          // One echo round trip on the session the answer came over: the
          // path's RTT, without the provider's time to build the answer
          // (which the call's own time includes). Bounded like the ask.
          struct Ping {
            explicit Ping(asio::io_context& io) : timer(io) {}
            asio::steady_timer timer;
            bool finished = false;
          };
          auto ping = std::make_shared<Ping>(io_);
          auto finish = [alive, left, done, ping] {
            if (!*alive || ping->finished) return;
            ping->finished = true;
            ping->timer.cancel();
            if (--*left == 0) done();
          };
          ping->timer.expires_after(kAskTimeout);
          ping->timer.async_wait([finish](boost::system::error_code ec) {
            if (!ec) finish();
          });
          link_.service().ping(
              t.key, t.addresses, 1, std::chrono::milliseconds(0),
              [this, alive, key = t.key](std::chrono::nanoseconds rtt) {
                if (!*alive) return;
                if (auto it = known_.find(key); it != known_.end()) {
                  it->second.rtt_ms = std::chrono::duration<double, std::milli>(rtt).count();
                }
              },
              [finish](Status) { finish(); });
        });
  }
}

nlohmann::json MeshConsumer::capacity_json(mesh::UnixMs now, const mesh::Membership* only) const {
  nlohmann::json providers = nlohmann::json::array();
  uint64_t total = 0, free = 0, queued = 0, answering = 0;
  for (const auto& [key, k] : known_) {
    if (only != nullptr && !mesh::is_member(*only, key)) continue;
    nlohmann::json p = {{"node_id", k.target.node_id}, {"name", k.target.name}, {"path", k.path},
                        {"rtt_ms", k.rtt_ms}, {"fetched_at_ms", k.fetched_at_ms},
                        {"source", k.pushed ? "pushed" : "pulled"}};
    if (!k.error.empty()) p["error"] = k.error;
    if (opinions_ != nullptr) p.update(opinions_->provider_json(key));  // reputation, latest benchmark
    if (!k.ad) {
      p["state"] = "no advertisement";
      providers.push_back(std::move(p));
      continue;
    }
    const mesh::Advertisement& ad = *k.ad;
    bool fresh = mesh::advertisement_fresh(ad, now);
    p["state"] = !fresh ? "stale" : (k.error.empty() ? "ok" : "last known");
    p["fresh"] = fresh;
    nlohmann::json gpus = nlohmann::json::array();
    uint64_t f = 0;
    for (size_t i = 0; i < ad.gpus.size(); ++i) {
      const auto& g = ad.gpus[i];
      // Whether a GPU check of ours confirmed the model (mesh/core/gpu_claims.h).
      mesh::GpuClaim claim = opinions_ != nullptr ? opinions_->gpu_claim(key, g.model) : mesh::GpuClaim::kUnverified;
      gpus.push_back({{"index", i}, {"model", g.model}, {"memory_bytes", g.memory_bytes},
                      {"cuda", std::to_string(g.cuda_major) + "." + std::to_string(g.cuda_minor)},
                      {"driver", g.driver}, {"leased", g.leased}, {"claim", mesh::gpu_claim_name(claim)}});
      f += g.leased ? 0 : 1;
    }
    p["gpus"] = gpus;
    p["gpus_total"] = ad.gpus.size();
    p["free"] = f;
    p["queue_depth"] = ad.queue_depth;
    p["backends"] = ad.backends;
    p["labels"] = ad.labels;
    p["issued_at_ms"] = ad.issued_at_ms;
    p["expires_at_ms"] = ad.expires_at_ms;
    p["age_ms"] = std::max<mesh::UnixMs>(0, now - ad.issued_at_ms);
    if (fresh) {
      ++answering;
      total += ad.gpus.size();
      free += f;
      queued += ad.queue_depth;
    }
    providers.push_back(std::move(p));
  }
  nlohmann::json out = {{"providers", providers},
                        {"totals", {{"providers", answering}, {"gpus", total}, {"free", free}, {"queued", queued}}}};
  if (only != nullptr) out["group"] = {{"group_id", only->group_id}, {"name", only->name}};
  return out;
}

Result<mesh::Membership> MeshConsumer::group_list(const std::string& name_or_id) const {
  if (groups_ == nullptr) {
    return make_error(ErrorCode::kUnavailable, "this daemon does not track groups; placement by group is off");
  }
  return groups_->membership(name_or_id);
}

mesh::Snapshot MeshConsumer::snapshot(mesh::UnixMs now) const {
  mesh::Snapshot s;
  s.now_ms = now;
  // A provider's ledger about us mirrors ours about it: allowance + what we
  // gave it - what it gave us = 2 * allowance - the balance we hold for it.
  double allowance = 0;
  std::map<std::string, double> balance;
  if (credits_ != nullptr) {
    nlohmann::json report = credits_->report(now);
    allowance = report["params"].value("starting_allowance", 0.0);
    for (const auto& p : report["peers"]) balance[p.value("peer_id", "")] = p.value("balance", 0.0);
  }
  std::vector<mesh::Membership> lists;
  if (groups_ != nullptr) lists = groups_->memberships();
  for (const auto& [key, k] : known_) {
    if (!k.ad) continue;
    mesh::ProviderView v;
    v.ad = *k.ad;
    v.path_quality = path_quality(k.path);
    v.rtt_ms = k.rtt_ms;
    if (credits_ != nullptr) {
      auto b = balance.find(k.target.node_id);
      v.credit = b == balance.end() ? allowance : 2 * allowance - b->second;
    }
    if (opinions_ != nullptr) {
      v.reputation = opinions_->reputation(key);  // EigenTrust, 0..1
      v.gpu_claim_verified = opinions_->gpu_claims_verified(v.ad);
    }
    // The groups it is in, by the lists this node holds (a list names the
    // provider by key; the owner counts as a member).
    if (groups_ != nullptr) {
      for (const auto& m : lists) {
        if (mesh::is_member(m, key)) v.groups.push_back(m.group_id);
      }
    }
    s.providers.push_back(std::move(v));
  }
  return s;
}

void MeshConsumer::lease_for(nlohmann::json b, api::Answer reply) {
  if (!b.is_object()) return reply(make_error(ErrorCode::kInvalidArgument, "the body must be a JSON object"));
  mesh::PlacementRequest job;
  auto gpus = api::body_uint(b, "gpus", 1, mesh::kMaxGpusPerProvider);
  auto vram = api::body_uint(b, "vram_bytes", 0, uint64_t{1} << 50);
  auto cap = api::body_uint(b, "min_capability", 0, 9999);
  for (auto* r : {&gpus, &vram, &cap}) {
    if (!*r) return reply(r->error());
  }
  if (*gpus == 0) return reply(make_error(ErrorCode::kInvalidArgument, "a mesh job needs at least one GPU"));
  job.gpus = static_cast<uint32_t>(*gpus);
  job.vram_bytes = *vram;
  job.min_capability = static_cast<uint32_t>(*cap);
  if (b.contains("labels")) {
    if (!b["labels"].is_object()) return reply(make_error(ErrorCode::kInvalidArgument, "\"labels\" must be an object"));
    std::string text;
    for (auto it = b["labels"].begin(); it != b["labels"].end(); ++it) {
      if (!it->is_string()) return reply(make_error(ErrorCode::kInvalidArgument, "label values must be strings"));
      text += it.key() + "=" + it->get<std::string>() + ",";
    }
    auto labels = mesh::parse_labels(text);
    if (!labels) return reply(labels.error());
    job.labels = std::move(*labels);
  }
  // The group's display name, for the "nothing feasible" error.
  std::string group_name;
  if (b.contains("group")) {
    if (!b["group"].is_string()) return reply(make_error(ErrorCode::kInvalidArgument, "\"group\" must be a string"));
    auto g = group_list(b["group"].get<std::string>());
    if (!g) return reply(g.error());
    job.group = g->group_id;
    group_name = g->name;
  }
  // "exclude": providers (node ids) not to place on (a mesh job's requeue).
  std::set<std::string> exclude;
  if (b.contains("exclude")) {
    if (!b["exclude"].is_array() || b["exclude"].size() > 256) {
      return reply(make_error(ErrorCode::kInvalidArgument, "\"exclude\" must be a list of node ids"));
    }
    for (const auto& e : b["exclude"]) {
      if (e.is_string()) exclude.insert(e.get<std::string>());
    }
  }
  refresh([this, alive = alive_, job, group_name, exclude, reply] {
    if (!*alive) return;
    mesh::UnixMs now = wall_ms();
    mesh::Snapshot snap = snapshot(now);
    std::erase_if(snap.providers, [&](const mesh::ProviderView& v) {
      auto k = known_.find(v.ad.provider);
      return k != known_.end() && exclude.count(k->second.target.node_id) > 0;
    });
    mesh::Weights weights;
    mesh::Plan plan = mesh::place(snap, job, weights);
    if (plan.ranked.empty()) {
      size_t fresh = 0;
      for (const auto& v : snap.providers) fresh += mesh::advertisement_fresh(v.ad, now) ? 1 : 0;
      mesh::PlacementRequest named = job;
      if (named.group) named.group = group_name;
      return reply(mesh::nothing_feasible(named, fresh));
    }
    nlohmann::json plan_json = nlohmann::json::array();
    for (const auto& c : plan.ranked) {
      const Known& k = known_.at(c.provider);
      auto view = std::find_if(snap.providers.begin(), snap.providers.end(),
                               [&](const auto& v) { return v.ad.provider == c.provider; });
      mesh::ScoreParts parts = mesh::score_parts(*view, c.expected_start_s, weights);
      plan_json.push_back({{"node_id", k.target.node_id},
                           {"name", k.target.name},
                           {"score", c.score},
                           {"why", mesh::describe_score(parts)},
                           {"parts", {{"reputation", parts.reputation}, {"path", parts.path}, {"rtt", parts.rtt},
                                      {"start", parts.start}, {"credit", parts.credit},
                                      {"unverified_gpu", parts.unverified}}},
                           {"expected_start_s", c.expected_start_s},
                           {"devices", c.devices}});
    }
    // Offers the job to plan_json[i], then the next on refusal.
    auto refusals = std::make_shared<nlohmann::json>(nlohmann::json::array());
    auto next = std::make_shared<std::function<void(size_t)>>();
    *next = [this, alive, job, reply, plan, plan_json, refusals, weak = std::weak_ptr<std::function<void(size_t)>>(next)](size_t i) {
      auto self = weak.lock();
      if (!*alive || !self) return;
      if (i >= plan.ranked.size()) {
        std::string why;
        for (const auto& r : *refusals) why += (why.empty() ? "" : "; ") + r.value("name", "") + ": " + r.value("reason", "");
        return reply(make_error(
            ErrorCode::kUnavailable, "every provider that could run it refused a lease (" + why +
                                         "); try again later, or ask for less (`yonder mesh` shows what is free)"));
      }
      const Known& k = known_.at(plan.ranked[i].provider);
      reach::Peers::Target t = k.target;
      mesh::LeaseMessage offer;
      offer.kind = mesh::LeaseKind::kOffer;
      offer.request_id = next_request_id_++;
      offer.gpus = job.gpus;
      offer.vram_bytes = job.vram_bytes;
      offer.min_capability = job.min_capability;
      offer.term_ms = settings_.lease_term_ms;
      offer.timeout_ms = settings_.offer_timeout_ms;
      auto refused = [refusals, t, self, i](std::string reason) {
        spdlog::info("mesh: {} refused the lease: {}", t.name, reason);
        refusals->push_back({{"node_id", t.node_id}, {"name", t.name}, {"reason", reason}});
        (*self)(i + 1);
      };
      // An accept that arrives after we gave up is given back at once.
      auto late = [this, t](Result<nlohmann::json> r) {
        if (!r || !r->contains("message") || !(*r)["message"].is_string()) return;
        auto m = mesh::decode_lease_message((*r)["message"].get_ref<const std::string&>());
        if (!m || m->kind != mesh::LeaseKind::kAccept) return;
        mesh::LeaseMessage rel;
        rel.kind = mesh::LeaseKind::kRelease;
        rel.lease_id = m->lease_id;
        rel.release_reason = mesh::ReleaseReason::kCancelled;
        link_.service().call(t.key, t.addresses, "mesh.lease", {{"message", mesh::encode_lease_message(rel)}},
                             [](Result<nlohmann::json>) {});
      };
      call_with_timeout(
          io_, link_, t, "mesh.lease", {{"message", mesh::encode_lease_message(offer)}},
          std::chrono::milliseconds(settings_.offer_timeout_ms),
          [this, alive, t, i, plan_json, refusals, reply, refused, request_id = offer.request_id](Result<nlohmann::json> r) {
            if (!*alive) return;
            if (!r) return refused(r.error().message());
            if (!r->contains("message") || !(*r)["message"].is_string()) return refused("an answer without a lease message");
            auto m = mesh::decode_lease_message((*r)["message"].get_ref<const std::string&>());
            if (!m) return refused(m.error().message());
            if (m->request_id != request_id) return refused("an answer to another request");
            if (m->kind == mesh::LeaseKind::kRefuse) return refused(refusal_text(*m));
            if (m->kind != mesh::LeaseKind::kAccept) return refused("an answer that is not accept or refuse");
            auto held = std::make_shared<Held>(io_);
            held->target = t;
            held->lease_id = m->lease_id;
            held->since = std::chrono::steady_clock::now();
            held_[t.node_id + "/" + std::to_string(m->lease_id)] = held;
            renew_later(held);
            spdlog::info("mesh: {} leased {} device(s) to us (lease {})", t.name, m->devices.size(), m->lease_id);
            reply(nlohmann::json({{"provider", {{"node_id", t.node_id}, {"name", t.name}}},
                                       {"lease_id", m->lease_id},
                                       {"devices", m->devices},
                                       {"expires_at_ms", m->expires_at_ms},
                                       {"chosen", plan_json[i]},
                                       {"plan", plan_json},
                                       {"refusals", *refusals}}));
          },
          late);
    };
    // `next` refers to itself weakly; the step in flight holds it (through
    // `refused`) until the chain ends.
    (*next)(0);
  });
}

void MeshConsumer::bind_lease(const PeerId& provider, LeaseId lease_id, const JobId& job_id,
                              std::function<void(Result<nlohmann::json>)> answer) {
  lease_call(provider.value(),
             {{"provider", provider.value()}, {"lease_id", lease_id.value()}, {"job_id", job_id.value()}},
             std::move(answer), "mesh.bind");
}

void MeshConsumer::release_lease(const PeerId& provider, LeaseId lease_id,
                                 std::function<void(Result<nlohmann::json>)> answer) {
  lease_call(provider.value(), {{"provider", provider.value()}, {"lease_id", lease_id.value()}}, std::move(answer),
             "mesh.release");
}

void MeshConsumer::renew_later(std::shared_ptr<Held> held) {
  uint64_t term = settings_.lease_term_ms;
  held->timer.expires_after(std::chrono::milliseconds(std::max<uint64_t>(term / 3, 100)));
  held->timer.async_wait([this, alive = alive_, held](boost::system::error_code ec) {
    if (ec || !*alive) return;
    std::string key = held->target.node_id + "/" + std::to_string(held->lease_id);
    if (std::chrono::steady_clock::now() - held->since > kMaxUnboundRenewal) {
      spdlog::info("mesh: lease {} on {} was never bound to a job; letting it lapse", held->lease_id, held->target.name);
      return forget(key);
    }
    mesh::LeaseMessage renew;
    renew.kind = mesh::LeaseKind::kRenew;
    renew.lease_id = held->lease_id;
    renew.term_ms = settings_.lease_term_ms;
    link_.service().call(held->target.key, held->target.addresses, "mesh.lease",
                         {{"message", mesh::encode_lease_message(renew)}},
                         [this, alive, held, key](Result<nlohmann::json> r) {
                           if (!*alive || held_.count(key) == 0) return;
                           if (!r) {
                             spdlog::warn("mesh: renewing lease {} on {} failed: {}", held->lease_id,
                                          held->target.name, r.error().message());
                             return forget(key);
                           }
                           renew_later(held);
                         });
  });
}

void MeshConsumer::forget(const std::string& key) {
  auto it = held_.find(key);
  if (it == held_.end()) return;
  it->second->timer.cancel();
  held_.erase(it);
}

void MeshConsumer::lease_call(const std::string& provider, const nlohmann::json& body, api::Answer reply,
                              const char* method) {
  auto t = link_.target(provider);
  if (!t) return reply(t.error());
  uint64_t lease_id = body["lease_id"].get<uint64_t>();
  std::string key = t->node_id + "/" + std::to_string(lease_id);
  auto answer = [this, alive = alive_, key, reply](Result<nlohmann::json> r) {
    if (!*alive) return;
    forget(key);  // bound or released: no more renewals from here
    reply(std::move(r));
  };
  if (std::string(method) == "mesh.bind") {
    if (!body.contains("job_id") || !body["job_id"].is_string()) {
      return reply(make_error(ErrorCode::kInvalidArgument, "the body needs \"job_id\""));
    }
    link_.service().call(t->key, t->addresses, "mesh.bind", {{"lease_id", lease_id}, {"job_id", body["job_id"]}}, answer);
    return;
  }
  mesh::LeaseMessage rel;
  rel.kind = mesh::LeaseKind::kRelease;
  rel.lease_id = lease_id;
  rel.release_reason = mesh::ReleaseReason::kCancelled;
  link_.service().call(t->key, t->addresses, "mesh.lease", {{"message", mesh::encode_lease_message(rel)}}, answer);
}

}  // namespace yonder::mesh
