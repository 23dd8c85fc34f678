// Metering glue between a job's record and its receipt (receipt.h), pure:
// what the provider signs when a job ends, and what the consumer checks
// before it countersigns. The I/O (link RPCs, SQLite) is in src/node
// (receipts_provider.h, receipts_consumer.h).
//
// GPU-seconds are whole devices x whole wall seconds: the provider's job
// record keeps start and end in Unix seconds, so start_ms and end_ms are
// multiples of 1000 and gpu_seconds = devices * (end - start) / 1000. A
// share of one GPU (jobs/provider/gpu_shares.h) counts its part of the
// device: ceil(share_permille * (end - start) / 1000), so a half share for
// an hour is 1,800 GPU-seconds of that model. The consumer bounds a share
// as one GPU.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "base/error.h"
#include "mesh/core/receipt.h"
#include "mesh/core/types.h"

namespace yonder::mesh {

// The GPU model a CPU-only job's receipt names.
inline constexpr const char* kNoGpuModel = "none";
// SHA-256 written when the provider has no hash of the job's output (a job
// that ended before metering existed).
inline constexpr const char* kNoOutputHash = "0000000000000000000000000000000000000000000000000000000000000000";
// How far the two nodes' clocks may disagree before a receipt's times look wrong.
inline constexpr UnixMs kReceiptClockSkewMs = 5 * 60 * 1000;

// What the provider's record says about a finished job.
struct JobEnd {
  std::string job_id;
  PeerKey consumer{};
  std::string gpu_model = kNoGpuModel;  // "none" when devices == 0
  int devices = 0;                      // GPUs the job held (1 for a share)
  uint32_t share_permille = 0;          // > 0: a share of its one device, this part of it (1..1000)
  int64_t start_s = 0;                  // 0: never started (then start = end, no GPU-seconds)
  int64_t end_s = 0;
  std::optional<int> exit_code;  // nullopt: no exit code (stopped while queued, failed to start, lost) -> -1
  std::string output_hash = kNoOutputHash;
};

// The unsigned receipt for `end` (the provider signs it).
Receipt receipt_for_job_end(const JobEnd& end);

// What the consumer knows of a job it submitted: all of it seen by the
// consumer itself, on its own clock (Unix ms; 0: not seen).
struct ConsumerJobFacts {
  std::string job_id;
  PeerKey self{};      // the consumer
  PeerKey provider{};  // whom the job was submitted to
  int gpus_requested = 0;  // a share of one GPU counts as 1
  std::optional<int> exit_code;  // the one the consumer saw (following, or a view); nullopt: none seen
  UnixMs submitted_ms = 0;
  // The first view in which the job was running: recorded, but no bound (a
  // job may start and end between two views).
  UnixMs first_seen_running_ms = 0;
  UnixMs seen_ended_ms = 0;          // the first view in which it had ended; 0: now_ms stands in
  UnixMs now_ms = 0;
};

// Is this receipt about this job at all: the job, the parties, the
// provider's signature, end >= start, no GPU model for a CPU-only job.
// kPermissionDenied with the reason otherwise: such a receipt is refused,
// not held against the provider (it may not be the provider's).
Status check_receipt_for_job(const Receipt& r, const ConsumerJobFacts& facts);

// How far a claim may exceed what the consumer saw before it is a
// disagreement rather than rounding: this many seconds per GPU asked for,
// plus kMeteringSlackPercent of the bound.
inline constexpr uint64_t kMeteringSlackSeconds = 30;
inline constexpr uint64_t kMeteringSlackPercent = 10;

// The consumer's answer to a receipt that passed check_receipt_for_job.
struct MeteringVerdict {
  enum class Kind {
    kAsIs,      // countersign the provider's figures
    kClamped,   // countersign with `view`: the provider claimed a little more than seen
    kDisagree,  // do not countersign; store the disagreement, hold it against the provider
  };
  Kind kind = Kind::kAsIs;
  ConsumerView view;   // kClamped: the consumer's figures
  std::string reason;  // kClamped, kDisagree: why, for people
  uint64_t observed_gpu_seconds = 0;  // the most the consumer saw room for
};

// Judges the provider's claim against what the consumer observed, pure.
// GPU-seconds: at most the GPUs asked for times the wall time the consumer
// saw, from its submit to the end it saw (the end it learnt of; now when it
// saw none), plus one second for whole-second rounding; both ends on the
// consumer's clock, so clock skew between the nodes does not widen it.
// Within that: as is; above it by at most the slack: clamped to it; more: a
// disagreement. So is an exit status other than the one the consumer saw,
// and times outside submit - kReceiptClockSkewMs .. now + kReceiptClockSkewMs.
MeteringVerdict judge_receipt(const Receipt& r, const ConsumerJobFacts& facts);

// Config forms of CreditParams' factor table (the credits.* settings):
// "MODEL=FACTOR,MODEL=FACTOR" (model names may hold spaces, not ',' or '='),
// factors 0..1000. kInvalidArgument naming the bad item (`what` for one factor).
Result<double> parse_factor(std::string_view text, const std::string& what);
Result<std::map<std::string, double>> parse_model_factors(std::string_view text);

}  // namespace yonder::mesh
