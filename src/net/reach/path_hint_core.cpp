#include "net/reach/path_hint_core.h"

namespace yonder::reach {

std::optional<relay::PathHint> hint_to_send(const std::string& mapped, PathKind path) {
  if (mapped.empty() || !worse_than_mapped(path)) return std::nullopt;
  return relay::PathHint{mapped};
}

HintVerdict PathHintCore::admit(const PublicKeyBytes& from, const relay::PathHint& hint, bool grants_us,
                                MonoTime now) {
  if (!hint.mapped) return {HintVerdict::Kind::kIgnore, "the hint names no mapped address"};
  if (!grants_us) return {HintVerdict::Kind::kIgnore, "the peer keeps the link up: it dials"};
  if (!limits_[from].allow(now)) return {HintVerdict::Kind::kRateLimited, *hint.mapped};
  return {HintVerdict::Kind::kDial, *hint.mapped};
}

HintVerdict PathHintCore::target(const std::string& mapped, const relay::HintDialContext& ctx) {
  if (auto allowed = relay::check_hint_target(mapped, ctx); !allowed) {
    return {HintVerdict::Kind::kRefused, allowed.error().message()};
  }
  return {HintVerdict::Kind::kDial, mapped};
}

}  // namespace yonder::reach
