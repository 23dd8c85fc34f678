#include "mesh/core/lease.h"

#include <algorithm>
#include <array>

#include "mesh/core/json_fields.h"

namespace yonder::mesh {
namespace {

using namespace detail;
constexpr std::string_view kLeaseWhat = "lease message";

constexpr std::array<const char*, 5> kKinds = {"offer", "accept", "refuse", "renew", "release"};
constexpr std::array<const char*, 4> kRefuse = {"busy", "infeasible", "not_allowed", "draining"};
constexpr std::array<const char*, 4> kRelease = {"done", "cancelled", "expired", "evicted"};

template <size_t N>
int index_of(const std::array<const char*, N>& names, const std::string& s) {
  for (size_t i = 0; i < N; ++i) {
    if (s == names[i]) return static_cast<int>(i);
  }
  return -1;
}

}  // namespace

Result<LeaseMessage> decode_lease_message(std::string_view text) {
  MESH_GET(j, parse_object(text, kMaxLeaseMessageBytes, kLeaseWhat));
  LeaseMessage m;
  MESH_GET(kind, get_string(j, "kind", 1, 16, kLeaseWhat));
  int k = index_of(kKinds, kind);
  if (k < 0) return bad(kLeaseWhat, "unknown \"kind\"");
  m.kind = static_cast<LeaseKind>(k);
  switch (m.kind) {
    case LeaseKind::kOffer: {
      MESH_GET(req, get_uint(j, "request_id", uint64_t{1} << 53, kLeaseWhat));
      MESH_GET(gpus, get_uint(j, "gpus", 64, kLeaseWhat));
      if (gpus == 0) return bad(kLeaseWhat, "\"gpus\" must be at least 1");
      MESH_GET(vram, get_uint(j, "vram_bytes", uint64_t{1} << 50, kLeaseWhat));
      MESH_GET(cap, get_uint(j, "min_capability", 9999, kLeaseWhat));
      MESH_GET(term, get_uint(j, "term_ms", kMaxLeaseTermMs, kLeaseWhat));
      MESH_GET(timeout, get_uint(j, "timeout_ms", kMaxLeaseTermMs, kLeaseWhat));
      if (term == 0) return bad(kLeaseWhat, "\"term_ms\" must be at least 1");
      m.request_id = req;
      m.gpus = static_cast<uint32_t>(gpus);
      m.vram_bytes = vram;
      m.min_capability = static_cast<uint32_t>(cap);
      m.term_ms = term;
      m.timeout_ms = timeout;
      break;
    }
    case LeaseKind::kAccept: {
      MESH_GET(req, get_uint(j, "request_id", uint64_t{1} << 53, kLeaseWhat));
      MESH_GET(lease, get_uint(j, "lease_id", uint64_t{1} << 53, kLeaseWhat));
      MESH_GET(expires, get_time(j, "expires_at_ms", kLeaseWhat));
      const json* devs = find(j, "devices");
      if (devs == nullptr || !devs->is_array() || devs->empty() || devs->size() > 64) {
        return bad(kLeaseWhat, "\"devices\" must be an array of 1..64 device indices");
      }
      for (const auto& d : *devs) {
        if (!d.is_number_unsigned() || d.get<uint64_t>() >= 64) return bad(kLeaseWhat, "a device index is 0..63");
        auto v = static_cast<uint32_t>(d.get<uint64_t>());
        if (std::find(m.devices.begin(), m.devices.end(), v) != m.devices.end()) {
          return bad(kLeaseWhat, "a device is listed twice");
        }
        m.devices.push_back(v);
      }
      m.request_id = req;
      m.lease_id = lease;
      m.expires_at_ms = expires;
      break;
    }
    case LeaseKind::kRefuse: {
      MESH_GET(req, get_uint(j, "request_id", uint64_t{1} << 53, kLeaseWhat));
      MESH_GET(reason, get_string(j, "reason", 1, 16, kLeaseWhat));
      int r = index_of(kRefuse, reason);
      if (r < 0) return bad(kLeaseWhat, "unknown refusal \"reason\"");
      MESH_GET(retry, get_uint(j, "retry_after_ms", kMaxLeaseTermMs, kLeaseWhat));
      m.request_id = req;
      m.refuse_reason = static_cast<RefuseReason>(r);
      m.retry_after_ms = retry;
      break;
    }
    case LeaseKind::kRenew: {
      MESH_GET(lease, get_uint(j, "lease_id", uint64_t{1} << 53, kLeaseWhat));
      MESH_GET(term, get_uint(j, "term_ms", kMaxLeaseTermMs, kLeaseWhat));
      if (term == 0) return bad(kLeaseWhat, "\"term_ms\" must be at least 1");
      m.lease_id = lease;
      m.term_ms = term;
      break;
    }
    case LeaseKind::kRelease: {
      MESH_GET(lease, get_uint(j, "lease_id", uint64_t{1} << 53, kLeaseWhat));
      MESH_GET(reason, get_string(j, "reason", 1, 16, kLeaseWhat));
      int r = index_of(kRelease, reason);
      if (r < 0) return bad(kLeaseWhat, "unknown release \"reason\"");
      m.lease_id = lease;
      m.release_reason = static_cast<ReleaseReason>(r);
      break;
    }
  }
  return m;
}

std::string encode_lease_message(const LeaseMessage& m) {
  json j{{"kind", kKinds[static_cast<size_t>(m.kind)]}};
  switch (m.kind) {
    case LeaseKind::kOffer:
      j["request_id"] = m.request_id;
      j["gpus"] = m.gpus;
      j["vram_bytes"] = m.vram_bytes;
      j["min_capability"] = m.min_capability;
      j["term_ms"] = m.term_ms;
      j["timeout_ms"] = m.timeout_ms;
      break;
    case LeaseKind::kAccept:
      j["request_id"] = m.request_id;
      j["lease_id"] = m.lease_id;
      j["devices"] = m.devices;
      j["expires_at_ms"] = static_cast<uint64_t>(m.expires_at_ms);
      break;
    case LeaseKind::kRefuse:
      j["request_id"] = m.request_id;
      j["reason"] = kRefuse[static_cast<size_t>(m.refuse_reason)];
      j["retry_after_ms"] = m.retry_after_ms;
      break;
    case LeaseKind::kRenew:
      j["lease_id"] = m.lease_id;
      j["term_ms"] = m.term_ms;
      break;
    case LeaseKind::kRelease:
      j["lease_id"] = m.lease_id;
      j["reason"] = kRelease[static_cast<size_t>(m.release_reason)];
      break;
  }
  return j.dump();
}

}  // namespace yonder::mesh
