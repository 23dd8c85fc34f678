#include "net/reach/relay_paths.h"

#include <utility>  // before Boost.Asio (GCC 12)

#include <unistd.h>

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <sodium.h>
#include <spdlog/spdlog.h>

#include "crypto/node_id.h"
#include "relay/client.h"

namespace yonder::reach {
namespace asio = boost::asio;

namespace {

std::string trim(std::string s) {
  while (!s.empty() && s.front() == ' ') s.erase(0, 1);
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

std::string short_id(const PublicKeyBytes& k) { return NodeId(k).short_form(); }

// The pipe's socket as a carrier: a duplicate of its descriptor (the asio
// socket closes its own when dropped).
Result<link::Carrier> carrier_of(relay::RelayPipe& pipe, const std::string& address) {
  int fd = ::dup(pipe.socket.native_handle());
  if (fd < 0) return make_error(ErrorCode::kInternal, "cannot take the relay pipe's socket");
  boost::system::error_code ec;
  pipe.socket.close(ec);
  return link::Carrier{fd, "relay via " + address, pipe.initiator};
}

}  // namespace

// Why the relays of one dial failed, and the most telling code among them:
// a relay that proved the wrong key (kPermissionDenied) beats a link whose
// relays cannot be checked (kFailedPrecondition) beats "unreachable".
struct RelayPaths::DialErrors {
  std::string text;
  ErrorCode code = ErrorCode::kUnavailable;
  void add(const std::string& address, ErrorCode c, const std::string& why) {
    if (!text.empty()) text += "; ";
    text += "relay " + address + ": " + why;
    auto rank = [](ErrorCode x) {
      return x == ErrorCode::kPermissionDenied ? 2 : x == ErrorCode::kFailedPrecondition ? 1 : 0;
    };
    if (rank(c) > rank(code)) code = c;
  }
};

struct RelayPaths::Entry {
  RelaySpec spec;
  // The key the relay's TLS handshake proved at its last registration (kept
  // across reconnections): what a share link names for an unpinned relay.
  std::optional<PublicKeyBytes> proved_key;
  std::shared_ptr<relay::RelayClient> client;
  enum class State { kConnecting, kRegistered, kWaiting } state = State::kWaiting;
  std::string last_error;
  int failures = 0;
  std::unique_ptr<asio::steady_timer> retry;
  std::vector<std::function<void(Status)>> waiters;
  std::optional<relay::Registration> registration;
};

RelayPaths::RelayPaths(asio::io_context& io, const Identity& identity, link::LinkService& link, Hooks hooks)
    : io_(io), identity_(identity), link_(link), hooks_(std::move(hooks)) {}

RelayPaths::~RelayPaths() { stop(); }

Result<std::vector<RelaySpec>> RelayPaths::parse(const std::string& list) {
  std::vector<RelaySpec> out;
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    if (comma == std::string::npos) comma = list.size();
    std::string item = trim(list.substr(start, comma - start));
    start = comma + 1;
    if (item.empty()) continue;
    auto relay = parse_link_relay(item);
    if (!relay) return make_error(ErrorCode::kInvalidArgument, "link.relays: " + relay.error().message());
    out.push_back(RelaySpec{std::move(relay->address), relay->key, true, "", ""});
  }
  return out;
}

void RelayPaths::add(RelaySpec spec) {
  if (stopped_ || spec.address.empty()) return;
  auto it = entries_.find(spec.address);
  if (it != entries_.end()) {
    // A configured entry (with its pin) wins over a learned one.
    if (spec.configured && !it->second->spec.configured) it->second->spec = spec;
    return;
  }
  auto e = std::make_unique<Entry>();
  e->spec = std::move(spec);
  Entry& ref = *e;
  entries_[ref.spec.address] = std::move(e);
  connect(ref);
}

void RelayPaths::set_group_relays(const std::vector<RelaySpec>& specs, const std::set<std::string>& still_learned) {
  if (stopped_) return;
  std::map<std::string, const RelaySpec*> wanted;
  for (const auto& s : specs) {
    if (s.key && !s.group.empty()) wanted.emplace(s.address, &s);
  }
  for (auto it = entries_.begin(); it != entries_.end();) {
    Entry& e = *it->second;
    if (e.spec.group.empty() || wanted.count(it->first) != 0) {
      ++it;
      continue;
    }
    if (e.spec.configured || !e.spec.offered_by.empty() ||
        still_learned.count(it->first) != 0) {  // link.relays, a peer's offer or a provider still names it
      e.spec.group.clear();
      ++it;
      continue;
    }
    spdlog::info("relay {}: no group lists it any more; leaving it", it->first);
    drop(it, "no group lists this relay any more");
  }
  for (const auto& [address, spec] : wanted) {
    auto it = entries_.find(address);
    if (it == entries_.end()) {
      add(*spec);
      continue;
    }
    RelaySpec& held = it->second->spec;
    if (held.key && *held.key != *spec->key) {
      spdlog::warn("relay {}: group {} names it with key {}, but this node pins key {} ({}); the group's is not used",
                   address, spec->group, NodeId(*spec->key).short_form(), NodeId(*held.key).short_form(),
                   held.configured ? "link.relays" : "a share link");
      continue;
    }
    held.group = spec->group;
    if (!held.key) held.key = spec->key;  // an unpinned link.relays entry: the group's key pins it from now on
  }
}

void RelayPaths::drop(std::map<std::string, std::unique_ptr<Entry>>::iterator& it, const std::string& why) {
  Entry& e = *it->second;
  if (e.retry) e.retry->cancel();
  if (e.client) e.client->close();
  auto waiters = std::move(e.waiters);
  it = entries_.erase(it);
  for (auto& w : waiters) w(make_error(ErrorCode::kUnavailable, why));
}

void RelayPaths::set_offered_relays(const std::vector<RelaySpec>& specs) {
  if (stopped_) return;
  std::map<std::string, const RelaySpec*> wanted;
  for (const auto& s : specs) {
    if (s.key && !s.offered_by.empty()) wanted.emplace(s.address, &s);
  }
  for (auto it = entries_.begin(); it != entries_.end();) {
    const RelaySpec& held = it->second->spec;
    if (held.offered_by.empty() || wanted.count(it->first) != 0) {
      ++it;
      continue;
    }
    if (held.configured || !held.group.empty()) {  // link.relays or a group names it too: it stays
      it->second->spec.offered_by.clear();
      ++it;
      continue;
    }
    spdlog::info("relay {}: {} no longer offers it, or a closer peer's relay is used; leaving it", it->first,
                 held.offered_by);
    drop(it, "the peer that offered this relay no longer does");
  }
  for (const auto& [address, spec] : wanted) {
    auto it = entries_.find(address);
    if (it == entries_.end()) {
      spdlog::info("relay {}: offered by {}; registering there", address, spec->offered_by);
      add(*spec);
    } else if (!it->second->spec.offered_by.empty()) {
      it->second->spec.offered_by = spec->offered_by;
    }
  }
}

RelayPaths::ForLink RelayPaths::for_share_link(size_t max) const {
  ForLink out;
  for (const auto& [address, e] : entries_) {
    if (!e->spec.configured && e->spec.group.empty() && e->spec.offered_by.empty()) continue;
    std::optional<PublicKeyBytes> key = e->spec.key ? e->spec.key : e->proved_key;
    if (!key) {
      out.left_out.emplace_back(address, "relay " + address +
                                             " left out: its key is not known yet; pin it with link.relays = " + address + "@NODE_ID");
    } else if (out.relays.size() >= max) {
      out.left_out.emplace_back(address, "relay " + address + " left out: a link carries at most " +
                                             std::to_string(max) + " relays; name fewer in link.relays");
    } else {
      out.relays.push_back(LinkRelay{address, key});
    }
  }
  return out;
}

std::vector<std::string> RelayPaths::addresses() const {
  std::vector<std::string> out;
  for (const auto& [address, e] : entries_) out.push_back(address);
  return out;
}

void RelayPaths::connect(Entry& e) {
  if (stopped_) return;
  relay::RelayClientConfig cfg;
  cfg.address = e.spec.address;
  cfg.relay_key = e.spec.key;
  cfg.relay_key_from_share_link = !e.spec.configured;  // learned entries are pinned by a link's key
  if (hooks_.peers) cfg.peers = hooks_.peers();
  if (hooks_.rendezvous) cfg.rendezvous = hooks_.rendezvous();
  std::string address = e.spec.address;
  auto client = relay::RelayClient::create(io_, identity_, cfg);
  if (!client) {
    e.last_error = client.error().message();
    return schedule_retry(e);
  }
  e.client = *client;
  e.state = Entry::State::kConnecting;
  relay::RelayClient::Handlers h;
  std::weak_ptr<bool> alive = alive_;
  h.pipe_wanted = [this, alive, address](const PublicKeyBytes& from) {
    if (alive.lock()) on_pipe_wanted(address, from, std::nullopt);
  };
  h.pairing_pipe_wanted = [this, alive, address](const PublicKeyBytes& from, const relay::Rendezvous& token) {
    if (alive.lock()) on_pipe_wanted(address, from, token);
  };
  h.signal = [this, alive](const PublicKeyBytes& from, Bytes data, const std::string& from_host) {
    if (alive.lock() && hooks_.signal) hooks_.signal(from, std::move(data), from_host);
  };
  h.nat = [this, alive, address](const relay::NatReport& nat) {
    if (!alive.lock()) return;
    auto it = entries_.find(address);
    if (it != entries_.end() && it->second->registration) it->second->registration->nat = nat;
  };
  h.closed = [this, alive, address](const Error& why) {
    if (alive.lock()) on_closed(address, why.message());
  };
  std::weak_ptr<relay::RelayClient> weak_client = e.client;
  e.client->connect(h, [this, alive, address, weak_client](Result<relay::Registration> r) {
    if (!alive.lock()) return;
    auto it = entries_.find(address);
    if (it == entries_.end() || it->second->client != weak_client.lock()) return;
    Entry& en = *it->second;
    auto waiters = std::move(en.waiters);
    en.waiters.clear();
    if (!r) {
      en.last_error = r.error().message();
      spdlog::warn("relay {}: {}", address, en.last_error);
      en.client.reset();
      schedule_retry(en);
      for (auto& w : waiters) w(make_error(r.error().code(), en.last_error));
      return;
    }
    en.state = Entry::State::kRegistered;
    en.failures = 0;
    en.last_error.clear();
    en.registration = *r;
    en.proved_key = r->relay_key;
    spdlog::info("relay {}: registered; it sees this node at {} (NAT: {})", address, r->nat.observed.to_string(),
                 relay::verdict_name(r->nat.nat));
    for (auto& w : waiters) w(ok_status());
    // A second registration from a fresh socket tells a NAT that keeps
    // ports from one that does not (netcheck; hole punching later).
    en.client->probe_nat([this, alive, address](Result<relay::NatReport> nat) {
      if (!alive.lock() || !nat) return;
      auto found = entries_.find(address);
      if (found == entries_.end() || !found->second->registration) return;
      found->second->registration->nat.nat = nat->nat;
      found->second->registration->nat.samples = nat->samples;
    });
  });
}

void RelayPaths::on_closed(const std::string& address, const std::string& why) {
  auto it = entries_.find(address);
  if (it == entries_.end()) return;
  Entry& e = *it->second;
  spdlog::warn("relay {}: connection lost: {}; reconnecting", address, why);
  e.last_error = why;
  e.client.reset();
  e.registration.reset();
  schedule_retry(e);
}

void RelayPaths::schedule_retry(Entry& e) {
  if (stopped_) return;
  e.state = Entry::State::kWaiting;
  int f = std::min(e.failures++, 6);
  auto delay = std::chrono::milliseconds(500) * (1 << f);  // 0.5 s .. 32 s
  delay += std::chrono::milliseconds(randombytes_uniform(static_cast<uint32_t>(delay.count() / 4 + 1)));
  if (!e.retry) e.retry = std::make_unique<asio::steady_timer>(io_);
  e.retry->expires_after(delay);
  std::weak_ptr<bool> alive = alive_;
  std::string address = e.spec.address;
  e.retry->async_wait([this, alive, address](boost::system::error_code ec) {
    if (ec || !alive.lock()) return;
    auto it = entries_.find(address);
    if (it != entries_.end() && it->second->state == Entry::State::kWaiting) connect(*it->second);
  });
}

void RelayPaths::when_ready(Entry& e, std::function<void(Status)> ready) {
  if (e.state == Entry::State::kRegistered && e.client && e.client->registered()) return ready(ok_status());
  e.waiters.push_back(std::move(ready));
  if (e.state == Entry::State::kWaiting) {
    // Someone needs it now: do not wait for the backoff.
    if (e.retry) e.retry->cancel();
    connect(e);
  }
}

void RelayPaths::refresh() {
  if (stopped_) return;
  std::vector<PublicKeyBytes> peers = hooks_.peers ? hooks_.peers() : std::vector<PublicKeyBytes>{};
  std::vector<relay::Rendezvous> tokens = hooks_.rendezvous ? hooks_.rendezvous() : std::vector<relay::Rendezvous>{};
  for (auto& [address, e] : entries_) {
    if (e->state != Entry::State::kRegistered || !e->client) continue;
    e->client->set_peers(peers, tokens, [address = address](Status st) {
      if (!st) spdlog::warn("relay {}: cannot update the declared peers: {}", address, st.error().message());
    });
  }
}

void RelayPaths::on_pipe_wanted(const std::string& address, const PublicKeyBytes& from,
                                std::optional<relay::Rendezvous> token) {
  auto it = entries_.find(address);
  if (it == entries_.end() || !it->second->client) return;
  if (token) {
    auto tokens = hooks_.rendezvous ? hooks_.rendezvous() : std::vector<relay::Rendezvous>{};
    if (std::find(tokens.begin(), tokens.end(), *token) == tokens.end()) {
      spdlog::info("relay {}: pairing pipe from {} for a link that can no longer pair: ignored", address,
                   short_id(from));
      return;
    }
  } else {
    auto peers = hooks_.peers ? hooks_.peers() : std::vector<PublicKeyBytes>{};
    if (std::find(peers.begin(), peers.end(), from) == peers.end()) return;  // not ours (any more)
  }
  std::weak_ptr<bool> alive = alive_;
  auto on_pipe = [this, alive, address, from](Result<relay::RelayPipe> pipe) {
    if (!alive.lock()) return;
    if (!pipe) {
      spdlog::info("relay {}: pipe for {} failed: {}", address, short_id(from), pipe.error().message());
      return;
    }
    auto carrier = carrier_of(*pipe, address);
    if (!carrier) return;
    link_.accept_carrier(std::move(*carrier), from);
  };
  if (token) {
    it->second->client->open_pipe(from, *token, on_pipe);
  } else {
    it->second->client->open_pipe(from, on_pipe);
  }
}

void RelayPaths::dial(const PublicKeyBytes& peer, const std::optional<ShareLink>& pairing,
                      std::function<void(Result<link::Carrier>)> done) {
  auto order = std::make_shared<std::vector<Hop>>();
  auto errors = std::make_shared<DialErrors>();
  std::optional<relay::Rendezvous> token;
  if (pairing) {
    // Pairing: only the link's relays know the provider's token, and each
    // is used only with the key the link names for it (or, for a v1 link's
    // keyless relay, the key our own link.relays pins).
    for (const auto& r : pairing->relays) {
      auto it = entries_.find(r.address);
      const Entry* e = it == entries_.end() ? nullptr : it->second.get();
      std::string refused;
      ErrorCode code = ErrorCode::kFailedPrecondition;
      if (!r.key && (e == nullptr || !e->spec.configured || !e->spec.key)) {
        refused = "this share link is in the old format (v1), which names relays without their keys, and this node "
                  "uses no relay whose key it cannot check; pin it with link.relays = " +
                  r.address + "@NODE_ID (the relay's operator has its node id), or ask the provider for a new link "
                  "from an up-to-date yonder";
      } else if (r.key && e != nullptr && e->spec.key && *e->spec.key != *r.key) {
        code = ErrorCode::kPermissionDenied;
        refused = "this node pins it to key " + NodeId(*e->spec.key).to_string() +
                  (e->spec.configured ? " (link.relays)" : " (another provider's share link)") +
                  ", not the key " + NodeId(*r.key).to_string() +
                  " this share link names; check the relay's node id with the provider";
      }
      if (!refused.empty()) {
        errors->add(r.address, code, refused);
        continue;
      }
      if (e == nullptr) add(RelaySpec{r.address, r.key, false, "", ""});
      // An unpinned configured entry connects to whatever relay answers
      // there: check the key it proved against the link's after the fact.
      order->push_back(Hop{r.address, r.key});
    }
    token = link_rendezvous_token(pairing->id, hash_link_secret(pairing->secret));
  } else {
    // Registered relays first: no connection to wait for.
    for (const auto& [address, e] : entries_) {
      if (e->state == Entry::State::kRegistered) order->push_back(Hop{address, std::nullopt});
    }
    for (const auto& [address, e] : entries_) {
      if (e->state != Entry::State::kRegistered) order->push_back(Hop{address, std::nullopt});
    }
  }
  if (order->empty()) {
    if (!pairing) return done(make_error(ErrorCode::kUnavailable, "no relay is configured (link.relays)"));
    if (errors->text.empty()) return done(make_error(ErrorCode::kUnavailable, "the share link names no relay"));
    return done(make_error(errors->code, "no relay of this share link can be used: " + errors->text));
  }
  try_relay(order, 0, peer, token, errors, std::move(done));
}

void RelayPaths::try_relay(std::shared_ptr<std::vector<Hop>> order, size_t index, PublicKeyBytes peer,
                           std::optional<relay::Rendezvous> token, std::shared_ptr<DialErrors> errors,
                           std::function<void(Result<link::Carrier>)> done) {
  if (stopped_) return done(make_error(ErrorCode::kUnavailable, "the node is shutting down"));
  if (index >= order->size()) {
    // A refusal (a wrong key, a relay's "no") already says what to do.
    std::string advice = errors->code == ErrorCode::kUnavailable ? "; check that it runs and uses one of our relays" : "";
    return done(make_error(errors->code,
                           "no relay could join us with peer " + short_id(peer) + " (" + errors->text + ")" + advice));
  }
  const std::string address = (*order)[index].address;
  const std::optional<PublicKeyBytes> expect = (*order)[index].expect;
  auto next = [this, order, index, peer, token, errors, done, address](ErrorCode code, const std::string& why) {
    errors->add(address, code, why);
    try_relay(order, index + 1, peer, token, errors, done);
  };
  auto it = entries_.find(address);
  if (it == entries_.end()) return next(ErrorCode::kUnavailable, "not configured");
  std::weak_ptr<bool> alive = alive_;
  when_ready(*it->second, [this, alive, address, expect, peer, token, next, done](Status st) {
    if (!alive.lock()) return done(make_error(ErrorCode::kUnavailable, "the node is shutting down"));
    if (!st) return next(st.error().code(), st.error().message());
    auto e = entries_.find(address);
    if (e == entries_.end() || !e->second->client) return next(ErrorCode::kUnavailable, "the connection closed");
    const auto& reg = e->second->registration;
    if (expect && (!reg || reg->relay_key != *expect)) {
      return next(ErrorCode::kPermissionDenied, "it proved key " + (reg ? NodeId(reg->relay_key).to_string() : std::string("(none)")) +
                  ", not the key " + NodeId(*expect).to_string() +
                  " the share link names: it is not the provider's relay; ask the provider for a new link, or pin "
                  "the right key with link.relays = " + address + "@NODE_ID");
    }
    auto on_pipe = [alive, address, next, done](Result<relay::RelayPipe> pipe) {
      if (!alive.lock()) return done(make_error(ErrorCode::kUnavailable, "the node is shutting down"));
      if (!pipe) return next(pipe.error().code(), pipe.error().message());
      auto carrier = carrier_of(*pipe, address);
      if (!carrier) return next(carrier.error().code(), carrier.error().message());
      done(std::move(*carrier));
    };
    if (token) {
      e->second->client->open_pipe(peer, *token, on_pipe);
    } else {
      e->second->client->open_pipe(peer, on_pipe);
    }
  });
}

struct RelayPaths::SignalJob {
  std::vector<std::string> order;
  PublicKeyBytes peer{};
  Bytes data;
  std::function<void(Status)> done;
  int rounds = 1;
  std::string last_error = "no relay is registered";
};

void RelayPaths::send_signal(const PublicKeyBytes& peer, Bytes data, std::function<void(Status)> done, int rounds) {
  auto job = std::make_shared<SignalJob>();
  for (auto& [address, e] : entries_) job->order.push_back(address);
  job->peer = peer;
  job->data = std::move(data);
  job->done = std::move(done);
  job->rounds = std::max(1, rounds);
  try_signal(std::move(job), 0, 0);
}

// Through one relay: the first registered one that delivers it. A peer that
// just paired may not have declared us at the relay yet (`peer_unavailable`
// for a moment): every relay refusing means try again shortly, a few times.
void RelayPaths::try_signal(std::shared_ptr<SignalJob> job, size_t index, int round) {
  if (stopped_) return;
  constexpr auto kPause = std::chrono::milliseconds(250);
  for (; index < job->order.size(); ++index) {
    auto it = entries_.find(job->order[index]);
    if (it == entries_.end() || it->second->state != Entry::State::kRegistered || !it->second->client) continue;
    std::weak_ptr<bool> alive = alive_;
    it->second->client->send_signal(job->peer, job->data,
                                    [this, alive, job, index, round, address = it->first](Status st) {
                                      if (st) {
                                        if (job->done) job->done(ok_status());
                                        return;
                                      }
                                      job->last_error = address + ": " + st.error().message();
                                      spdlog::debug("relay {}: signal to {} not delivered: {}", address,
                                                    short_id(job->peer), st.error().message());
                                      if (auto a = alive.lock(); a && *a) try_signal(job, index + 1, round);
                                    });
    return;
  }
  if (round + 1 >= job->rounds) {
    spdlog::debug("no relay delivered a signal to {}", short_id(job->peer));
    if (job->done) job->done(make_error(ErrorCode::kUnavailable, "no relay delivered the signal (" + job->last_error + ")"));
    return;
  }
  auto timer = std::make_shared<asio::steady_timer>(io_, kPause);
  std::weak_ptr<bool> alive = alive_;
  timer->async_wait([this, alive, timer, job, round](boost::system::error_code ec) {
    if (auto a = alive.lock(); !ec && a && *a) try_signal(job, 0, round + 1);
  });
}

nlohmann::json RelayPaths::status() const {
  nlohmann::json arr = nlohmann::json::array();
  for (const auto& [address, e] : entries_) {
    nlohmann::json j = {{"address", address},
                        {"configured", e->spec.configured},
                        {"pinned", e->spec.key.has_value()},
                        {"group", e->spec.group},
                        {"offered_by", e->spec.offered_by},
                        {"state", e->state == Entry::State::kRegistered   ? "registered"
                                  : e->state == Entry::State::kConnecting ? "connecting"
                                                                          : "waiting"}};
    if (!e->last_error.empty()) j["error"] = e->last_error;
    if (e->registration) {
      const auto& n = e->registration->nat;
      j["relay_node"] = NodeId(e->registration->relay_key).to_string();
      j["observed_addr"] = n.observed.to_string();
      j["mapping"] = relay::mapping_name(n.mapping);
      j["nat"] = relay::verdict_name(n.nat);
      j["node_rate"] = e->registration->node_rate;
    }
    arr.push_back(std::move(j));
  }
  return arr;
}

void RelayPaths::stop() {
  if (stopped_) return;
  stopped_ = true;
  *alive_ = false;
  alive_ = std::make_shared<bool>(false);
  for (auto& [address, e] : entries_) {
    if (e->retry) e->retry->cancel();
    if (e->client) e->client->close();
  }
  entries_.clear();
}

}  // namespace yonder::reach
