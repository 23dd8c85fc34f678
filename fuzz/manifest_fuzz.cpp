// Fuzzes the two decoders of a content-addressed upload
// (src/transfer/manifest.h, upload_cache.h): the manifest a peer sends a
// provider, and the plan a provider sends back. Neither may crash, accept a
// path the rules refuse, declare more bytes than the limit, or (for the
// plan) name a file or offset outside the manifest, whatever the split.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "transfer/manifest.h"
#include "transfer/upload_cache.h"

using namespace yonder;
using namespace yonder::transfer;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1 || size > 1 << 20) return 0;
  ByteView in(data + 1, size - 1);
  if (data[0] & 1) {
    // A plan reply against a fixed manifest of 20 files.
    Manifest m;
    for (int i = 0; i < 20; ++i) m.entries.push_back({"f" + std::to_string(i), false, 0644, static_cast<uint64_t>(i * 10), {}});
    m.files = 20;
    auto j = nlohmann::json::parse(in.begin(), in.end(), nullptr, false);
    auto r = parse_plan_reply(j, m);
    if (r) {
      if (r->need.size() != 20) __builtin_trap();
      for (const auto& [i, off] : r->resume) {
        if (i >= 20 || !r->need[i] || off >= m.entries[i].size) __builtin_trap();
      }
    }
    return 0;
  }
  ArchiveLimits limits{1 << 20, 64};
  ManifestReader a(limits), b(limits);
  auto st = a.feed(in);
  Status st2 = ok_status();
  for (size_t i = 0; i < in.size() && st2; ++i) st2 = b.feed(in.subspan(i, 1));
  if (st.ok() != st2.ok() || a.complete() != b.complete()) __builtin_trap();
  if (!a.complete()) return 0;
  auto m = a.take();
  if (!m) __builtin_trap();
  uint64_t bytes = 0;
  for (const auto& e : m->entries) {
    if (!check_archive_path(e.path) || e.mode > 0777) __builtin_trap();
    bytes += e.size;
  }
  if (bytes != m->bytes || bytes > limits.max_bytes || m->entries.size() > limits.max_entries) __builtin_trap();
  return 0;
}
