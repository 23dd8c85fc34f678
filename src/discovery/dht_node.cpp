#include "discovery/dht_node.h"

#include <opendht.h>
#include <opendht/dhtrunner.h>

#include <boost/asio/post.hpp>
#include <exception>
#include <mutex>
#include <random>

namespace yonder::discovery {
namespace {

namespace asio = boost::asio;

// "HOST:PORT" -> host, port text; false when it has no port.
bool split_host_port(const std::string& text, std::string* host, std::string* port) {
  auto colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size()) return false;
  *host = text.substr(0, colon);
  *port = text.substr(colon + 1);
  if (host->size() > 2 && host->front() == '[' && host->back() == ']') *host = host->substr(1, host->size() - 2);
  for (char c : *port) {
    if (c < '0' || c > '9') return false;
  }
  return port->size() <= 5 && std::stoul(*port) <= 65535;
}

dht::InfoHash hash_of(const LocatorLocation& l) {
  return dht::InfoHash(l.data(), l.size());
}

}  // namespace

struct DhtNode::Impl : std::enable_shared_from_this<Impl> {
  explicit Impl(asio::io_context& i) : io(i) {}
  asio::io_context& io;
  dht::DhtRunner runner;
  std::map<LocatorLocation, dht::Value::Id> mine;  // io thread only
  std::mt19937_64 ids{std::random_device{}()};
  bool stopped = false;

  // Runs `f` on the io thread unless the node stopped meanwhile.
  void on_io(std::function<void()> f) {
    std::weak_ptr<Impl> weak = weak_from_this();
    asio::post(io, [weak, f = std::move(f)] {
      auto self = weak.lock();
      if (self && !self->stopped) f();
    });
  }
};

Result<std::unique_ptr<DhtNode>> DhtNode::start(asio::io_context& io, const Config& config) {
  std::string host, port;
  if (!split_host_port(config.listen, &host, &port)) {
    return make_error(ErrorCode::kInvalidArgument,
                      "discovery.dht_listen \"" + config.listen +
                          "\" is not IP:PORT (e.g. 0.0.0.0:4222, port 0 for any); fix it with `yonder config set "
                          "discovery.dht_listen IP:PORT`");
  }
  std::vector<std::pair<std::string, std::string>> bootstrap;
  for (const auto& b : config.bootstrap) {
    std::string h, p;
    if (!split_host_port(b, &h, &p)) {
      return make_error(ErrorCode::kInvalidArgument,
                        "discovery.dht names \"" + b + "\", which is not HOST:PORT; fix it with `yonder config set "
                        "discovery.dht HOST:PORT,...`");
    }
    bootstrap.emplace_back(h, p);
  }
  auto impl = std::make_shared<Impl>(io);
  try {
    dht::DhtRunner::Config c;
    c.dht_config.node_config.network = kYonderDhtNetwork;
    c.threaded = true;
    c.peer_discovery = false;
    c.peer_publish = false;
    c.bind4 = dht::SockAddr::resolve(host, port).at(0);
    c.bind4.setPort(static_cast<in_port_t>(std::stoul(port)));
    c.bind6 = {};
    impl->runner.run(c, dht::DhtRunner::Context{});
    for (const auto& [h, p] : bootstrap) impl->runner.bootstrap(h, p);
  } catch (const std::exception& e) {
    return make_error(ErrorCode::kUnavailable, "cannot start the DHT node on " + config.listen + ": " + e.what() +
                                                   "; choose a free address in discovery.dht_listen");
  }
  return std::unique_ptr<DhtNode>(new DhtNode(std::move(impl)));
}

DhtNode::~DhtNode() {
  stop();
}

void DhtNode::put(const LocatorLocation& location, Bytes value, std::function<void(bool)> done) {
  if (impl_->stopped || value.size() > kMaxLocatorValueBytes) {
    if (done) done(false);
    return;
  }
  auto hash = hash_of(location);
  auto v = std::make_shared<dht::Value>(dht::ValueType::USER_DATA.id, value.data(), value.size(), impl_->ids());
  if (auto it = impl_->mine.find(location); it != impl_->mine.end()) impl_->runner.cancelPut(hash, it->second);
  impl_->mine[location] = v->id;
  std::weak_ptr<Impl> weak = impl_;
  impl_->runner.put(
      hash, v,
      [weak, done](bool ok) {
        auto self = weak.lock();
        if (self && done) self->on_io([done, ok] { done(ok); });
      },
      dht::time_point::max(), true);
}

void DhtNode::withdraw(const LocatorLocation& location) {
  auto it = impl_->mine.find(location);
  if (impl_->stopped || it == impl_->mine.end()) return;
  impl_->runner.cancelPut(hash_of(location), it->second);
  impl_->mine.erase(it);
}

void DhtNode::get(const LocatorLocation& location, std::function<void(std::vector<Bytes>)> done) {
  if (impl_->stopped) return;
  // Filled on OpenDHT's thread, handed over whole when the search ends.
  auto found = std::make_shared<std::pair<std::mutex, std::vector<Bytes>>>();
  std::weak_ptr<Impl> weak = impl_;
  impl_->runner.get(
      hash_of(location),
      [found](const std::vector<std::shared_ptr<dht::Value>>& values) {
        std::lock_guard lock(found->first);
        for (const auto& v : values) {
          if (v && v->data.size() <= kMaxLocatorValueBytes && found->second.size() < 64) {
            found->second.emplace_back(v->data.begin(), v->data.end());
          }
        }
        return true;
      },
      [weak, found, done](bool) {
        auto self = weak.lock();
        if (!self) return;
        std::vector<Bytes> out;
        {
          std::lock_guard lock(found->first);
          out = std::move(found->second);
        }
        self->on_io([done, out = std::move(out)] { done(out); });
      });
}

DhtNode::Stats DhtNode::stats() const {
  Stats s;
  if (impl_->stopped) return s;
  s.port = impl_->runner.getBoundPort(AF_INET);
  unsigned good = 0, dubious = 0, cached = 0, incoming = 0;
  impl_->runner.getNodesStats(AF_INET, &good, &dubious, &cached, &incoming);
  s.good = good;
  s.dubious = dubious;
  return s;
}

void DhtNode::stop() {
  if (impl_->stopped) return;
  impl_->stopped = true;
  try {
    impl_->runner.join();
  } catch (const std::exception&) {
    // Already stopped: nothing left to join.
  }
}

}  // namespace yonder::discovery
