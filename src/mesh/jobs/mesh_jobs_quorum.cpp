// Replicas (mesh/jobs/mesh_jobs.h, `--replicas K`): once every replica has
// answered or given up, each answer's outputs and log come home into
// replica-N, are digested (mesh/jobs/mesh_replicas.h) or judged by the
// validator, and mesh::decide_quorum decides.
#include "mesh/jobs/mesh_jobs.h"
#include "mesh/jobs/mesh_jobs_state.h"

#include <utility>  // before Boost.Asio (GCC 12)

#include <boost/asio/post.hpp>
#include <filesystem>
#include <spdlog/spdlog.h>

#include "jobs/metering/verifications.h"
#include "mesh/jobs/mesh_replicas.h"
#include "mesh/core/quorum.h"

namespace yonder::mesh {
namespace fs = std::filesystem;

namespace {

// What one replica's log may weigh when it is read for its digest.
constexpr size_t kMaxReplicaLog = 64u << 20;
constexpr std::chrono::minutes kValidatorTimeout{5};

}  // namespace

void MeshJobs::maybe_verify(const std::shared_ptr<Live>& live) {
  if (live->done || live->verifying) return;
  if (!std::all_of(live->slots.begin(), live->slots.end(), [](const auto& s) { return s->done; })) return;
  verify(live);
}

void MeshJobs::verify(const std::shared_ptr<Live>& live) {
  live->verifying = true;
  auto answers = std::make_shared<std::vector<Answer>>();
  for (const auto& s : live->slots) {
    if (s->answer < 0) continue;
    Answer a;
    a.replica = s->replica;
    a.attempt = live->row.attempts[static_cast<size_t>(s->answer)];
    a.folder = job_dir(live->row.id) + "/replica-" + std::to_string(s->replica + 1);
    answers->push_back(std::move(a));
  }
  gather(live, answers, 0);
}

// Brings replica i's outputs and log home, digests them (and runs the
// validator), then the next; decides once all are in.
void MeshJobs::gather(const std::shared_ptr<Live>& live, std::shared_ptr<std::vector<Answer>> answers, size_t i) {
  if (i >= answers->size()) return decide(live, answers);
  Answer& ans = (*answers)[i];
  asio::post(blocking_, [this, alive = alive_, live, answers, i, folder = ans.folder] {
    std::error_code ec;
    fs::remove_all(folder, ec);
    fs::create_directories(folder, ec);
    asio::post(io_, [this, alive, live, answers, i, folder] {
      if (!*alive) return;
      Answer& a = (*answers)[i];
      nlohmann::json body = {{"job_id", a.attempt.job_id}, {"dir", folder}};
      if (live->row.spec.value("outputs_limit", "") == "off") body["outputs_limit"] = "off";
      attempts_.fetch_into(body,
                        [this, alive, live, answers, i](Result<nlohmann::json> got) {
                          if (!*alive) return;
                          if (!got)
                            (*answers)[i].problem = "its outputs could not be fetched: " + got.error().message();
                          read_log(live, answers, i, 0);
                        });
    });
  });
}

void MeshJobs::read_log(const std::shared_ptr<Live>& live, std::shared_ptr<std::vector<Answer>> answers, size_t i,
                        uint64_t offset) {
  Answer& a = (*answers)[i];
  attempts_.call_job(a.attempt.job_id, "run.logs", {{"offset", offset}, {"wait_ms", 0}}, false,
                   [this, alive = alive_, live, answers, i](Result<nlohmann::json> got) {
                     if (!*alive) return;
                     Answer& ans = (*answers)[i];
                     bool more = false;
                     uint64_t next = 0;
                     if (!got) {
                       ans.problem = "its log could not be read: " + got.error().message();
                     } else {
                       const auto& records = (*got)["records"];
                       for (const auto& rec : records) {
                         auto bytes = base64_decode(rec.value("data", ""));
                         if (!bytes) continue;
                         std::string stream = rec.value("stream", "");
                         std::string* to = stream == "stdout" ? &ans.out : stream == "stderr" ? &ans.err : nullptr;
                         if (to != nullptr) to->append(bytes->begin(), bytes->end());
                       }
                       next = got->value("next_offset", uint64_t{0});
                       more =
                           records.is_array() && !records.empty() && ans.out.size() + ans.err.size() < kMaxReplicaLog;
                       if (!more && !records.empty()) ans.problem = "its log is larger than the digest reads";
                     }
                     if (more) return read_log(live, answers, i, next);
                     digest(live, answers, i);
                   });
}

void MeshJobs::digest(const std::shared_ptr<Live>& live, std::shared_ptr<std::vector<Answer>> answers, size_t i) {
  std::string validator = live->row.spec.value("validator", "");
  asio::post(blocking_, [this, alive = alive_, live, answers, i, validator] {
    Answer& a = (*answers)[i];
    if (a.problem.empty()) {
      auto h = replica_digest(a.folder, a.out, a.err, a.attempt.exit_code.value_or(-1));
      if (h) {
        a.hash = *h;
      } else {
        a.problem = h.error().message();
      }
      if (h && !validator.empty()) {
        auto v = run_validator(a.folder, validator, kValidatorTimeout);
        if (v) {
          a.valid = *v;
        } else {
          a.problem = v.error().message();
        }
      }
    }
    asio::post(io_, [this, alive, live, answers, i] {
      if (*alive) gather(live, answers, i + 1);
    });
  });
}

void MeshJobs::decide(const std::shared_ptr<Live>& live, std::shared_ptr<std::vector<Answer>> answers) {
  bool with_validator = !live->row.spec.value("validator", "").empty();
  std::vector<mesh::ReplicaResult> results;
  std::map<PublicKeyBytes, const Answer*> by_key;
  for (const auto& a : *answers) {
    if (!a.problem.empty()) continue;
    auto t = link_.target(a.attempt.provider_id);
    if (!t) continue;
    mesh::ReplicaResult rr;
    rr.provider = t->key;
    // With a validator, the accepted ones agree; each rejected one stands alone.
    rr.output_hash = with_validator ? (a.valid.value_or(false) ? "accepted" : "rejected:" + a.hash) : a.hash;
    results.push_back(rr);
    by_key[t->key] = &a;
  }
  mesh::QuorumDecision d = mesh::decide_quorum(results);
  int k = live->replicas();
  // A strict majority of the replicas asked for, not just of those that answered.
  bool decided =
      d.accepted && static_cast<int>(d.agreeing.size()) * 2 > k && (!with_validator || *d.accepted == "accepted");
  std::set<std::string> outvoted;
  for (const auto& key : d.outvoted) {
    if (auto it = by_key.find(key); it != by_key.end()) outvoted.insert(it->second->attempt.provider_id);
  }
  nlohmann::json replicas = nlohmann::json::array();
  const Answer* winner = nullptr;
  for (const auto& a : *answers) {
    nlohmann::json j = {{"replica", a.replica + 1},
                        {"provider_id", a.attempt.provider_id},
                        {"provider_name", a.attempt.provider_name},
                        {"job_id", a.attempt.job_id},
                        {"hash", a.hash},
                        {"outvoted", decided && outvoted.count(a.attempt.provider_id) > 0}};
    j["exit_code"] = a.attempt.exit_code ? nlohmann::json(*a.attempt.exit_code) : nlohmann::json();
    if (a.valid) j["valid"] = *a.valid;
    if (!a.problem.empty()) j["problem"] = a.problem;
    replicas.push_back(j);
    std::string h = with_validator ? (a.valid.value_or(false) ? "accepted" : "") : a.hash;
    if (decided && winner == nullptr && a.problem.empty() && h == *d.accepted) winner = &a;
  }
  nlohmann::json quorum = {{"decided", decided}, {"replicas", replicas}, {"asked", k}};
  if (decided) quorum["agreeing"] = d.agreeing.size();
  if (decided && verifications_ != nullptr) {
    for (const auto& a : *answers) {
      if (!a.problem.empty()) continue;
      bool lost_vote = outvoted.count(a.attempt.provider_id) > 0;
      auto rec = verifications_->record(a.attempt.provider_id, mesh::CheckKind::kReplica, live->row.id,
                                        lost_vote ? mesh::CheckOutcome::kOutvoted : mesh::CheckOutcome::kAgreed,
                                        {{"hash", a.hash.substr(0, 64)}, {"replicas", k}});
      if (!rec)
        spdlog::warn("mesh job {}: the verification could not be recorded: {}", live->row.id.substr(0, 12),
                     rec.error().message());
    }
  }
  if (winner == nullptr) {
    // The largest group that agrees, for the message (decide_quorum names none when undecided).
    std::map<std::string, size_t> votes;
    size_t best = 0;
    for (const auto& rr : results) best = std::max(best, ++votes[rr.output_hash]);
    std::string message = "no quorum: " + std::to_string(best) + " of the " + std::to_string(k) + " replicas agree" +
                          (with_validator ? " (validator)" : "") +
                          "; `yonder mesh jobs --json` shows each replica's hash, and its outputs are in " +
                          job_dir(live->row.id);
    return finish(live, "failed", {{"message", message}, {"exit_code", nullptr}, {"quorum", quorum}});
  }
  nlohmann::json result = result_of(winner->attempt);
  result["quorum"] = quorum;
  result["hash"] = winner->hash;
  finish(live, winner->attempt.exit_code == 0 ? "succeeded" : "failed", result);
}

}  // namespace yonder::mesh
