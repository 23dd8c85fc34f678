#include "net/reach/punch_paths.h"

#include <utility>  // before Boost.Asio (GCC 12)

#include <set>

#include <arpa/inet.h>

#include <netinet/in.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <spdlog/spdlog.h>

#include "net/link/link_service.h"
#include "net/punch/nat_check.h"
#include "net/punch/punch_packet.h"
#include "net/punch/punch_session.h"
#include "net/punch/signal.h"
#include "net/quic/quic_endpoint.h"
#include "os/interfaces.h"
#include "relay/nat.h"

namespace yonder::reach {
namespace asio = boost::asio;
using udp = asio::ip::udp;
using Clock = std::chrono::steady_clock;

namespace {

// The punch code's view of the QUIC socket.
class QuicPort final : public punch::DatagramPort {
 public:
  explicit QuicPort(std::weak_ptr<quic::QuicEndpoint> ep) : ep_(std::move(ep)) {}
  void send_to(const udp::endpoint& to, ByteView bytes, std::optional<int> ttl) override {
    if (auto ep = ep_.lock()) (void)ep->send_to(to, bytes, ttl);
  }

 private:
  std::weak_ptr<quic::QuicEndpoint> ep_;
};

std::string endpoint_text(const udp::endpoint& e) {
  if (e.address().is_v6()) return "[" + e.address().to_string() + "]:" + std::to_string(e.port());
  return e.address().to_string() + ":" + std::to_string(e.port());
}

// This host's own IPv4 addresses (not loopback): the host candidates, for
// peers on the same network.
std::vector<asio::ip::address> host_addresses() {
  std::vector<asio::ip::address> out;
  auto ifs = os::ipv4_interfaces();
  if (!ifs) return out;
  for (const auto& i : *ifs) {
    asio::ip::address_v4 a(i.address);
    if (a.is_loopback() || a.is_unspecified()) continue;
    out.emplace_back(a);
    if (out.size() >= 4) break;
  }
  return out;
}

constexpr std::chrono::minutes kNatCheckMaxAge{5};
constexpr std::chrono::seconds kFirstBackoff{10};
constexpr int kOfferRetries = 12;
constexpr std::chrono::milliseconds kOfferPause{250};
constexpr std::chrono::minutes kMaxBackoff{10};
// Why no punch is tried: UDP cannot tell, TCP says symmetric.
constexpr std::string_view kSymmetricOverTcp =
    "the NAT picked a new public port for each TCP connection (a relay's registrations; with one relay the UDP "
    "check cannot tell), so it most likely does over UDP too: links stay on the relay (a second relay at another "
    "address in link.relays lets the UDP check decide)";
// Why no punch is tried: the NAT check got no public UDP address.
constexpr std::string_view kNoPublicUdp =
    "this node has no public UDP address (no relay answered over UDP; UDP may be blocked on this network), so a "
    "direct path cannot be punched; links stay on the relay";

}  // namespace

struct PunchPaths::Impl : std::enable_shared_from_this<Impl> {
  struct PeerPunch {
    std::shared_ptr<punch::PunchSession> session;
    bool initiator = false;
    std::string state;  // punching, connecting, awaiting quic, punched, failed
    std::string reason;
    std::string remote;
    double elapsed_ms = 0;
    double punch_rtt_ms = 0;
    int attempts = 0;
    int failures = 0;
    int offer_retries = 0;
    Clock::time_point next_try{};
    bool birthday = false;  // the last punch probed birthday ports (one NAT symmetric)
    size_t datagrams = 0;   // the last punch's datagrams, from this side
    bool hard_birthday = false;  // the running session may open birthday ports (this side's NAT is symmetric)
    // Birthday paths' sockets, each a QUIC endpoint of its own carrying its
    // connection: the newest two (a new one closes the oldest), all at stop.
    std::vector<std::shared_ptr<quic::QuicEndpoint>> own_endpoints;
    // Fires at next_try after a failure: tries again while the link is
    // still on the relay (a relayed session does not come up again on its
    // own, so without it one unlucky attempt would be the last).
    std::shared_ptr<asio::steady_timer> retry;
  };

