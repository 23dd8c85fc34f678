// How a Mux session ends: GOAWAY, keepalive and dead links, protocol errors.
#include <gtest/gtest.h>

#include "net/link/mux.h"
#include "net/link/mux_harness.h"

namespace yonder::link {
namespace {

using namespace std::chrono_literals;
using testing::decode_frames;
using testing::Pair;
using testing::to_bytes;
using testing::to_string;

TEST(MuxGoAway, FinishesOpenStreamsAndRefusesNewOnes) {
  Pair p;
  auto kept = *p.dialer.mux.open_stream(StreamKind::kLogFollow);
  p.pump();
  // Opened while the acceptor's GOAWAY is on its way: never handled.
  auto late = *p.dialer.mux.open_stream(StreamKind::kExec);
  p.acceptor.mux.go_away(ResetCode::kNoError, "daemon restarting");
  EXPECT_FALSE(p.acceptor.mux.open_stream(StreamKind::kFile).ok());
  p.transfer(p.acceptor, p.dialer);
  p.dialer.service();
  auto away = p.dialer.events_of<GoAwayReceived>();
  ASSERT_EQ(away.size(), 1u);
  EXPECT_EQ(away[0].last_stream, kept);
  EXPECT_EQ(away[0].reason, "daemon restarting");
  auto refused = p.dialer.events_of<StreamReset>();
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_EQ(refused[0].id, late);
  EXPECT_EQ(refused[0].code, ResetCode::kRefused);
  auto again = p.dialer.mux.open_stream(StreamKind::kExec);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.error().code(), ErrorCode::kFailedPrecondition);
  // The stream that was accepted finishes normally, both ways.
  p.dialer.close_back = p.acceptor.close_back = true;
  p.acceptor.send(kept, to_bytes("last log line\n"), /*then_close=*/true);
  p.pump();
  EXPECT_EQ(to_string(p.dialer.received[kept.value]), "last log line\n");
  EXPECT_TRUE(p.acceptor.events_of<StreamOpened>().size() == 1);  // `late` was refused there too
  EXPECT_FALSE(p.dialer.mux.is_dead());
  EXPECT_FALSE(p.acceptor.mux.is_dead());
  EXPECT_TRUE(p.dialer.mux.is_drained());
  EXPECT_TRUE(p.acceptor.mux.is_drained());
}

TEST(MuxKeepalive, PingsWhenIdleAndMeasuresTheRoundTrip) {
  MuxConfig c;
  c.keepalive_interval = 1s;
  c.dead_after = 3s;
  Pair p(c);
  const MonoTime t0 = p.now;
  EXPECT_EQ(p.dialer.mux.on_timer(t0), t0 + 1s);
  EXPECT_FALSE(p.dialer.mux.has_output());
  p.now = t0 + 1s;
  EXPECT_EQ(p.dialer.mux.on_timer(p.now), t0 + 2s);
  auto ping = decode_frames(p.dialer.mux.take_output(1000));
  ASSERT_EQ(ping.size(), 1u);
  EXPECT_EQ(wire::frame_type(ping[0]), wire::FrameType::kPing);
  Bytes ping_bytes;
  wire::encode(ping[0], ping_bytes);
  p.acceptor.mux.feed(ping_bytes, p.now);
  Bytes pong = p.acceptor.mux.take_output(1000);
  p.now += 5ms;
  p.dialer.mux.feed(pong, p.now);
  p.dialer.service();
  auto pongs = p.dialer.events_of<PongReceived>();
  ASSERT_EQ(pongs.size(), 1u);
  EXPECT_EQ(pongs[0].rtt, 5ms);
}

TEST(MuxKeepalive, TrafficKeepsTheLinkAlive) {
  MuxConfig c;
  c.keepalive_interval = 1s;
  c.dead_after = 3s;
  Pair p(c);
  for (int i = 0; i < 40; ++i) {
    p.now += 500ms;
    p.dialer.mux.on_timer(p.now);
    p.acceptor.mux.on_timer(p.now);
    p.pump();
  }
  EXPECT_FALSE(p.dialer.mux.is_dead());
  EXPECT_FALSE(p.acceptor.mux.is_dead());
  EXPECT_GE(p.dialer.events_of<PongReceived>().size(), 5u);
}

TEST(MuxKeepalive, DeclaresASilentPeerDead) {
  MuxConfig c;
  c.keepalive_interval = 1s;
  c.dead_after = 3s;
  Pair p(c);
  const MonoTime t0 = p.now;
  auto id = *p.dialer.mux.open_stream(StreamKind::kExec);
  MonoTime next = p.dialer.mux.on_timer(t0);
  // The peer never answers: pings go out, then the link is declared dead.
  int pings = 0;
  while (!p.dialer.mux.is_dead()) {
    ASSERT_LE(next, t0 + 3s);
    next = p.dialer.mux.on_timer(next);
    for (const auto& f : decode_frames(p.dialer.mux.take_output(1 << 20))) {
      pings += wire::frame_type(f) == wire::FrameType::kPing;
    }
  }
  EXPECT_EQ(pings, 2);
  p.dialer.service();
  auto errors = p.dialer.events_of<LinkError>();
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].error.code(), ErrorCode::kUnavailable);
  EXPECT_NE(errors[0].error.message().find("no bytes from the peer for 3 s"), std::string::npos);
  EXPECT_FALSE(p.dialer.mux.write(id, to_bytes("x")).ok());
  EXPECT_FALSE(p.dialer.mux.open_stream(StreamKind::kExec).ok());
}

