// Fuzzes a Mux session (net/link/mux.h) with arbitrary bytes from a peer.
// Input: one control byte (bit 0: dial or accept; bits 1-3: how the bytes are
// split; bits 4-7: how eagerly the application reads and writes), then the
// peer's bytes. A small application on this side accepts streams, echoes
// what it reads (within credit), closes when the peer closes and sends
// pings. Checks: no crash; the session's invariants hold after every call;
// everything it writes decodes as valid frames; a session that failed says
// why exactly once and stays failed.
#include <cstdint>
#include <cstdio>
#include <set>

#include "net/link/mux.h"
#include "wire/frame.h"

namespace {

using namespace yonder;
using namespace yonder::link;

void check(bool condition) {
  if (!condition) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t control = data[0];
  ByteView input(data + 1, size - 1);
  MuxConfig config;
  config.initial_window = 4096;  // small, so short inputs reach the limits
  config.max_streams = 8;
  config.max_control_backlog = 2048;
  config.chunk_size = 1024;
  config.keepalive_interval = Millis(10);
  config.dead_after = Millis(1000);
  MonoTime now{};
  Mux mux(control & 1 ? Role::kDialer : Role::kAcceptor, now, config);
  wire::FrameDecoder own_output;
  std::set<uint32_t> streams{0};
  const size_t piece = size_t{1} << ((control >> 1) & 7);  // 1 .. 128 bytes
  const bool echo = control & 0x10;
  const bool open_own = control & 0x20;
  int link_errors = 0;
  uint32_t step = 0;

  while (!input.empty()) {
    ByteView in = input.first(std::min(piece, input.size()));
    input = input.subspan(in.size());
    now += Millis(1);
    mux.feed(in, now);
    ++step;
    if (open_own && step % 7 == 0) {
      auto id = mux.open_stream(wire::StreamKind::kFile);
      if (id.ok()) streams.insert(id->value);
    }
    if (step % 5 == 0) mux.send_ping(now);
    if (step % 3 == 0) mux.on_timer(now);
    while (auto e = mux.poll_event()) {
      if (auto* o = std::get_if<StreamOpened>(&*e)) streams.insert(o->id.value);
      if (auto* c = std::get_if<StreamClosed>(&*e)) (void)mux.close(c->id);
      if (auto* r = std::get_if<StreamReset>(&*e)) streams.erase(r->id.value);
      if (std::holds_alternative<LinkError>(*e)) {
        ++link_errors;
        check(mux.is_dead());
      }
    }
    for (uint32_t id : streams) {
      Bytes got = mux.read(wire::StreamId{id}, 512);
      if (echo && !got.empty()) (void)mux.write(wire::StreamId{id}, got);
    }
    if (auto st = mux.check_invariants(); !st.ok()) {
      std::fprintf(stderr, "%s\n", st.error().to_string().c_str());
      __builtin_trap();
    }
    Bytes out = mux.take_output(1 + (step * 37) % 3000);
    ByteView view(out);
    while (!view.empty()) {
      auto f = own_output.next(view);
      check(f.ok());
      if (!f->has_value()) break;
    }
  }
  check(link_errors == (mux.is_dead() ? 1 : 0));
  return 0;
}