  asio::io_context& io;
  const Identity& identity;
  link::LinkService& link;
  Hooks hooks;
  std::string listen;
  std::string preferred_host;
  uint16_t preferred_port;
  quic::QuicConfig quic_config;
  std::shared_ptr<quic::QuicEndpoint> endpoint;
  // Dial-backs over UDP in flight (probe_udp), each on a socket of its own;
  // held here, not by their own callbacks, and closed at stop.
  std::set<std::shared_ptr<quic::QuicEndpoint>> probes;
  std::unique_ptr<QuicPort> port;
  std::shared_ptr<punch::NatCheckSession> check;
  std::optional<punch::NatCheckResult> nat;
  Clock::time_point nat_at{};
  std::vector<std::function<void()>> after_check;
  std::map<PublicKeyBytes, PeerPunch> peers;
  std::string off_reason;
  bool stopped = false;

  Impl(asio::io_context& i, const Identity& id, link::LinkService& l, Hooks h, std::string lst, std::string ph,
       uint16_t pp, std::chrono::milliseconds keepalive)
      : io(i), identity(id), link(l), hooks(std::move(h)), listen(std::move(lst)), preferred_host(std::move(ph)),
        preferred_port(pp) {
    quic_config.keepalive = keepalive;
    // Both ends send a keepalive at least this often, so a punched path
    // that hears nothing for four of them is gone (a NAT dropped or moved
    // the mapping, the peer moved): QUIC's idle timeout ends it then and the
    // link goes back to the relay, instead of waiting out link.dead_after_s.
    quic_config.idle_timeout = 4 * keepalive;
  }

  Status start() {
    Result<std::shared_ptr<quic::QuicEndpoint>> ep = make_error(ErrorCode::kInternal, "unset");
    if (!listen.empty()) {
      auto addr = relay::parse_net_address(listen);
      if (!addr) {
        return make_error(ErrorCode::kInvalidArgument,
                          "link.udp_listen \"" + listen + "\" is not IP:PORT (e.g. 0.0.0.0:7850); fix it with "
                          "`yonder config set link.udp_listen IP:PORT`, or leave it empty");
      }
      ep = quic::QuicEndpoint::bind(io.get_executor(), identity,
                                    udp::endpoint(asio::ip::make_address(addr->ip), addr->port), quic_config);
      if (!ep) return Error(ep.error()).with_context("link.udp_listen " + listen);
    } else {
      // Where the link listens (a node that listens on one address opens
      // its UDP port there only). Punching reaches other hosts by nature,
      // so a link on loopback (or on all addresses) punches from all
      // IPv4 addresses; the socket answers only punch probes of peers it
      // signalled and QUIC handshakes of pinned keys.
      boost::system::error_code bad;
      auto host = asio::ip::make_address(preferred_host.empty() ? "0.0.0.0" : preferred_host, bad);
      if (bad || !host.is_v4() || host.is_loopback()) host = asio::ip::address_v4::any();
      ep = quic::QuicEndpoint::bind(io.get_executor(), identity, udp::endpoint(host, preferred_port), quic_config);
      if (!ep) ep = quic::QuicEndpoint::bind(io.get_executor(), identity, udp::endpoint(host, 0), quic_config);
      if (!ep) return Error(ep.error()).with_context("the UDP socket for hole punching");
    }
    endpoint = *ep;
    port = std::make_unique<QuicPort>(endpoint);
    std::weak_ptr<Impl> weak = weak_from_this();
    endpoint->on_other_datagram([weak](const udp::endpoint& from, ByteView data) {
      if (auto self = weak.lock()) self->on_datagram(from, data);
    });
    endpoint->listen(
        [weak](const PublicKeyBytes& key) {
          auto self = weak.lock();
          return self && self->hooks.pinned(key);
        },
        [weak](std::shared_ptr<quic::QuicChannel> ch, PublicKeyBytes key) {
          auto self = weak.lock();
          if (!self) return ch->close();
          self->adopt(std::move(ch), key, false);
        });
    spdlog::info("hole punching: UDP socket on {}", endpoint_text(endpoint->local_endpoint()));
    // Know the NAT before the first offer comes or goes.
    if (!stun_servers().empty()) run_check();
    return ok_status();
  }

  void stop() {
    stopped = true;
    for (auto& [key, p] : peers) {
      if (p.session) p.session->cancel();
      if (p.retry) p.retry->cancel();
      for (auto& ep : p.own_endpoints) ep->close();
      p.own_endpoints.clear();
    }
    peers.clear();
    if (check) check->cancel();
    check.reset();
    if (endpoint) endpoint->close();
    auto closing = std::move(probes);  // a close may call back into probes
    probes.clear();
    for (const auto& ep : closing) ep->close();
  }

