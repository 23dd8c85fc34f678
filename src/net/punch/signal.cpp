#include "net/punch/signal.h"

#include <cstdlib>
#include <cstring>
#include <string>

namespace yonder::punch {
namespace {

constexpr uint8_t kMagic[3] = {'Y', 'P', 'S'};
constexpr uint8_t kVersion = 2;      // written; 1 (no flags byte) is still read
constexpr uint8_t kOldestVersion = 1;
constexpr uint8_t kFlagBirthday = 0x01;
enum : uint8_t { kTypeOffer = 1, kTypeAnswer = 2, kTypeGo = 3 };

Error malformed(const std::string& what) {
  return make_error(ErrorCode::kInvalidArgument,
                    "a malformed hole-punching signal from the peer (" + what +
                        "); the link stays on the relay. If it repeats, the peer may run an incompatible version");
}

void signal_put_header(Bytes& out, uint8_t type, uint64_t session) {
  out.insert(out.end(), kMagic, kMagic + 3);
  out.push_back(kVersion);
  out.push_back(type);
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(session >> (56 - 8 * i)));
}

template <typename M>
void put_body(Bytes& out, const M& m) {
  if (m.candidates.size() > kMaxCandidates || m.attempt == 0 || m.attempt > m.attempts ||
      m.attempts > kMaxAttemptNumber) {
    std::abort();
  }
  out.push_back(m.attempt);
  out.push_back(m.attempts);
  out.push_back(static_cast<uint8_t>(m.nat));
  out.push_back(m.birthday ? kFlagBirthday : 0);
  out.push_back(static_cast<uint8_t>(m.candidates.size()));
  for (const auto& c : m.candidates) {
    out.push_back(static_cast<uint8_t>(c.kind));
    auto ip = c.address.address();
    if (ip.is_v4()) {
      out.push_back(4);
      auto b = ip.to_v4().to_bytes();
      out.insert(out.end(), b.begin(), b.end());
    } else {
      out.push_back(6);
      auto b = ip.to_v6().to_bytes();
      out.insert(out.end(), b.begin(), b.end());
    }
    out.push_back(static_cast<uint8_t>(c.address.port() >> 8));
    out.push_back(static_cast<uint8_t>(c.address.port()));
  }
}

// A bounded reader: every take checks what is left.
class Reader {
 public:
  explicit Reader(ByteView b) : b_(b) {}
  bool take(size_t n, const uint8_t** out) {
    if (b_.size() - at_ < n) return false;
    *out = b_.data() + at_;
    at_ += n;
    return true;
  }
  bool byte(uint8_t* out) {
    const uint8_t* p = nullptr;
    if (!take(1, &p)) return false;
    *out = *p;
    return true;
  }
  bool done() const { return at_ == b_.size(); }

