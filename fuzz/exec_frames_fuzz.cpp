// Fuzzes the exec session's frame reader (jobs/protocol/exec_frames.h: frames from the
// provider, and from the CLI through the relay), fed in the chunk sizes the
// first input byte chooses.
#include <cstdint>
#include <string_view>

#include "jobs/protocol/exec_frames.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  size_t chunk = 1 + data[0] % 64;
  yonder::jobs::protocol::ExecFrameReader reader;
  for (size_t off = 1; off < size; off += chunk) {
    size_t n = std::min(chunk, size - off);
    reader.feed(std::string_view(reinterpret_cast<const char*>(data + off), n));
    for (;;) {
      auto f = reader.next();
      if (!f.ok()) return 0;  // the stream is broken from here
      if (!*f) break;
      if ((*f)->payload.size() > yonder::jobs::protocol::kMaxFramePayload) __builtin_trap();
      if ((*f)->type == yonder::jobs::protocol::ExecFrameType::kResize) (void)yonder::jobs::protocol::decode_resize((*f)->payload);
      if ((*f)->type == yonder::jobs::protocol::ExecFrameType::kExit) (void)yonder::jobs::protocol::decode_exit((*f)->payload);
    }
  }
  return 0;
}
