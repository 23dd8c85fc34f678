// The relay's state and every decision it makes, with no I/O: who is
// registered (bound to the key of their TLS session), whom each node declared
// as its peers, which pipe requests wait for their other half, which tickets
// are live, and the per-node connection and total pipe limits. The server
// (server.h) owns the sockets and calls in here; tests drive it with a
// manual `now`.
//
// Mutual declaration is the rule for everything between two nodes: a signal
// or a pipe from A to B needs A to list B and B to list A. A refusal never
// tells A whether B is online unless B has listed A. The one exception is a
// pipe for pairing: B registered a rendezvous token (protocol.h), A presents
// it, and B answers with the same token.
//
// Hosted nodes and visitors: a relay that a node runs for its own peers
// (a yonderd with relay.listen or relay.offer) hosts those peers; any other
// node it admits is a visitor, and a signal or pipe needs a hosted node at
// one end at least, so the relay carries traffic to and from its owner's
// peers and never between two strangers. A yonder-relay hosts every node.
//
// Pipes: A asks for B (B is told "pipe_wanted"); when B asks for A before
// A's request times out, both get a one-time ticket for their end. The
// earlier request is the initiator. Each end then connects and claims its
// ticket; the pipe counts against the cap from the match until it closes.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "relay/protocol.h"
#include "relay/refusal.h"
#include "relay/token_bucket.h"

