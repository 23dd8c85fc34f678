// Fuzzes the LAN discovery announcement decoder and the protocol core that
// reads it (discovery/announcement.h, discovery/lan_discovery_core.h):
// accepted datagrams re-encode to their bytes; the core never crashes, and
// a candidate only ever comes from a datagram that decodes, with its port.
// The corpus's valid announcements carry a tag made with the fixed key and
// announcer below (fuzz/corpus/lan_announcement/README).
#include <algorithm>
#include <cstdint>

#include "discovery/lan_discovery_core.h"

using namespace yonder;
using namespace yonder::discovery;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ByteView in(data, size);
  auto decoded = decode_announcement(in);
  if (decoded.ok()) {
    Bytes again = encode_announcement(*decoded);
    if (!std::equal(again.begin(), again.end(), in.begin(), in.end())) __builtin_trap();
  }
  static LanDiscoveryCore* core = [] {
    PublicKeyBytes self{}, peer{};
    self.fill(0x11);
    peer.fill(0x22);
    PairKey key{};
    key.fill(0x33);
    auto* c = new LanDiscoveryCore(self, {.link_port = 7000},
                                   [](std::span<uint8_t> out) { std::fill(out.begin(), out.end(), uint8_t{0x5a}); });
    c->set_peers({PairedPeer{NodeId(peer), key}});
    c->start(SteadyTime());
    return c;
  }();
  // A second per input: the rate bound never hides the parser.
  static SteadyTime now = SteadyTime();
  now += std::chrono::seconds(1);
  auto candidate = core->on_datagram(in, "192.0.2.7", now);
  if (candidate && (!decoded.ok() || candidate->port != decoded->link_port)) __builtin_trap();
  core->on_timer(now);
  for (const auto& out : core->take_outgoing()) {
    if (!decode_announcement(out).ok()) __builtin_trap();
  }
  return 0;
}
