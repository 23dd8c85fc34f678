#include "mesh/core/gpu_claims.h"

namespace yonder::mesh {

const char* gpu_claim_name(GpuClaim c) {
  switch (c) {
    case GpuClaim::kUnverified: return "unverified";
    case GpuClaim::kVerified: return "verified";
    case GpuClaim::kFailed: return "failed";
  }
  return "unverified";
}

std::optional<GpuCheck> gpu_check_of(std::string provider_id, CheckKind kind, CheckOutcome outcome,
                                      const nlohmann::json& details, UnixMs at_ms) {
  if (kind != CheckKind::kKnownAnswer || !details.is_object()) return std::nullopt;
  auto gpu = details.find("gpu");
  auto model = details.find("gpu_model");
  if (gpu == details.end() || !gpu->is_boolean() || !gpu->get<bool>()) return std::nullopt;
  if (model == details.end() || !model->is_string() || model->get_ref<const std::string&>().empty()) {
    return std::nullopt;
  }
  return GpuCheck{std::move(provider_id), model->get<std::string>(), outcome == CheckOutcome::kPassed, at_ms};
}

void GpuClaims::add(GpuCheck check) {
  auto key = std::make_pair(check.provider_id, check.model);
  auto it = latest_.find(key);
  if (it == latest_.end()) {
    latest_.emplace(std::move(key), std::move(check));
    return;
  }
  const GpuCheck& old = it->second;
  if (check.at_ms > old.at_ms || (check.at_ms == old.at_ms && !check.passed)) it->second = std::move(check);
}

GpuClaim GpuClaims::claim(std::string_view provider_id, std::string_view model) const {
  auto it = latest_.find(std::make_pair(std::string(provider_id), std::string(model)));
  if (it == latest_.end()) return GpuClaim::kUnverified;
  return it->second.passed ? GpuClaim::kVerified : GpuClaim::kFailed;
}

bool GpuClaims::verified(std::string_view provider_id, const Advertisement& ad) const {
  if (ad.gpus.empty()) return false;
  for (const auto& g : ad.gpus) {
    if (claim(provider_id, g.model) != GpuClaim::kVerified) return false;
  }
  return true;
}

}  // namespace yonder::mesh
