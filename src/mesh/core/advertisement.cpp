#include "mesh/core/advertisement.h"

#include "mesh/core/json_fields.h"

namespace yonder::mesh {
namespace {

using namespace detail;
constexpr std::string_view kWhat = "advertisement";
constexpr std::string_view kLabel = "yonder-mesh-advertisement-v1";

json unsigned_json(const Advertisement& ad) {
  json gpus = json::array();
  for (const auto& g : ad.gpus) {
    gpus.push_back(json{{"model", g.model},
                        {"memory_bytes", g.memory_bytes},
                        {"cuda_major", g.cuda_major},
                        {"cuda_minor", g.cuda_minor},
                        {"driver", g.driver},
                        {"leased", g.leased}});
  }
  return json{{"provider", peer_text(ad.provider)},
              {"gpus", std::move(gpus)},
              {"queue_depth", ad.queue_depth},
              {"backends", ad.backends},
              {"labels", labels_json(ad.labels)},
              {"issued_at_ms", static_cast<uint64_t>(ad.issued_at_ms)},
              {"expires_at_ms", static_cast<uint64_t>(ad.expires_at_ms)}};
}

Result<GpuOffer> decode_gpu(const json& g) {
  if (!g.is_object()) return bad(kWhat, "a GPU must be an object");
  GpuOffer o;
  MESH_GET(model, get_string(g, "model", 1, 64, kWhat));
  MESH_GET(mem, get_uint(g, "memory_bytes", uint64_t{1} << 50, kWhat));
  MESH_GET(major, get_uint(g, "cuda_major", 99, kWhat));
  MESH_GET(minor, get_uint(g, "cuda_minor", 99, kWhat));
  MESH_GET(driver, get_string(g, "driver", 0, 32, kWhat));
  MESH_GET(leased, get_bool(g, "leased", kWhat));
  o.model = std::move(model);
  o.memory_bytes = mem;
  o.cuda_major = static_cast<uint32_t>(major);
  o.cuda_minor = static_cast<uint32_t>(minor);
  o.driver = std::move(driver);
  o.leased = leased;
  return o;
}

}  // namespace

Result<Advertisement> decode_advertisement(std::string_view text) {
  MESH_GET(j, parse_object(text, kMaxAdvertisementBytes, kWhat));
  Advertisement ad;
  MESH_GET(provider, get_peer(j, "provider", kWhat));
  ad.provider = provider;
  const json* gpus = find(j, "gpus");
  if (gpus == nullptr || !gpus->is_array() || gpus->size() > kMaxGpusPerProvider) {
    return bad(kWhat, "\"gpus\" must be an array of at most 64 GPUs");
  }
  for (const auto& g : *gpus) {
    MESH_GET(o, decode_gpu(g));
    ad.gpus.push_back(std::move(o));
  }
  MESH_GET(depth, get_uint(j, "queue_depth", 1'000'000, kWhat));
  ad.queue_depth = static_cast<uint32_t>(depth);
  const json* backends = find(j, "backends");
  if (backends == nullptr || !backends->is_array() || backends->size() > kMaxBackends) {
    return bad(kWhat, "\"backends\" must be an array of at most 8 names");
  }
  for (const auto& b : *backends) {
    if (!b.is_string() || b.get_ref<const std::string&>().empty() || b.get_ref<const std::string&>().size() > 32 ||
        !token_chars(b.get_ref<const std::string&>(), false)) {
      return bad(kWhat, "a backend name must be 1..32 of [A-Za-z0-9._/:-]");
    }
    ad.backends.push_back(b.get<std::string>());
  }
  MESH_GET(labels, get_labels(j, "labels", kWhat));
  ad.labels = std::move(labels);
  MESH_GET(issued, get_time(j, "issued_at_ms", kWhat));
  MESH_GET(expires, get_time(j, "expires_at_ms", kWhat));
  ad.issued_at_ms = issued;
  ad.expires_at_ms = expires;
  MESH_GET(sig, get_signature(j, "sig", kWhat));
  ad.signature = std::move(sig);
  return ad;
}

std::string encode_advertisement(const Advertisement& ad) {
  json j = unsigned_json(ad);
  j["sig"] = base64_encode(ad.signature);
  return j.dump();
}

Bytes advertisement_signing_bytes(const Advertisement& ad) {
  return signing_bytes(kLabel, unsigned_json(ad));
}

void sign_advertisement(Advertisement& ad, const Identity& provider) {
  ad.provider = provider.public_key();
  ad.signature = provider.sign(advertisement_signing_bytes(ad));
}

Status verify_advertisement(const Advertisement& ad) {
  if (!verify_signature(ad.provider, advertisement_signing_bytes(ad), ad.signature)) {
    return make_error(ErrorCode::kPermissionDenied,
                      "advertisement from " + peer_text(ad.provider).substr(0, 7) +
                          " has a bad signature; it was ignored (a forged or corrupted message)");
  }
  if (ad.expires_at_ms <= ad.issued_at_ms || ad.expires_at_ms - ad.issued_at_ms > kMaxAdvertisementTtlMs) {
    return make_error(ErrorCode::kInvalidArgument,
                      "advertisement freshness window is empty or longer than an hour; it was ignored");
  }
  return ok_status();
}

bool advertisement_fresh(const Advertisement& ad, UnixMs now_ms) {
  return ad.issued_at_ms <= now_ms + kMaxClockSkewMs && now_ms < ad.expires_at_ms;
}

}  // namespace yonder::mesh