  void on_datagram(const udp::endpoint& from, ByteView data) {
    switch (punch::classify_datagram(data)) {
      case punch::DatagramKind::kStun:
        if (check) check->on_datagram(from, data);
        return;
      case punch::DatagramKind::kPunch: {
        auto pkt = punch::decode_punch_packet(data);
        if (!pkt) return;
        for (auto& [key, p] : peers) {
          if (p.session && p.session->session() == pkt->session) {
            p.session->on_datagram(from, data);
            return;
          }
        }
        return;
      }
      default:
        return;
    }
  }

  std::vector<udp::endpoint> stun_servers() const {
    std::vector<udp::endpoint> out;
    for (const auto& r : hooks.relays()) {
      auto a = relay::parse_net_address(r);
      if (!a) continue;  // a relay named by host name: its TCP side works, STUN needs an address
      boost::system::error_code ec;
      auto ip = asio::ip::make_address(a->ip, ec);
      if (ec) continue;
      out.emplace_back(ip, a->port);
      if (out.size() >= 4) break;
    }
    return out;
  }

  // Runs `then` once this node's NAT is known (checking first when the
  // last check is missing or old).
  // A result that is merely old is used at once (and refreshed behind it):
  // a responder must answer an offer without a STUN round trip first, or
  // the initiator's round-trip estimate (offer -> answer), which times the
  // punch, is off by that much and the probes of one side reach the other
  // side's NAT before that side has opened its mapping.
  void with_nat(std::function<void()> then) {
    if (nat) {
      if (Clock::now() - nat_at >= kNatCheckMaxAge) run_check();
      return then();
    }
    after_check.push_back(std::move(then));
    run_check();
  }

  void run_check() {
    if (check || !endpoint) return;
    auto servers = stun_servers();
    if (servers.empty()) {
      punch::NatCheckResult r;
      r.why = "no relay with a numeric address to ask (link.relays): cannot learn this node's public UDP address";
      finish_check(r);
      return;
    }
    punch::NatCheckConfig cfg;
    cfg.servers = std::move(servers);
    std::weak_ptr<Impl> weak = weak_from_this();
    check = punch::NatCheckSession::start(io, *port, cfg, [weak](const punch::NatCheckResult& r) {
      auto self = weak.lock();
      if (!self || self->stopped) return;
      // The session calls back from its own timer or datagram handler: let
      // it unwind before it is dropped.
      asio::post(self->io, [weak, r] {
        if (auto s = weak.lock()) s->finish_check(r);
      });
    });
  }

  void finish_check(const punch::NatCheckResult& r) {
    check.reset();
    nat = r;
    nat_at = Clock::now();
    spdlog::info("hole punching: NAT {}{}{}", punch::nat_kind_name(r.nat), r.why.empty() ? "" : ": ", r.why);
    auto waiting = std::move(after_check);
    after_check.clear();
    for (auto& f : waiting) f();
  }

  std::vector<punch::Candidate> candidates() const {
    std::vector<punch::Candidate> out;
    uint16_t local_port = endpoint->local_endpoint().port();
    if (nat && nat->public_address) out.push_back({*nat->public_address, punch::CandidateKind::kServerReflexive});
    for (const auto& a : host_addresses()) {
      if (out.size() >= punch::kMaxCandidates) break;
      udp::endpoint e(a, local_port);
      if (nat && nat->public_address && *nat->public_address == e) continue;
      out.push_back({e, punch::CandidateKind::kHost});
    }
    return out;
  }

  // The UDP check's verdict, or symmetric when it cannot tell and TCP says
  // so (the puncher then gives up at once and its signal tells the peer why).
  punch::NatKind effective_nat() const {
    if (!nat) return punch::NatKind::kUnknown;
    if (nat->nat == punch::NatKind::kUnknown && tcp_says_symmetric()) return punch::NatKind::kSymmetric;
    return nat->nat;
  }
  bool tcp_says_symmetric() const { return hooks.tcp_symmetric && hooks.tcp_symmetric(); }

