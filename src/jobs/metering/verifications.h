// Verification outcomes this node recorded about providers, in
// SQLite (the `verifications` table): one row per check, signed by this
// node's key when it is recorded (mesh/core/verification.h), so the same row
// can be handed to peers (`mesh.opinions`) as evidence for reputation.
//
// How to record a check (e.g. after a --replicas quorum, once per provider):
//
//   verifications.record(provider_node_id, mesh::CheckKind::kReplica, mesh_job_id,
//                         outvoted ? mesh::CheckOutcome::kOutvoted : mesh::CheckOutcome::kAgreed,
//                         {{"hash", hash}, {"quorum_hash", winner}});
//
//   kind      replica (outcome agreed | outvoted) or known_answer (passed | failed)
//   subject   what was checked: the mesh job id, or the benchmark id;
//             1..64 of [A-Za-z0-9._:/-]
//   details   a small JSON object (at most 1 KiB dumped): shown to people,
//             signed with the row, never interpreted by reputation
//   at_ms     Unix ms; 0: now
// An outvoted replica or a failed benchmark costs the provider reputation
// (mesh/core/reputation.h); agreed and passed add standing only through the
// receipt of the job (passed benchmarks also count a little on their own).
//
// Threading: one connection, guarded inside; any thread. Blocking (disk),
// but one small INSERT: callable on the event loop, like the group store.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "crypto/identity.h"
#include "mesh/core/verification.h"
#include "store/database.h"

namespace yonder::jobs::metering {

struct VerificationRow {
  int64_t id = 0;
  std::string provider_id;  // node id, display form
  mesh::CheckKind kind = mesh::CheckKind::kReplica;
  std::string subject;
  mesh::CheckOutcome outcome = mesh::CheckOutcome::kAgreed;
  nlohmann::json details = nlohmann::json::object();
  mesh::UnixMs at_ms = 0;
  std::string signed_json;  // mesh::encode_verification's form, signed by this node

  nlohmann::json to_json() const;  // {"id", "provider_id", "kind", "subject", "outcome", "details", "at_ms"}
};

class Verifications {
 public:
  // `self` signs every row and must outlive the store.
  static Result<std::unique_ptr<Verifications>> open(const std::string& db_path, const Identity& self);

  // Signs and stores one check; the stored row. kInvalidArgument for a bad
  // provider id, subject, outcome that does not fit the kind, or details
  // too large.
  Result<VerificationRow> record(const std::string& provider_id, mesh::CheckKind kind, const std::string& subject,
                                 mesh::CheckOutcome outcome, const nlohmann::json& details = nlohmann::json::object(),
                                 mesh::UnixMs at_ms = 0);
  // Newest first, at most `limit`; only `provider_id`'s when not empty.
  Result<std::vector<VerificationRow>> list(const std::string& provider_id = "", size_t limit = 1000);

 private:
  Verifications(store::Database db, const Identity& self) : db_(std::move(db)), self_(self) {}
  std::mutex mutex_;
  store::Database db_;
  const Identity& self_;
};

}  // namespace yonder::jobs::metering
