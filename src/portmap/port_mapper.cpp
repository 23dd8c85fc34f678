#include "portmap/port_mapper.h"

#include <algorithm>

namespace yonder::portmap {
namespace {

using std::chrono::seconds;

class RealGateway final : public GatewayBackend {
 public:
  Result<Mapping> map(uint16_t internal_port, const MapOptions& options) override {
    return map_tcp_port(internal_port, options);
  }
  Result<Mapping> renew(const Mapping& m, const MapOptions& options) override { return portmap::renew(m, options); }
  Status unmap(const Mapping& m, const MapOptions& options) override { return portmap::unmap(m, options); }
};

std::string double_nat_warning(const Mapping& m) {
  if (!is_private_ipv4(m.external_ip)) return "";
  return "the gateway's external address " + m.external_ip +
         " is private: it sits behind another NAT (double NAT or carrier-grade NAT), so this mapping does not make "
         "the node reachable from the internet; peers will use hole punching or a relay";
}

}  // namespace

const char* map_state_name(MapState s) {
  switch (s) {
    case MapState::kNone: return "none";
    case MapState::kMapping: return "mapping";
    case MapState::kMapped: return "mapped";
    case MapState::kUnavailable: return "unavailable";
  }
  return "none";
}

nlohmann::json PortMapperStatus::to_json() const {
  nlohmann::json j = {{"state", map_state_name(state)}};
  if (!reason.empty()) j["reason"] = reason;
  if (mapping) j["mapping"] = mapping->to_json();
  if (next_attempt_in.count() > 0) j["next_attempt_in_s"] = next_attempt_in.count();
  return j;
}

seconds RenewalSchedule::after_success(seconds lifetime) {
  if (lifetime.count() <= 0) return seconds(30 * 60);
  return std::max(seconds(60), lifetime / 2);
}

seconds RenewalSchedule::after_failure(int failures) {
  int shift = std::clamp(failures - 1, 0, 6);  // 30 s * 64 > 30 min: capped below
  return std::min(seconds(30) * (1 << shift), seconds(30 * 60));
}

std::unique_ptr<GatewayBackend> make_gateway_backend() {
  return std::make_unique<RealGateway>();
}

PortMapper::PortMapper(uint16_t internal_port, MapOptions options, Listener listener,
                       std::unique_ptr<GatewayBackend> backend)
    : internal_port_(internal_port),
      options_(std::move(options)),
      listener_(std::move(listener)),
      backend_(std::move(backend)),
      thread_([this] { run(); }) {}

PortMapper::~PortMapper() {
  stop();
}

void PortMapper::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

PortMapperStatus PortMapper::status() const {
  std::lock_guard lock(mu_);
  return status_;
}

void PortMapper::publish(PortMapperStatus s) {
  {
    std::lock_guard lock(mu_);
    status_ = s;
  }
  if (listener_) listener_(s);
}

void PortMapper::refresh_now() {
  {
    std::lock_guard lock(mu_);
    refresh_ = true;
  }
  wake_.notify_all();
}

bool PortMapper::wait_or_stop(seconds d) {
  std::unique_lock lock(mu_);
  wake_.wait_for(lock, d, [this] { return stopping_ || refresh_; });
  refresh_ = false;
  return stopping_;
}

void PortMapper::run() {
  std::optional<Mapping> held;
  int failures = 0;
  auto stopping = [this] {
    std::lock_guard lock(mu_);
    return stopping_;
  };
  while (!stopping()) {
    if (!held) publish({.state = MapState::kMapping, .reason = "", .mapping = std::nullopt, .next_attempt_in = {}});
    // A held mapping is renewed in place; if that fails, map afresh (the
    // gateway may have rebooted, or another method may now answer).
    Result<Mapping> got = held ? backend_->renew(*held, options_) : backend_->map(internal_port_, options_);
    if (!got.ok() && held) got = backend_->map(internal_port_, options_);
    seconds next;
    if (got.ok()) {
      failures = 0;
      held = *got;
      next = RenewalSchedule::after_success(held->lifetime);
      publish(
          {.state = MapState::kMapped, .reason = double_nat_warning(*held), .mapping = held, .next_attempt_in = next});
    } else {
      held.reset();
      next = RenewalSchedule::after_failure(++failures);
      publish({.state = MapState::kUnavailable,
               .reason = got.error().to_string(),
               .mapping = std::nullopt,
               .next_attempt_in = next});
    }
    if (wait_or_stop(next)) break;
  }
  // Removed on exit. A failure here is only reported: the lease runs out by
  // itself (NAT-PMP, UPnP with a lease).
  std::string reason;
  if (held) {
    auto s = backend_->unmap(*held, options_);
    if (!s.ok()) reason = "could not remove the mapping: " + s.error().to_string();
  }
  publish({.state = MapState::kNone, .reason = reason, .mapping = std::nullopt, .next_attempt_in = {}});
}

}  // namespace yonder::portmap