  std::shared_ptr<punch::PunchSession> new_session(const PublicKeyBytes& peer, punch::Role role) {
    punch::PuncherConfig cfg;
    cfg.role = role;
    cfg.self_key = identity.public_key();
    cfg.peer_key = peer;
    cfg.candidates = candidates();
    cfg.nat = effective_nat();
    cfg.birthday = hooks.birthday;
    bool hard = cfg.nat == punch::NatKind::kSymmetric;
    if (hard && cfg.birthday && birthday_running(peer)) {
      cfg.birthday = false;
      cfg.birthday_off_why = "this node is birthday probing with another peer (one at a time)";
    }
    std::weak_ptr<Impl> weak = weak_from_this();
    bool initiator = role == punch::Role::kInitiator;
    auto session = punch::PunchSession::create(
        io, *port, cfg,
        [weak, peer, initiator](Bytes b) {
          auto self = weak.lock();
          if (!self) return;
          bool offer = false;
          if (auto sig = punch::decode_punch_signal(b)) offer = std::holds_alternative<punch::Offer>(*sig);
          Bytes copy = b;
          self->hooks.send_signal(
              peer, std::move(b),
              [weak, peer, initiator, offer, copy = std::move(copy)](Status st) {
                if (st || !initiator || !offer) return;
                // Not delivered (the peer's declaration may still be on its way
                // to the relay): start over with a fresh offer a moment later,
                // so the offer -> answer time that times the punch stays true.
                if (auto s2 = weak.lock()) s2->offer_undelivered(peer, st.error().message(), copy);
              },
              1);
        },
        [weak, peer](const punch::PunchOutcome& o) {
          // Called from inside the session: act after it returns.
          auto self = weak.lock();
          if (!self) return;
          asio::post(self->io, [weak, peer, o] {
            if (auto s = weak.lock()) s->on_outcome(peer, o);
          });
        });
    if (endpoint->local_endpoint().address().is_v4()) session->set_birthday_address(endpoint->local_endpoint().address());
    PeerPunch& p = peers[peer];
    if (p.session && p.session != session) p.session->cancel();
    p.session = session;
    p.hard_birthday = hard && cfg.birthday;
    p.initiator = role == punch::Role::kInitiator;
    p.state = "punching";
    p.reason.clear();
    return session;
  }

  // Another peer's punch holds (or may open) birthday ports now.
  bool birthday_running(const PublicKeyBytes& except) const {
    for (const auto& [key, p] : peers) {
      if (key != except && p.hard_birthday && p.session && !p.session->finished() &&
          (p.state == "punching" || p.session->open_ports() > 0)) {
        return true;
      }
    }
    return false;
  }

  void offer_undelivered(const PublicKeyBytes& peer, const std::string& why, const Bytes& offer) {
    auto it = peers.find(peer);
    if (stopped || it == peers.end()) return;
    if (it->second.state == "failed") {
      // We gave up at once (our NAT is symmetric): the offer still tells the
      // peer why, for its `yonder peers`; deliver it when the relay can.
      hooks.send_signal(peer, offer, nullptr, kOfferRetries);
      return;
    }
    if (!it->second.session || it->second.state != "punching") return;
    PeerPunch& p = it->second;
    auto session = p.session;
    if (++p.offer_retries > kOfferRetries) {
      session->cancel();
      failed(peer, "the relay did not deliver the hole-punching offer: " + why);
      return;
    }
    session->cancel();
    p.session.reset();
    auto timer = std::make_shared<asio::steady_timer>(io, kOfferPause);
    std::weak_ptr<Impl> weak = weak_from_this();
    timer->async_wait([weak, timer, peer](boost::system::error_code ec) {
      auto self = weak.lock();
      if (ec || !self || self->stopped) return;
      auto again = self->peers.find(peer);
      if (again == self->peers.end() || again->second.session) return;  // something else started one
      self->new_session(peer, punch::Role::kInitiator)->start();
    });
  }

