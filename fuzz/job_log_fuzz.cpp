// Fuzzes the reader of the provider's persisted job log records
// (src/jobs/provider/job_log.h): whatever it accepts re-encodes to the
// same bytes.
#include <cstdint>
#include <string>
#include <string_view>

#include "jobs/provider/job_log.h"

using namespace yonder::jobs::provider;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 4 << 20) return 0;
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  size_t used = 0;
  auto records = decode_log_records(bytes, &used);
  if (!records) return 0;
  if (used > size) __builtin_trap();
  std::string again;
  for (const auto& r : *records) again += encode_log_record(r.stream, r.unix_ns, r.data);
  if (again != bytes.substr(0, used)) __builtin_trap();
  return 0;
}