namespace yonder::relay {

using ConnId = uint64_t;
using PipeId = uint64_t;

struct RegistryLimits {
  size_t max_connections_per_node = 8;  // control and probe connections of one key
  size_t max_pipes_per_node = 32;       // matched or joined pipes with this key at either end
  size_t max_pipes = 1024;              // matched or joined pipes, all nodes
  size_t max_peers = kMaxPeers;         // declared peers per node
  size_t max_visitors = SIZE_MAX;       // nodes admitted that the relay does not host
  std::chrono::milliseconds pipe_request_timeout{30'000};
  std::chrono::milliseconds ticket_timeout{10'000};
};

class Registry {
 public:
  using TicketSource = std::function<Ticket()>;
  Registry(RegistryLimits limits, TicketSource tickets);

  const RegistryLimits& limits() const { return limits_; }

  // Which nodes the relay hosts (see the class comment), asked at each
  // decision, so a node that pairs with the owner is hosted from then on.
  // Unset: all of them.
  void set_hosts(std::function<bool(const PublicKeyBytes&)> hosts);
  bool hosts(const PublicKeyBytes& node) const;

  // Every connection of a node takes a slot: control and probe connections
  // count against max_connections_per_node; a pipe end does not (its pipe
  // was counted against max_pipes_per_node when it matched).
  enum class Slot { kControl, kPipeEnd };
  Decision<Ok> admit(const PublicKeyBytes& node, Slot slot = Slot::kControl);
  void release(const PublicKeyBytes& node, Slot slot = Slot::kControl);

  struct Registered {
    NatReport nat;
    // The node's other connections whose NAT verdict just changed.
    std::vector<std::pair<ConnId, NatReport>> nat_changed;
  };
  // `tls_key` is the key the connection's TLS session proved; the message's
  // node must be that key.
  Decision<Registered> register_conn(ConnId conn, const PublicKeyBytes& tls_key, const Register& msg,
                                     const NetAddress& observed);
  // The connection closed: its registration and its waiting requests go.
  void unregister(ConnId conn);
  bool registered(ConnId conn) const { return regs_.count(conn) != 0; }
  std::optional<PublicKeyBytes> node_of(ConnId conn) const;

  Decision<Ok> set_peers(ConnId conn, std::vector<PublicKeyBytes> peers, std::vector<Rendezvous> rendezvous = {});
  // The connection a signal from `from` to `to` goes to.
  Decision<ConnId> route_signal(ConnId from, const PublicKeyBytes& to);

  struct PipeWait {
    ConnId notify;  // tell this connection: pipe_wanted from the caller
    std::optional<Rendezvous> rendezvous;  // ... presenting this token
  };
  struct PipeSide {
    ConnId conn;
    uint64_t request_id;
    PublicKeyBytes node;
    PublicKeyBytes peer;
    Ticket ticket;
    bool initiator;
  };
  struct PipeMatch {
    PipeId pipe;
    std::array<PipeSide, 2> sides;  // [0] asked first
  };
  using PipeOutcome = std::variant<PipeWait, PipeMatch>;
  Decision<PipeOutcome> request_pipe(ConnId from, uint64_t request_id, const PublicKeyBytes& to, MonoTime now,
                                     const std::optional<Rendezvous>& rendezvous = std::nullopt);

  struct Claim {
    PipeId pipe;
    int side;  // 0 or 1, as in PipeMatch::sides
    PublicKeyBytes node;
  };
  // A pipe end presented a ticket: valid once, until the ticket timeout.
  Decision<Claim> claim(const Ticket& ticket, MonoTime now);
  // Both ends arrived: the pipe no longer expires.
  void pipe_joined(PipeId pipe);
  void pipe_closed(PipeId pipe);

  struct Expired {
    std::vector<std::pair<ConnId, uint64_t>> requests;  // tell these: pipe_timeout
    std::vector<PipeId> pipes;                          // matched but not joined in time: gone
  };
  Expired expire(MonoTime now);
  std::optional<MonoTime> next_deadline() const;

  size_t node_count() const;  // keys with at least one live registration
  size_t registration_count() const { return regs_.size(); }
  size_t pipe_count() const { return pipes_.size(); }
  size_t pending_requests() const { return pending_.size(); }

 private:
  struct Reg {
    PublicKeyBytes node;
    NetAddress observed;
    Mapping mapping;
    bool probe;
    uint64_t order;  // newer registrations are preferred for delivery
  };
  struct Node {
    std::set<PublicKeyBytes> peers;
    std::set<Rendezvous> rendezvous;
    std::vector<ConnId> regs;
    size_t connections = 0;  // control and probe
    size_t pipe_ends = 0;
  };
  struct Pending {
    ConnId conn;
    uint64_t request_id;
    MonoTime deadline;
    std::optional<Rendezvous> rendezvous;
  };
  struct PipeState {
    std::array<Ticket, 2> tickets;
    std::array<PublicKeyBytes, 2> nodes;  // by side
    bool joined = false;
    MonoTime deadline;
  };

  NatReport report_for(ConnId conn) const;
  NatVerdict verdict_of(const Node& n) const;
  std::optional<ConnId> delivery_conn(const Node& n) const;
  Decision<const Node*> mutual(ConnId from, const PublicKeyBytes& to) const;
  // The rendezvous rule instead of mutual(): see the class comment.
  Decision<const Node*> by_rendezvous(ConnId from, const PublicKeyBytes& to, const Rendezvous& token) const;
  void forget_if_unused(const PublicKeyBytes& node);
  size_t pipes_of(const PublicKeyBytes& node) const;
  // Refuses traffic between two visitors.
  Decision<const Node*> hosted_end(const PublicKeyBytes& self, const PublicKeyBytes& to, const Node* them) const;

  RegistryLimits limits_;
  TicketSource tickets_;
  std::function<bool(const PublicKeyBytes&)> hosts_;
  std::map<ConnId, Reg> regs_;
  std::map<PublicKeyBytes, Node> nodes_;
  std::map<std::pair<PublicKeyBytes, PublicKeyBytes>, Pending> pending_;  // (from, to)
  std::map<PipeId, PipeState> pipes_;
  std::map<Ticket, std::pair<PipeId, int>> tickets_live_;
  PipeId next_pipe_ = 1;
  uint64_t next_order_ = 1;
};

}  // namespace yonder::relay
