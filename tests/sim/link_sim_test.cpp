// Peer-link sessions over the in-memory network (net/link/memory_channel.h):
// two Sessions on one event loop, joined by a MemoryChannel pair whose reads
// split the byte stream at seeded places. The first room of tests/sim: the
// mux, framing and session loops run as in a real node, without sockets,
// and the same seed gives the same run.
#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <variant>

#include "net/link/memory_channel.h"
#include "net/link/session.h"

namespace yonder::link {
namespace {

// Collects what a session's mux reports; reads stream data as it arrives.
struct Recorder : SessionObserver {
  void on_mux_event(const std::shared_ptr<Session>& s, MuxEvent event) override {
    if (const auto* o = std::get_if<StreamOpened>(&event)) opened.push_back(o->id);
    if (const auto* d = std::get_if<DataAvailable>(&event)) {
      Bytes got = s->mux().read(d->id);
      received[d->id].append(reinterpret_cast<const char*>(got.data()), got.size());
    }
    if (const auto* c = std::get_if<StreamClosed>(&event)) finished.push_back(c->id);
  }
  void on_session_closed(const std::shared_ptr<Session>&, const std::string& reason) override {
    closed = true;
    why = reason;
  }
  std::vector<StreamId> opened, finished;
  std::map<StreamId, std::string> received;
  bool closed = false;
  std::string why;
};

struct Pair {
  explicit Pair(uint64_t seed, size_t max_read) : net(memory_channel_pair(io.get_executor(), seed, max_read)) {
    PublicKeyBytes ka{}, kb{};
    ka[0] = 1;
    kb[0] = 2;
    dialer = std::make_shared<Session>(net.a, Role::kDialer, kb, KeyVerdict::kPinned, &at_dialer, "memory");
    acceptor = std::make_shared<Session>(net.b, Role::kAcceptor, ka, KeyVerdict::kPinned, &at_acceptor, "memory");
    dialer->start();
    acceptor->start();
  }
  ~Pair() {
    if (!dialer->closed()) dialer->abort("test over");
    if (!acceptor->closed()) acceptor->abort("test over");
    io.poll();
  }
  boost::asio::io_context io;
  MemoryPair net;
  Recorder at_dialer, at_acceptor;
  std::shared_ptr<Session> dialer, acceptor;
};

std::string payload(uint64_t seed, size_t n) {
  std::mt19937_64 g(seed);
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(g());
  return s;
}

// Writes all of `data` on stream `id`, as the window allows, running the
// loop between writes; returns when the acceptor has it all or nothing moves.
void send_all(Pair& p, StreamId id, const std::string& data) {
  size_t sent = 0;
  for (int idle = 0; idle < 1000 && p.at_acceptor.received[id].size() < data.size();) {
    if (sent < data.size()) {
      auto n = p.dialer->mux().write(id, ByteView(reinterpret_cast<const uint8_t*>(data.data()) + sent,
                                                   data.size() - sent));
      ASSERT_TRUE(n.ok()) << n.error().to_string();
      sent += *n;
      p.dialer->flush();
    }
    idle = p.io.poll() == 0 ? idle + 1 : 0;
  }
}

TEST(LinkSim, AStreamArrivesWholeAndInOrderHoweverTheReadsSplitIt) {
  for (uint64_t seed : {1u, 2u, 3u, 42u}) {
    Pair p(seed, 1 + seed * 7);  // reads of 1..8, 1..15, 1..22, 1..295 bytes
    auto id = p.dialer->mux().open_stream(wire::StreamKind::kFile);
    ASSERT_TRUE(id.ok()) << id.error().to_string();
    std::string data = payload(seed, 300 * 1024);  // past the initial window: credit must flow back
    send_all(p, *id, data);
    ASSERT_EQ(p.at_acceptor.received[*id].size(), data.size()) << "seed " << seed;
    EXPECT_TRUE(p.at_acceptor.received[*id] == data) << "seed " << seed;
    ASSERT_EQ(p.at_acceptor.opened.size(), 1u);
    EXPECT_EQ(p.at_acceptor.opened[0], *id);
    EXPECT_EQ(p.dialer->short_auth_string(), p.acceptor->short_auth_string());
  }
}

TEST(LinkSim, TheSameSeedGivesTheSameRun) {
  auto run = [](uint64_t seed) {
    Pair p(seed, 13);
    auto id = p.dialer->mux().open_stream(wire::StreamKind::kFile);
    EXPECT_TRUE(id.ok());
    send_all(p, *id, payload(seed, 100 * 1024));
    return std::make_pair(p.net.a->bytes_written(), p.net.b->bytes_written());
  };
  EXPECT_EQ(run(9), run(9));
}

TEST(LinkSim, APartitionEndsBothSessionsAndTellsTheirObservers) {
  Pair p(5, 64);
  auto id = p.dialer->mux().open_stream(wire::StreamKind::kFile);
  ASSERT_TRUE(id.ok());
  send_all(p, *id, payload(5, 1000));
  ASSERT_FALSE(p.at_dialer.closed);
  p.net.cut();
  for (int i = 0; i < 100 && !(p.at_dialer.closed && p.at_acceptor.closed); ++i) p.io.poll();
  EXPECT_TRUE(p.at_dialer.closed);
  EXPECT_TRUE(p.at_acceptor.closed);
  EXPECT_TRUE(p.dialer->closed());
  EXPECT_TRUE(p.acceptor->closed());
}

TEST(LinkSim, AnOrderlyCloseReachesThePeer) {
  Pair p(6, 64);
  p.dialer->close("done here");
  for (int i = 0; i < 100 && !p.at_acceptor.closed; ++i) p.io.poll();
  EXPECT_TRUE(p.at_acceptor.closed);
  EXPECT_TRUE(p.at_dialer.closed);
}

}  // namespace
}  // namespace yonder::link
