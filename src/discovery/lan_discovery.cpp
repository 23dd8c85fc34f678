#include "discovery/lan_discovery.h"

#include <net/if.h>
#include <netinet/in.h>
#include <sodium.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>

#include <boost/asio/ip/multicast.hpp>
#include <boost/asio/ip/udp.hpp>
#include <boost/asio/steady_timer.hpp>

#include "os/interfaces.h"

namespace yonder::discovery {

namespace asio = boost::asio;
using asio::ip::udp;

namespace {

struct Interface {
  std::string name;
  asio::ip::address_v4 address;
};

// The IPv4 interfaces to use: the named ones, or every one that is up and
// can multicast, loopback excepted. One address per interface (the first).
Result<std::vector<Interface>> choose_interfaces(const std::vector<std::string>& wanted) {
  auto listed = os::ipv4_interfaces();
  if (!listed) return std::move(listed).error();
  std::vector<Interface> all, chosen;
  std::vector<unsigned> flags;
  for (const auto& i : *listed) {
    bool have = false;
    for (const auto& a : all) have = have || a.name == i.name;
    if (have) continue;
    all.push_back({i.name, asio::ip::address_v4(i.address)});
    flags.push_back(i.flags);
  }
  if (!wanted.empty()) {
    for (const auto& name : wanted) {
      auto it = std::find_if(all.begin(), all.end(), [&](const Interface& a) { return a.name == name; });
      if (it == all.end()) {
        return make_error(ErrorCode::kInvalidArgument,
                          "no interface '" + name + "' with an IPv4 address for LAN discovery; see 'ip -4 addr'");
      }
      chosen.push_back(*it);
    }
    return chosen;
  }
  for (size_t k = 0; k < all.size(); ++k) {
    if ((flags[k] & IFF_UP) && (flags[k] & IFF_MULTICAST) && !(flags[k] & IFF_LOOPBACK)) chosen.push_back(all[k]);
  }
  if (chosen.empty()) {
    return make_error(ErrorCode::kUnavailable,
                      "no network interface is up with an IPv4 address and multicast: LAN discovery has nothing to "
                      "announce on");
  }
  return chosen;
}

void fill_random(std::span<uint8_t> out) {
  randombytes_buf(out.data(), out.size());
}

bool transient(const boost::system::error_code& ec) {
  // ICMP errors from earlier sends surface on a UDP socket's next receive.
  return ec == asio::error::connection_refused || ec == asio::error::host_unreachable ||
         ec == asio::error::network_unreachable || ec == asio::error::message_size;
}

}  // namespace

struct LanDiscovery::Impl : std::enable_shared_from_this<LanDiscovery::Impl> {
  Impl(asio::io_context& io, const PublicKeyBytes& self, const LanDiscoveryOptions& options, OnCandidate cb)
      : socket(io),
        timer(io),
        core(self, LanDiscoveryConfig{.link_port = options.link_port, .interval = options.interval}, fill_random),
        on_candidate(std::move(cb)) {}

  void receive() {
    socket.async_receive_from(
        asio::buffer(buf), from, [self = shared_from_this()](boost::system::error_code ec, size_t n) {
          if (self->stopped) return;
          if (ec && !transient(ec)) return;  // closed, or broken for good: stop listening
          if (!ec) {
            auto candidate = self->core.on_datagram(ByteView(self->buf.data(), n), self->from.address().to_string(),
                                                    std::chrono::steady_clock::now());
            self->flush();
            if (candidate && self->on_candidate) self->on_candidate(*candidate);
            if (self->stopped) return;  // the callback destroyed us
            self->arm();
          }
          self->receive();
        });
  }

  // Keeps one timer wait pending for the core's next deadline.
  void arm() {
    SteadyTime due = core.next_deadline();
    if (due == armed) return;
    armed = due;
    if (due == SteadyTime::max()) {
      timer.cancel();
      return;
    }
    timer.expires_at(due);
    timer.async_wait([self = shared_from_this()](boost::system::error_code ec) {
      if (self->stopped || ec) return;  // cancelled: a newer wait is pending
      self->armed = SteadyTime::max();
      self->core.on_timer(std::chrono::steady_clock::now());
      self->flush();
      self->arm();
    });
  }

  // Multicasts what the core wants sent on every interface. UDP sends do not
  // block; a failure (an interface gone down) loses one announcement, which
  // the schedule repeats.
  void flush() {
    for (const auto& datagram : core.take_outgoing()) {
      for (const auto& iface : interfaces) {
        boost::system::error_code ec;
        socket.set_option(asio::ip::multicast::outbound_interface(iface.address), ec);
        if (!ec) socket.send_to(asio::buffer(datagram), group, 0, ec);
      }
    }
  }

