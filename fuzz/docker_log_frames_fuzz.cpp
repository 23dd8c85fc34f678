// Fuzzes Docker's 8-byte multiplexed frame decoder (attach, logs, exec),
// the timestamp prefix of log entries and the TTY log decoder. The first
// byte picks how the input is cut into reads, so frames and entries split
// across reads are covered.
#include <cstdint>
#include <string_view>

#include "exec/docker/log_frames.h"

using namespace yonder::exec;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0 || size > 256 * 1024) return 0;
  size_t step = 1 + data[0] % 64;
  std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
  docker::FrameDecoder decoder(4096);
  size_t payload = 0;
  for (size_t i = 0; i < input.size(); i += step) {
    auto st = decoder.feed(input.substr(i, step), [&](LogStream s, std::string_view p) {
      if (static_cast<int>(s) > 3) __builtin_trap();
      payload += p.size();
      auto ts = docker::split_timestamp(p);
      if (ts && ts->second.size() >= p.size()) __builtin_trap();
    });
    if (!st) break;
  }
  if (payload > input.size()) __builtin_trap();
  // The same bytes as a TTY container's log: every byte comes out at most
  // once, and no entry is longer than the bound.
  docker::TtyLogDecoder tty;
  size_t tty_bytes = 0;
  auto on_entry = [&](int64_t, std::string_view b) {
    if (b.empty() || b.size() > docker::kTtyEntryBytes) __builtin_trap();
    tty_bytes += b.size();
  };
  for (size_t i = 0; i < input.size(); i += step) tty.feed(input.substr(i, step), on_entry);
  tty.finish(on_entry);
  if (tty_bytes > input.size()) __builtin_trap();
  (void)docker::parse_rfc3339_ns(input.substr(0, 64));
  return 0;
}
