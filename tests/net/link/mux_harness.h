// Two Mux sessions wired back to back in memory, with a manual clock: the
// test pump moves bytes between them (optionally in random chunk sizes from a
// seeded RNG) and plays simple applications on both sides.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>
#include <string>

#include "net/link/mux.h"
#include "wire/frame.h"

namespace yonder::link::testing {

inline Bytes to_bytes(std::string_view s) { return Bytes(s.begin(), s.end()); }
inline std::string to_string(const Bytes& b) { return std::string(b.begin(), b.end()); }

// The byte at `offset` of stream `id`'s test payload: distinct per stream
// and position, so a swapped, lost or duplicated byte shows.
inline uint8_t pattern_byte(uint32_t id, uint64_t offset) {
  uint64_t x = (uint64_t{id} << 40) ^ offset;
  x ^= x >> 29;
  x *= 0xBF58476D1CE4E5B9ULL;
  return static_cast<uint8_t>(x >> 32);
}

inline Bytes pattern(uint32_t id, uint64_t from, size_t n) {
  Bytes out(n);
  for (size_t i = 0; i < n; ++i) out[i] = pattern_byte(id, from + i);
  return out;
}

// One side's application: records events, reads streams it is not told to
// leave alone, and keeps writing what it was asked to send as credit allows.
struct Side {
  Side(Role role, MonoTime now, MuxConfig config) : mux(role, now, config) {}

  Mux mux;
  std::vector<MuxEvent> events;
  std::map<uint32_t, Bytes> received;
  std::set<uint32_t> paused;  // streams whose reader is slow (not reading)
  std::set<uint32_t> remote_closed;
  std::map<uint32_t, ResetCode> reset_by_peer;
  std::map<uint32_t, Bytes> to_send;  // bytes not yet accepted by write()
  std::set<uint32_t> close_when_sent;
  bool auto_read = true;
  bool close_back = false;  // close our half when the peer closes its half

  template <typename E>
  std::vector<E> events_of() const {
    std::vector<E> out;
    for (const auto& e : events) {
      if (const E* x = std::get_if<E>(&e)) out.push_back(*x);
    }
    return out;
  }

  void send(StreamId id, Bytes data, bool then_close = false) {
    Bytes& q = to_send[id.value];
    q.insert(q.end(), data.begin(), data.end());
    if (then_close) close_when_sent.insert(id.value);
  }

  void service() {
    while (auto e = mux.poll_event()) {
      if (auto* c = std::get_if<StreamClosed>(&*e)) {
        remote_closed.insert(c->id.value);
        if (close_back) {
          if (to_send.count(c->id.value)) {
            close_when_sent.insert(c->id.value);
          } else {
            (void)mux.close(c->id);  // may be gone already if we closed first
          }
        }
      }
      if (auto* d = std::get_if<DataAvailable>(&*e)) has_data.insert(d->id.value);
      if (auto* r = std::get_if<StreamReset>(&*e)) {
        reset_by_peer[r->id.value] = r->code;
        to_send.erase(r->id.value);
      }
      events.push_back(std::move(*e));
    }
    for (auto it = to_send.begin(); it != to_send.end();) {
      StreamId id{it->first};
      auto n = mux.write(id, it->second);
      if (!n.ok()) {
        it = to_send.erase(it);
        continue;
      }
      it->second.erase(it->second.begin(), it->second.begin() + static_cast<std::ptrdiff_t>(*n));
      if (it->second.empty()) {
        if (close_when_sent.count(id.value)) {
          EXPECT_TRUE(mux.close(id).ok());
        }
        it = to_send.erase(it);
      } else {
        ++it;
      }
    }
    if (!auto_read) return;
    for (auto it = has_data.begin(); it != has_data.end();) {
      if (paused.count(*it)) {
        ++it;
        continue;
      }
      Bytes got = mux.read(StreamId{*it});
      Bytes& r = received[*it];
      r.insert(r.end(), got.begin(), got.end());
      it = mux.readable(StreamId{*it}) == 0 ? has_data.erase(it) : std::next(it);
    }
  }

  std::set<uint32_t> has_data;  // DataAvailable seen, not yet read empty
};

class Pair {
 public:
  // seed 0: whole buffers; otherwise random chunk sizes in [1, max_chunk].
  explicit Pair(MuxConfig config = {}, uint64_t seed = 0, size_t max_chunk = 20000)
      : Pair(config, config, seed, max_chunk) {}
  Pair(MuxConfig dialer_config, MuxConfig acceptor_config, uint64_t seed = 0, size_t max_chunk = 20000)
      : now(MonoTime{} + std::chrono::hours(1)),
        dialer(Role::kDialer, now, dialer_config),
        acceptor(Role::kAcceptor, now, acceptor_config),
        rng_(seed),
        random_(seed != 0),
        max_chunk_(max_chunk) {}

  // Moves up to one chunk from `from` to `to`; false if `from` had nothing.
  bool transfer(Side& from, Side& to) {
    if (!from.mux.has_output()) return false;
    size_t n = random_ ? 1 + rng_() % max_chunk_ : size_t{1} << 20;
    Bytes out = from.mux.take_output(n);
    EXPECT_LE(out.size(), n);
    bytes_moved += out.size();
    to.mux.feed(out, now);
    return true;
  }

  // Runs both applications and moves bytes until nothing moves.
  void pump(int max_rounds = 1'000'000) {
    for (int round = 0; round < max_rounds; ++round) {
      dialer.service();
      acceptor.service();
      bool moved = transfer(dialer, acceptor);
      moved = transfer(acceptor, dialer) || moved;
      if (!moved) {
        dialer.service();
        acceptor.service();
        if (!dialer.mux.has_output() && !acceptor.mux.has_output()) return;
      }
    }
    ADD_FAILURE() << "pump did not settle";
  }

  MonoTime now;
  Side dialer;
  Side acceptor;
  uint64_t bytes_moved = 0;

 private:
  std::mt19937_64 rng_;
  bool random_;
  size_t max_chunk_;
};

// Decodes a side's output taken in pieces (frames may straddle takes).
class FrameReader {
 public:
  std::vector<wire::Frame> feed(const Bytes& bytes) {
    ByteView in(bytes);
    std::vector<wire::Frame> frames;
    while (!in.empty()) {
      auto r = decoder_.next(in);
      EXPECT_TRUE(r.ok()) << r.error().to_string();
      if (!r.ok() || !r->has_value()) break;
      frames.push_back(std::move(**r));
    }
    return frames;
  }

 private:
  wire::FrameDecoder decoder_;
};

// Decodes everything in `wire` (which must be whole frames).
inline std::vector<wire::Frame> decode_frames(const Bytes& bytes) {
  wire::FrameDecoder d;
  ByteView in(bytes);
  std::vector<wire::Frame> frames;
  while (!in.empty()) {
    auto r = d.next(in);
    EXPECT_TRUE(r.ok()) << r.error().to_string();
    if (!r.ok() || !r->has_value()) break;
    frames.push_back(std::move(**r));
  }
  return frames;
}

}  // namespace yonder::link::testing
