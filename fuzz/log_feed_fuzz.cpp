// Fuzzes what a hostile provider can push on a job's log stream
// (run.logs.follow): length-prefixed JSON messages, each pushed into the
// consumer's LogFeedCore, with polls between them at offsets the input
// chooses. The core must refuse what does not follow on, keep what it holds
// bounded, and answer a poll only with a reply that starts where it asked.
#include <cstdint>

#include "jobs/consumer/log_feed_core.h"
#include "net/link/message.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const size_t max = 1024u * (1 + data[0] % 8);
  yonder::jobs::consumer::LogFeedCore core(data[1], max);
  yonder::link::MessageReader reader;
  reader.feed(yonder::ByteView(data + 2, size - 2));
  uint64_t poll_at = data[1];
  for (;;) {
    size_t before = reader.buffered();
    auto msg = reader.next();
    if (!msg.ok() || !*msg) break;
    (void)core.push(**msg, before - reader.buffered());
    if (core.held_bytes() > 2 * max + yonder::link::kMaxMessageBytes + 4) __builtin_trap();
    auto p = core.poll(poll_at);
    if (p.verdict == yonder::jobs::consumer::LogFeedCore::Verdict::kAnswer) {
      if (!p.reply.is_object() || !p.reply["next_offset"].is_number_unsigned()) __builtin_trap();
      uint64_t next = p.reply["next_offset"].get<uint64_t>();
      if (next < poll_at || (next == poll_at && !p.reply.value("ended", false))) __builtin_trap();
      poll_at = next;
    }
  }
  return 0;
}