// A fresh acceptor fed `bytes` must fail with a message containing `needle`
// and tell the peer so in a GOAWAY.
void expect_link_error(const Bytes& bytes, const std::string& needle, ResetCode code = ResetCode::kProtocolError) {
  Mux mux(Role::kAcceptor, MonoTime{});
  // Split in two to cover the incremental path as well.
  mux.feed(ByteView(bytes).first(bytes.size() / 2), MonoTime{});
  mux.feed(ByteView(bytes).subspan(bytes.size() / 2), MonoTime{});
  ASSERT_TRUE(mux.is_dead()) << needle;
  EXPECT_NE(mux.failure()->message().find(needle), std::string::npos) << mux.failure()->message();
  int link_errors = 0;
  while (auto e = mux.poll_event()) link_errors += std::holds_alternative<LinkError>(*e);
  EXPECT_EQ(link_errors, 1);
  auto frames = decode_frames(mux.take_output(1 << 20));
  ASSERT_FALSE(frames.empty());
  auto* away = std::get_if<wire::GoAwayFrame>(&frames.back());
  ASSERT_NE(away, nullptr);
  EXPECT_EQ(away->code, code);
  // Dead stays dead: more input is ignored, calls are refused.
  Bytes ping;
  wire::encode(wire::PingFrame{}, ping);
  mux.feed(ping, MonoTime{});
  EXPECT_FALSE(mux.has_output());
  EXPECT_FALSE(mux.open_stream(StreamKind::kFile).ok());
}

Bytes frames(std::initializer_list<wire::Frame> list) {
  Bytes out;
  for (const auto& f : list) wire::encode(f, out);
  return out;
}

TEST(MuxProtocolError, BadVersion) {
  expect_link_error({7, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0}, "version 7");
}

TEST(MuxProtocolError, OversizedFrame) {
  expect_link_error({1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0x11, 0x70}, "exceeds its bound of 65536");
}

TEST(MuxProtocolError, DataBeyondTheWindow) {
  Bytes chunk(wire::kMaxDataPayload, 'x');
  expect_link_error(frames({wire::DataFrame{wire::kControlStream, chunk}, wire::DataFrame{wire::kControlStream, chunk},
                            wire::DataFrame{wire::kControlStream, chunk}, wire::DataFrame{wire::kControlStream, chunk},
                            wire::DataFrame{wire::kControlStream, Bytes{'!'}}}),
                    "beyond its credit of 0", ResetCode::kFlowControl);
}

TEST(MuxProtocolError, DataOnStreamsNeverOpened) {
  expect_link_error(frames({wire::DataFrame{StreamId{1}, Bytes{'a'}}}), "DATA on stream 1, which was never opened");
  expect_link_error(frames({wire::DataFrame{StreamId{2}, Bytes{'a'}}}), "DATA on stream 2, which was never opened");
  expect_link_error(frames({wire::WindowUpdateFrame{StreamId{9}, 5}}), "never opened");
}

TEST(MuxProtocolError, StreamIdRules) {
  expect_link_error(frames({wire::OpenFrame{StreamId{2}, StreamKind::kFile}}), "may not use");
  expect_link_error(frames({wire::OpenFrame{StreamId{3}, StreamKind::kFile}, wire::OpenFrame{StreamId{1}, StreamKind::kFile}}),
                    "may not use");
  expect_link_error(frames({wire::OpenFrame{StreamId{1}, StreamKind::kFile}, wire::CloseFrame{StreamId{1}},
                            wire::DataFrame{StreamId{1}, Bytes{'a'}}}),
                    "after closing it");
  expect_link_error(frames({wire::OpenFrame{StreamId{1}, StreamKind::kFile}, wire::CloseFrame{StreamId{1}},
                            wire::CloseFrame{StreamId{1}}}),
                    "twice");
}

TEST(MuxProtocolError, CreditBeyondTheInitialWindow) {
  expect_link_error(frames({wire::WindowUpdateFrame{wire::kControlStream, 1}}), "beyond the initial window",
                    ResetCode::kFlowControl);
}

TEST(MuxProtocolError, PingFloodFromAPeerThatDoesNotRead) {
  MuxConfig c;
  c.max_control_backlog = 1000;
  Mux mux(Role::kAcceptor, MonoTime{}, c);
  Bytes flood;
  for (int i = 0; i < 100; ++i) wire::encode(wire::PingFrame{}, flood);
  mux.feed(flood, MonoTime{});
  ASSERT_TRUE(mux.is_dead());
  EXPECT_EQ(mux.failure()->code(), ErrorCode::kResourceExhausted);
}

TEST(MuxProtocolError, FramesForEndedStreamsAreDropped) {
  // A RESET crosses data in flight: the late frames are no error.
  Mux mux(Role::kAcceptor, MonoTime{});
  mux.feed(frames({wire::OpenFrame{StreamId{1}, StreamKind::kFile}}), MonoTime{});
  ASSERT_TRUE(mux.reset(StreamId{1}, ResetCode::kCancel, "no").ok());
  mux.feed(frames({wire::DataFrame{StreamId{1}, Bytes{'a'}}, wire::WindowUpdateFrame{StreamId{1}, 1},
                   wire::CloseFrame{StreamId{1}}, wire::ResetFrame{StreamId{1}, ResetCode::kCancel, ""}}),
           MonoTime{});
  EXPECT_FALSE(mux.is_dead());
}

}  // namespace
}  // namespace yonder::link
