#include "jobs/consumer/log_feed_core.h"

#include <string>

namespace yonder::jobs::consumer {

Status LogFeedCore::push(const nlohmann::json& reply, size_t bytes) {
  if (ended_) return make_error(ErrorCode::kInvalidArgument, "the provider pushed log records after the job's end");
  if (!reply.is_object() || !reply.contains("records") || !reply["records"].is_array() ||
      !reply.contains("next_offset") || !reply["next_offset"].is_number_unsigned() ||
      (reply.contains("ended") && !reply["ended"].is_boolean())) {
    return make_error(ErrorCode::kInvalidArgument,
                      "the provider pushed a log reply without records, next_offset or a boolean ended");
  }
  uint64_t next = reply["next_offset"].get<uint64_t>();
  bool ended = reply.value("ended", false);
  bool empty = reply["records"].empty();
  if (next < end_ || (next == end_) != empty) {
    return make_error(ErrorCode::kInvalidArgument, "the provider pushed log records that do not follow offset " +
                                                       std::to_string(end_) + " (next_offset " +
                                                       std::to_string(next) + ")");
  }
  ended_ = ended;
  if (empty) return ok_status();  // only the end, which poll() answers from ended_
  chunks_.push_back(Chunk{end_, next, bytes, reply});
  held_ += bytes;
  end_ = next;
  trim();
  return ok_status();
}

LogFeedCore::Poll LogFeedCore::poll(uint64_t offset) {
  Poll p;
  if (offset == end_) {
    if (!ended_) {
      p.verdict = Verdict::kWait;
      return p;
    }
    p.verdict = Verdict::kAnswer;
    p.reply = {{"records", nlohmann::json::array()}, {"next_offset", end_}, {"ended", true}};
    return p;
  }
  for (const Chunk& c : chunks_) {
    if (c.offset != offset) continue;
    p.verdict = Verdict::kAnswer;
    p.reply = c.reply;
    if (c.next > read_) read_ = c.next;
    trim();
    return p;
  }
  return p;  // kElsewhere
}

size_t LogFeedCore::unread_bytes() const {
  size_t n = 0;
  for (const Chunk& c : chunks_) {
    if (c.next > read_) n += c.bytes;
  }
  return n;
}

void LogFeedCore::trim() {
  while (!chunks_.empty() && held_ > max_bytes_ && (chunks_.front().next <= read_ || held_ > 2 * max_bytes_)) {
    held_ -= chunks_.front().bytes;
    chunks_.pop_front();
  }
  base_ = chunks_.empty() ? end_ : chunks_.front().offset;
}

}  // namespace yonder::jobs::consumer