  void stop() {
    stopped = true;
    boost::system::error_code ec;
    timer.cancel();
    socket.close(ec);
  }

  udp::socket socket;
  asio::steady_timer timer;
  LanDiscoveryCore core;
  OnCandidate on_candidate;
  udp::endpoint group;
  std::vector<Interface> interfaces;
  std::vector<std::string> names;
  std::array<uint8_t, kMaxAnnouncementSize + 1> buf{};  // one more: an oversized datagram is seen as such
  udp::endpoint from;
  SteadyTime armed = SteadyTime::max();
  bool stopped = false;
};

Result<std::unique_ptr<LanDiscovery>> LanDiscovery::start(asio::io_context& io, const PublicKeyBytes& self,
                                                          std::vector<PairedPeer> peers, LanDiscoveryOptions options,
                                                          OnCandidate on_candidate) {
  if (sodium_init() < 0) return make_error(ErrorCode::kInternal, "libsodium failed to initialise");
  if (options.link_port == 0) return make_error(ErrorCode::kInvalidArgument, "LAN discovery needs the link's port");
  if (options.port == 0) return make_error(ErrorCode::kInvalidArgument, "LAN discovery needs a UDP port other than 0");
  boost::system::error_code ec;
  auto group = asio::ip::make_address_v4(options.group, ec);
  if (ec || !group.is_multicast()) {
    return make_error(ErrorCode::kInvalidArgument,
                      "LAN discovery group '" + options.group + "' is not an IPv4 multicast address (239.x.x.x)");
  }
  auto chosen = choose_interfaces(options.interfaces);
  if (!chosen.ok()) return std::move(chosen).error();

  auto impl = std::make_shared<Impl>(io, self, options, std::move(on_candidate));
  impl->group = udp::endpoint(group, options.port);
  impl->interfaces = std::move(*chosen);
  auto fail = [&](const std::string& step) {
    impl->stop();
    return make_error(ErrorCode::kUnavailable, "LAN discovery: " + step + ": " + ec.message());
  };
  impl->socket.open(udp::v4(), ec);
  if (ec) return fail("opening a UDP socket");
  // Other nodes on this host (another YONDER_HOME) listen on the same port.
  impl->socket.set_option(udp::socket::reuse_address(true), ec);
  if (ec) return fail("SO_REUSEADDR");
  // Only the groups this socket joined, not every group any socket on the host joined.
  int zero = 0;
  if (::setsockopt(impl->socket.native_handle(), IPPROTO_IP, IP_MULTICAST_ALL, &zero, sizeof zero) != 0) {
    ec = boost::system::error_code(errno, boost::system::system_category());
    return fail("IP_MULTICAST_ALL");
  }
  impl->socket.bind(udp::endpoint(asio::ip::address_v4::any(), options.port), ec);
  if (ec) return fail("binding UDP port " + std::to_string(options.port));
  impl->socket.set_option(asio::ip::multicast::hops(1), ec);  // this link only
  if (ec) return fail("multicast TTL");
  // Other nodes on this host hear us through the loopback.
  impl->socket.set_option(asio::ip::multicast::enable_loopback(true), ec);
  if (ec) return fail("multicast loopback");
  for (const auto& iface : impl->interfaces) {
    impl->socket.set_option(asio::ip::multicast::join_group(group, iface.address), ec);
    if (ec) return fail("joining " + options.group + " on " + iface.name);
    impl->names.push_back(iface.name);
  }
  impl->core.set_peers(std::move(peers));
  auto now = std::chrono::steady_clock::now();
  impl->core.start(now);
  impl->core.on_timer(now);
  impl->flush();
  impl->arm();
  impl->receive();
  return std::unique_ptr<LanDiscovery>(new LanDiscovery(std::move(impl)));
}

LanDiscovery::~LanDiscovery() {
  impl_->stop();
}

void LanDiscovery::set_peers(std::vector<PairedPeer> peers) {
  // A new peer (just paired): query as if just started, so it is found now.
  if (impl_->core.set_peers(std::move(peers))) {
    auto now = std::chrono::steady_clock::now();
    impl_->core.start(now);
    impl_->core.on_timer(now);
    impl_->flush();
  }
  impl_->arm();
}

void LanDiscovery::query_now() {
  auto now = std::chrono::steady_clock::now();
  impl_->core.start(now);
  impl_->core.on_timer(now);
  impl_->flush();
  impl_->arm();
}

const std::vector<std::string>& LanDiscovery::interfaces() const {
  return impl_->names;
}

}  // namespace yonder::discovery
