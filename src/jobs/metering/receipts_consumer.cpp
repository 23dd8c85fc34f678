#include "jobs/metering/receipts_consumer.h"

#include <utility>  // before Boost.Asio (GCC 12)

#include <spdlog/spdlog.h>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <chrono>
#include <map>

#include "base/clock.h"
#include "jobs/consumer/consumer_jobs.h"
#include "jobs/metering/verifications.h"
#include "mesh/core/metering.h"

namespace yonder::jobs::metering {
namespace asio = boost::asio;
using jobs::receipts::ReceiptState;
using jobs::receipts::StoredReceipt;

namespace {

constexpr std::chrono::seconds kFirstSweep{3};

// Calls `done` once `count` parts have finished (loop only).
std::function<void()> countdown(size_t count, std::function<void()> done) {
  if (count == 0) {
    done();
    return [] {};
  }
  auto left = std::make_shared<size_t>(count);
  return [left, done = std::move(done)] {
    if (--*left == 0) done();
  };
}

}  // namespace

ReceiptsConsumer::ReceiptsConsumer(asio::io_context& io, asio::any_io_executor blocking, LoopTimers& timers,
                                   reach::Peers& link, const Identity& identity,
                                   std::shared_ptr<jobs::consumer::ConsumerJobStore> jobs,
                                   jobs::receipts::ReceiptStore& store, Credits& credits)
    : io_(io),
      pool_(std::move(blocking)),
      timers_(timers),
      link_(link),
      identity_(identity),
      self_id_(identity.node_id().to_string()),
      jobs_(std::move(jobs)),
      store_(store),
      credits_(credits) {}

ReceiptsConsumer::~ReceiptsConsumer() {
  *alive_ = false;
  timer_.reset();
}

Status ReceiptsConsumer::start() {
  asio::post(pool_, [this] {
    if (auto st = credits_.reload(); !st) spdlog::warn("credits: {}", st.error().to_string());
  });
  if (interval_.count() > 0) schedule_sweep(std::min(kFirstSweep, interval_));
  return ok_status();
}

void ReceiptsConsumer::schedule_sweep(std::chrono::seconds after) {
  timer_ = timers_.after(after, [this, alive = alive_] {
    if (!*alive) return;
    sweep([this, alive] {
      if (*alive) schedule_sweep(interval_);
    });
  });
}

void ReceiptsConsumer::job_ended(const PeerId& provider, const JobId& job) {
  const std::string& job_id = job.value();
  if (!in_flight_.insert(job_id).second) return;
  auto t = link_.target(provider.value());
  if (!t) {
    in_flight_.erase(job_id);
    return;
  }
  auto release = [this, job_id] { in_flight_.erase(job_id); };
  asio::post(pool_, [this, t = *t, job, job_id, release] {
    auto have = store_.get(PeerId(t.node_id), job);
    bool done = have && *have && (*have)->state != ReceiptState::kSigned;
    asio::post(io_, [this, t, job_id, release, done] {
      if (done) return release();
      link_.service().call(t.key, t.addresses, "receipt.get", {{"job_id", job_id}},
                           [this, t, job_id, release](Result<nlohmann::json> r) {
                             if (!r || !r->contains("receipt") || !(*r)["receipt"].is_string()) {
                               spdlog::info("receipt of job {} not fetched from {} yet: {}", job_id, t.name,
                                            r ? "the answer holds no receipt" : r.error().message());
                               return release();
                             }
                             process(t, (*r)["receipt"].get<std::string>(), release);
                           });
    });
  });
}

void ReceiptsConsumer::process(const reach::Peers::Target& t, const std::string& text, std::function<void()> done) {
  asio::post(pool_, [this, t, text, done = std::move(done)]() mutable {
    auto finish = [this, done] { asio::post(io_, done); };
    auto r = mesh::decode_receipt(text);
    if (!r) {
      spdlog::warn("a receipt from provider {} does not decode and was refused: {}", t.name, r.error().message());
      return finish();
    }
    std::string job = r->job_id;
    auto existing = store_.get(PeerId(t.node_id), JobId(job));
    std::string to_send;
    if (existing && *existing && (*existing)->state == ReceiptState::kCountersigned) {
      to_send = (*existing)->receipt_json;  // countersigned before; the provider may not have heard
    } else if (existing && *existing &&
               ((*existing)->state == ReceiptState::kRefused || (*existing)->state == ReceiptState::kDisputed) &&
               (*existing)->receipt_json == text) {
      return finish();  // refused or disputed before, logged then
    } else {
      Status checked = ok_status();
      mesh::MeteringVerdict verdict;
      auto cj = jobs_->find(job);
      if (!cj || cj->job_id != job || cj->provider_id != t.node_id) {
        checked =
            make_error(ErrorCode::kPermissionDenied,
                       "receipt for job " + job + " refused: no such job was submitted from this node to " + t.name);
      } else {
        mesh::ConsumerJobFacts facts;
        facts.job_id = job;
        facts.self = identity_.public_key();
        facts.provider = t.key;
        const nlohmann::json& request = cj->spec.contains("request") ? cj->spec["request"] : nlohmann::json();
        facts.gpus_requested = request.is_object() ? request.value("gpus", 0) : 0;
        // A share of one GPU (--gpus 0.5, --vram alone) is bounded as one GPU.
        if (facts.gpus_requested == 0 && request.is_object() &&
            (request.value("share_permille", 0) > 0 || request.value("share_vram_mib", 0) > 0)) {
          facts.gpus_requested = 1;
        }
        // Only what this node saw itself: the first ended view's exit code,
        // not a later view a provider could have rewritten.
        facts.exit_code = cj->observed.exit_code;
        facts.submitted_ms = cj->created_at * 1000;
        facts.first_seen_running_ms = cj->observed.first_running_ms;
        facts.seen_ended_ms = cj->observed.ended_ms;
        facts.now_ms = now_ms();
        checked = mesh::check_receipt_for_job(*r, facts);
        if (checked) verdict = mesh::judge_receipt(*r, facts);
      }
      StoredReceipt row;
      row.provider_id = t.node_id;
      row.job_id = job;
      row.consumer_id = self_id_;
      row.we_provided = false;
      if (checked && verdict.kind == mesh::MeteringVerdict::Kind::kDisagree) {
        spdlog::warn("{} (from provider {}); it is not countersigned and counts against the provider",
                     verdict.reason, t.name);
        row.state = ReceiptState::kDisputed;
        row.receipt_json = text;
        row.problem = verdict.reason;
        if (auto st = store_.put(row); !st) {
          spdlog::error("storing a disputed receipt: {}", st.error().to_string());
          return finish();
        }
        if (verifications_ != nullptr) {
          nlohmann::json details = {{"reason", verdict.reason.substr(0, 400)},
                                     {"claimed_gpu_seconds", r->gpu_seconds},
                                     {"observed_gpu_seconds", verdict.observed_gpu_seconds},
                                     {"claimed_exit_status", r->exit_status}};
          if (cj->observed.exit_code) details["seen_exit_code"] = *cj->observed.exit_code;
          auto rec = verifications_->record(t.node_id, mesh::CheckKind::kReceipt, job, mesh::CheckOutcome::kDisputed,
                                            details);
          if (!rec) spdlog::error("recording the dispute of job {}: {}", job, rec.error().to_string());
        }
        return finish();
      }
      mesh::Receipt signed_receipt = *r;
      if (checked && verdict.kind == mesh::MeteringVerdict::Kind::kClamped) {
        spdlog::warn("{} (from provider {})", verdict.reason, t.name);
        signed_receipt.consumer_view = verdict.view;
      }
      if (checked) checked = mesh::countersign_receipt(signed_receipt, identity_);
      if (!checked) {
        spdlog::warn("{} (from provider {}); it is kept out of the credits", checked.error().message(), t.name);
        row.state = ReceiptState::kRefused;
        row.receipt_json = text;
        row.problem = checked.error().message();
        if (auto st = store_.put(row); !st) spdlog::error("storing a refused receipt: {}", st.error().to_string());
        return finish();
      }
      if (verdict.kind == mesh::MeteringVerdict::Kind::kClamped) row.problem = verdict.reason;
      row.state = ReceiptState::kCountersigned;
      row.receipt_json = mesh::encode_receipt(signed_receipt);
      if (auto st = store_.put(row); !st) {  // never send what is not stored
        spdlog::error("receipt of job {} could not be stored; it is fetched again later: {}", job,
                      st.error().to_string());
        return finish();
      }
      spdlog::info("job {} on {}: receipt countersigned ({} GPU-seconds on {})", job, t.name,
                   mesh::credited_gpu_seconds(signed_receipt), r->gpu_model);
      if (auto st = credits_.reload(); !st) spdlog::warn("credits: {}", st.error().to_string());
      to_send = row.receipt_json;
    }
    asio::post(io_, [this, t, job, to_send, done] {
      link_.service().call(t.key, t.addresses, "receipt.countersign", {{"job_id", job}, {"receipt", to_send}},
                           [t, job, done](Result<nlohmann::json> answer) {
                             if (!answer) {
                               spdlog::warn("provider {} did not take the countersigned receipt of job {}: {}", t.name,
                                            job, answer.error().message());
                             }
                             done();
                           });
    });
  });
}

void ReceiptsConsumer::sweep(std::function<void()> done) {
  asio::post(pool_, [this, done = std::move(done)] {
    std::set<std::string> providers;
    auto jobs = jobs_->list();
    auto rows = store_.list();
    if (jobs && rows) {
      std::set<std::pair<std::string, std::string>> settled;
      for (const auto& r : *rows) {
        if (!r.we_provided && r.state != ReceiptState::kSigned) settled.insert({r.provider_id, r.job_id});
      }
      for (const auto& j : *jobs) {
        if (!settled.count({j.provider_id, j.job_id})) providers.insert(j.provider_id);
      }
    }
    asio::post(io_, [this, providers, done] {
      auto part = countdown(providers.size(), done);
      for (const auto& p : providers) {
        auto t = link_.target(p);
        if (!t) {
          part();
          continue;
        }
        link_.service().call(t->key, t->addresses, "receipt.pending", nlohmann::json::object(),
                             [this, t = *t, part](Result<nlohmann::json> r) {
                               if (!r || !r->contains("receipts") || !(*r)["receipts"].is_array()) return part();
                               std::vector<std::string> texts;
                               for (const auto& x : (*r)["receipts"]) {
                                 if (x.is_string()) texts.push_back(x.get<std::string>());
                               }
                               auto each = countdown(texts.size(), part);
                               for (const auto& text : texts) process(t, text, each);
                             });
      }
    });
  });
}

void ReceiptsConsumer::add_routes(api::Router& router) {
  router.add("GET", "/v1/credits",
             [this](const api::Request& req, api::Reply reply) { credits(req, std::move(reply)); });
  router.add("GET", "/v1/receipts",
             [this](const api::Request& req, api::Reply reply) { receipts(req, std::move(reply)); });
}

void ReceiptsConsumer::maybe_sweep(const api::Request& req, std::function<void()> then) {
  if (api::parse_query(req.query)["fetch"] == "0") return then();
  sweep(std::move(then));
}

void ReceiptsConsumer::credits(const api::Request& req, api::Reply reply) {
  maybe_sweep(req, [this, reply] {
    asio::post(pool_, [this, reply] {
      auto st = credits_.reload();
      nlohmann::json out = credits_.report(now_ms());
      asio::post(io_, [this, reply, st = std::move(st), out]() mutable {
        if (!st) return reply(api::Response::error(st.error()));
        for (auto& p : out["peers"]) {
          auto t = link_.target(p.value("peer_id", ""));
          p["name"] = t ? t->name : "";
        }
        out["node_id"] = self_id_;
        reply(api::Response::json(200, out));
      });
    });
  });
}

void ReceiptsConsumer::receipts(const api::Request& req, api::Reply reply) {
  bool verify = api::parse_query(req.query)["verify"] == "1";
  maybe_sweep(req, [this, reply, verify] {
    asio::post(pool_, [this, reply, verify] {
      auto rows = store_.list();
      if (rows) (void)credits_.reload();
      // The exit code this node saw of each of its jobs: shown rather than the
      // provider's claim when they differ.
      std::map<std::string, int> seen_exit;
      if (auto jobs = jobs_->list()) {
        for (const auto& j : *jobs) {
          if (j.observed.exit_code) seen_exit[j.provider_id + "/" + j.job_id] = *j.observed.exit_code;
        }
      }
      nlohmann::json out = nlohmann::json::array();
      for (const auto& row : rows ? *rows : std::vector<StoredReceipt>{}) {
        nlohmann::json v = {{"job_id", row.job_id},
                            {"provider_id", row.provider_id},
                            {"consumer_id", row.consumer_id},
                            {"role", row.we_provided ? "provider" : "consumer"},
                            {"peer_id", row.we_provided ? row.consumer_id : row.provider_id},
                            {"state", receipt_state_name(row.state)},
                            {"stored_at", row.created_at}};
        if (!row.problem.empty()) v["problem"] = row.problem;
        auto r = mesh::decode_receipt(row.receipt_json);
        if (r) {
          v["receipt"] = nlohmann::json::parse(row.receipt_json, nullptr, false);
          v["gpu_model"] = r->gpu_model;
          v["gpu_seconds"] = mesh::credited_gpu_seconds(*r);
          if (r->consumer_view) v["claimed_gpu_seconds"] = r->gpu_seconds;
          v["start_ms"] = r->start_ms;
          v["end_ms"] = r->end_ms;
          v["exit_status"] = r->exit_status;
          auto seen = row.we_provided ? seen_exit.end() : seen_exit.find(row.provider_id + "/" + row.job_id);
          if (seen != seen_exit.end() && seen->second != r->exit_status) {
            v["exit_status"] = seen->second;
            v["claimed_exit_status"] = r->exit_status;
          }
          v["output_hash"] = r->output_hash;
        }
        if (verify) {
          std::string problem;
          if (!r) {
            problem = "the stored receipt does not decode: " + r.error().message();
          } else if (r->job_id != row.job_id || NodeId(r->provider).to_string() != row.provider_id ||
                     NodeId(r->consumer).to_string() != row.consumer_id) {
            problem = "the stored receipt names another job or peers than its row";
          } else if (row.state == ReceiptState::kRefused || row.state == ReceiptState::kDisputed) {
            problem = row.problem;
          } else if (row.state == ReceiptState::kSigned) {
            problem = mesh::receipt_provider_signature_valid(*r) ? "awaiting the consumer's countersignature"
                                                                 : "the provider's signature does not verify";
          } else if (auto st = mesh::verify_receipt(*r); !st) {
            problem = st.error().message();
          }
          v["verified"] = problem.empty();
          if (!problem.empty()) v["verify_problem"] = problem;
        }
        out.push_back(std::move(v));
      }
      asio::post(io_, [this, reply, rows = std::move(rows), out]() mutable {
        if (!rows) return reply(api::Response::error(rows.error()));
        for (auto& v : out) {
          auto t = link_.target(v.value("peer_id", ""));
          v["peer_name"] = t ? t->name : "";
        }
        reply(api::Response::json(200, {{"node_id", self_id_}, {"receipts", out}}));
      });
    });
  });
}

}  // namespace yonder::jobs::metering
