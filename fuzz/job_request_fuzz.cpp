// Fuzzes the job request parser (the local API today, peers later): never
// crashes, and what it accepts survives a round trip unchanged.
#include <cstdint>

#include <nlohmann/json.hpp>

#include "jobs/provider/job_request.h"

using namespace yonder::jobs::provider;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > kMaxRequestBytes) return 0;
  auto json = nlohmann::json::parse(data, data + size, nullptr, false);
  if (json.is_discarded()) return 0;
  auto request = parse_job_request(json);
  if (!request) return 0;
  auto again = parse_job_request(request->to_json());
  if (!again || again->to_json() != request->to_json()) __builtin_trap();
  (void)resolve(*request, ProviderLimits{});
  return 0;
}
