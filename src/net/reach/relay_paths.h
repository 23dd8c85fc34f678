// The node's relays: `link.relays`, the relays named in the signed lists of
// the groups this node is in, and the relays named by the share links of
// providers we paired with. One RelayClient per relay, kept registered
// (redialled with backoff) and declaring every pinned peer and, on a
// provider, one rendezvous token per share link that can still pair
// (relay/protocol.h). It gives the link two things:
//   - the carrier dialer (link::LinkService::set_carrier_dialer): a pipe to
//     the peer through the first relay where both are registered, or, for
//     pairing, through the link's relays with the link's token;
//   - pipes that peers ask for (pipe_wanted), accepted only from pinned peers
//     or for one of our live tokens, handed to the link as carriers.
// The relay only ever joins two TCP connections: the peers' own TLS session
// (pinned keys, as on a direct path) runs inside.
//
// Relays are pinned by key wherever a key is known: a relay learned from a
// share link (or from a provider's stored addresses) is dialled with the key
// the link names, so a different relay at that address is refused before
// this node registers there; this node never uses a link's relay whose key
// it cannot check (a format v1 link's), unless its own link.relays pins it.
// The keys a share link carries come from for_share_link().
//
// Threading: the daemon's event loop only.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"
#include "crypto/identity.h"
#include "crypto/share_link.h"
#include "net/link/link_service.h"
#include "relay/protocol.h"

namespace boost::asio {
class io_context;
}

namespace yonder::relay {
class RelayClient;
}

namespace yonder::reach {

struct RelaySpec {
  std::string address;                  // HOST:PORT
  std::optional<PublicKeyBytes> key;    // pinned relay key (@NODE_ID, or the key a share link names)
  bool configured = false;              // from link.relays (else learned from a share link, always with a key)
  std::string group;                    // named by this group's signed list (always with a key); "" otherwise
  std::string offered_by;               // the peer (its name) that offered it (relay_offer_core.h; always with
                                        // the peer's key); "" otherwise
};

class RelayPaths {
 public:
  struct Hooks {
    std::function<std::vector<PublicKeyBytes>()> peers;          // pinned and not denied
    std::function<std::vector<relay::Rendezvous>()> rendezvous;  // tokens of our links that can pair
    // A signal from a mutual peer (opaque bytes, at most 4 KiB).
    // `from_host`: the sender's IP as the relay saw it ("" when it did not say).
    std::function<void(const PublicKeyBytes& from, Bytes data, const std::string& from_host)> signal;
  };

  RelayPaths(boost::asio::io_context& io, const Identity& identity, link::LinkService& link, Hooks hooks);
  ~RelayPaths();
  RelayPaths(const RelayPaths&) = delete;
  RelayPaths& operator=(const RelayPaths&) = delete;

  // "HOST:PORT[@NODE_ID],..." as in link.relays.
  static Result<std::vector<RelaySpec>> parse(const std::string& list);

  // Keeps a connection to `spec` (no-op when there is one already; a
  // configured spec replaces a learned one at the same address).
  void add(RelaySpec spec);
  // The relays the groups' lists name now (each with its key and group):
  // new ones are added, and those no longer named are dropped unless
  // link.relays names them too, or `still_learned` does (a paired
  // provider's stored address names it: it stays, as learned). A learned relay at the same address with
  // the same key becomes a group relay; one with another key is kept and the
  // group's is not used (a warning says which).
  void set_group_relays(const std::vector<RelaySpec>& specs, const std::set<std::string>& still_learned);
  // The relays our peers offer that this node uses now (each with the
  // offering peer's key and name): new ones are added, and offered ones no
  // longer wanted are dropped. A relay already kept for another reason
  // (link.relays, a group, a share link) is left as it is.
  void set_offered_relays(const std::vector<RelaySpec>& specs);
  // What a share link may carry: each configured, group and offered relay with its key, pinned
  // in link.relays or proved by the relay's TLS handshake (the last
  // registration), at most `max` of them; the others, whose key is not
  // known yet or that do not fit, in `left_out` with a note for the user.
  struct ForLink {
    std::vector<LinkRelay> relays;
    std::vector<std::pair<std::string, std::string>> left_out;  // address, why (a sentence)
  };
  ForLink for_share_link(size_t max) const;
  // Every relay's HOST:PORT, configured or learned (their UDP port of the
  // same number answers STUN: hole punching's NAT check).
  std::vector<std::string> addresses() const;
  bool empty() const { return entries_.empty(); }
  // Peers or tokens changed (pairing, deny, share, revoke): declare anew.
  void refresh();
  // link::CarrierDialer.
  void dial(const PublicKeyBytes& peer, const std::optional<ShareLink>& pairing,
            std::function<void(Result<link::Carrier>)> done);
  // Per relay: address, state, last error, and what it observed of us
  // (public address, mapping, NAT verdict), for `yonder netcheck`.
  nlohmann::json status() const;
  // Sends `data` to `peer` through the first registered relay that takes it
  // (retrying for about 3 s while none does: a new peer's declaration may
  // still be on its way to the relay).
  // `done` (optional) hears whether a relay took it; `rounds` 1: no retry.
  void send_signal(const PublicKeyBytes& peer, Bytes data, std::function<void(Status)> done = nullptr,
                   int rounds = 12);
  void stop();

  struct Entry;

 private:
  void connect(Entry& e);
  // Closes and forgets an entry; its waiters hear `why`.
  void drop(std::map<std::string, std::unique_ptr<Entry>>::iterator& it, const std::string& why);
  void on_closed(const std::string& address, const std::string& why);
  void schedule_retry(Entry& e);
  void when_ready(Entry& e, std::function<void(Status)> ready);
  struct SignalJob;
  void try_signal(std::shared_ptr<SignalJob> job, size_t index, int round);
  void on_pipe_wanted(const std::string& address, const PublicKeyBytes& from, std::optional<relay::Rendezvous> token);
  // One relay a dial tries: `expect` is the key it must have proved (a
  // pairing link's key for a relay whose connection was not dialled with it).
  struct DialErrors;
  struct Hop {
    std::string address;
    std::optional<PublicKeyBytes> expect;
  };
  void try_relay(std::shared_ptr<std::vector<Hop>> order, size_t index, PublicKeyBytes peer,
                 std::optional<relay::Rendezvous> token, std::shared_ptr<DialErrors> errors,
                 std::function<void(Result<link::Carrier>)> done);

  boost::asio::io_context& io_;
  const Identity& identity_;
  link::LinkService& link_;
  Hooks hooks_;
  std::map<std::string, std::unique_ptr<Entry>> entries_;  // by address
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  bool stopped_ = false;
};

}  // namespace yonder::reach
