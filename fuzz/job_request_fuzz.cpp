// Fuzzes the job request parser (what the local API and run.submit take):
// never crashes, what it accepts survives a round trip unchanged, the
// provider's resolve() and stored terms take it without harm, and a
// request held to a scope (apply_scope: caps filled in, a share's VRAM
// cap) is still one the provider's store can read back.
#include <cstdint>

#include <nlohmann/json.hpp>

#include "jobs/protocol/job_request.h"
#include "crypto/scope.h"
#include "jobs/provider/job_terms.h"

using namespace yonder::jobs::protocol;
using yonder::jobs::provider::ProviderLimits;
using yonder::jobs::provider::resolve;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > kMaxRequestBytes) return 0;
  auto json = nlohmann::json::parse(data, data + size, nullptr, false);
  if (json.is_discarded()) return 0;
  auto request = parse_job_request(json);
  if (!request) return 0;
  auto again = parse_job_request(request->to_json());
  if (!again || again->to_json() != request->to_json()) __builtin_trap();
  yonder::Scope scope;
  scope.vram_bytes = 12ULL << 30;
  scope.cpus_milli = 2000;
  scope.memory_bytes = 4ULL << 30;
  auto scoped = *request;
  if (yonder::jobs::provider::apply_scope(scoped, scope, ProviderLimits{}) && !parse_job_request(scoped.to_json())) {
    __builtin_trap();
  }
  auto resolved = resolve(*request, ProviderLimits{});
  if (resolved) {
    auto terms = yonder::jobs::provider::job_terms(*request, *resolved, false, "");
    if (!yonder::jobs::provider::terms_from_json(yonder::jobs::provider::terms_to_json(terms))) __builtin_trap();
  }
  return 0;
}
