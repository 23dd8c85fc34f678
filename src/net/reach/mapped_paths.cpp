#include "net/reach/mapped_paths.h"

#include <chrono>
#include <utility>  // before Boost.Asio (GCC 12)

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <spdlog/spdlog.h>

#include "portmap/port_mapper.h"

namespace yonder::reach {
MappedPaths::MappedPaths(boost::asio::io_context& io, link::LinkService& link, RelayPaths& relays, bool wanted)
    : io_(io), link_(link), relays_(relays), wanted_(wanted) {}

MappedPaths::~MappedPaths() { stop(); }

void MappedPaths::start(Listening listening) {
  // Not listening: nothing to map, and the state says so as it always has.
  if (!wanted_ || listening == Listening::kNo) return;
  if (listening == Listening::kLoopbackOnly) {
    state_ = {{"state", "off (listening on loopback only)"}};
    return;
  }
  state_ = {{"state", "mapping"}};
  std::weak_ptr<bool> alive = alive_;
  boost::asio::io_context* io = &io_;
  mapper_ = std::make_unique<portmap::PortMapper>(
      link_.port(), portmap::MapOptions{}, [this, alive, io](const portmap::PortMapperStatus& st) {
        // The mapper's thread: hand the news to the event loop.
        boost::asio::post(*io, [this, alive, st] {
          if (auto a = alive.lock(); a && *a) on_port_mapping(st);
        });
      });
}

void MappedPaths::stop() {
  *alive_ = false;
  if (mapper_) {
    mapper_->stop();  // removes the mapping from the router
    mapper_.reset();
  }
}

void MappedPaths::recheck() {
  if (mapper_ && mapper_->status().state != portmap::MapState::kMapped) mapper_->refresh_now();
}

void MappedPaths::on_port_mapping(const portmap::PortMapperStatus& st) {
  std::string before = state_.value("state", "") + state_.value("reason", "");
  state_ = st.to_json();
  if (st.state == portmap::MapState::kUnavailable && before != state_.value("state", "") + st.reason) {
    spdlog::info("port mapping unavailable: {}", st.reason);
  }
  std::string was = mapped_;
  mapped_.clear();
  if (st.state == portmap::MapState::kMapped && st.mapping) {
    mapped_ = st.mapping->external_ip + ":" + std::to_string(st.mapping->external_port);
    state_["external"] = mapped_;
    state_["protocol"] = st.mapping->protocol;
  }
  if (mapped_ == was || mapped_.empty()) return;
  spdlog::info("port mapping: the router forwards {} to this node's link port", mapped_);
  // Peers on a relay path can move to it now.
  for (const auto& s : link_.sessions()) {
    if (s.established && !s.draining) send_hint(s.peer, path_kind_from_rank(link::path_rank(s.path)));
  }
}

void MappedPaths::on_established(const PublicKeyBytes& peer, const std::string& path) {
  send_hint(peer, path_kind_from_rank(link::path_rank(path)));
}

void MappedPaths::send_hint(const PublicKeyBytes& peer, PathKind path) {
  if (auto hint = hint_to_send(mapped_, path)) relays_.send_signal(peer, relay::encode_path_hint(*hint));
}

void MappedPaths::on_hint(const peers::PeerRecord& from, ByteView data, const std::string& from_host) {
  auto hint = relay::decode_path_hint(data);
  if (!hint) {
    spdlog::info("relay signal from {}: {}", from.id().short_form(), hint.error().message());
    return;
  }
  HintVerdict admitted = hints_.admit(from.key, *hint, from.granted_to_us.has_value(), std::chrono::steady_clock::now());
  if (admitted.kind == HintVerdict::Kind::kRateLimited) {
    spdlog::info("peer {}: path hint to {} ignored: too many hints in a short time", from.id().short_form(),
                 admitted.detail);
  }
  if (admitted.kind != HintVerdict::Kind::kDial) return;
  relay::HintDialContext ctx;
  for (const auto& a : from.addresses) {
    if (a.rfind("relay:", 0) != 0) ctx.peer_hosts.push_back(a.substr(0, a.rfind(':')));
  }
  if (!from_host.empty()) ctx.observed_hosts.push_back(from_host);
  ctx.own_hosts = local_ipv4_hosts();
  HintVerdict target = PathHintCore::target(admitted.detail, ctx);
  if (target.kind != HintVerdict::Kind::kDial) {
    spdlog::warn("peer {}: {}", from.id().short_form(), target.detail);
    return;
  }
  link_.try_path(from.key, target.detail, "mapped");
}

}  // namespace yonder::reach
