#include "mesh/core/receipt.h"

#include <algorithm>

#include "mesh/core/json_fields.h"

namespace yonder::mesh {
namespace {

using namespace detail;
constexpr std::string_view kReceiptWhat = "receipt";
constexpr std::string_view kReceiptLabel = "yonder-mesh-receipt-v1";
constexpr std::string_view kCounterLabel = "yonder-mesh-receipt-countersign-v1";
constexpr std::string_view kCounterViewLabel = "yonder-mesh-receipt-countersign-v2";

json unsigned_json(const Receipt& r) {
  return json{{"job", r.job_id},
              {"provider", peer_text(r.provider)},
              {"consumer", peer_text(r.consumer)},
              {"gpu_model", r.gpu_model},
              {"gpu_seconds", r.gpu_seconds},
              {"start_ms", static_cast<uint64_t>(r.start_ms)},
              {"end_ms", static_cast<uint64_t>(r.end_ms)},
              {"exit_status", r.exit_status},
              {"output_hash", r.output_hash}};
}

json view_json(const ConsumerView& v) {
  return json{{"gpu_seconds", v.gpu_seconds},
              {"start_ms", static_cast<uint64_t>(v.start_ms)},
              {"end_ms", static_cast<uint64_t>(v.end_ms)}};
}

Bytes counter_bytes(const Receipt& r) {
  json fields = unsigned_json(r);
  if (r.consumer_view) fields["consumer_view"] = view_json(*r.consumer_view);
  Bytes b = signing_bytes(r.consumer_view ? kCounterViewLabel : kCounterLabel, fields);
  b.insert(b.end(), r.provider_signature.begin(), r.provider_signature.end());
  return b;
}

}  // namespace

Result<Receipt> decode_receipt(std::string_view text) {
  MESH_GET(j, parse_object(text, kMaxReceiptBytes, kReceiptWhat));
  Receipt r;
  MESH_GET(job, get_string(j, "job", 1, 64, kReceiptWhat));
  if (!token_chars(job, false)) return bad(kReceiptWhat, "\"job\" must be of [A-Za-z0-9._:/-]");
  r.job_id = std::move(job);
  MESH_GET(provider, get_peer(j, "provider", kReceiptWhat));
  MESH_GET(consumer, get_peer(j, "consumer", kReceiptWhat));
  r.provider = provider;
  r.consumer = consumer;
  MESH_GET(model, get_string(j, "gpu_model", 1, 64, kReceiptWhat));
  r.gpu_model = std::move(model);
  MESH_GET(secs, get_uint(j, "gpu_seconds", kMaxReceiptGpuSeconds, kReceiptWhat));
  r.gpu_seconds = secs;
  MESH_GET(start, get_time(j, "start_ms", kReceiptWhat));
  MESH_GET(end, get_time(j, "end_ms", kReceiptWhat));
  r.start_ms = start;
  r.end_ms = end;
  const json* ex = find(j, "exit_status");
  if (ex == nullptr || !ex->is_number_integer() ||
      (ex->is_number_unsigned() ? ex->get<uint64_t>() > 0x7fffffffull
                                : (ex->get<int64_t>() < INT32_MIN || ex->get<int64_t>() > INT32_MAX))) {
    return bad(kReceiptWhat, "\"exit_status\" must be a 32-bit integer");
  }
  r.exit_status = static_cast<int32_t>(ex->get<int64_t>());
  MESH_GET(hash, get_hash(j, "output_hash", kReceiptWhat));
  r.output_hash = std::move(hash);
  MESH_GET(psig, get_signature(j, "provider_sig", kReceiptWhat));
  r.provider_signature = std::move(psig);
  if (const json* cv = find(j, "consumer_view"); cv != nullptr) {
    if (!cv->is_object()) return bad(kReceiptWhat, "\"consumer_view\" must be an object");
    ConsumerView v;
    MESH_GET(view_secs, get_uint(*cv, "gpu_seconds", kMaxReceiptGpuSeconds, kReceiptWhat));
    MESH_GET(view_start, get_time(*cv, "start_ms", kReceiptWhat));
    MESH_GET(view_end, get_time(*cv, "end_ms", kReceiptWhat));
    v.gpu_seconds = view_secs;
    v.start_ms = view_start;
    v.end_ms = view_end;
    r.consumer_view = v;
  }
  if (find(j, "consumer_sig") != nullptr) {
    MESH_GET(csig, get_signature(j, "consumer_sig", kReceiptWhat));
    r.consumer_signature = std::move(csig);
  }
  return r;
}

std::string encode_receipt(const Receipt& r) {
  json j = unsigned_json(r);
  j["provider_sig"] = base64_encode(r.provider_signature);
  if (r.consumer_view) j["consumer_view"] = view_json(*r.consumer_view);
  if (!r.consumer_signature.empty()) j["consumer_sig"] = base64_encode(r.consumer_signature);
  return j.dump();
}

uint64_t credited_gpu_seconds(const Receipt& r) {
  return r.consumer_view ? std::min(r.consumer_view->gpu_seconds, r.gpu_seconds) : r.gpu_seconds;
}

void sign_receipt_as_provider(Receipt& r, const Identity& provider) {
  r.provider = provider.public_key();
  r.consumer_signature.clear();
  r.consumer_view.reset();
  r.provider_signature = provider.sign(signing_bytes(kReceiptLabel, unsigned_json(r)));
}

bool receipt_provider_signature_valid(const Receipt& r) {
  return verify_signature(r.provider, signing_bytes(kReceiptLabel, unsigned_json(r)), r.provider_signature);
}

Status countersign_receipt(Receipt& r, const Identity& consumer) {
  if (r.consumer != consumer.public_key()) {
    return make_error(ErrorCode::kPermissionDenied,
                      "this receipt names another consumer; it was not countersigned (report the provider)");
  }
  if (!receipt_provider_signature_valid(r)) {
    return make_error(ErrorCode::kPermissionDenied,
                      "the provider's signature on this receipt does not verify; it was not countersigned");
  }
  if (r.consumer_view && (r.consumer_view->gpu_seconds > r.gpu_seconds || r.consumer_view->end_ms < r.consumer_view->start_ms)) {
    return make_error(ErrorCode::kInvalidArgument,
                      "the consumer's view of receipt " + r.job_id + " claims more than the provider or ends before it starts");
  }
  r.consumer_signature = consumer.sign(counter_bytes(r));
  return ok_status();
}

Status verify_receipt(const Receipt& r) {
  if (r.end_ms < r.start_ms || r.provider == r.consumer ||
      (r.consumer_view && (r.consumer_view->end_ms < r.consumer_view->start_ms ||
                           r.consumer_view->gpu_seconds > r.gpu_seconds))) {
    return make_error(ErrorCode::kInvalidArgument, "receipt " + r.job_id +
                                                       " ends before it starts, names the same peer twice "
                                                       "or its consumer view claims more than the provider; "
                                                       "it was not counted");
  }
  if (!receipt_provider_signature_valid(r)) {
    return make_error(ErrorCode::kPermissionDenied,
                      "receipt " + r.job_id + ": the provider's signature does not verify; it was not counted");
  }
  if (!verify_signature(r.consumer, counter_bytes(r), r.consumer_signature)) {
    return make_error(ErrorCode::kPermissionDenied,
                      "receipt " + r.job_id +
                          ": the consumer's countersignature is missing or does not verify; "
                          "it was not counted");
  }
  return ok_status();
}

}  // namespace yonder::mesh
