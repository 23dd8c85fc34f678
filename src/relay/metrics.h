// The relay's counters and their Prometheus text exposition (format 0.0.4:
// https://prometheus.io/docs/instrumenting/exposition_formats/). Counters
// only grow; gauges are read from the live state when the page is rendered.
// Event-loop thread only.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "relay/refusal.h"

namespace yonder::relay {

struct Metrics {
  uint64_t connections_total = 0;    // TCP connections accepted
  uint64_t registrations_total = 0;  // successful registrations (probes included)
  uint64_t signals_total = 0;        // signals delivered
  uint64_t signal_bytes_total = 0;
  uint64_t pipe_requests_total = 0;
  uint64_t pipes_total = 0;          // pipes joined (both ends connected)
  uint64_t bytes_relayed_total = 0;  // bytes copied between pipe ends, both directions
  uint64_t throttled_total = 0;      // times a pipe direction waited for its node's bandwidth budget
  uint64_t stun_answered_total = 0;      // STUN Binding requests answered over UDP
  uint64_t stun_ignored_total = 0;       // UDP datagrams that were no Binding request
  uint64_t stun_rate_limited_total = 0;  // Binding requests dropped over the answer budget
  std::array<uint64_t, kReasonCount> refusals{};

  void refused(Reason r) { ++refusals[static_cast<size_t>(r)]; }
  uint64_t refusals_of(Reason r) const { return refusals[static_cast<size_t>(r)]; }
};

struct Gauges {
  uint64_t connections = 0;    // open TCP connections
  uint64_t nodes = 0;          // distinct keys with a live registration
  uint64_t registrations = 0;  // live control connections that registered
  uint64_t pipes = 0;          // matched or joined pipes
  uint64_t pending_pipe_requests = 0;
};

std::string render_prometheus(const Metrics& m, const Gauges& g);

}  // namespace yonder::relay