  void on_established(const PublicKeyBytes& peer, const std::string& path) {
    if (stopped || !endpoint) return;
    int rank = link::path_rank(path);
    auto it = peers.find(peer);
    if (rank == link::path_rank("punched")) {
      PeerPunch& p = peers[peer];
      p.state = "punched";
      p.reason.clear();
      p.failures = 0;
      return;
    }
    if (rank < link::path_rank("punched")) {
      if (it != peers.end() && it->second.session && !it->second.session->finished()) it->second.session->cancel();
      return;
    }
    // On a relay: the smaller key starts the punch; the other answers its offer.
    if (!punch::initiator_is_self(identity.public_key(), peer)) return;
    if (it != peers.end()) {
      PeerPunch& p = it->second;
      if (p.session && !p.session->finished() && (p.state == "punching" || p.state == "connecting")) return;
      if (Clock::now() < p.next_try) return;
    }
    std::weak_ptr<Impl> weak = weak_from_this();
    with_nat([weak, peer] {
      auto self = weak.lock();
      if (!self || self->stopped) return;
      if (!self->nat->public_address) {
        // Nothing the peer could send to: a punch would only time out.
        self->failed(peer, std::string(kNoPublicUdp));
        return;
      }
      spdlog::info("hole punching: trying a direct path to {}", NodeId(peer).short_form());
      self->peers[peer].offer_retries = 0;
      self->new_session(peer, punch::Role::kInitiator)->start();
    });
  }

  void on_signal(const PublicKeyBytes& from, ByteView data) {
    if (stopped || !endpoint || !hooks.pinned(from)) return;
    auto sig = punch::decode_punch_signal(data);
    if (!sig) {
      spdlog::info("hole punching: a bad signal from {}: {}", NodeId(from).short_form(), sig.error().message());
      return;
    }
    auto it = peers.find(from);
    bool running = it != peers.end() && it->second.session && !it->second.session->finished();
    if (std::holds_alternative<punch::Offer>(*sig) &&
        (!running || it->second.initiator)) {
      // A responder for a new exchange (a retry's offer goes to the running one).
      std::weak_ptr<Impl> weak = weak_from_this();
      punch::PunchSignal s = *sig;
      with_nat([weak, from, s] {
        auto self = weak.lock();
        if (!self || self->stopped) return;
        auto session = self->new_session(from, punch::Role::kResponder);
        session->start();
        session->on_signal(s);
      });
      return;
    }
    if (running) it->second.session->on_signal(*sig);
  }

  void on_outcome(const PublicKeyBytes& peer, const punch::PunchOutcome& o) {
    // Sessions end cancelled only when we replace or drop them on purpose.
    if (stopped || o.failure == punch::PunchFailure::kCancelled) return;
    PeerPunch& p = peers[peer];
    p.elapsed_ms = std::chrono::duration<double, std::milli>(o.elapsed).count();
    p.attempts = o.attempts;
    p.birthday = o.birthday;
    p.datagrams = o.datagrams;
    if (!o.punched()) {
      failed(peer, o.reason);
      return;
    }
    p.remote = endpoint_text(o.remote);
    p.punch_rtt_ms = std::chrono::duration<double, std::milli>(o.rtt).count();
    spdlog::info("hole punching: punched a path to {} at {} in {:.0f} ms{}", NodeId(peer).short_form(), p.remote,
                 p.elapsed_ms,
                 o.birthday ? " (birthday probing, " + std::to_string(o.datagrams) + " datagrams)" : std::string());
    std::shared_ptr<quic::QuicEndpoint> from = endpoint;
    if (o.via != 0) {
      // Birthday probing, this side symmetric: the path runs from one of the
      // punch's own ports, which becomes a QUIC endpoint of its own.
      auto socket = p.session ? p.session->take_port(o.via)
                              : Result<udp::socket>(make_error(ErrorCode::kNotFound, "the punch is gone"));
      if (!socket) {
        failed(peer, "the punched port could not carry QUIC: " + socket.error().message());
        return;
      }
      auto own = quic::QuicEndpoint::adopt(std::move(*socket), identity, quic_config);
      if (!own) {
        failed(peer, "the punched port could not carry QUIC: " + own.error().message());
        return;
      }
      from = *own;
      if (p.own_endpoints.size() >= 2) {
        p.own_endpoints.front()->close();
        p.own_endpoints.erase(p.own_endpoints.begin());
      }
      p.own_endpoints.push_back(from);
    } else if (!p.initiator || o.birthday) {
      // The initiator connects (after birthday probing: the symmetric side,
      // from its port); our listener adopts it.
      p.state = "awaiting quic";
      return;
    }
    p.state = "connecting";
    std::weak_ptr<Impl> weak = weak_from_this();
    from->connect(o.remote, peer, [weak, peer](Result<std::shared_ptr<quic::QuicChannel>> ch) {
      auto self = weak.lock();
      if (!self || self->stopped) {
        if (ch) (*ch)->close();
        return;
      }
      if (!ch) {
        self->failed(peer, "the punched path did not carry QUIC: " + ch.error().message());
        return;
      }
      self->adopt(std::move(*ch), peer, true);
    });
  }

