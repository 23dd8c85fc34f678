// The relay in the NAT lab (scripts/natlab.sh, tests/support/nat_lab.h):
// the relay on the public router, one node behind a port-preserving NAT
// (MASQUERADE), one behind a symmetric one (--random-fully). Each sees its
// NAT's public address and the right verdict; they signal each other and
// run a TLS session through a pipe whose relayed bytes hold no plaintext.
// Each side runs its own event loop on a thread inside its namespace, so
// every socket it makes (control, probe, pipe end) is made there.
#include <gtest/gtest.h>

#include <utility>  // before Boost.Asio (GCC 12)

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <future>
#include <mutex>
#include <thread>

#include "crypto/identity.h"
#include "net/link/tls_channel.h"
#include "net/link/tls_context.h"
#include "relay/client.h"
#include "relay/server.h"
#include "support/nat_lab.h"
#include "support/node_loop.h"

namespace yonder::relay {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using testing::NatLab;
using testing::NodeLoop;
using testing::NatMode;

template <typename T>
T wait(std::future<T>& f) {
  if (f.wait_for(20s) != std::future_status::ready) {
    ADD_FAILURE() << "timed out";
    std::abort();  // a hung lab test must not hang ctest
  }
  return f.get();
}

TEST(RelayLab, NodesBehindNatsRegisterSignalAndPipeThroughTheRelay) {
  YONDER_SKIP_WITHOUT_NAT_LAB();
  NatLab lab({.nat_a = NatMode::kPreserving, .nat_b = NatMode::kSymmetric});
  Identity relay_id = Identity::generate().value();
  Identity a_id = Identity::generate().value();
  Identity b_id = Identity::generate().value();
  std::mutex tapped_mu;
  std::string tapped;

  NodeLoop pub(lab, "pub"), a1(lab, "a1"), b1(lab, "b1");
  RelayConfig cfg;
  cfg.node_rate = 0;
  auto server = pub.on([&] {
    auto s = std::make_unique<RelayServer>(pub.io, relay_id, cfg);
    EXPECT_TRUE(s->listen(lab.server_address() + ":0"));
    s->set_tap([&](const PublicKeyBytes&, ByteView b) {
      std::lock_guard lock(tapped_mu);
      tapped.append(reinterpret_cast<const char*>(b.data()), b.size());
    });
    return s;
  });
  std::string address = lab.server_address() + ":" + std::to_string(server->local_endpoint().port());

  struct Side {
    std::shared_ptr<RelayClient> client;
    std::promise<Result<Registration>> registered;
    std::promise<Bytes> signal;
    std::promise<Result<RelayPipe>> pipe;
  };
  Side a, b;
  auto connect = [&](NodeLoop& loop, Side& side, const Identity& me, const PublicKeyBytes& peer, bool accept) {
    loop.on([&] {
      RelayClientConfig c;
      c.address = address;
      c.relay_key = relay_id.public_key();
      c.peers = {peer};
      side.client = RelayClient::create(loop.io, me, c).value();
      RelayClient::Handlers h;
      h.signal = [&side](const PublicKeyBytes&, Bytes d, const std::string&) { side.signal.set_value(std::move(d)); };
      if (accept) {
        h.pipe_wanted = [&side](const PublicKeyBytes& from) {
          side.client->open_pipe(from, [&side](Result<RelayPipe> p) { side.pipe.set_value(std::move(p)); });
        };
      }
      side.client->connect(h, [&side](Result<Registration> r) { side.registered.set_value(std::move(r)); });
      return 0;
    });
  };
  connect(a1, a, a_id, b_id.public_key(), false);
  connect(b1, b, b_id, a_id.public_key(), true);
  auto fa = a.registered.get_future();
  auto fb = b.registered.get_future();
  auto ra = wait(fa);
  auto rb = wait(fb);
  ASSERT_TRUE(ra) << ra.error().to_string() << "\n" << lab.status();
  ASSERT_TRUE(rb) << rb.error().to_string();

  // Each is seen from its NAT's public address.
  EXPECT_EQ(ra->nat.observed.ip, lab.address("nat-a"));
  EXPECT_EQ(rb->nat.observed.ip, lab.address("nat-b"));
  EXPECT_EQ(ra->nat.mapping, Mapping::kPortPreserving) << ra->nat.observed.to_string();
  EXPECT_EQ(ra->nat.nat, NatVerdict::kPortPreserving);
  EXPECT_EQ(rb->nat.mapping, Mapping::kPortChanging) << rb->nat.observed.to_string();
  EXPECT_EQ(rb->nat.nat, NatVerdict::kSymmetric);

  // A second registration from another local socket keeps the verdicts.
  std::promise<Result<NatReport>> pa, pb;
  a1.on([&] {
    a.client->probe_nat([&](Result<NatReport> r) { pa.set_value(std::move(r)); });
    return 0;
  });
  b1.on([&] {
    b.client->probe_nat([&](Result<NatReport> r) { pb.set_value(std::move(r)); });
    return 0;
  });
  auto fpa = pa.get_future();
  auto fpb = pb.get_future();
  auto probe_a = wait(fpa);
  auto probe_b = wait(fpb);
  ASSERT_TRUE(probe_a) << probe_a.error().to_string();
  ASSERT_TRUE(probe_b) << probe_b.error().to_string();
  EXPECT_EQ(probe_a->samples, 2u);
  EXPECT_EQ(probe_a->nat, NatVerdict::kPortPreserving);
  EXPECT_EQ(probe_b->nat, NatVerdict::kSymmetric);

  // Signalling across both NATs.
  std::promise<Status> sent;
  b1.on([&] {
    b.client->send_signal(a_id.public_key(), Bytes{'h', 'i'}, [&](Status s) { sent.set_value(std::move(s)); });
    return 0;
  });
  auto fs = sent.get_future();
  ASSERT_TRUE(wait(fs));
  auto fsig = a.signal.get_future();
  EXPECT_EQ(wait(fsig), (Bytes{'h', 'i'}));

  // A pipe, and the peers' own TLS inside it.
  std::promise<Result<RelayPipe>> a_pipe;
  a1.on([&] {
    a.client->open_pipe(b_id.public_key(), [&](Result<RelayPipe> p) { a_pipe.set_value(std::move(p)); });
    return 0;
  });
  auto fpipe_a = a_pipe.get_future();
  auto fpipe_b = b.pipe.get_future();
  auto end_a = wait(fpipe_a);
  auto end_b = wait(fpipe_b);
  ASSERT_TRUE(end_a) << end_a.error().to_string();
  ASSERT_TRUE(end_b) << end_b.error().to_string();
  ASSERT_TRUE(end_a->initiator);

  const std::string marker = "NAT-LAB-RELAY-MARKER-0b9e";
  std::string payload;
  while (payload.size() < 256 * 1024) payload += marker + std::to_string(payload.size());
  auto ctx_a = link::TlsContext::create(a_id, false).value();
  auto ctx_b = link::TlsContext::create(b_id, true).value();
  std::shared_ptr<link::TlsChannel> tls_a, tls_b;
  std::promise<bool> hs_a, hs_b;
  a1.on([&] {
    tls_a = std::make_shared<link::TlsChannel>(std::move(end_a->socket), ctx_a->native(), false);
    link::TlsContext::set_policy(tls_a->native_handle(), [&](const PublicKeyBytes& k) {
      return k == b_id.public_key() ? link::KeyVerdict::kPinned : link::KeyVerdict::kReject;
    });
    tls_a->async_handshake([&](boost::system::error_code ec) { hs_a.set_value(!ec); });
    return 0;
  });
  b1.on([&] {
    tls_b = std::make_shared<link::TlsChannel>(std::move(end_b->socket), ctx_b->native(), true);
    link::TlsContext::set_policy(tls_b->native_handle(), [&](const PublicKeyBytes& k) {
      return k == a_id.public_key() ? link::KeyVerdict::kPinned : link::KeyVerdict::kReject;
    });
    tls_b->async_handshake([&](boost::system::error_code ec) { hs_b.set_value(!ec); });
    return 0;
  });
  auto fha = hs_a.get_future();
  auto fhb = hs_b.get_future();
  ASSERT_TRUE(wait(fha));
  ASSERT_TRUE(wait(fhb));
  std::promise<std::string> received;
  auto got = std::make_shared<std::string>();
  auto buf = std::make_shared<std::vector<uint8_t>>(64 * 1024);
  std::function<void()> read_more = [&] {
    tls_b->async_read_some(buf->data(), buf->size(), [&, got, buf](boost::system::error_code ec, size_t n) {
      got->append(reinterpret_cast<const char*>(buf->data()), n);
      if (ec) return received.set_value(*got);
      read_more();
    });
  };
  b1.on([&] {
    read_more();
    return 0;
  });
  a1.on([&] {
    tls_a->async_write(as_bytes(payload), [&](boost::system::error_code, size_t) {
      tls_a->async_shutdown([](boost::system::error_code) {});
    });
    return 0;
  });
  auto frecv = received.get_future();
  EXPECT_EQ(wait(frecv), payload);
  {
    std::lock_guard lock(tapped_mu);
    EXPECT_GT(tapped.size(), payload.size());
    EXPECT_EQ(tapped.find(marker), std::string::npos);
  }

  a1.on([&] {
    tls_a->close();
    a.client->close();
    return 0;
  });
  b1.on([&] {
    tls_b->close();
    b.client->close();
    return 0;
  });
  pub.on([&] {
    server.reset();
    return 0;
  });
}

}  // namespace
}  // namespace yonder::relay
