#include "jobs/files/transfers.h"

#include <chrono>
#include <nlohmann/json.hpp>

namespace yonder::jobs::files {
namespace {

const char* phase_name(TransferProgress::Phase p) {
  using P = TransferProgress::Phase;
  switch (p) {
    case P::kWaiting: return "waiting";
    case P::kListing: return "listing";
    case P::kHashing: return "hashing";
    case P::kPlanning: return "planning";
    case P::kSending: return "sending";
    case P::kReceiving: return "receiving";
    case P::kFinishing: return "finishing";
    case P::kRetrying: return "retrying";
    case P::kDone: return "done";
    case P::kFailed: return "failed";
  }
  return "unknown";
}

}  // namespace

nlohmann::json TransferProgress::to_json() const {
  return {{"id", id},
          {"kind", kind},
          {"peer", peer},
          {"dir", dir},
          {"phase", phase_name(phase.load())},
          {"files", files.load()},
          {"bytes", bytes.load()},
          {"hashed_bytes", hashed_bytes.load()},
          {"need_files", need_files.load()},
          {"need_bytes", need_bytes.load()},
          {"sent_bytes", sent_bytes.load()},
          {"attempt", attempt.load()},
          {"started_ms", started_ms},
          {"cancel_requested", cancel_requested.load()},
          {"ended", !outcome.empty()},
          {"outcome", outcome},
          {"job_id", job_id},
          {"error", error}};
}

std::shared_ptr<TransferProgress> Transfers::begin(const std::string& requested_id, const std::string& kind,
                                                   const std::string& peer, const std::string& dir) {
  auto p = std::make_shared<TransferProgress>();
  p->kind = kind;
  p->peer = peer;
  p->dir = dir;
  p->started_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  std::lock_guard lock(mutex_);
  p->id = !requested_id.empty() && requested_id.size() <= 64 && !live_.count(requested_id)
              ? requested_id
              : kind + "-" + std::to_string(++next_);
  live_[p->id] = p;
  return p;
}

void Transfers::end(const std::shared_ptr<TransferProgress>& p, const std::string& outcome) {
  p->outcome = outcome;
  p->on_cancel = nullptr;
  std::lock_guard lock(mutex_);
  auto it = live_.find(p->id);
  if (it != live_.end() && it->second == p) live_.erase(it);
  auto now = std::chrono::steady_clock::now();
  for (auto r = recent_.begin(); r != recent_.end();) {
    r = now - r->second.first > std::chrono::minutes(2) ? recent_.erase(r) : std::next(r);
  }
  if (recent_.size() < 1024) recent_[p->id] = {now, p};
}

Result<nlohmann::json> Transfers::cancel(const std::string& id) {
  std::shared_ptr<TransferProgress> p;
  {
    std::lock_guard lock(mutex_);
    auto it = live_.find(id);
    if (it != live_.end()) p = it->second;
    auto r = recent_.find(id);
    if (!p && r != recent_.end()) return r->second.second->to_json();  // already over: its outcome
  }
  if (!p) return make_error(ErrorCode::kNotFound, "no transfer " + id.substr(0, 64) + " on this node");
  p->cancel_requested = true;
  if (auto hook = std::move(p->on_cancel)) hook();
  return p->to_json();
}

nlohmann::json Transfers::list(const std::string& id) const {
  nlohmann::json out = nlohmann::json::array();
  std::lock_guard lock(mutex_);
  for (const auto& [tid, p] : live_) {
    if (id.empty() || id == tid) out.push_back(p->to_json());
  }
  if (!id.empty() && out.empty()) {
    auto r = recent_.find(id);
    if (r != recent_.end()) out.push_back(r->second.second->to_json());
  }
  return {{"transfers", out}};
}

void Transfers::add_routes(api::Router& router) {
  router.add("GET", "/v1/transfers", [this](const api::Request& req, api::Reply reply) {
    reply(api::Response::json(200, list(api::parse_query(req.query)["id"])));
  });
  router.add("POST", "/v1/transfers/cancel", [this](const api::Request& req, api::Reply reply) {
    auto body = nlohmann::json::parse(req.body, nullptr, false);
    if (!body.is_object() || !body.contains("id") || !body["id"].is_string()) {
      return reply(api::Response::error(make_error(ErrorCode::kInvalidArgument, "the body needs \"id\"")));
    }
    auto r = cancel(body["id"].get<std::string>());
    reply(r ? api::Response::json(200, *r) : api::Response::error(r.error()));
  });
}

}  // namespace yonder::jobs::files
