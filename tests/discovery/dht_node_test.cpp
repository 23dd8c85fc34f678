// Real OpenDHT nodes of ours on loopback (discovery/dht_node.h): one
// bootstrap node and two that join through it; a value put by one is found
// by the other, a new put replaces the old one, and a withdrawn value is
// not announced again. Nothing leaves 127.0.0.1.
#include <gtest/gtest.h>

#include <utility>  // before Boost.Asio (GCC 12)

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <algorithm>
#include <future>
#include <thread>

#include "discovery/dht_node.h"
#include "support/wait_until.h"

namespace yonder::discovery {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using testing::wait_until;

class Loop {
 public:
  Loop() : thread_([this] { io.run(); }) {}
  ~Loop() {
    work_.reset();
    thread_.join();
  }
  template <typename F>
  auto on(F f) {
    std::promise<decltype(f())> p;
    asio::post(io, [&] { p.set_value(f()); });
    return p.get_future().get();
  }
  asio::io_context io;

 private:
  asio::executor_work_guard<asio::io_context::executor_type> work_{io.get_executor()};
  std::thread thread_;
};

std::vector<Bytes> get_values(Loop& loop, DhtNode& node, const LocatorLocation& where) {
  std::promise<std::vector<Bytes>> found;
  auto f = found.get_future();
  loop.on([&] {
    node.get(where, [&](std::vector<Bytes> v) { found.set_value(std::move(v)); });
    return 0;
  });
  if (f.wait_for(30s) != std::future_status::ready) {
    ADD_FAILURE() << "the DHT search did not end";
    std::abort();
  }
  return f.get();
}

TEST(DhtNode, AValuePutByOneNodeIsFoundByAnotherAndANewPutReplacesIt) {
  Loop loop;
  auto boot = loop.on([&] { return DhtNode::start(loop.io, {"127.0.0.1:0", {}}); });
  ASSERT_TRUE(boot) << boot.error().to_string();
  uint16_t port = (*boot)->stats().port;
  ASSERT_NE(port, 0);
  std::string at = "127.0.0.1:" + std::to_string(port);
  auto a = loop.on([&] { return DhtNode::start(loop.io, {"127.0.0.1:0", {at}}); });
  auto b = loop.on([&] { return DhtNode::start(loop.io, {"127.0.0.1:0", {at}}); });
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(wait_until([&] { return (*a)->stats().good + (*a)->stats().dubious >= 1 &&
                                      (*b)->stats().good + (*b)->stats().dubious >= 1; }, 30s))
      << "the nodes did not join";

  LocatorLocation where{};
  where.fill(0x42);
  std::promise<bool> stored;
  loop.on([&] {
    (*a)->put(where, Bytes{1, 2, 3}, [&](bool ok) { stored.set_value(ok); });
    return 0;
  });
  EXPECT_TRUE(stored.get_future().get());
  std::vector<Bytes> found;
  ASSERT_TRUE(wait_until([&] {
    found = get_values(loop, **b, where);
    return !found.empty();
  }, 30s));
  EXPECT_EQ(found, std::vector<Bytes>{Bytes({1, 2, 3})});

  // A new put replaces what the node put there: the old value is no longer
  // announced (it lingers where stored until it expires; readers take the
  // newest record, locator.h).
  std::promise<bool> stored2;
  loop.on([&] {
    (*a)->put(where, Bytes{4, 5}, [&](bool ok) { stored2.set_value(ok); });
    return 0;
  });
  EXPECT_TRUE(stored2.get_future().get());
  ASSERT_TRUE(wait_until([&] {
    found = get_values(loop, **b, where);
    return std::find(found.begin(), found.end(), Bytes({4, 5})) != found.end();
  }, 30s));

  // Too large is refused before anything is sent.
  std::promise<bool> refused;
  loop.on([&] {
    (*a)->put(where, Bytes(kMaxLocatorValueBytes + 1, 0), [&](bool ok) { refused.set_value(ok); });
    return 0;
  });
  EXPECT_FALSE(refused.get_future().get());

  loop.on([&] {
    (*a)->stop();
    (*b)->stop();
    (*boot)->stop();
    return 0;
  });
}

TEST(DhtNode, ABadAddressIsRefusedWithWhatToDo) {
  Loop loop;
  auto r = loop.on([&] { return DhtNode::start(loop.io, {"nonsense", {}}); });
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message().find("discovery.dht_listen"), std::string::npos) << r.error().message();
  auto r2 = loop.on([&] { return DhtNode::start(loop.io, {"127.0.0.1:0", {"no-port"}}); });
  ASSERT_FALSE(r2);
  EXPECT_NE(r2.error().message().find("discovery.dht"), std::string::npos) << r2.error().message();
}

}  // namespace
}  // namespace yonder::discovery
