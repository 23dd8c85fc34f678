// What the consumer's daemon holds of one job's log as its provider pushes
// it (run.logs.follow), and what a follower's poll at an offset gets from
// it. Pure: no I/O, no clock, no threads; log_feeds.h drives it.
//
// The provider pushes the same replies run.logs answers ({"records",
// "next_offset", "ended"}), each starting where the one before ended. The
// core keeps them in order, keyed by the offset each starts at, so a poll at
// any reply boundary it holds is answered at once, a poll at the end waits
// for the next push, and anything else (behind what is kept, inside a reply,
// ahead of the feed) is for run.logs to answer: the provider's log on disk
// stays the record, and resuming by offset is never lost.
//
// Untrusted input: a push that is not such a reply, or that does not carry
// on from the last one, is refused (the feed is then dropped and polls go
// back to run.logs). What is kept is bounded: past max_bytes, replies every
// poll has read are dropped, and past twice that the oldest go regardless;
// while the unread part exceeds max_bytes the feed asks to stop reading
// (back-pressure to the provider).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <nlohmann/json.hpp>

#include "base/error.h"

namespace yonder::jobs::consumer {

class LogFeedCore {
 public:
  LogFeedCore(uint64_t start, size_t max_bytes) : base_(start), end_(start), read_(start), max_bytes_(max_bytes) {}

  // A pushed reply; `bytes` is its size on the wire (what it costs to keep).
  Status push(const nlohmann::json& reply, size_t bytes);

  enum class Verdict {
    kAnswer,  // *reply is the answer
    kWait,    // at the end of an open feed: wait for the next push
    kElsewhere,  // not held here: ask the provider (run.logs)
  };
  struct Poll {
    Verdict verdict = Verdict::kElsewhere;
    nlohmann::json reply;
  };
  // What a poll at `offset` gets now. An answer counts as read up to its end.
  Poll poll(uint64_t offset);

  // The provider's last push said the job ended: polls at the end are
  // answered with that, not made to wait.
  bool ended() const { return ended_; }
  uint64_t base() const { return base_; }
  uint64_t end() const { return end_; }
  size_t held_bytes() const { return held_; }
  // More than max_bytes pushed and not yet read by any poll: stop reading
  // the stream until a poll reads some.
  bool full() const { return unread_bytes() > max_bytes_; }

 private:
  struct Chunk {
    uint64_t offset;
    uint64_t next;
    size_t bytes;
    nlohmann::json reply;
  };
  size_t unread_bytes() const;
  void trim();

  std::deque<Chunk> chunks_;
  uint64_t base_;  // where the first kept chunk starts (end_ when none is kept)
  uint64_t end_;   // where the next push must start
  uint64_t read_;  // the furthest end a poll was answered up to
  size_t held_ = 0;
  size_t max_bytes_;
  bool ended_ = false;
};

}  // namespace yonder::jobs::consumer
