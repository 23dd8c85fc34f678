#include "net/link/mux.h"

#include <gtest/gtest.h>

#include "net/link/mux_harness.h"

namespace yonder::link {
namespace {

using namespace std::chrono_literals;
using testing::decode_frames;
using testing::Pair;
using testing::pattern;
using testing::to_bytes;
using testing::to_string;

TEST(Mux, OpensStreamsWithKindAndParity) {
  Pair p;
  auto a = p.dialer.mux.open_stream(StreamKind::kLogFollow);
  auto b = p.dialer.mux.open_stream(StreamKind::kExec);
  auto c = p.acceptor.mux.open_stream(StreamKind::kFile);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(a->value, 1u);
  EXPECT_EQ(b->value, 3u);
  EXPECT_EQ(c->value, 2u);
  p.dialer.send(*a, to_bytes("hello"));
  p.pump();
  auto opened = p.acceptor.events_of<StreamOpened>();
  ASSERT_EQ(opened.size(), 2u);
  EXPECT_EQ(opened[0].id, *a);
  EXPECT_EQ(opened[0].kind, StreamKind::kLogFollow);
  EXPECT_EQ(opened[1].kind, StreamKind::kExec);
  EXPECT_EQ(p.dialer.events_of<StreamOpened>().at(0).kind, StreamKind::kFile);
  EXPECT_EQ(to_string(p.acceptor.received[1]), "hello");
  EXPECT_TRUE(p.dialer.mux.peer_seen());
  EXPECT_TRUE(p.acceptor.mux.peer_seen());
  EXPECT_FALSE(p.dialer.mux.open_stream(StreamKind::kControl).ok());
}

TEST(Mux, ControlStreamIsOpenFromTheStart) {
  Pair p;
  EXPECT_FALSE(p.acceptor.mux.peer_seen());
  p.dialer.send(wire::kControlStream, to_bytes("{\"hello\":1}"));
  p.pump();
  EXPECT_EQ(to_string(p.acceptor.received[0]), "{\"hello\":1}");
  p.acceptor.send(wire::kControlStream, to_bytes("{\"ok\":true}"));
  p.pump();
  EXPECT_EQ(to_string(p.dialer.received[0]), "{\"ok\":true}");
  EXPECT_FALSE(p.dialer.mux.close(wire::kControlStream).ok());
  EXPECT_FALSE(p.dialer.mux.reset(wire::kControlStream, ResetCode::kCancel, "x").ok());
}

// 64 streams, opened by both sides, bulk both ways, with control messages
// between them and the carrier splitting bytes at random places.
TEST(Mux, ManyConcurrentStreamsArriveIntactAndInOrder) {
  for (uint64_t seed : {1, 2, 3}) {
    Pair p(MuxConfig{}, seed, 40000);
    p.dialer.close_back = p.acceptor.close_back = true;
    std::map<uint32_t, size_t> sizes;
    for (int i = 0; i < 64; ++i) {
      testing::Side& side = i % 2 == 0 ? p.dialer : p.acceptor;
      auto id = side.mux.open_stream(static_cast<StreamKind>(1 + i % 4));
      ASSERT_TRUE(id.ok());
      size_t n = 1000 + (static_cast<size_t>(i) * 7919) % 150000;
      sizes[id->value] = n;
      side.send(*id, pattern(id->value, 0, n), /*then_close=*/true);
    }
    for (int i = 0; i < 20; ++i) {
      p.dialer.send(wire::kControlStream, to_bytes("request " + std::to_string(i) + ";"));
      p.acceptor.send(wire::kControlStream, to_bytes("event " + std::to_string(i) + ";"));
      for (int k = 0; k < 5; ++k) {
        p.transfer(p.dialer, p.acceptor);
        p.transfer(p.acceptor, p.dialer);
        p.dialer.service();
        p.acceptor.service();
      }
    }
    p.pump();
    for (auto [id, n] : sizes) {
      testing::Side& reader = id % 2 == 1 ? p.acceptor : p.dialer;
      ASSERT_EQ(reader.received[id], pattern(id, 0, n)) << "stream " << id << " seed " << seed;
      EXPECT_TRUE(reader.remote_closed.count(id));
    }
    std::string requests;
    std::string events;
    for (int i = 0; i < 20; ++i) {
      requests += "request " + std::to_string(i) + ";";
      events += "event " + std::to_string(i) + ";";
    }
    EXPECT_EQ(to_string(p.acceptor.received[0]), requests);
    EXPECT_EQ(to_string(p.dialer.received[0]), events);
    EXPECT_TRUE(p.dialer.mux.check_invariants().ok());
    EXPECT_TRUE(p.acceptor.mux.check_invariants().ok());
    // Both halves closed and everything read: every stream is gone.
    EXPECT_EQ(p.dialer.mux.stream_count(), 0u);
    EXPECT_EQ(p.acceptor.mux.stream_count(), 0u);
  }
}

TEST(Mux, ControlTrafficOvertakesQueuedBulkData) {
  Pair p;
  auto bulk = p.dialer.mux.open_stream(StreamKind::kFile);
  ASSERT_TRUE(bulk.ok());
  ASSERT_EQ(*p.dialer.mux.write(*bulk, pattern(1, 0, 200000)), 200000u);
  testing::FrameReader reader;
  // OPEN, one whole DATA frame and the start of a second one.
  EXPECT_EQ(reader.feed(p.dialer.mux.take_output(20000)).size(), 2u);
  // Written after the bulk data, sent before the rest of it: only the frame
  // already started is finished first.
  ASSERT_EQ(*p.dialer.mux.write(wire::kControlStream, to_bytes("cancel job 7")), 12u);
  p.dialer.mux.send_ping(p.now);
  auto frames = reader.feed(p.dialer.mux.take_output(2000));
  ASSERT_GE(frames.size(), 3u);
  EXPECT_EQ(std::get<wire::DataFrame>(frames[0]).stream, *bulk);
  EXPECT_EQ(wire::frame_type(frames[1]), wire::FrameType::kPing);
  ASSERT_EQ(wire::frame_type(frames[2]), wire::FrameType::kData);
  EXPECT_EQ(std::get<wire::DataFrame>(frames[2]).stream, wire::kControlStream);
  EXPECT_EQ(to_string(std::get<wire::DataFrame>(frames[2]).data), "cancel job 7");
}

TEST(Mux, BulkStreamsTakeTurns) {
  MuxConfig config;
  config.chunk_size = 16 * 1024;
  Pair p(config);
  std::vector<StreamId> ids;
  for (int i = 0; i < 3; ++i) {
    ids.push_back(*p.dialer.mux.open_stream(StreamKind::kFile));
    ASSERT_EQ(*p.dialer.mux.write(ids.back(), pattern(ids.back().value, 0, 100000)), 100000u);
  }
  std::vector<uint32_t> order;
  testing::FrameReader reader;
  while (p.dialer.mux.has_output()) {
    for (const auto& f : reader.feed(p.dialer.mux.take_output(config.chunk_size + wire::kHeaderSize))) {
      if (auto* d = std::get_if<wire::DataFrame>(&f)) order.push_back(d->stream.value);
    }
  }
  ASSERT_GE(order.size(), 18u);
  for (size_t i = 0; i + 3 <= 18; i += 3) {
    EXPECT_EQ((std::vector<uint32_t>(order.begin() + static_cast<long>(i), order.begin() + static_cast<long>(i) + 3)),
              (std::vector<uint32_t>{1, 3, 5}))
        << "turn " << i / 3;
  }
}

TEST(Mux, SlowReaderBackPressuresOnlyItsOwnStream) {
  Pair p(MuxConfig{}, 7, 30000);
  auto slow = *p.dialer.mux.open_stream(StreamKind::kLogFollow);
  auto fast = *p.dialer.mux.open_stream(StreamKind::kFile);
  const size_t n = 1 << 20;
  p.dialer.send(slow, pattern(slow.value, 0, n));
  p.dialer.send(fast, pattern(fast.value, 0, n));
  p.acceptor.paused.insert(slow.value);
  p.pump();
  // The fast stream finished; the slow one stopped at exactly one window.
  EXPECT_EQ(p.acceptor.received[fast.value], pattern(fast.value, 0, n));
  EXPECT_EQ(p.acceptor.mux.readable(slow), wire::kInitialWindow);
  EXPECT_EQ(p.acceptor.mux.receive_window(slow), 0);
  EXPECT_EQ(p.dialer.mux.send_window(slow), 0);
  EXPECT_EQ(p.dialer.mux.writable(slow), 0u);
  EXPECT_EQ(p.dialer.to_send[slow.value].size(), n - wire::kInitialWindow);
  // The control stream still flows while the slow stream is stuck.
  p.dialer.send(wire::kControlStream, to_bytes("still here"));
  p.pump();
  EXPECT_EQ(to_string(p.acceptor.received[0]), "still here");
  // The reader wakes up: credit returns, the writer is told, all arrives.
  p.acceptor.paused.clear();
  p.pump();
  EXPECT_EQ(p.acceptor.received[slow.value], pattern(slow.value, 0, n));
  bool told = false;
  for (const auto& w : p.dialer.events_of<StreamWritable>()) told = told || w.id == slow;
  EXPECT_TRUE(told);
}

TEST(Mux, ShortWriteIsBoundedByTheOutputBudget) {
  MuxConfig config;
  config.max_buffered_output = 100 * 1024;
  Pair p(config);
  auto a = *p.dialer.mux.open_stream(StreamKind::kFile);
  auto b = *p.dialer.mux.open_stream(StreamKind::kFile);
  size_t first = *p.dialer.mux.write(a, pattern(1, 0, 200000));
  EXPECT_LT(first, 100u * 1024);
  EXPECT_EQ(*p.dialer.mux.write(b, pattern(3, 0, 1000)), 0u);
  EXPECT_LE(p.dialer.mux.buffered_output(), config.max_buffered_output);
  Bytes out = p.dialer.mux.take_output(50000);
  p.acceptor.mux.feed(out, p.now);
  auto writable = p.dialer.events_of<StreamWritable>();
  while (auto e = p.dialer.mux.poll_event()) {
    if (auto* w = std::get_if<StreamWritable>(&*e)) writable.push_back(*w);
  }
  ASSERT_EQ(writable.size(), 2u);
  EXPECT_GT(p.dialer.mux.writable(b), 0u);
}

TEST(Mux, HalfCloseEachWay) {
  Pair p;
  auto id = *p.dialer.mux.open_stream(StreamKind::kExec);
  p.dialer.send(id, to_bytes("request"), /*then_close=*/true);
  p.pump();
  EXPECT_EQ(to_string(p.acceptor.received[id.value]), "request");
  EXPECT_TRUE(p.acceptor.remote_closed.count(id.value));
  auto write_after_close = p.dialer.mux.write(id, to_bytes("more"));
  ASSERT_FALSE(write_after_close.ok());
  EXPECT_EQ(write_after_close.error().code(), ErrorCode::kFailedPrecondition);
  // The other half is still open: the answer flows back.
  p.acceptor.send(id, to_bytes("response"), /*then_close=*/true);
  p.pump();
  EXPECT_EQ(to_string(p.dialer.received[id.value]), "response");
  EXPECT_TRUE(p.dialer.remote_closed.count(id.value));
  EXPECT_FALSE(p.dialer.mux.has_stream(id));
  EXPECT_FALSE(p.acceptor.mux.has_stream(id));
}

TEST(Mux, ClosedStreamStaysReadableUntilDrained) {
  Pair p;
  p.acceptor.auto_read = false;
  auto id = *p.dialer.mux.open_stream(StreamKind::kFile);
  p.dialer.send(id, to_bytes("last words"), /*then_close=*/true);
  p.pump();
  ASSERT_TRUE(p.acceptor.mux.close(id).ok());
  p.pump();
  ASSERT_TRUE(p.acceptor.mux.has_stream(id));
  EXPECT_EQ(to_string(p.acceptor.mux.read(id, 4)), "last");
  EXPECT_EQ(to_string(p.acceptor.mux.read(id)), " words");
  EXPECT_FALSE(p.acceptor.mux.has_stream(id));
}

TEST(Mux, ResetEitherWay) {
  Pair p;
  auto a = *p.dialer.mux.open_stream(StreamKind::kForward);
  auto b = *p.dialer.mux.open_stream(StreamKind::kForward);
  p.dialer.send(a, to_bytes("x"));
  p.dialer.send(b, to_bytes("y"));
  p.pump();
  // The acceptor refuses stream a while more of its data is in flight.
  p.dialer.send(a, pattern(a.value, 0, 100000));
  p.dialer.service();
  ASSERT_TRUE(p.acceptor.mux.reset(a, ResetCode::kRefused, "port 8888 is not forwarded").ok());
  p.pump();
  auto resets = p.dialer.events_of<StreamReset>();
  ASSERT_EQ(resets.size(), 1u);
  EXPECT_EQ(resets[0].id, a);
  EXPECT_EQ(resets[0].code, ResetCode::kRefused);
  EXPECT_EQ(resets[0].reason, "port 8888 is not forwarded");
  EXPECT_FALSE(p.dialer.mux.write(a, to_bytes("z")).ok());
  EXPECT_FALSE(p.dialer.mux.is_dead());
  EXPECT_FALSE(p.acceptor.mux.is_dead());
  // The dialer cancels b, dropping what it had queued.
  ASSERT_EQ(*p.dialer.mux.write(b, pattern(b.value, 0, 50000)), 50000u);
  ASSERT_TRUE(p.dialer.mux.reset(b, ResetCode::kCancel, "ctrl-c").ok());
  EXPECT_LT(p.dialer.mux.buffered_output(), 1000u);
  p.pump();
  auto theirs = p.acceptor.events_of<StreamReset>();
  ASSERT_EQ(theirs.size(), 1u);
  EXPECT_EQ(theirs[0].id, b);
  EXPECT_EQ(theirs[0].code, ResetCode::kCancel);
  EXPECT_EQ(p.dialer.mux.stream_count() + p.acceptor.mux.stream_count(), 0u);
  EXPECT_EQ(p.dialer.mux.reset(b, ResetCode::kCancel, "again").error().code(), ErrorCode::kNotFound);
}

TEST(Mux, RefusesStreamsBeyondTheLimit) {
  MuxConfig small;
  small.max_streams = 4;
  Pair p(small);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(p.dialer.mux.open_stream(StreamKind::kExec).ok());
  auto fifth = p.dialer.mux.open_stream(StreamKind::kExec);
  ASSERT_FALSE(fifth.ok());
  EXPECT_EQ(fifth.error().code(), ErrorCode::kResourceExhausted);
  p.pump();
  // The acceptor's own limit counts the dialer's streams too.
  auto mine = p.acceptor.mux.open_stream(StreamKind::kExec);
  EXPECT_FALSE(mine.ok());
}

TEST(Mux, PeerOpeningTooManyStreamsIsRefusedNotFatal) {
  MuxConfig small;
  small.max_streams = 2;
  Pair p(MuxConfig{}, small);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(p.dialer.mux.open_stream(StreamKind::kFile).ok());
  p.pump();
  EXPECT_EQ(p.acceptor.events_of<StreamOpened>().size(), 2u);
  auto refused = p.dialer.events_of<StreamReset>();
  ASSERT_EQ(refused.size(), 3u);
  EXPECT_EQ(refused[0].code, ResetCode::kTooManyStreams);
  EXPECT_FALSE(p.acceptor.mux.is_dead());
  EXPECT_EQ(p.dialer.mux.stream_count(), 2u);
}

}  // namespace
}  // namespace yonder::link