  void failed(const PublicKeyBytes& peer, const std::string& why) {
    PeerPunch& p = peers[peer];
    p.state = "failed";
    p.reason = why;
    p.failures++;
    auto backoff = kFirstBackoff * (1 << std::min(p.failures - 1, 6));
    p.next_try = Clock::now() + std::min<Clock::duration>(backoff, kMaxBackoff);
    spdlog::info("hole punching: no direct path to {}: {}", NodeId(peer).short_form(), why);
    if (!p.retry) p.retry = std::make_shared<asio::steady_timer>(io);
    p.retry->expires_at(p.next_try);
    std::weak_ptr<Impl> weak = weak_from_this();
    p.retry->async_wait([weak, peer](boost::system::error_code ec) {
      auto self = weak.lock();
      if (ec || !self || self->stopped) return;
      self->retry_on_relay(peer);
    });
  }

  // After a failure's backoff: punch again if the link to `peer` still runs
  // only on a path worse than a punched one (on_established decides who
  // starts and whether it is time).
  void retry_on_relay(const PublicKeyBytes& peer) {
    std::string best;
    for (const auto& s : link.sessions()) {
      if (s.peer != peer || !s.established || s.draining) continue;
      if (best.empty() || link::path_rank(s.path) < link::path_rank(best)) best = s.path;
    }
    if (best.empty() || link::path_rank(best) <= link::path_rank("punched")) return;
    on_established(peer, best);
  }

  void adopt(std::shared_ptr<quic::QuicChannel> ch, const PublicKeyBytes& peer, bool dialer) {
    std::string path = ch->path_string();
    std::weak_ptr<Impl> weak = weak_from_this();
    link.adopt_channel(std::move(ch), peer, dialer, path, [weak, peer, dialer](Status st) {
      auto self = weak.lock();
      if (!self || st) return;
      // A connection we accepted with no punch under way (a peer's dial-back
      // over UDP, which closes after the handshake) is no failed punch.
      auto it = self->peers.find(peer);
      bool punching = it != self->peers.end() && it->second.state != "failed" && it->second.state != "punched";
      if (!dialer && !punching) {
        spdlog::debug("hole punching: a QUIC connection from {} ended before the link started: {}",
                      NodeId(peer).short_form(), st.error().message());
        return;
      }
      self->failed(peer, "the link did not start on the punched path: " + st.error().message());
    });
  }

  nlohmann::json status() const {
    nlohmann::json j;
    if (!endpoint) {
      j["state"] = off_reason.empty() ? "off" : off_reason;
      return j;
    }
    j["state"] = "on";
    j["local"] = endpoint_text(endpoint->local_endpoint());
    j["gso"] = endpoint->gso_enabled();
    j["gro"] = endpoint->gro_enabled();
    if (check) j["checking"] = true;
    if (!nat) {
      j["nat"] = "unknown";
      j["punching"] = "not checked yet";
      return j;
    }
    j["nat"] = punch::nat_kind_name(nat->nat);
    if (!nat->why.empty()) j["why"] = nat->why;
    if (nat->public_address) j["public"] = endpoint_text(*nat->public_address);
    nlohmann::json servers = nlohmann::json::array();
    for (const auto& s : nat->servers) {
      servers.push_back({{"server", endpoint_text(s.server)},
                         {"mapped", s.mapped ? nlohmann::json(endpoint_text(*s.mapped)) : nlohmann::json()}});
    }
    j["servers"] = servers;
    switch (nat->nat) {
      case punch::NatKind::kPunchable:
        j["punching"] = "possible: the NAT keeps one public port for every destination";
        break;
      case punch::NatKind::kSymmetric:
        j["punching"] = hooks.birthday
                            ? "only with peers whose NAT keeps one port (birthday probing): the NAT picks a new public "
                              "port per destination; with other peers links stay on the relay"
                            : "not possible: the NAT picks a new public port per destination and birthday probing is "
                              "off (link.punch_birthday); links stay on the relay";
        break;
      default:
        if (!nat->public_address) {
          j["punching"] = "not tried: " + std::string(kNoPublicUdp);
        } else if (tcp_says_symmetric()) {
          j["punching"] = "not tried: " + std::string(kSymmetricOverTcp);
        } else {
          j["punching"] = "unknown (tried anyway): two relays at different addresses are needed to tell";
        }
        break;
    }
    return j;
  }

