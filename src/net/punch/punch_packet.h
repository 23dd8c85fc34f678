// Punch probes and acks: the datagrams two peers throw at each other's
// candidate addresses to open their NATs (puncher.h has the exchange).
//
//   byte 0      kPunchFirstByte (0x0b): bit 0x40 clear, so never QUIC, and
//               not 0x00-0x03, so never STUN (RFC 7983 leaves 4-15 unused)
//   bytes 1-3   "YPK"
//   byte 4      version (1)
//   byte 5      type: 1 probe, 2 ack
//   bytes 6-13  session id (big endian), random, known only to the two
//               peers (it travelled in the relay signals): stray and spoofed
//               packets without it are dropped
//   bytes 14-21 the sender's tag: SHA-256("yonder punch tag" | session | the
//               sender's public key), first 8 bytes; tells the two sides
//               apart, so a packet reflected back at its sender is not taken
//               for the peer's
//   bytes 22-23 sequence number: a probe's own, or the probe an ack answers
//
// Exactly kPunchPacketBytes long; anything else is not a punch packet.
#pragma once

#include <array>
#include <cstdint>
#include <optional>

#include "base/bytes.h"
#include "crypto/node_id.h"

namespace yonder::punch {

constexpr uint8_t kPunchFirstByte = 0x0b;
constexpr size_t kPunchPacketBytes = 24;

using PunchTag = std::array<uint8_t, 8>;

enum class PunchType : uint8_t { kProbe = 1, kAck = 2 };

struct PunchPacket {
  PunchType type = PunchType::kProbe;
  uint64_t session = 0;
  PunchTag sender{};
  uint16_t seq = 0;
};

Bytes encode_punch_packet(const PunchPacket& p);
// Untrusted input: exactly kPunchPacketBytes with our magic and version, or nothing.
std::optional<PunchPacket> decode_punch_packet(ByteView datagram);

PunchTag punch_tag(uint64_t session, const PublicKeyBytes& sender_key);

// What a datagram arriving on the shared UDP socket is (datagram_port.h).
enum class DatagramKind { kStun, kPunch, kQuic, kOther };
DatagramKind classify_datagram(ByteView datagram);

}  // namespace yonder::punch
