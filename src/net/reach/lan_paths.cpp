#include "net/reach/lan_paths.h"

#include <utility>  // before Boost.Asio (GCC 12)
#include <vector>

#include <spdlog/spdlog.h>

#include "discovery/lan_discovery.h"
#include "discovery/pair_key.h"
#include "net/reach/lan_core.h"

namespace yonder::reach {
namespace {

// The peers whose announcements we can read and who can read ours.
std::vector<discovery::PairedPeer> announce_to(const Identity& self, const std::vector<peers::PeerRecord>& records) {
  std::vector<discovery::PairedPeer> out;
  for (const auto& p : records) {
    if (p.denied()) continue;
    auto key = discovery::derive_pair_key(self, p.key);
    if (key) out.push_back(discovery::PairedPeer{p.id(), *key});
  }
  return out;
}

}  // namespace

LanPaths::LanPaths(boost::asio::io_context& io, const Identity& identity, link::LinkService& link,
                   const peers::TrustStore& store, bool wanted)
    : io_(io), identity_(identity), link_(link), store_(store), wanted_(wanted) {}

LanPaths::~LanPaths() = default;

void LanPaths::start(Listening listening) {
  if (!wanted_) return;
  if (listening == Listening::kNo) {
    state_ = "off (this node does not listen: link.listen is empty)";
    return;
  }
  if (listening == Listening::kLoopbackOnly) {
    state_ = "off (listening on loopback only)";
    return;
  }
  discovery::LanDiscoveryOptions opts;
  opts.link_port = link_.port();
  auto lan = discovery::LanDiscovery::start(io_, identity_.public_key(), announce_to(identity_, store_.peers()), opts,
                                            [this](const discovery::LanCandidate& c) { on_candidate(c); });
  if (!lan) {
    state_ = "unavailable: " + lan.error().message();
    spdlog::info("LAN discovery is off: {}", lan.error().message());
    return;
  }
  lan_ = std::move(*lan);
  std::string names;
  for (const auto& i : lan_->interfaces()) names += (names.empty() ? "" : ", ") + i;
  state_ = "on (" + names + ")";
}

void LanPaths::on_candidate(const discovery::LanCandidate& c) {
  LanPeer peer;
  peer.key = c.peer.public_key();
  if (const peers::PeerRecord* p = store_.find(peer.key)) {
    peer.paired = true;
    peer.grants_us = p->granted_to_us.has_value();
    peer.we_grant = p->grant.capabilities != 0;
    for (const auto& s : link_.sessions()) {
      if (s.peer != peer.key || !s.established || s.draining) continue;
      PathKind kind = path_kind_from_rank(link::path_rank(s.path));
      if (!peer.best || static_cast<int>(kind) < static_cast<int>(*peer.best)) peer.best = kind;
    }
  }
  LanAction action = decide_lan_dial(identity_.public_key(), LanSighting{c.address, c.port}, peer);
  if (action.kind == LanAction::Kind::kIgnore) {
    spdlog::debug("LAN: {} seen at {}: not dialled ({})", c.peer.short_form(), c.address, action.reason);
    return;
  }
  link_.try_path(peer.key, action.address, "lan");
}

void LanPaths::peers_changed() {
  if (lan_) lan_->set_peers(announce_to(identity_, store_.peers()));
}

void LanPaths::query_now() {
  if (lan_) lan_->query_now();
}

void LanPaths::stop() { lan_.reset(); }

}  // namespace yonder::reach
