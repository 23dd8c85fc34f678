// Seeded property test: random operations on both sides of a link (open,
// write, read, close, reset, ping, carrier transfers in random sizes) for
// thousands of steps. After every step the window accounting stays within
// [0, initial window] and each side's invariants hold; at the end every byte
// sent on a stream that was not reset has been delivered, in order.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>

#include "net/link/mux.h"
#include "net/link/mux_harness.h"

namespace yonder::link {
namespace {

using testing::pattern;

struct Direction {
  uint64_t sent = 0;       // accepted by write()
  uint64_t delivered = 0;  // returned by read() on the other side
  bool closed = false;     // the sender called close()
  bool close_seen = false; // the receiver got StreamClosed
  bool reset = false;
};

class World {
 public:
  World(uint64_t seed, MuxConfig config) : rng_(seed), config_(config) {
    sides_[0] = std::make_unique<Mux>(Role::kDialer, now_, config);
    sides_[1] = std::make_unique<Mux>(Role::kAcceptor, now_, config);
    alive_[0].insert(0);
    alive_[1].insert(0);
  }

  void step() {
    int s = static_cast<int>(rng_() % 2);
    Mux& m = *sides_[s];
    switch (rng_() % 16) {
      case 0: open(s); break;
      case 1:
      case 2:
      case 3: write(s, pick(s)); break;
      case 4:
      case 5:
      case 6: read(s, pick(s)); break;
      case 7:
        if (rng_() % 8 == 0) close(s, pick(s));
        break;
      case 8:
        if (rng_() % 16 == 0) reset(s, pick(s));
        break;
      case 9:
        if (rng_() % 8 == 0) m.send_ping(now_);
        break;
      case 10:
        now_ += Millis(1 + rng_() % 100);
        m.on_timer(now_);
        break;
      default: transfer(s, 1 + rng_() % (rng_() % 4 == 0 ? 200 : 40000)); break;
    }
    drain_events();
    check_windows();
  }

  // Lets both applications read everything and the carrier move everything.
  void settle() {
    for (int round = 0; round < 100000; ++round) {
      bool moved = false;
      for (int s = 0; s < 2; ++s) {
        for (uint32_t id : std::set<uint32_t>(alive_[s])) read(s, id, SIZE_MAX);
        if (sides_[s]->has_output()) {
          transfer(s, 1 << 20);
          moved = true;
        }
        drain_events();
      }
      check_windows();
      if (!moved) return;
    }
    ADD_FAILURE() << "did not settle";
  }

  void check_delivery() {
    for (const auto& [key, d] : dirs_) {
      if (d.reset) continue;
      EXPECT_EQ(d.delivered, d.sent) << "stream " << key.second << " from side " << key.first;
      EXPECT_EQ(d.close_seen, d.closed) << "stream " << key.second << " from side " << key.first;
    }
  }

 private:
  // Keys the test payload by stream and direction.
  static uint32_t salt(int sender, uint32_t id) { return id * 2 + static_cast<uint32_t>(sender); }

  uint32_t pick(int s) {
    const auto& ids = alive_[s];
    auto it = ids.begin();
    std::advance(it, static_cast<long>(rng_() % ids.size()));
    return *it;
  }

  void open(int s) {
    auto id = sides_[s]->open_stream(static_cast<StreamKind>(1 + rng_() % 4));
    if (id.ok()) alive_[s].insert(id->value);
  }

  void write(int s, uint32_t id) {
    Direction& d = dirs_[{s, id}];
    size_t n = 1 + rng_() % (rng_() % 4 == 0 ? 70000 : 3000);
    auto taken = sides_[s]->write(StreamId{id}, pattern(salt(s, id), d.sent, n));
    if (taken.ok()) d.sent += *taken;
  }

  void read(int s, uint32_t id, size_t max = 0) {
    if (max == 0) max = 1 + rng_() % 20000;
    Bytes got = sides_[s]->read(StreamId{id}, max);
    if (got.empty()) return;
    Direction& d = dirs_[{1 - s, id}];
    ASSERT_EQ(got, pattern(salt(1 - s, id), d.delivered, got.size())) << "stream " << id << " at " << d.delivered;
    d.delivered += got.size();
  }