  nlohmann::json peer_state(const PublicKeyBytes& peer) const {
    auto it = peers.find(peer);
    if (it == peers.end()) return nullptr;
    const PeerPunch& p = it->second;
    nlohmann::json j{{"state", p.state}, {"attempts", p.attempts}};
    if (!p.reason.empty()) j["reason"] = p.reason;
    if (!p.remote.empty()) j["remote"] = p.remote;
    if (p.elapsed_ms > 0) j["elapsed_ms"] = p.elapsed_ms;
    if (p.punch_rtt_ms > 0) j["probe_rtt_ms"] = p.punch_rtt_ms;
    if (p.birthday) j["birthday"] = true;
    if (p.datagrams > 0) j["datagrams"] = p.datagrams;
    return j;
  }
};

PunchPaths::PunchPaths(asio::io_context& io, const Identity& identity, link::LinkService& link, Hooks hooks,
                       std::string listen, std::string preferred_host, uint16_t preferred_port,
                       std::chrono::milliseconds keepalive)
    : impl_(std::make_shared<Impl>(io, identity, link, std::move(hooks), std::move(listen), std::move(preferred_host),
                                   preferred_port, keepalive)) {}

PunchPaths::~PunchPaths() { stop(); }

Status PunchPaths::start() { return impl_->start(); }
void PunchPaths::stop() {
  if (!impl_->stopped) impl_->stop();
}
void PunchPaths::on_established(const PublicKeyBytes& peer, const std::string& path) {
  impl_->on_established(peer, path);
}
void PunchPaths::on_signal(const PublicKeyBytes& from, ByteView data) { impl_->on_signal(from, data); }
void PunchPaths::recheck(std::function<void()> done) {
  if (!impl_->endpoint || impl_->stopped) return done();
  impl_->after_check.push_back(std::move(done));
  impl_->run_check();
}
nlohmann::json PunchPaths::status() const { return impl_->status(); }
uint16_t PunchPaths::udp_port() const { return impl_->endpoint ? impl_->endpoint->local_endpoint().port() : 0; }
std::string PunchPaths::public_udp() const {
  const auto& nat = impl_->nat;
  return nat && nat->public_address ? endpoint_text(*nat->public_address) : std::string();
}

void PunchPaths::probe_udp(const PublicKeyBytes& peer, const std::string& address, std::chrono::milliseconds within,
                           std::function<void(Status)> done) {
  Impl& m = *impl_;
  if (m.stopped) return done(make_error(ErrorCode::kUnavailable, "the node is shutting down"));
  auto target = relay::parse_net_address(address);
  boost::system::error_code bad;
  auto ip = target ? asio::ip::make_address(target->ip, bad) : asio::ip::address();
  if (!target || bad) return done(make_error(ErrorCode::kInvalidArgument, "not IP:PORT: " + address));
  quic::QuicConfig config = m.quic_config;
  config.connect_timeout = within;
  auto ep = quic::QuicEndpoint::bind(m.io.get_executor(), m.identity, udp::endpoint(asio::ip::address_v4::any(), 0),
                                     config);
  if (!ep) return done(Error(ep.error()).with_context("a UDP socket for the dial-back"));
  std::shared_ptr<quic::QuicEndpoint> endpoint = *ep;
  m.probes.insert(endpoint);
  std::weak_ptr<Impl> weak = impl_;
  std::weak_ptr<quic::QuicEndpoint> weak_ep = endpoint;
  endpoint->connect(udp::endpoint(ip, target->port), peer,
                    [weak, weak_ep, done = std::move(done)](Result<std::shared_ptr<quic::QuicChannel>> ch) {
                      if (ch) (*ch)->close();
                      auto self = weak.lock();
                      if (auto own = weak_ep.lock()) {
                        own->close();
                        if (self) self->probes.erase(own);
                      }
                      if (!ch) {
                        return done(make_error(ErrorCode::kUnavailable,
                                               "the QUIC handshake with the peer's key did not complete: " +
                                                   ch.error().message()));
                      }
                      done(ok_status());
                    });
}
nlohmann::json PunchPaths::peer_state(const PublicKeyBytes& peer) const { return impl_->peer_state(peer); }

}  // namespace yonder::reach
