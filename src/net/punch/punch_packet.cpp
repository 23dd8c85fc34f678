#include "net/punch/punch_packet.h"

#include <openssl/sha.h>

#include <cstring>

#include "net/punch/stun.h"

namespace yonder::punch {
namespace {

constexpr uint8_t kPunchPacketMagic[3] = {'Y', 'P', 'K'};
constexpr uint8_t kPunchPacketVersion = 1;

}  // namespace

Bytes encode_punch_packet(const PunchPacket& p) {
  Bytes out(kPunchPacketBytes, 0);
  out[0] = kPunchFirstByte;
  std::memcpy(&out[1], kPunchPacketMagic, 3);
  out[4] = kPunchPacketVersion;
  out[5] = static_cast<uint8_t>(p.type);
  for (int i = 0; i < 8; ++i) out[6 + i] = static_cast<uint8_t>(p.session >> (56 - 8 * i));
  std::memcpy(&out[14], p.sender.data(), 8);
  out[22] = static_cast<uint8_t>(p.seq >> 8);
  out[23] = static_cast<uint8_t>(p.seq);
  return out;
}

std::optional<PunchPacket> decode_punch_packet(ByteView d) {
  if (d.size() != kPunchPacketBytes || d[0] != kPunchFirstByte || std::memcmp(&d[1], kPunchPacketMagic, 3) != 0 ||
      d[4] != kPunchPacketVersion) {
    return std::nullopt;
  }
  if (d[5] != static_cast<uint8_t>(PunchType::kProbe) && d[5] != static_cast<uint8_t>(PunchType::kAck)) {
    return std::nullopt;
  }
  PunchPacket p;
  p.type = static_cast<PunchType>(d[5]);
  for (int i = 0; i < 8; ++i) p.session = (p.session << 8) | d[6 + i];
  std::memcpy(p.sender.data(), &d[14], 8);
  p.seq = static_cast<uint16_t>((d[22] << 8) | d[23]);
  return p;
}

PunchTag punch_tag(uint64_t session, const PublicKeyBytes& sender_key) {
  static constexpr char kLabel[] = "yonder punch tag";
  uint8_t input[sizeof(kLabel) - 1 + 8 + 32];
  std::memcpy(input, kLabel, sizeof(kLabel) - 1);
  for (int i = 0; i < 8; ++i) input[sizeof(kLabel) - 1 + i] = static_cast<uint8_t>(session >> (56 - 8 * i));
  std::memcpy(input + sizeof(kLabel) - 1 + 8, sender_key.data(), 32);
  uint8_t digest[SHA256_DIGEST_LENGTH];
  SHA256(input, sizeof(input), digest);
  PunchTag tag{};
  std::memcpy(tag.data(), digest, tag.size());
  return tag;
}

DatagramKind classify_datagram(ByteView d) {
  if (d.empty()) return DatagramKind::kOther;
  if (d[0] & 0x40) return DatagramKind::kQuic;
  if (looks_like_stun(d)) return DatagramKind::kStun;
  if (decode_punch_packet(d)) return DatagramKind::kPunch;
  return DatagramKind::kOther;
}

}  // namespace yonder::punch
