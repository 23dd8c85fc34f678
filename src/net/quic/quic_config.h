// Settings of the QUIC carrier (net/quic): timeouts, keepalive and the
// test-only loss knob. Plain values, no ngtcp2 types.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>

namespace yonder::quic {

using MonoTime = std::chrono::steady_clock::time_point;

struct QuicConfig {
  // How long connect() waits for a confirmed handshake before it gives up
  // ("the path is blocked").
  std::chrono::milliseconds connect_timeout{10'000};
  // A PING goes out when nothing was sent for this long, so NATs keep the
  // mapping and a dead path is noticed.
  std::chrono::milliseconds keepalive{15'000};
  // The connection dies after this long without a packet from the peer
  // (QUIC max_idle_timeout; the smaller of both ends' values applies).
  std::chrono::milliseconds idle_timeout{60'000};
  // Receive windows: what the peer may send before we read it. The
  // connection's window grows up to the max values as ngtcp2 auto-tunes it.
  uint64_t stream_window = 4 * 1024 * 1024;
  uint64_t max_stream_window = 16 * 1024 * 1024;
  uint64_t connection_window = 8 * 1024 * 1024;
  uint64_t max_connection_window = 24 * 1024 * 1024;
  // Send with UDP GSO (UDP_SEGMENT) and receive with UDP GRO when the kernel
  // offers them: one system call per run of packets instead of per packet.
  bool gso = true;
  // Tests only: drop every Nth QUIC datagram this endpoint receives (0: none).
  uint32_t drop_every_nth_received = 0;
};

}  // namespace yonder::quic