 private:
  ByteView b_;
  size_t at_ = 0;
};

template <typename M>
Result<M> read_body(Reader& r, uint64_t session, uint8_t version) {
  M m;
  m.session = session;
  uint8_t nat = 0, flags = 0, count = 0;
  if (!r.byte(&m.attempt) || !r.byte(&m.attempts) || !r.byte(&nat)) return malformed("cut short");
  // Unknown flag bits are capabilities of a newer peer: ignored.
  if (version >= 2 && !r.byte(&flags)) return malformed("cut short");
  if (!r.byte(&count)) return malformed("cut short");
  m.birthday = (flags & kFlagBirthday) != 0;
  if (m.attempt == 0 || m.attempt > m.attempts || m.attempts > kMaxAttemptNumber) {
    return malformed("attempt out of range");
  }
  if (nat > static_cast<uint8_t>(NatKind::kSymmetric)) return malformed("unknown NAT kind");
  m.nat = static_cast<NatKind>(nat);
  if (count > kMaxCandidates) return malformed("more than " + std::to_string(kMaxCandidates) + " candidates");
  for (uint8_t i = 0; i < count; ++i) {
    uint8_t kind = 0, family = 0;
    if (!r.byte(&kind) || !r.byte(&family)) return malformed("cut short in a candidate");
    if (kind != static_cast<uint8_t>(CandidateKind::kHost) &&
        kind != static_cast<uint8_t>(CandidateKind::kServerReflexive)) {
      return malformed("unknown candidate kind");
    }
    boost::asio::ip::address ip;
    const uint8_t* p = nullptr;
    if (family == 4) {
      if (!r.take(4, &p)) return malformed("cut short in an address");
      boost::asio::ip::address_v4::bytes_type a{};
      std::memcpy(a.data(), p, 4);
      ip = boost::asio::ip::address_v4(a);
    } else if (family == 6) {
      if (!r.take(16, &p)) return malformed("cut short in an address");
      boost::asio::ip::address_v6::bytes_type a{};
      std::memcpy(a.data(), p, 16);
      ip = boost::asio::ip::address_v6(a);
    } else {
      return malformed("unknown address family");
    }
    if (ip.is_unspecified() || ip.is_multicast() ||
        (ip.is_v4() && ip.to_v4() == boost::asio::ip::address_v4::broadcast())) {
      return malformed("a candidate address nobody can be reached at");
    }
    if (!r.take(2, &p)) return malformed("cut short in a port");
    uint16_t port = static_cast<uint16_t>((p[0] << 8) | p[1]);
    if (port == 0) return malformed("candidate port 0");
    m.candidates.push_back(Candidate{udp::endpoint(ip, port), static_cast<CandidateKind>(kind)});
  }
  return m;
}

}  // namespace

bool is_punch_signal(ByteView b) {
  return b.size() >= 4 && std::memcmp(b.data(), kMagic, 3) == 0;
}

Bytes encode_punch_signal(const PunchSignal& signal) {
  Bytes out;
  out.reserve(kMaxPunchSignalBytes);
  if (auto* o = std::get_if<Offer>(&signal)) {
    signal_put_header(out, kTypeOffer, o->session);
    put_body(out, *o);
  } else if (auto* a = std::get_if<Answer>(&signal)) {
    signal_put_header(out, kTypeAnswer, a->session);
    put_body(out, *a);
  } else {
    signal_put_header(out, kTypeGo, std::get<Go>(signal).session);
  }
  return out;
}

Result<PunchSignal> decode_punch_signal(ByteView bytes) {
  if (bytes.size() > kMaxPunchSignalBytes) return malformed("too long");
  if (!is_punch_signal(bytes)) return malformed("not a punch signal");
  uint8_t version = bytes[3];
  if (version < kOldestVersion || version > kVersion) {
    return make_error(ErrorCode::kFailedPrecondition,
                      "the peer speaks hole-punching version " + std::to_string(version) + ", this node versions " +
                          std::to_string(kOldestVersion) + " to " + std::to_string(kVersion) +
                          ": the link stays on the relay; update the older side");
  }
  Reader r(bytes);
  const uint8_t* head = nullptr;
  if (!r.take(13, &head)) return malformed("cut short");
  uint64_t session = 0;
  for (int i = 0; i < 8; ++i) session = (session << 8) | head[5 + i];
  PunchSignal out;
  switch (head[4]) {
    case kTypeOffer: {
      auto m = read_body<Offer>(r, session, version);
      if (!m) return std::move(m).error();
      out = std::move(*m);
      break;
    }
    case kTypeAnswer: {
      auto m = read_body<Answer>(r, session, version);
      if (!m) return std::move(m).error();
      out = std::move(*m);
      break;
    }
    case kTypeGo: out = Go{session}; break;
    default: return malformed("unknown message type");
  }
  if (!r.done()) return malformed("trailing bytes");
  return out;
}

const char* nat_kind_name(NatKind nat) {
  switch (nat) {
    case NatKind::kPunchable: return "punchable";
    case NatKind::kSymmetric: return "symmetric";
    case NatKind::kUnknown: break;
  }
  return "unknown";
}

const char* candidate_kind_name(CandidateKind kind) {
  return kind == CandidateKind::kServerReflexive ? "srflx" : "host";
}

}  // namespace yonder::punch
