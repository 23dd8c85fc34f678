#include "mesh/core/lease_book.h"

#include <algorithm>

namespace yonder::mesh {

LeaseBook::LeaseBook(uint32_t device_count) : holder_(device_count, 0) {}

Result<LeaseGrant> LeaseBook::grant(const PeerKey& consumer, const std::vector<uint32_t>& devices, uint64_t term_ms,
                                    UnixMs now_ms) {
  if (devices.empty() || term_ms == 0 || term_ms > kMaxLeaseTermMs) {
    return make_error(ErrorCode::kInvalidArgument, "a lease needs at least one device and a term of 1 ms..24 h");
  }
  for (size_t i = 0; i < devices.size(); ++i) {
    if (devices[i] >= holder_.size() || std::find(devices.begin(), devices.begin() + static_cast<long>(i),
                                                  devices[i]) != devices.begin() + static_cast<long>(i)) {
      return make_error(ErrorCode::kInvalidArgument, "a lease names an unknown or repeated device");
    }
  }
  expire(now_ms);
  for (uint32_t d : devices) {
    if (holder_[d] != 0) {
      return make_error(ErrorCode::kFailedPrecondition, "device " + std::to_string(d) + " is leased; try later");
    }
  }
  LeaseGrant g;
  g.lease_id = next_id_++;
  g.consumer = consumer;
  g.devices = devices;
  g.expires_at_ms = now_ms + static_cast<UnixMs>(term_ms);
  for (uint32_t d : devices) holder_[d] = g.lease_id;
  leases_.emplace(g.lease_id, g);
  return g;
}

Result<LeaseGrant> LeaseBook::renew(uint64_t lease_id, const PeerKey& consumer, uint64_t term_ms, UnixMs now_ms) {
  expire(now_ms);
  auto it = leases_.find(lease_id);
  if (it == leases_.end() || it->second.consumer != consumer) {
    return make_error(ErrorCode::kNotFound,
                      "lease " + std::to_string(lease_id) + " expired or is not yours; ask for a new one");
  }
  if (term_ms == 0 || term_ms > kMaxLeaseTermMs) {
    return make_error(ErrorCode::kInvalidArgument, "a lease term is 1 ms..24 h");
  }
  it->second.expires_at_ms = now_ms + static_cast<UnixMs>(term_ms);
  return it->second;
}

Status LeaseBook::release(uint64_t lease_id, const PeerKey& consumer) {
  auto it = leases_.find(lease_id);
  if (it == leases_.end() || it->second.consumer != consumer) {
    return make_error(ErrorCode::kNotFound, "lease " + std::to_string(lease_id) + " is not held by this peer");
  }
  for (uint32_t d : it->second.devices) holder_[d] = 0;
  leases_.erase(it);
  return ok_status();
}

std::vector<LeaseGrant> LeaseBook::expire(UnixMs now_ms) {
  std::vector<LeaseGrant> out;
  for (auto it = leases_.begin(); it != leases_.end();) {
    if (it->second.expires_at_ms <= now_ms) {
      for (uint32_t d : it->second.devices) holder_[d] = 0;
      out.push_back(std::move(it->second));
      it = leases_.erase(it);
    } else {
      ++it;
    }
  }
  return out;
}

std::optional<UnixMs> LeaseBook::next_deadline() const {
  std::optional<UnixMs> d;
  for (const auto& [id, g] : leases_) {
    if (!d || g.expires_at_ms < *d) d = g.expires_at_ms;
  }
  return d;
}

bool LeaseBook::device_free(uint32_t device, UnixMs now_ms) const {
  if (device >= holder_.size()) return false;
  uint64_t id = holder_[device];
  if (id == 0) return true;
  return leases_.at(id).expires_at_ms <= now_ms;
}

LeaseMessage answer_offer(LeaseBook& book, const std::vector<GpuOffer>& gpus, const PeerKey& consumer,
                          const LeaseMessage& offer, UnixMs now_ms) {
  LeaseMessage out;
  out.request_id = offer.request_id;
  auto fits = [&](uint32_t i) {
    return gpus[i].memory_bytes >= offer.vram_bytes && gpus[i].capability() >= offer.min_capability;
  };
  uint32_t n = std::min<uint32_t>(book.device_count(), static_cast<uint32_t>(gpus.size()));
  uint32_t could = 0;
  std::vector<uint32_t> pick;
  for (uint32_t i = 0; i < n; ++i) {
    if (!fits(i)) continue;
    ++could;
    // A device marked leased in `gpus` is held outside the book (a job the
    // provider runs for someone else): it fits, but is not free now.
    if (pick.size() < offer.gpus && !gpus[i].leased && book.device_free(i, now_ms)) pick.push_back(i);
  }
  if (offer.kind != LeaseKind::kOffer || offer.gpus == 0 || could < offer.gpus) {
    out.kind = LeaseKind::kRefuse;
    out.refuse_reason = RefuseReason::kInfeasible;
    return out;
  }
  if (pick.size() < offer.gpus) {
    out.kind = LeaseKind::kRefuse;
    out.refuse_reason = RefuseReason::kBusy;
    auto next = book.next_deadline();
    out.retry_after_ms = next ? static_cast<uint64_t>(std::max<UnixMs>(0, *next - now_ms)) : 0;
    return out;
  }
  auto g = book.grant(consumer, pick, offer.term_ms, now_ms);
  if (!g) {
    out.kind = LeaseKind::kRefuse;
    out.refuse_reason = RefuseReason::kBusy;
    return out;
  }
  out.kind = LeaseKind::kAccept;
  out.lease_id = g->lease_id;
  out.devices = g->devices;
  out.expires_at_ms = g->expires_at_ms;
  return out;
}

}  // namespace yonder::mesh
