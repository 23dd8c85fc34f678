// PortMapper keeps one TCP port mapped on the gateway for as long as it
// lives: maps it at start, renews it at half its lease, maps it again when a
// renewal fails (the router rebooted, the lease was lost), retries with
// back-off while no gateway answers, and removes the mapping in stop() or
// its destructor ("removed on exit").
//
// Threads: the gateway calls block (up to a few seconds each), so the mapper
// runs them on a thread of its own, which sleeps between them; stop() wakes
// it at once. status() may be called from any thread. The listener, if any,
// is called on the mapper's thread after every change of status: post it to
// your event loop, do not block in it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>

#include "base/error.h"
#include "portmap/port_mapping.h"

namespace yonder::portmap {

enum class MapState {
  kNone,         // not started, or stopped (mapping removed)
  kMapping,      // asking the gateway
  kMapped,       // a mapping is held; `mapping` says which
  kUnavailable,  // no gateway gave one; `reason` says why and what to do
};
const char* map_state_name(MapState s);

struct PortMapperStatus {
  MapState state = MapState::kNone;
  std::string reason;                       // kUnavailable: the error; kMapped: a warning (double NAT), or empty
  std::optional<Mapping> mapping;           // kMapped only
  std::chrono::seconds next_attempt_in{0};  // until the next renewal or retry, as of the change
  nlohmann::json to_json() const;
};

// When to ask the gateway next. Pure: tested on its own.
struct RenewalSchedule {
  // After a mapping was granted for `lifetime` (0 = permanent): at half-life,
  // never sooner than a minute; a permanent one is re-asserted every 30 min
  // in case the router forgot it.
  static std::chrono::seconds after_success(std::chrono::seconds lifetime);
  // After `failures` failures in a row (1, 2, ...): 30 s, doubling, at most 30 min.
  static std::chrono::seconds after_failure(int failures);
};

// The gateway, as the mapper sees it: the seam for tests.
class GatewayBackend {
 public:
  virtual ~GatewayBackend() = default;
  virtual Result<Mapping> map(uint16_t internal_port, const MapOptions& options) = 0;
  virtual Result<Mapping> renew(const Mapping& m, const MapOptions& options) = 0;
  virtual Status unmap(const Mapping& m, const MapOptions& options) = 0;
};

// The real one: map_tcp_port, renew and unmap from port_mapping.h.
std::unique_ptr<GatewayBackend> make_gateway_backend();

class PortMapper {
 public:
  using Listener = std::function<void(const PortMapperStatus&)>;

  // Starts mapping `internal_port` (the link's listening port) at once.
  PortMapper(uint16_t internal_port, MapOptions options, Listener listener = {},
             std::unique_ptr<GatewayBackend> backend = make_gateway_backend());
  // stop().
  ~PortMapper();
  PortMapper(const PortMapper&) = delete;
  PortMapper& operator=(const PortMapper&) = delete;

  // Removes the mapping (if held) and ends the thread; waits for both, which
  // takes one gateway round trip (bounded by the options' timeouts).
  // Idempotent. Not from the listener.
  void stop();

  // Asks the gateway again now instead of at the next deadline (renews the
  // mapping, or retries after a failure): for the daemon to call when the
  // network changed. Returns at once.
  void refresh_now();

  PortMapperStatus status() const;

 private:
  void run();
  void publish(PortMapperStatus s);
  // Waits `d`, or until stop() (returns true) or refresh_now() (false).
  bool wait_or_stop(std::chrono::seconds d);

  const uint16_t internal_port_;
  const MapOptions options_;
  const Listener listener_;
  const std::unique_ptr<GatewayBackend> backend_;

  mutable std::mutex mu_;  // guards status_, stopping_ and refresh_
  std::condition_variable wake_;
  PortMapperStatus status_;
  bool stopping_ = false;
  bool refresh_ = false;
  std::thread thread_;  // last: starts after everything above is built
};

}  // namespace yonder::portmap
