#include "mesh/core/metering.h"

#include <algorithm>
#include <charconv>

#include "crypto/node_id.h"

namespace yonder::mesh {
namespace {

std::string metering_trim(std::string_view s) {
  size_t a = s.find_first_not_of(' '), b = s.find_last_not_of(' ');
  return a == std::string_view::npos ? "" : std::string(s.substr(a, b - a + 1));
}

}  // namespace

Result<double> parse_factor(std::string_view text, const std::string& what) {
  double v = 0;
  std::string t = metering_trim(text);
  auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (ec != std::errc() || end != t.data() + t.size() || t.empty() || !(v >= 0 && v <= 1000)) {
    return make_error(ErrorCode::kInvalidArgument,
                      what + ": \"" + t.substr(0, 32) + "\" is not a factor between 0 and 1000 (e.g. 0.5)");
  }
  return v;
}

Result<std::map<std::string, double>> parse_model_factors(std::string_view text) {
  std::map<std::string, double> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    std::string item = metering_trim(text.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    start = comma == std::string::npos ? text.size() + 1 : comma + 1;
    if (item.empty()) continue;
    size_t eq = item.rfind('=');
    if (eq == std::string::npos || eq == 0) {
      return make_error(ErrorCode::kInvalidArgument, "\"" + item.substr(0, 64) + "\" is not MODEL=FACTOR");
    }
    std::string model = metering_trim(std::string_view(item).substr(0, eq));
    auto factor = parse_factor(std::string_view(item).substr(eq + 1), "the factor of " + model);
    if (!factor) return std::move(factor).error();
    out[model] = *factor;
  }
  return out;
}

Receipt receipt_for_job_end(const JobEnd& end) {
  Receipt r;
  r.job_id = end.job_id;
  r.consumer = end.consumer;
  r.gpu_model = end.devices > 0 && !end.gpu_model.empty() ? end.gpu_model : kNoGpuModel;
  int64_t start = end.start_s > 0 && end.start_s <= end.end_s ? end.start_s : end.end_s;
  r.start_ms = start * 1000;
  r.end_ms = end.end_s * 1000;
  uint64_t wall_s = static_cast<uint64_t>(end.end_s - start);
  r.gpu_seconds = static_cast<uint64_t>(std::max(0, end.devices)) * wall_s;
  if (end.share_permille > 0 && end.devices == 1) {
    uint64_t permille = std::min<uint64_t>(end.share_permille, 1000);
    r.gpu_seconds = (permille * wall_s + 999) / 1000;
  }
  r.exit_status = end.exit_code.value_or(-1);
  r.output_hash = end.output_hash;
  return r;
}

Status check_receipt_for_job(const Receipt& r, const ConsumerJobFacts& f) {
  auto refuse = [&](const std::string& why) {
    return make_error(ErrorCode::kPermissionDenied, "receipt for job " + f.job_id + " refused: " + why);
  };
  if (r.job_id != f.job_id) return refuse("it is for job " + r.job_id);
  if (r.consumer != f.self) return refuse("it names another consumer (" + NodeId(r.consumer).to_string() + ")");
  if (r.provider != f.provider) {
    return refuse("it names provider " + NodeId(r.provider).to_string() + ", not the one the job was sent to");
  }
  if (!receipt_provider_signature_valid(r)) return refuse("the provider's signature does not verify");
  if (r.end_ms < r.start_ms) return refuse("it ends before it starts");
  if (f.gpus_requested == 0 && r.gpu_model != kNoGpuModel) {
    return refuse("it names GPU model \"" + r.gpu_model + "\" for a job that asked for no GPU");
  }
  return ok_status();
}

MeteringVerdict judge_receipt(const Receipt& r, const ConsumerJobFacts& f) {
  MeteringVerdict v;
  auto disagree = [&](std::string why) {
    v.kind = MeteringVerdict::Kind::kDisagree;
    v.reason = "receipt for job " + f.job_id + " disputed: " + std::move(why);
    return v;
  };
  UnixMs seen_end = f.seen_ended_ms > 0 ? f.seen_ended_ms : f.now_ms;
  UnixMs seen_start = f.submitted_ms > 0 ? std::min(f.submitted_ms, seen_end) : seen_end;
  uint64_t seen_wall_s = static_cast<uint64_t>((seen_end - seen_start + 999) / 1000) + 1;
  uint64_t gpus = static_cast<uint64_t>(std::max(0, f.gpus_requested));
  v.observed_gpu_seconds = gpus * seen_wall_s;

  if (f.exit_code && r.exit_status != *f.exit_code) {
    return disagree("it says the job exited " + std::to_string(r.exit_status) + "; this node saw it exit " +
                    std::to_string(*f.exit_code));
  }
  std::string claim = "it claims " + std::to_string(r.gpu_seconds) + " GPU-seconds; this node saw " +
                      std::to_string(f.gpus_requested) + " GPU(s) asked for over at most " +
                      std::to_string(seen_wall_s) + " s (" + std::to_string(v.observed_gpu_seconds) + ")";
  uint64_t slack = gpus * kMeteringSlackSeconds + v.observed_gpu_seconds * kMeteringSlackPercent / 100;
  if (r.gpu_seconds > v.observed_gpu_seconds + slack) return disagree(claim);
  if (f.submitted_ms > 0 && r.start_ms + kReceiptClockSkewMs < f.submitted_ms) {
    return disagree("it starts before the job was submitted");
  }
  if (f.now_ms > 0 && r.end_ms > f.now_ms + kReceiptClockSkewMs) return disagree("it ends in the future");
  if (r.gpu_seconds <= v.observed_gpu_seconds) return v;
  v.kind = MeteringVerdict::Kind::kClamped;
  v.reason = "receipt for job " + f.job_id + " countersigned for less: " + claim;
  v.view.gpu_seconds = v.observed_gpu_seconds;
  v.view.start_ms = seen_start;
  v.view.end_ms = seen_end;
  return v;
}

}  // namespace yonder::mesh
