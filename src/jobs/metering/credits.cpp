#include "jobs/metering/credits.h"

#include <spdlog/spdlog.h>

#include <chrono>

#include "crypto/node_id.h"
#include "mesh/core/metering.h"

namespace yonder::jobs::metering {
namespace {

Error bad_setting(const std::string& key, const std::string& why) {
  return make_error(ErrorCode::kInvalidArgument, key + " " + why + "; fix it with `yonder config set " + key + " ...`");
}

}  // namespace

Result<mesh::CreditParams> credit_params_from_config(const config::Config& cfg) {
  mesh::CreditParams p;
  int64_t allowance = cfg.get_int("credits.starting_allowance");
  if (allowance < 0) return bad_setting("credits.starting_allowance", "must be at least 0");
  p.starting_allowance = static_cast<double>(allowance);
  int64_t idle = cfg.get_int("credits.idle_after_s"), half = cfg.get_int("credits.half_life_s");
  if (idle < 0 || half < 0) return bad_setting("credits.idle_after_s and credits.half_life_s", "must be at least 0");
  p.idle_after_ms = idle * 1000;
  p.half_life_ms = half * 1000;
  auto factors = mesh::parse_model_factors(cfg.get("credits.model_factors"));
  if (!factors) return bad_setting("credits.model_factors", factors.error().message());
  p.model_factors = std::move(*factors);
  auto def = mesh::parse_factor(cfg.get("credits.default_factor"), "credits.default_factor");
  if (!def) return bad_setting("credits.default_factor", def.error().message());
  p.default_factor = *def;
  return p;
}

Credits::Credits(mesh::PeerKey self, mesh::CreditParams params, jobs::receipts::ReceiptStore& store, bool order_queue)
    : self_(self), params_(params), store_(store), order_queue_(order_queue), ledger_(self, std::move(params)) {}

Status Credits::reload() {
  auto rows = store_.list();
  if (!rows) return std::move(rows).error().with_context("reading receipts");
  mesh::Ledger ledger(self_, params_);
  std::map<mesh::PeerKey, Raw> raw;
  std::map<std::pair<std::string, std::string>, std::string> problems;
  std::vector<std::pair<std::pair<std::string, std::string>, std::string>> to_warn;
  for (const auto& row : *rows) {
    if (row.state != jobs::receipts::ReceiptState::kCountersigned) continue;
    auto key = std::make_pair(row.provider_id, row.job_id);
    auto r = mesh::decode_receipt(row.receipt_json);
    Status added = r ? ledger.add(*r) : Status(r.error());
    if (added && (NodeId(r->provider).to_string() != row.provider_id || r->job_id != row.job_id)) {
      added = make_error(ErrorCode::kPermissionDenied, "the stored row names another provider or job than its receipt");
    }
    if (!added) {
      problems[key] = added.error().message();
      to_warn.emplace_back(key, added.error().message());
      continue;
    }
    bool provided = r->provider == self_;
    auto& x = raw[provided ? r->consumer : r->provider];
    (provided ? x.taken : x.given) += mesh::credited_gpu_seconds(*r);
  }
  std::lock_guard lock(mutex_);
  ledger_ = std::move(ledger);
  raw_ = std::move(raw);
  problems_ = std::move(problems);
  for (const auto& [key, why] : to_warn) {
    if (warned_.insert(key).second) {
      spdlog::warn("receipt of job {} (provider {}) is not counted in the credits: {}", key.second, key.first, why);
    }
  }
  return ok_status();
}

nlohmann::json Credits::report(mesh::UnixMs now_ms) const {
  std::lock_guard lock(mutex_);
  nlohmann::json peers = nlohmann::json::array();
  for (const auto& [peer, t] : ledger_.totals()) {
    const Raw& x = raw_.count(peer) ? raw_.at(peer) : Raw{};
    peers.push_back({{"peer_id", NodeId(peer).to_string()},
                     {"given", t.given},
                     {"taken", t.taken},
                     {"net", t.given - t.taken},
                     {"balance", ledger_.balance(peer, now_ms)},
                     {"receipts", t.receipts},
                     {"given_gpu_seconds", x.given},
                     {"taken_gpu_seconds", x.taken},
                     {"last_receipt_ms", t.last_ms}});
  }
  nlohmann::json factors = nlohmann::json::object();
  for (const auto& [m, f] : params_.model_factors) factors[m] = f;
  return {{"peers", peers},
          {"params",
           {{"starting_allowance", params_.starting_allowance},
            {"idle_after_s", params_.idle_after_ms / 1000},
            {"half_life_s", params_.half_life_ms / 1000},
            {"model_factors", factors},
            {"default_factor", params_.default_factor},
            {"queue_order", order_queue_ ? "tit-for-tat" : "first come, first served"}}}};
}

std::string Credits::problem(const std::string& provider_id, const std::string& job_id) const {
  std::lock_guard lock(mutex_);
  auto it = problems_.find({provider_id, job_id});
  return it == problems_.end() ? "" : it->second;
}

std::vector<std::string> Credits::order(const std::vector<jobs::provider::ProviderJobs::QueuedJob>& queue) const {
  std::vector<mesh::QueuedRequest> requests;
  std::vector<std::string> ids;
  for (const auto& q : queue) {
    auto id = NodeId::parse(q.peer_id);
    mesh::QueuedRequest r;
    r.request_id = ids.size();
    r.consumer = id ? id->public_key() : mesh::PeerKey{};  // a local job: an unknown peer, within the allowance
    r.arrived_ms = q.created_at * 1000;
    requests.push_back(r);
    ids.push_back(q.job_id);
  }
  auto now = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
                 .count();
  std::vector<mesh::QueuedRequest> sorted;
  {
    std::lock_guard lock(mutex_);
    sorted = mesh::order_queue(std::move(requests), ledger_, now);
  }
  std::vector<std::string> out;
  for (const auto& r : sorted) out.push_back(ids[r.request_id]);
  return out;
}

}  // namespace yonder::jobs::metering