  void close(int s, uint32_t id) {
    if (sides_[s]->close(StreamId{id}).ok()) dirs_[{s, id}].closed = true;
  }

  void reset(int s, uint32_t id) {
    if (sides_[s]->reset(StreamId{id}, ResetCode::kCancel, "property test").ok()) mark_reset(id);
  }

  void mark_reset(uint32_t id) {
    dirs_[{0, id}].reset = dirs_[{1, id}].reset = true;
    alive_[0].erase(id);
    alive_[1].erase(id);
  }

  void transfer(int s, size_t n) {
    Bytes out = sides_[s]->take_output(n);
    ASSERT_LE(out.size(), n);
    sides_[1 - s]->feed(out, now_);
  }

  void drain_events() {
    for (int s = 0; s < 2; ++s) {
      while (auto e = sides_[s]->poll_event()) {
        if (auto* o = std::get_if<StreamOpened>(&*e)) alive_[s].insert(o->id.value);
        if (auto* r = std::get_if<StreamReset>(&*e)) mark_reset(r->id.value);
        if (auto* c = std::get_if<StreamClosed>(&*e)) {
          Direction& d = dirs_[{1 - s, c->id.value}];
          d.close_seen = true;
          // All of the sender's bytes have arrived by its CLOSE.
          EXPECT_EQ(d.delivered + sides_[s]->readable(c->id), d.sent) << "stream " << c->id.value;
        }
        ASSERT_FALSE(std::holds_alternative<LinkError>(*e)) << std::get<LinkError>(*e).error.to_string();
      }
      // Streams closed both ways and read empty are gone from the mux.
      for (auto it = alive_[s].begin(); it != alive_[s].end();) {
        it = sides_[s]->has_stream(StreamId{*it}) ? std::next(it) : alive_[s].erase(it);
      }
    }
  }

  void check_windows() {
    for (int s = 0; s < 2; ++s) {
      auto st = sides_[s]->check_invariants();
      ASSERT_TRUE(st.ok()) << st.error().to_string();
      for (uint32_t id : alive_[s]) {
        int64_t send = sides_[s]->send_window(StreamId{id});
        int64_t recv = sides_[s]->receive_window(StreamId{id});
        ASSERT_GE(send, 0);
        ASSERT_LE(send, int64_t{config_.initial_window});
        ASSERT_GE(recv, 0);
        ASSERT_LE(recv, int64_t{config_.initial_window});
      }
    }
  }

  std::mt19937_64 rng_;
  MuxConfig config_;
  MonoTime now_{};
  std::unique_ptr<Mux> sides_[2];
  std::set<uint32_t> alive_[2];
  std::map<std::pair<int, uint32_t>, Direction> dirs_;
};

TEST(MuxProperty, RandomOperationsKeepAccountingAndDeliverEverything) {
  const uint32_t windows[] = {1024, 4096, 65536, wire::kInitialWindow};
  const size_t chunks[] = {512, 4096, 16384};
  for (uint64_t seed = 1; seed <= 24; ++seed) {
    MuxConfig config;
    config.initial_window = windows[seed % 4];
    config.chunk_size = chunks[seed % 3];
    config.max_buffered_output = seed % 2 ? 16 * 1024 : 1 << 20;
    config.max_streams = 12;
    config.keepalive_interval = Millis(500);
    config.dead_after = Millis(1'000'000'000);
    World world(seed, config);
    for (int i = 0; i < 3000; ++i) {
      world.step();
      if (::testing::Test::HasFatalFailure()) FAIL() << "seed " << seed << " step " << i;
    }
    world.settle();
    world.check_delivery();
    if (::testing::Test::HasFailure()) FAIL() << "seed " << seed;
  }
}

}  // namespace
}  // namespace yonder::link
