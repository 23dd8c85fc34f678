// What `yonder gpu PEER` prints: a provider's GPUs (model, VRAM free of
// total, utilisation, whether a job holds it), its driver and CUDA version,
// what it lets this node do (our scope there), its per-job maxima, the
// images it allows and its queue; from GET /v1/peers/offer (the provider's
// run.offer). Pure: tested without a daemon (tests/cli/peer_offer_test.cpp).
#pragma once

#include <string>

#include <nlohmann/json_fwd.hpp>

namespace yonder::cli {

// The answer as text; a provider that reports no usable GPU says why (its
// inventory's message) instead of a table. Every value the provider chose
// is made safe to print (base/terminal_text.h terminal_safe).
std::string offer_text(const nlohmann::json& offer);

}  // namespace yonder::cli
