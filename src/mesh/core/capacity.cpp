#include "mesh/core/capacity.h"

#include <cmath>
#include <cstdio>

#include "mesh/core/json_fields.h"

namespace yonder::mesh {

namespace {

std::string trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return std::string(s);
}

std::string fixed2(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

std::string size_text(uint64_t bytes) {
  constexpr uint64_t kGiB = uint64_t{1} << 30, kMiB = uint64_t{1} << 20;
  if (bytes % kGiB == 0) return std::to_string(bytes / kGiB) + " GiB";
  if (bytes >= kGiB) return fixed2(static_cast<double>(bytes) / static_cast<double>(kGiB)) + " GiB";
  return std::to_string((bytes + kMiB - 1) / kMiB) + " MiB";
}

}  // namespace

Result<std::map<std::string, std::string>> parse_labels(std::string_view text) {
  std::map<std::string, std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string_view::npos) comma = text.size();
    std::string item = trim(text.substr(start, comma - start));
    start = comma + 1;
    if (item.empty()) continue;
    size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0) {
      return make_error(ErrorCode::kInvalidArgument, "label \"" + item + "\" must be KEY=VALUE, e.g. site=lab2");
    }
    std::string k = item.substr(0, eq), v = item.substr(eq + 1);
    if (k.size() > detail::kMaxLabelKey || !detail::token_chars(k, false)) {
      return make_error(ErrorCode::kInvalidArgument,
                        "label key \"" + k + "\" must be 1..63 of A-Z a-z 0-9 . _ / : -");
    }
    if (v.size() > detail::kMaxLabelValue || !detail::token_chars(v, true)) {
      return make_error(ErrorCode::kInvalidArgument,
                        "label value \"" + v + "\" must be at most 63 of A-Z a-z 0-9 . _ / : = -");
    }
    if (!out.emplace(k, v).second) {
      return make_error(ErrorCode::kInvalidArgument, "label \"" + k + "\" is given twice; keep one");
    }
    if (out.size() > detail::kMaxLabels) {
      return make_error(ErrorCode::kInvalidArgument,
                        "at most " + std::to_string(detail::kMaxLabels) + " labels; drop some");
    }
  }
  return out;
}

ScoreParts score_parts(const ProviderView& view, double expected_start_s, const Weights& w) {
  ScoreParts p;
  p.reputation = w.reputation * view.reputation;
  p.path = w.path * view.path_quality;
  p.rtt = -w.rtt * view.rtt_ms / 100.0;
  p.start = -w.start * expected_start_s / 60.0;
  p.credit = w.credit * view.credit / (std::fabs(view.credit) + w.credit_scale);
  p.unverified = view.gpu_claim_verified ? 0.0 : -w.unverified_gpu;
  p.total = p.reputation + p.path + p.rtt + p.start + p.credit + p.unverified;
  return p;
}

std::string describe_score(const ScoreParts& p) {
  auto term = [](const char* name, double v, bool first) {
    std::string s = first ? "" : (v < 0 ? " - " : " + ");
    return s + name + " " + fixed2(first ? v : std::fabs(v));
  };
  return "score " + fixed2(p.total) + " = " + term("reputation", p.reputation, true) + term("path", p.path, false) +
         term("rtt", p.rtt, false) + term("start", p.start, false) + term("credit", p.credit, false) +
         (p.unverified != 0 ? term("unverified GPU", p.unverified, false) : std::string());
}

std::string describe_request(const PlacementRequest& job) {
  std::string s = std::to_string(job.gpus) + (job.gpus == 1 ? " free GPU" : " free GPUs");
  std::vector<std::string> with;
  if (job.vram_bytes > 0) with.push_back(size_text(job.vram_bytes));
  if (job.min_capability > 0) {
    with.push_back("compute capability " + std::to_string(job.min_capability / 100) + "." +
                   std::to_string(job.min_capability % 100));
  }
  for (const auto& [k, v] : job.labels) with.push_back("label " + k + "=" + v);
  for (size_t i = 0; i < with.size(); ++i) {
    s += i == 0 ? " with " : (i + 1 == with.size() ? " and " : ", ");
    s += with[i];
  }
  if (job.group) s += " in group " + *job.group;
  return s;
}

Error nothing_feasible(const PlacementRequest& job, size_t providers) {
  if (providers == 0) {
    return make_error(ErrorCode::kFailedPrecondition,
                      "no paired provider answered with its capacity; pair with one (`yonder pair LINK`, a link "
                      "shared with the mesh capability) and check `yonder mesh`");
  }
  return make_error(ErrorCode::kFailedPrecondition,
                    "no paired provider has " + describe_request(job) + "; `yonder mesh` shows what there is");
}

}  // namespace yonder::mesh
