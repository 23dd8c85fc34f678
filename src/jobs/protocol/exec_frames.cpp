#include "jobs/protocol/exec_frames.h"

namespace yonder::jobs::protocol {
namespace {

void put_u32(std::string& out, uint32_t v) {
  for (int i = 3; i >= 0; --i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

uint32_t get_u32(std::string_view s) {
  uint32_t v = 0;
  for (size_t i = 0; i < 4; ++i) v = (v << 8) | static_cast<uint8_t>(s[i]);
  return v;
}

}  // namespace

std::string encode_exec_frame(ExecFrameType type, std::string_view payload) {
  std::string out;
  out.reserve(5 + payload.size());
  out.push_back(static_cast<char>(type));
  put_u32(out, static_cast<uint32_t>(payload.size()));
  out.append(payload);
  return out;
}

std::string encode_resize(int rows, int cols) {
  std::string p;
  p.push_back(static_cast<char>((rows >> 8) & 0xff));
  p.push_back(static_cast<char>(rows & 0xff));
  p.push_back(static_cast<char>((cols >> 8) & 0xff));
  p.push_back(static_cast<char>(cols & 0xff));
  return encode_exec_frame(ExecFrameType::kResize, p);
}

std::string encode_exit(int code) {
  std::string p;
  put_u32(p, static_cast<uint32_t>(code));
  return encode_exec_frame(ExecFrameType::kExit, p);
}

Result<std::pair<int, int>> decode_resize(std::string_view p) {
  if (p.size() != 4) return make_error(ErrorCode::kInvalidArgument, "malformed resize frame");
  int rows = (static_cast<uint8_t>(p[0]) << 8) | static_cast<uint8_t>(p[1]);
  int cols = (static_cast<uint8_t>(p[2]) << 8) | static_cast<uint8_t>(p[3]);
  return std::make_pair(rows, cols);
}

Result<int> decode_exit(std::string_view p) {
  if (p.size() != 4) return make_error(ErrorCode::kInvalidArgument, "malformed exit frame");
  return static_cast<int>(static_cast<int32_t>(get_u32(p)));
}

Result<std::optional<ExecFrame>> ExecFrameReader::next() {
  if (buffer_.size() < 5) return std::optional<ExecFrame>();
  auto type = static_cast<uint8_t>(buffer_[0]);
  if (type > static_cast<uint8_t>(ExecFrameType::kStdinEof)) {
    return make_error(ErrorCode::kInvalidArgument, "unknown exec frame type " + std::to_string(type));
  }
  uint32_t len = get_u32(std::string_view(buffer_).substr(1, 4));
  if (len > kMaxFramePayload) return make_error(ErrorCode::kInvalidArgument, "exec frame too large");
  if (buffer_.size() < 5 + len) return std::optional<ExecFrame>();
  ExecFrame f{static_cast<ExecFrameType>(type), buffer_.substr(5, len)};
  buffer_.erase(0, 5 + len);
  return std::optional<ExecFrame>(std::move(f));
}

}  // namespace yonder::jobs::protocol
