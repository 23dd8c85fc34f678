// Metering glue between a job's record and its receipt (receipt.h), pure:
// what the provider signs when a job ends, and what the consumer checks
// before it countersigns. The I/O (link RPCs, SQLite) is in src/node
// (receipts_provider.h, receipts_consumer.h).
//
// GPU-seconds are whole devices x whole wall seconds: the provider's job
// record keeps start and end in Unix seconds, so start_ms and end_ms are
// multiples of 1000 and gpu_seconds = devices * (end - start) / 1000.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "base/error.h"
#include "mesh/receipt.h"
#include "mesh/types.h"

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
  int devices = 0;                      // GPUs the job held
  int64_t start_s = 0;                  // 0: never started (then start = end, no GPU-seconds)
  int64_t end_s = 0;
  std::optional<int> exit_code;  // nullopt: no exit code (stopped while queued, failed to start, lost) -> -1
  std::string output_hash = kNoOutputHash;
};

// The unsigned receipt for `end` (the provider signs it).
Receipt receipt_for_job_end(const JobEnd& end);

// What the consumer knows of a job it submitted.
struct ConsumerJobFacts {
  std::string job_id;
  PeerKey self{};      // the consumer
  PeerKey provider{};  // whom the job was submitted to
  int gpus_requested = 0;
  std::optional<int> exit_code;  // as the provider last reported it
  UnixMs submitted_ms = 0;
  UnixMs now_ms = 0;
};

// The consumer's checks before countersigning: the provider's signature,
// the parties and the job, and GPU-seconds no more than the devices asked
// for times the wall time. kPermissionDenied with the reason otherwise.
Status check_receipt_for_job(const Receipt& r, const ConsumerJobFacts& facts);

// Config forms of CreditParams' factor table (the credits.* settings):
// "MODEL=FACTOR,MODEL=FACTOR" (model names may hold spaces, not ',' or '='),
// factors 0..1000. kInvalidArgument naming the bad item (`what` for one factor).
Result<double> parse_factor(std::string_view text, const std::string& what);
Result<std::map<std::string, double>> parse_model_factors(std::string_view text);

}  // namespace yonder::mesh
