#include "wire/frame.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string_view>

namespace yonder::wire {
namespace {

constexpr uint8_t kMaxType = static_cast<uint8_t>(FrameType::kGoAway);

void put_u16(Bytes& out, uint16_t v) {
  out.push_back(static_cast<uint8_t>(v >> 8));
  out.push_back(static_cast<uint8_t>(v));
}

void put_u32(Bytes& out, uint32_t v) {
  out.push_back(static_cast<uint8_t>(v >> 24));
  out.push_back(static_cast<uint8_t>(v >> 16));
  out.push_back(static_cast<uint8_t>(v >> 8));
  out.push_back(static_cast<uint8_t>(v));
}

uint32_t get_u32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

uint16_t get_u16(const uint8_t* p) { return static_cast<uint16_t>((p[0] << 8) | p[1]); }

void put_header(Bytes& out, FrameType type, uint32_t stream, size_t length) {
  out.push_back(kVersion);
  out.push_back(static_cast<uint8_t>(type));
  put_u16(out, 0);  // flags
  put_u32(out, stream);
  put_u32(out, static_cast<uint32_t>(length));
}

bool is_reason_char(uint8_t c) { return c >= 0x20 && c != 0x7f; }

// The largest payload a frame of `type` may carry; the smallest is checked
// when the payload is parsed.
size_t max_payload(FrameType type) {
  switch (type) {
    case FrameType::kData: return kMaxDataPayload;
    case FrameType::kOpen: return 2;
    case FrameType::kClose: return 0;
    case FrameType::kReset: return 4 + kMaxReasonLength;
    case FrameType::kWindowUpdate: return 4;
    case FrameType::kPing:
    case FrameType::kPong: return 8;
    case FrameType::kGoAway: return 8 + kMaxReasonLength;
  }
  return 0;
}

// Whether `type` may name `stream`: session-wide frames use 0; stream
// lifecycle frames never do (the control stream opens with the session and
// ends with it); DATA and WINDOW_UPDATE serve stream 0 like any other.
bool stream_allowed(FrameType type, uint32_t stream) {
  switch (type) {
    case FrameType::kData:
    case FrameType::kWindowUpdate: return true;
    case FrameType::kOpen:
    case FrameType::kClose:
    case FrameType::kReset: return stream != 0;
    case FrameType::kPing:
    case FrameType::kPong:
    case FrameType::kGoAway: return stream == 0;
  }
  return false;
}

void put_reason(Bytes& out, const std::string& reason) {
  std::string clean = sanitize_reason(reason);
  out.insert(out.end(), clean.begin(), clean.end());
}

Result<std::string> parse_reason(ByteView bytes) {
  for (uint8_t c : bytes) {
    if (!is_reason_char(c)) return make_error(ErrorCode::kInvalidArgument, "frame reason text holds a control character");
  }
  return std::string(bytes.begin(), bytes.end());
}

void check(bool condition) {
  if (!condition) std::abort();
}

}  // namespace

const char* frame_type_name(FrameType type) {
  switch (type) {
    case FrameType::kData: return "DATA";
    case FrameType::kOpen: return "OPEN";
    case FrameType::kClose: return "CLOSE";
    case FrameType::kReset: return "RESET";
    case FrameType::kWindowUpdate: return "WINDOW_UPDATE";
    case FrameType::kPing: return "PING";
    case FrameType::kPong: return "PONG";
    case FrameType::kGoAway: return "GOAWAY";
  }
  return "UNKNOWN";
}

FrameType frame_type(const Frame& frame) { return static_cast<FrameType>(frame.index()); }

std::string sanitize_reason(std::string_view reason) {
  std::string out(reason.substr(0, kMaxReasonLength));
  for (char& c : out) {
    if (!is_reason_char(static_cast<uint8_t>(c))) c = '?';
  }
  return out;
}

void encode_data_header(StreamId stream, size_t length, Bytes& out) {
  check(length <= kMaxDataPayload);
  put_header(out, FrameType::kData, stream.value, length);
}

void encode_data(StreamId stream, ByteView data, Bytes& out) {
  encode_data_header(stream, data.size(), out);
  out.insert(out.end(), data.begin(), data.end());
}

void encode(const Frame& frame, Bytes& out) {
  struct Encoder {
    Bytes& out;
    void operator()(const DataFrame& f) { encode_data(f.stream, f.data, out); }
    void operator()(const OpenFrame& f) {
      check(f.stream.value != 0 && f.kind != StreamKind::kControl);
      put_header(out, FrameType::kOpen, f.stream.value, 2);
      put_u16(out, static_cast<uint16_t>(f.kind));
    }
    void operator()(const CloseFrame& f) {
      check(f.stream.value != 0);
      put_header(out, FrameType::kClose, f.stream.value, 0);
    }
    void operator()(const ResetFrame& f) {
      check(f.stream.value != 0);
      size_t reason_len = std::min(f.reason.size(), kMaxReasonLength);
      put_header(out, FrameType::kReset, f.stream.value, 4 + reason_len);
      put_u32(out, static_cast<uint32_t>(f.code));
      put_reason(out, f.reason);
    }
    void operator()(const WindowUpdateFrame& f) {
      check(f.increment != 0);
      put_header(out, FrameType::kWindowUpdate, f.stream.value, 4);
      put_u32(out, f.increment);
    }
    void operator()(const PingFrame& f) {
      put_header(out, FrameType::kPing, 0, 8);
      out.insert(out.end(), f.opaque.begin(), f.opaque.end());
    }
    void operator()(const PongFrame& f) {
      put_header(out, FrameType::kPong, 0, 8);
      out.insert(out.end(), f.opaque.begin(), f.opaque.end());
    }
    void operator()(const GoAwayFrame& f) {
      size_t reason_len = std::min(f.reason.size(), kMaxReasonLength);
      put_header(out, FrameType::kGoAway, 0, 8 + reason_len);
      put_u32(out, f.last_stream.value);
      put_u32(out, static_cast<uint32_t>(f.code));
      put_reason(out, f.reason);
    }
  };
  std::visit(Encoder{out}, frame);
}

Result<std::optional<Frame>> FrameDecoder::fail(ErrorCode code, std::string message) {
  failed_ = make_error(code, std::move(message) + " (at byte " + std::to_string(offset_) + " of the link)");
  return *failed_;
}

Status FrameDecoder::check_header() {
  const uint8_t* h = header_.data();
  if (h[0] != kVersion) {
    return make_error(ErrorCode::kInvalidArgument, "peer speaks link frame version " + std::to_string(h[0]) +
                                                       ", this node speaks " + std::to_string(kVersion) +
                                                       "; update the older side");
  }
  if (h[1] > kMaxType) return make_error(ErrorCode::kInvalidArgument, "unknown frame type " + std::to_string(h[1]));
  type_ = static_cast<FrameType>(h[1]);
  if (get_u16(h + 2) != 0) {
    return make_error(ErrorCode::kInvalidArgument,
                      std::string(frame_type_name(type_)) + " frame has reserved flags set");
  }
  stream_ = get_u32(h + 4);
  length_ = get_u32(h + 8);
  if (!stream_allowed(type_, stream_)) {
    return make_error(ErrorCode::kInvalidArgument, std::string(frame_type_name(type_)) +
                                                       " frame not allowed on stream " + std::to_string(stream_));
  }
  if (length_ > max_payload(type_)) {
    return make_error(ErrorCode::kResourceExhausted, std::string(frame_type_name(type_)) + " frame of " +
                                                         std::to_string(length_) + " bytes exceeds its bound of " +
                                                         std::to_string(max_payload(type_)));
  }
  return ok_status();
}

Result<Frame> FrameDecoder::parse_payload(Bytes payload) const {
  StreamId stream{stream_};
  const uint8_t* p = payload.data();
  auto too_short = [&]() {
    return make_error(ErrorCode::kInvalidArgument, std::string(frame_type_name(type_)) + " frame payload of " +
                                                       std::to_string(payload.size()) + " bytes is too short");
  };
  switch (type_) {
    case FrameType::kData: return Frame{DataFrame{stream, std::move(payload)}};
    case FrameType::kOpen: {
      if (payload.size() != 2) return too_short();
      auto kind = static_cast<StreamKind>(get_u16(p));
      if (kind == StreamKind::kControl) {
        return make_error(ErrorCode::kInvalidArgument, "OPEN of a second control stream");
      }
      return Frame{OpenFrame{stream, kind}};
    }
    case FrameType::kClose: return Frame{CloseFrame{stream}};
    case FrameType::kReset: {
      if (payload.size() < 4) return too_short();
      auto reason = parse_reason(ByteView(payload).subspan(4));
      if (!reason) return std::move(reason).error();
      return Frame{ResetFrame{stream, static_cast<ResetCode>(get_u32(p)), std::move(*reason)}};
    }
    case FrameType::kWindowUpdate: {
      if (payload.size() != 4) return too_short();
      uint32_t increment = get_u32(p);
      if (increment == 0) return make_error(ErrorCode::kInvalidArgument, "WINDOW_UPDATE with zero increment");
      return Frame{WindowUpdateFrame{stream, increment}};
    }
    case FrameType::kPing:
    case FrameType::kPong: {
      if (payload.size() != 8) return too_short();
      PingPayload opaque{};
      std::memcpy(opaque.data(), p, 8);
      if (type_ == FrameType::kPing) return Frame{PingFrame{opaque}};
      return Frame{PongFrame{opaque}};
    }
    case FrameType::kGoAway: {
      if (payload.size() < 8) return too_short();
      auto reason = parse_reason(ByteView(payload).subspan(8));
      if (!reason) return std::move(reason).error();
      return Frame{GoAwayFrame{StreamId{get_u32(p)}, static_cast<ResetCode>(get_u32(p + 4)), std::move(*reason)}};
    }
  }
  return make_error(ErrorCode::kInternal, "unreachable frame type");
}

Result<std::optional<Frame>> FrameDecoder::next(ByteView& in) {
  if (failed_) return *failed_;
  if (header_len_ < kHeaderSize) {
    size_t n = std::min(kHeaderSize - header_len_, in.size());
    std::memcpy(header_.data() + header_len_, in.data(), n);
    header_len_ += n;
    in = in.subspan(n);
    offset_ += n;
    if (header_len_ < kHeaderSize) return std::optional<Frame>();
    if (auto s = check_header(); !s) {
      offset_ -= kHeaderSize;  // point the message at the frame's first byte
      return fail(s.error().code(), s.error().message());
    }
    payload_.clear();
  }
  size_t want = length_ - payload_.size();
  if (payload_.empty() && in.size() >= want) {
    // The common case: the whole payload is at hand, one copy and no growth.
    payload_.assign(in.begin(), in.begin() + static_cast<std::ptrdiff_t>(want));
  } else {
    size_t n = std::min(want, in.size());
    if (payload_.capacity() < length_) payload_.reserve(length_);  // bounded by check_header
    payload_.insert(payload_.end(), in.begin(), in.begin() + static_cast<std::ptrdiff_t>(n));
    if (n < want) {
      in = in.subspan(n);
      offset_ += n;
      return std::optional<Frame>();
    }
  }
  in = in.subspan(want);
  offset_ += want;
  header_len_ = 0;
  auto frame = parse_payload(std::move(payload_));
  payload_ = Bytes();
  if (!frame) {
    offset_ -= kHeaderSize + length_;
    return fail(frame.error().code(), frame.error().message());
  }
  return std::optional<Frame>(std::move(*frame));
}

}  // namespace yonder::wire
