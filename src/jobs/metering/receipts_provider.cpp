#include "jobs/metering/receipts_provider.h"

#include <utility>  // before Boost.Asio (GCC 12)

#include <spdlog/spdlog.h>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>

#include "jobs/provider/provider_jobs.h"
#include "mesh/core/metering.h"

namespace yonder::jobs::metering {
namespace asio = boost::asio;
using jobs::receipts::ReceiptState;
using jobs::receipts::StoredReceipt;

namespace {

constexpr size_t kMaxPending = 200;  // receipts per receipt.pending reply (well under the link's message limit)

bool finished(const nlohmann::json& view) {
  std::string s = view.value("state", "");
  return s == "exited" || s == "stopped" || s == "failed";
}

Result<std::string> receipts_job_id_param(const nlohmann::json& p) {
  if (!p.is_object() || !p.contains("job_id") || !p["job_id"].is_string() ||
      p["job_id"].get_ref<const std::string&>().empty() || p["job_id"].get_ref<const std::string&>().size() > 64) {
    return make_error(ErrorCode::kInvalidArgument, "'job_id' (a string) is required");
  }
  return p["job_id"].get<std::string>();
}

Error not_found(const std::string& job_id) {
  return make_error(ErrorCode::kNotFound, "no job " + job_id.substr(0, 64) + " of yours on this provider");
}

}  // namespace

ReceiptsProvider::ReceiptsProvider(asio::io_context& io, asio::thread_pool& pool, reach::Peers& link,
                                   jobs::provider::ProviderService& provider, jobs::provider::RemoteProvider& remote,
                                   const Identity& identity, jobs::receipts::ReceiptStore& store, Credits& credits)
    : io_(io),
      pool_(pool),
      link_(link),
      provider_(provider),
      remote_(remote),
      identity_(identity),
      self_id_(identity.node_id().to_string()),
      store_(store),
      credits_(credits) {}

Result<StoredReceipt> ReceiptsProvider::ensure(const nlohmann::json& view) {
  std::string job_id = view.value("job_id", "");
  std::string peer_id = view.value("peer_id", "");
  auto consumer = NodeId::parse(peer_id);
  if (!consumer)
    return make_error(ErrorCode::kFailedPrecondition, "job " + job_id + " was not run for a peer; it has no receipt");
  std::lock_guard lock(mutex_);
  auto existing = store_.get(PeerId(self_id_), JobId(job_id));
  if (!existing) return std::move(existing).error();
  if (*existing) return **existing;
  mesh::JobEnd end;
  end.job_id = job_id;
  end.consumer = consumer->public_key();
  end.devices = view.contains("gpus") && view["gpus"].is_array() ? static_cast<int>(view["gpus"].size()) : 0;
  if (view.contains("share") && view["share"].is_object() && view["share"].contains("gpu")) {
    // A share of one GPU: that part of its time (mesh/core/metering.h).
    end.devices = 1;
    const auto& share = view["share"];
    auto p = share.find("permille");
    end.share_permille = p != share.end() && p->is_number_unsigned()
                             ? static_cast<uint32_t>(std::min<uint64_t>(p->get<uint64_t>(), 1000))
                             : 1000;
  }
  end.gpu_model = view.value("gpu_model", std::string(end.devices > 0 ? "unknown" : mesh::kNoGpuModel));
  if (end.gpu_model.empty()) end.gpu_model = "unknown";
  end.start_s = view.value("started_at", int64_t{0});
  end.end_s = view.value("finished_at", view.value("updated_at", int64_t{0}));
  if (view.contains("exit_code") && view["exit_code"].is_number_integer()) end.exit_code = view["exit_code"].get<int>();
  end.output_hash = view.value("output_sha256", std::string(mesh::kNoOutputHash));
  mesh::Receipt r = mesh::receipt_for_job_end(end);
  mesh::sign_receipt_as_provider(r, identity_);
  StoredReceipt row;
  row.provider_id = self_id_;
  row.job_id = job_id;
  row.consumer_id = peer_id;
  row.we_provided = true;
  row.state = ReceiptState::kSigned;
  row.receipt_json = mesh::encode_receipt(r);
  YONDER_TRY(store_.put(row));
  spdlog::info("job {} of peer {}: receipt signed ({} GPU-seconds on {})", job_id, peer_id, r.gpu_seconds, r.gpu_model);
  return row;
}

void ReceiptsProvider::on_job_end(const nlohmann::json& view) {
  if (!NodeId::parse(view.value("peer_id", ""))) return;  // a local job
  if (auto r = ensure(view); !r) {
    // receipt.get and receipt.pending make it later from the job's record.
    spdlog::error("job {}: the receipt could not be stored yet: {}", view.value("job_id", ""), r.error().to_string());
  }
}

void ReceiptsProvider::register_methods() {
  link::LinkService& service = link_.service();
  // Runs `work` on the pool with the job manager, replies on the loop.
  auto blocking = [this](link::RpcReply reply,
                         std::function<Result<nlohmann::json>(jobs::provider::ProviderJobs&)> work) {
    asio::post(pool_, [this, reply = std::move(reply), work = std::move(work)]() mutable {
      auto jobs = provider_.ready();
      Result<nlohmann::json> r = jobs ? work(**jobs) : Result<nlohmann::json>(std::move(jobs).error());
      asio::post(io_, [reply = std::move(reply), r = std::move(r)]() mutable { reply(std::move(r)); });
    });
  };

  service.add_method(
      "receipt.get", [this, blocking](const PublicKeyBytes& peer, const nlohmann::json& params, link::RpcReply reply) {
        auto id = receipts_job_id_param(params);
        if (!id) return reply(std::move(id).error());
        blocking(std::move(reply),
                 [this, peer_id = NodeId(peer).to_string(),
                  id = *id](jobs::provider::ProviderJobs& jobs) -> Result<nlohmann::json> {
                   auto view = jobs.get(JobId(id));
                   if (!view || view->value("peer_id", "") != peer_id) return not_found(id);
                   if (!finished(*view)) {
                     return make_error(ErrorCode::kFailedPrecondition, "job " + id + " is " + view->value("state", "") +
                                                                           "; its receipt is made when it ends");
                   }
                   auto row = ensure(*view);
                   if (!row) return std::move(row).error();
                   return nlohmann::json{{"receipt", row->receipt_json}, {"state", receipt_state_name(row->state)}};
                 });
      });

  service.add_method("receipt.pending", [this, blocking](const PublicKeyBytes& peer, const nlohmann::json&,
                                                         link::RpcReply reply) {
    blocking(std::move(reply),
             [this, peer_id = NodeId(peer).to_string()](jobs::provider::ProviderJobs& jobs) -> Result<nlohmann::json> {
               auto all = jobs.list();
               if (!all) return std::move(all).error();
               nlohmann::json out = nlohmann::json::array();
               for (const auto& v : *all) {
                 if (v.value("peer_id", "") != peer_id || !finished(v)) continue;
                 auto row = ensure(v);
                 if (!row) {
                   spdlog::warn("job {}: no receipt for peer {}: {}", v.value("job_id", ""), peer_id,
                                row.error().to_string());
                   continue;
                 }
                 if (row->state == ReceiptState::kCountersigned) continue;
                 out.push_back(row->receipt_json);
                 if (out.size() >= kMaxPending) break;
               }
               return nlohmann::json{{"receipts", out}};
             });
  });

  service.add_method(
      "receipt.countersign", [this](const PublicKeyBytes& peer, const nlohmann::json& params, link::RpcReply reply) {
        asio::post(pool_, [this, peer, params, reply = std::move(reply)]() mutable {
          auto r = countersign(peer, params);
          if (!r) {
            std::string peer_id = NodeId(peer).to_string();
            std::string job = params.is_object() && params.contains("job_id") && params["job_id"].is_string()
                                  ? params["job_id"].get<std::string>().substr(0, 64)
                                  : "";
            spdlog::warn("countersigned receipt of job {} from peer {} refused: {}", job, peer_id, r.error().message());
            remote_.record(peer_id, "receipt.countersign", job,
                           {{"refused", r.error().message()}, {"code", error_code_name(r.error().code())}});
          }
          asio::post(io_, [reply = std::move(reply), r = std::move(r)]() mutable { reply(std::move(r)); });
        });
      });
}

Result<nlohmann::json> ReceiptsProvider::countersign(const PublicKeyBytes& peer, const nlohmann::json& params) {
  auto id = receipts_job_id_param(params);
  if (!id) return std::move(id).error();
  if (!params.contains("receipt") || !params["receipt"].is_string()) {
    return make_error(ErrorCode::kInvalidArgument, "'receipt' (the countersigned receipt's JSON text) is required");
  }
  std::string peer_id = NodeId(peer).to_string();
  std::lock_guard lock(mutex_);
  auto stored = store_.get(PeerId(self_id_), JobId(*id));
  if (!stored) return std::move(stored).error();
  if (!*stored || (*stored)->consumer_id != peer_id) return not_found(*id);
  auto theirs = mesh::decode_receipt(params["receipt"].get_ref<const std::string&>());
  if (!theirs) return std::move(theirs).error();
  auto ours = mesh::decode_receipt((*stored)->receipt_json);
  if (!ours) {
    return make_error(ErrorCode::kDataLoss, "this provider's stored receipt of job " + *id + " does not decode (" +
                                                ours.error().message() + "); it cannot be countersigned");
  }
  // The consumer may countersign its own, smaller figures beside ours
  // (mesh/core/receipt.h consumer_view): what counts is then the smaller.
  mesh::Receipt unsigned_theirs = *theirs;
  unsigned_theirs.consumer_signature.clear();
  unsigned_theirs.consumer_view.reset();
  mesh::Receipt unsigned_ours = *ours;
  unsigned_ours.consumer_signature.clear();
  if (!(unsigned_theirs == unsigned_ours)) {
    return make_error(ErrorCode::kPermissionDenied, "the receipt sent for job " + *id +
                                                        " is not the one this provider signed (its fields or signature "
                                                        "differ); it was not stored");
  }
  if (theirs->consumer != peer) {
    return make_error(ErrorCode::kPermissionDenied, "the receipt of job " + *id + " names another consumer");
  }
  YONDER_TRY(mesh::verify_receipt(*theirs));
  if ((*stored)->state == ReceiptState::kCountersigned) return nlohmann::json{{"state", "countersigned"}};
  StoredReceipt row = **stored;
  row.state = ReceiptState::kCountersigned;
  row.receipt_json = mesh::encode_receipt(*theirs);
  row.problem.clear();
  YONDER_TRY(store_.put(row));
  if (theirs->consumer_view) {
    spdlog::warn("job {} of peer {}: receipt countersigned for {} GPU-seconds, not the {} claimed (the consumer saw less)",
                 *id, peer_id, theirs->consumer_view->gpu_seconds, theirs->gpu_seconds);
  } else {
    spdlog::info("job {} of peer {}: receipt countersigned", *id, peer_id);
  }
  if (auto st = credits_.reload(); !st) spdlog::warn("credits: {}", st.error().to_string());
  return nlohmann::json{{"state", "countersigned"}};
}

}  // namespace yonder::jobs::metering
