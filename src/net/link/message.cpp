#include "net/link/message.h"

namespace yonder::link {

Bytes encode_message(const nlohmann::json& message) {
  std::string body = message.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (body.size() > kMaxMessageBytes) std::abort();  // our own messages are small by construction
  Bytes out;
  out.reserve(4 + body.size());
  uint32_t n = static_cast<uint32_t>(body.size());
  for (int i = 3; i >= 0; --i) out.push_back(static_cast<uint8_t>(n >> (8 * i)));
  out.insert(out.end(), body.begin(), body.end());
  return out;
}

void MessageReader::feed(ByteView in) {
  if (failed_) return;
  buffer_.insert(buffer_.end(), in.begin(), in.end());
}

Result<std::optional<nlohmann::json>> MessageReader::next() {
  if (failed_) return *failed_;
  if (buffer_.size() < 4) return std::optional<nlohmann::json>();
  uint32_t n = (uint32_t{buffer_[0]} << 24) | (uint32_t{buffer_[1]} << 16) | (uint32_t{buffer_[2]} << 8) | buffer_[3];
  if (n > kMaxMessageBytes) {
    failed_ = make_error(ErrorCode::kResourceExhausted,
                         "peer sent a " + std::to_string(n) + "-byte message; the limit is " +
                             std::to_string(kMaxMessageBytes));
    return *failed_;
  }
  if (buffer_.size() < 4 + size_t{n}) {
    // Bounded: never more than one message plus what arrived with it.
    if (buffer_.size() > 2 * kMaxMessageBytes) {
      failed_ = make_error(ErrorCode::kResourceExhausted, "peer sent too much without completing a message");
      return *failed_;
    }
    return std::optional<nlohmann::json>();
  }
  auto j = nlohmann::json::parse(buffer_.begin() + 4, buffer_.begin() + 4 + n, nullptr, false);
  buffer_.erase(buffer_.begin(), buffer_.begin() + 4 + n);
  if (j.is_discarded() || !j.is_object()) {
    failed_ = make_error(ErrorCode::kInvalidArgument, "peer sent a message that is not a JSON object");
    return *failed_;
  }
  return std::optional<nlohmann::json>(std::move(j));
}

}  // namespace yonder::link
