#include "relay/metrics.h"

namespace yonder::relay {
namespace {

void metric(std::string& out, const char* name, const char* type, const char* help, uint64_t value) {
  out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n" + name + " " +
         std::to_string(value) + "\n";
}

}  // namespace

std::string render_prometheus(const Metrics& m, const Gauges& g) {
  std::string out;
  metric(out, "yonder_relay_connections", "gauge", "Open TCP connections (control, probe and pipe ends).",
         g.connections);
  metric(out, "yonder_relay_nodes", "gauge", "Distinct node keys with a live registration.", g.nodes);
  metric(out, "yonder_relay_registrations", "gauge", "Live registered control connections.", g.registrations);
  metric(out, "yonder_relay_pipes", "gauge", "Pipes matched or joined.", g.pipes);
  metric(out, "yonder_relay_pipe_requests_pending", "gauge", "Pipe requests waiting for the other node.",
         g.pending_pipe_requests);
  metric(out, "yonder_relay_connections_total", "counter", "TCP connections accepted.", m.connections_total);
  metric(out, "yonder_relay_registrations_total", "counter", "Successful registrations.", m.registrations_total);
  metric(out, "yonder_relay_signals_total", "counter", "Signalling messages delivered.", m.signals_total);
  metric(out, "yonder_relay_signal_bytes_total", "counter", "Payload bytes of delivered signals.",
         m.signal_bytes_total);
  metric(out, "yonder_relay_pipe_requests_total", "counter", "Pipe requests received.", m.pipe_requests_total);
  metric(out, "yonder_relay_pipes_total", "counter", "Pipes joined (both ends connected).", m.pipes_total);
  metric(out, "yonder_relay_bytes_relayed_total", "counter", "Bytes copied between pipe ends, both directions.",
         m.bytes_relayed_total);
  metric(out, "yonder_relay_throttled_total", "counter",
         "Times a pipe direction waited for its node's bandwidth budget.", m.throttled_total);
  metric(out, "yonder_relay_stun_answered_total", "counter", "STUN Binding requests answered over UDP.",
         m.stun_answered_total);
  metric(out, "yonder_relay_stun_ignored_total", "counter", "UDP datagrams ignored (not a STUN Binding request).",
         m.stun_ignored_total);
  metric(out, "yonder_relay_stun_rate_limited_total", "counter",
         "STUN Binding requests dropped because the answer budget was spent.", m.stun_rate_limited_total);
  out +=
      "# HELP yonder_relay_refusals_total Requests and connections refused or closed, by reason.\n"
      "# TYPE yonder_relay_refusals_total counter\n";
  for (int i = 0; i < kReasonCount; ++i) {
    out += std::string("yonder_relay_refusals_total{reason=\"") + reason_name(static_cast<Reason>(i)) + "\"} " +
           std::to_string(m.refusals[static_cast<size_t>(i)]) + "\n";
  }
  return out;
}

}  // namespace yonder::relay
