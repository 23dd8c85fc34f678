#include "relay/registry.h"

#include <algorithm>

namespace yonder::relay {
namespace {

std::string short_id(const PublicKeyBytes& k) {
  return NodeId(k).short_form();
}

Refusal refuse(Reason r, std::string message) {
  return Refusal{r, std::move(message)};
}

}  // namespace

Registry::Registry(RegistryLimits limits, TicketSource tickets) : limits_(limits), tickets_(std::move(tickets)) {}

void Registry::set_hosts(std::function<bool(const PublicKeyBytes&)> hosts) { hosts_ = std::move(hosts); }

bool Registry::hosts(const PublicKeyBytes& node) const { return !hosts_ || hosts_(node); }

Decision<Ok> Registry::admit(const PublicKeyBytes& node, Slot slot) {
  if (!hosts(node) && limits_.max_visitors != SIZE_MAX && nodes_.count(node) == 0) {
    size_t visitors = 0;
    for (const auto& [key, n] : nodes_) visitors += hosts(key) ? 0 : 1;
    if (visitors >= limits_.max_visitors) {
      return refuse(Reason::kNotAllowed, "this relay serves the peers of the node that runs it and has room for " +
                                             std::to_string(limits_.max_visitors) +
                                             " other nodes, all taken; try again later or use another relay");
    }
  }
  Node& n = nodes_[node];
  if (slot == Slot::kPipeEnd) {
    ++n.pipe_ends;
    return Ok{};
  }
  if (n.connections >= limits_.max_connections_per_node) {
    forget_if_unused(node);
    return refuse(Reason::kNodeConnectionLimit,
                  "this node already has " + std::to_string(limits_.max_connections_per_node) +
                      " connections to the relay (its limit); close some (old pipes, a second daemon with the same "
                      "key?) and try again");
  }
  ++n.connections;
  return Ok{};
}

void Registry::release(const PublicKeyBytes& node, Slot slot) {
  auto it = nodes_.find(node);
  if (it == nodes_.end()) return;
  size_t& count = slot == Slot::kPipeEnd ? it->second.pipe_ends : it->second.connections;
  if (count == 0) return;
  --count;
  forget_if_unused(node);
}

size_t Registry::pipes_of(const PublicKeyBytes& node) const {
  size_t n = 0;
  for (const auto& [id, p] : pipes_) n += (p.nodes[0] == node || p.nodes[1] == node) ? 1 : 0;
  return n;
}

void Registry::forget_if_unused(const PublicKeyBytes& node) {
  auto it = nodes_.find(node);
  if (it != nodes_.end() && it->second.connections == 0 && it->second.pipe_ends == 0 && it->second.regs.empty()) {
    nodes_.erase(it);
  }
}

NatVerdict Registry::verdict_of(const Node& n) const {
  std::vector<Mapping> samples;
  for (ConnId c : n.regs) samples.push_back(regs_.at(c).mapping);
  return combine_mappings(samples);
}

NatReport Registry::report_for(ConnId conn) const {
  const Reg& r = regs_.at(conn);
  const Node& n = nodes_.at(r.node);
  return NatReport{r.observed, r.mapping, verdict_of(n), static_cast<uint32_t>(n.regs.size())};
}

Decision<Registry::Registered> Registry::register_conn(ConnId conn, const PublicKeyBytes& tls_key, const Register& msg,
                                                       const NetAddress& observed) {
  if (msg.node != tls_key) {
    return refuse(Reason::kIdentityMismatch, "this connection proved the key of node " + NodeId(tls_key).to_string() +
                                                 ", not " + NodeId(msg.node).to_string() +
                                                 ": a node registers only with its own key (its TLS certificate)");
  }
  if (regs_.count(conn) != 0) return refuse(Reason::kBadMessage, "this connection is registered already");
  if (msg.peers.size() > limits_.max_peers || msg.rendezvous.size() > kMaxRendezvous) {
    return refuse(Reason::kTooManyPeers, "a node may declare at most " + std::to_string(limits_.max_peers) +
                                             " peers and " + std::to_string(kMaxRendezvous) +
                                             " rendezvous tokens on this relay");
  }
  auto nit = nodes_.find(tls_key);
  if (nit == nodes_.end() || nit->second.connections == 0) std::abort();  // the server admits first
  Node& n = nit->second;
  NatVerdict before = verdict_of(n);
  regs_[conn] = Reg{tls_key, observed, classify_mapping(observed, msg.local_addr), msg.probe, next_order_++};
  n.regs.push_back(conn);
  // A probe only samples the NAT; the node's peers come from its real session.
  if (!msg.probe) {
    n.peers = std::set<PublicKeyBytes>(msg.peers.begin(), msg.peers.end());
    n.rendezvous = std::set<Rendezvous>(msg.rendezvous.begin(), msg.rendezvous.end());
  }
  Registered out{report_for(conn), {}};
  if (verdict_of(n) != before) {
    for (ConnId other : n.regs) {
      if (other != conn) out.nat_changed.emplace_back(other, report_for(other));
    }
  }
  return out;
}

void Registry::unregister(ConnId conn) {
  auto it = regs_.find(conn);
  if (it == regs_.end()) return;
  PublicKeyBytes node = it->second.node;
  regs_.erase(it);
  for (auto p = pending_.begin(); p != pending_.end();) {
    p = p->second.conn == conn ? pending_.erase(p) : std::next(p);
  }
  Node& n = nodes_.at(node);
  n.regs.erase(std::remove(n.regs.begin(), n.regs.end(), conn), n.regs.end());
  if (!delivery_conn(n)) {
    n.peers.clear();
    n.rendezvous.clear();
  }
  forget_if_unused(node);
}

std::optional<PublicKeyBytes> Registry::node_of(ConnId conn) const {
  auto it = regs_.find(conn);
  if (it == regs_.end()) return std::nullopt;
  return it->second.node;
}

std::optional<ConnId> Registry::delivery_conn(const Node& n) const {
  std::optional<ConnId> best;
  uint64_t best_order = 0;
  for (ConnId c : n.regs) {
    const Reg& r = regs_.at(c);
    if (!r.probe && r.order > best_order) {
      best = c;
      best_order = r.order;
    }
  }
  return best;
}

size_t Registry::node_count() const {
  size_t count = 0;
  for (const auto& [key, n] : nodes_) count += n.regs.empty() ? 0 : 1;
  return count;
}

Decision<Ok> Registry::set_peers(ConnId conn, std::vector<PublicKeyBytes> peers, std::vector<Rendezvous> rendezvous) {
  auto it = regs_.find(conn);
  if (it == regs_.end()) return refuse(Reason::kNotRegistered, "register before declaring peers");
  if (it->second.probe) return refuse(Reason::kBadMessage, "a probe connection cannot declare peers");
  if (peers.size() > limits_.max_peers || rendezvous.size() > kMaxRendezvous) {
    return refuse(Reason::kTooManyPeers, "a node may declare at most " + std::to_string(limits_.max_peers) +
                                             " peers and " + std::to_string(kMaxRendezvous) +
                                             " rendezvous tokens on this relay");
  }
  Node& n = nodes_.at(it->second.node);
  n.peers = std::set<PublicKeyBytes>(peers.begin(), peers.end());
  n.rendezvous = std::set<Rendezvous>(rendezvous.begin(), rendezvous.end());
  return Ok{};
}

Decision<const Registry::Node*> Registry::mutual(ConnId from, const PublicKeyBytes& to) const {
  auto it = regs_.find(from);
  if (it == regs_.end()) return refuse(Reason::kNotRegistered, "register before talking to peers");
  if (it->second.probe) return refuse(Reason::kBadMessage, "a probe connection only samples the NAT");
  const PublicKeyBytes& self = it->second.node;
  const Node& me = nodes_.at(self);
  if (me.peers.count(to) == 0) {
    return refuse(Reason::kNotDeclared, "you have not declared node " + short_id(to) +
                                            " as a peer on this relay; add it to your peers (register or peers) "
                                            "first");
  }
  auto t = nodes_.find(to);
  if (t == nodes_.end() || !delivery_conn(t->second) || t->second.peers.count(self) == 0) {
    return refuse(Reason::kPeerUnavailable, "node " + short_id(to) +
                                                " is not connected to this relay, or has not declared you as its "
                                                "peer; try again once it is connected (both nodes must list each "
                                                "other)");
  }
  return hosted_end(self, to, &t->second);
}

Decision<const Registry::Node*> Registry::by_rendezvous(ConnId from, const PublicKeyBytes& to,
                                                        const Rendezvous& token) const {
  auto it = regs_.find(from);
  if (it == regs_.end()) return refuse(Reason::kNotRegistered, "register before talking to peers");
  if (it->second.probe) return refuse(Reason::kBadMessage, "a probe connection only samples the NAT");
  const PublicKeyBytes& self = it->second.node;
  const Node& me = nodes_.at(self);
  auto t = nodes_.find(to);
  // The node that registered the token answers a caller who presented it.
  if (me.rendezvous.count(token) != 0) {
    auto waiting = pending_.find({to, self});
    if (waiting == pending_.end() || waiting->second.rendezvous != token || t == nodes_.end() ||
        !delivery_conn(t->second)) {
      return refuse(Reason::kPeerUnavailable, "node " + short_id(to) +
                                                  " is not waiting for a pairing pipe with that token; it may have "
                                                  "given up");
    }
    return hosted_end(self, to, &t->second);
  }
  if (t == nodes_.end() || !delivery_conn(t->second) || t->second.rendezvous.count(token) == 0) {
    return refuse(Reason::kPeerUnavailable, "node " + short_id(to) +
                                                " is not connected to this relay or no longer accepts that share "
                                                "link (expired, used or revoked); ask its owner for a new link");
  }
  return hosted_end(self, to, &t->second);
}

Decision<const Registry::Node*> Registry::hosted_end(const PublicKeyBytes& self, const PublicKeyBytes& to,
                                                     const Node* them) const {
  if (hosts(self) || hosts(to)) return them;
  return refuse(Reason::kNotAllowed, "this relay carries traffic only to and from the peers of the node that runs it, "
                                     "and neither you nor node " + short_id(to) +
                                         " is one; meet at a relay one of you is paired with");
}

Decision<ConnId> Registry::route_signal(ConnId from, const PublicKeyBytes& to) {
  auto m = mutual(from, to);
  if (auto* r = refusal_of(m)) return *r;
  return *delivery_conn(*std::get<const Node*>(m));
}

Decision<Registry::PipeOutcome> Registry::request_pipe(ConnId from, uint64_t request_id, const PublicKeyBytes& to,
                                                       MonoTime now, const std::optional<Rendezvous>& rendezvous) {
  auto m = rendezvous ? by_rendezvous(from, to, *rendezvous) : mutual(from, to);
  if (auto* r = refusal_of(m)) return *r;
  const Node* target = std::get<const Node*>(m);
  const PublicKeyBytes self = regs_.at(from).node;
  if (pending_.count({self, to}) != 0) {
    return refuse(Reason::kPipePending, "a pipe request to node " + short_id(to) +
                                            " is already waiting for its answer; wait for it (or its timeout)");
  }
  if (pipes_.size() >= limits_.max_pipes) {
    return refuse(Reason::kTooManyPipes, "the relay carries its maximum of " + std::to_string(limits_.max_pipes) +
                                             " pipes; try again later or use another relay");
  }
  const std::string per_node = std::to_string(limits_.max_pipes_per_node);
  if (pipes_of(self) >= limits_.max_pipes_per_node) {
    return refuse(Reason::kTooManyPipes, "you have " + per_node +
                                             " pipes through this relay, its limit for one node; close some (or "
                                             "reach more peers directly) and try again");
  }
  if (pipes_of(to) >= limits_.max_pipes_per_node) {
    return refuse(Reason::kTooManyPipes, "node " + short_id(to) + " has " + per_node +
                                             " pipes through this relay, its limit for one node; try again later "
                                             "or meet it at another relay");
  }
  auto other = pending_.find({to, self});
  if (other != pending_.end() && other->second.rendezvous != rendezvous) other = pending_.end();
  if (other == pending_.end()) {
    pending_[{self, to}] = Pending{from, request_id, now + limits_.pipe_request_timeout, rendezvous};
    return PipeOutcome(PipeWait{*delivery_conn(*target), rendezvous});
  }
  PipeId id = next_pipe_++;
  PipeState& p = pipes_[id];
  p.deadline = now + limits_.ticket_timeout;
  p.nodes = {to, self};
  for (int side = 0; side < 2; ++side) {
    do {
      p.tickets[side] = tickets_();
    } while (tickets_live_.count(p.tickets[side]) != 0);
    tickets_live_[p.tickets[side]] = {id, side};
  }
  PipeMatch match{id,
                  {PipeSide{other->second.conn, other->second.request_id, to, self, p.tickets[0], true},
                   PipeSide{from, request_id, self, to, p.tickets[1], false}}};
  pending_.erase(other);
  return PipeOutcome(match);
}

Decision<Registry::Claim> Registry::claim(const Ticket& ticket, MonoTime now) {
  auto it = tickets_live_.find(ticket);
  if (it == tickets_live_.end()) {
    return refuse(Reason::kBadTicket, "unknown or already used pipe ticket");
  }
  auto [pipe, side] = it->second;
  tickets_live_.erase(it);
  PipeState& p = pipes_.at(pipe);
  if (now >= p.deadline) return refuse(Reason::kBadTicket, "the pipe ticket expired");
  return Claim{pipe, side, p.nodes[side]};
}

void Registry::pipe_joined(PipeId pipe) {
  auto it = pipes_.find(pipe);
  if (it != pipes_.end()) it->second.joined = true;
}

void Registry::pipe_closed(PipeId pipe) {
  auto it = pipes_.find(pipe);
  if (it == pipes_.end()) return;
  for (const Ticket& t : it->second.tickets) tickets_live_.erase(t);
  pipes_.erase(it);
}

Registry::Expired Registry::expire(MonoTime now) {
  Expired out;
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (it->second.deadline <= now) {
      out.requests.emplace_back(it->second.conn, it->second.request_id);
      it = pending_.erase(it);
    } else {
      ++it;
    }
  }
  for (auto it = pipes_.begin(); it != pipes_.end();) {
    if (!it->second.joined && it->second.deadline <= now) {
      for (const Ticket& t : it->second.tickets) tickets_live_.erase(t);
      out.pipes.push_back(it->first);
      it = pipes_.erase(it);
    } else {
      ++it;
    }
  }
  return out;
}

std::optional<MonoTime> Registry::next_deadline() const {
  std::optional<MonoTime> next;
  auto take = [&](MonoTime t) {
    if (!next || t < *next) next = t;
  };
  for (const auto& [k, p] : pending_) take(p.deadline);
  for (const auto& [id, p] : pipes_) {
    if (!p.joined) take(p.deadline);
  }
  return next;
}

}  // namespace yonder::relay
