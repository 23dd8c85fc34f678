#include "discovery/lan_discovery_core.h"

#include <algorithm>
#include <cstring>
#include <utility>

namespace yonder::discovery {

namespace {

constexpr size_t kRememberedNonces = 512;
// Tags are padded up to a multiple of this with random ones, so strangers
// see only roughly how many peers a node has.
constexpr size_t kTagPadding = 8;

}  // namespace

LanDiscoveryCore::LanDiscoveryCore(const PublicKeyBytes& self, LanDiscoveryConfig config, RandomFill random)
    : self_(self), config_(config), random_(std::move(random)) {
  tokens_ = config_.max_datagrams_per_second;
}

bool LanDiscoveryCore::set_peers(std::vector<PairedPeer> peers) {
  // A node never treats itself as a peer (its own announcements loop back).
  std::erase_if(peers, [&](const PairedPeer& p) { return p.id.public_key() == self_; });
  bool added = false;
  for (const auto& p : peers) {
    bool known = false;
    for (const auto& q : peers_) known = known || q.id.public_key() == p.id.public_key();
    added = added || !known;
  }
  peers_ = std::move(peers);
  return added;
}

void LanDiscoveryCore::start(SteadyTime now) {
  started_ = true;
  queries_left_ = 2;
  next_announce_ = now;
  tokens_at_ = now;
}

std::chrono::milliseconds LanDiscoveryCore::jittered(std::chrono::milliseconds base) {
  uint32_t r = 0;
  random_(std::span<uint8_t>(reinterpret_cast<uint8_t*>(&r), sizeof r));
  auto spread = base.count() / 10;
  return base + std::chrono::milliseconds(spread > 0 ? static_cast<int64_t>(r % static_cast<uint32_t>(spread + 1)) : 0);
}

void LanDiscoveryCore::announce(bool query) {
  if (peers_.empty()) return;
  for (size_t first = 0; first < peers_.size(); first += kMaxTags) {
    size_t real = std::min(kMaxTags, peers_.size() - first);
    size_t padded = std::min(kMaxTags, (real + kTagPadding - 1) / kTagPadding * kTagPadding);
    Announcement a;
    a.flags = query ? kFlagQuery : 0;
    a.link_port = config_.link_port;
    random_(a.nonce);
    a.tags.resize(padded);  // the count is part of what the tags cover
    for (size_t i = 0; i < real; ++i) a.tags[i] = announcement_tag(peers_[first + i].key, self_, a);
    for (size_t i = real; i < padded; ++i) random_(a.tags[i]);
    outgoing_.push_back(encode_announcement(a));
  }
}

void LanDiscoveryCore::on_timer(SteadyTime now) {
  if (!started_) return;
  if (answer_due_ <= now) {
    answer_due_ = SteadyTime::max();
    // A scheduled announcement in the same instant covers the answer.
    if (next_announce_ > now) {
      announce(false);
      last_answer_ = now;
    }
  }
  if (next_announce_ <= now) {
    bool query = queries_left_ > 0;
    announce(query);
    if (query) --queries_left_;
    next_announce_ = now + (queries_left_ > 0 ? config_.second_query_after : jittered(config_.interval));
  }
}

SteadyTime LanDiscoveryCore::next_deadline() const {
  if (!started_ || peers_.empty()) return SteadyTime::max();
  return std::min(next_announce_, answer_due_);
}

std::vector<Bytes> LanDiscoveryCore::take_outgoing() {
  return std::exchange(outgoing_, {});
}

bool LanDiscoveryCore::seen_nonce(const Nonce& nonce) {
  if (!nonces_.insert(nonce).second) return true;
  nonce_order_.push_back(nonce);
  if (nonce_order_.size() > kRememberedNonces) {
    nonces_.erase(nonce_order_.front());
    nonce_order_.pop_front();
  }
  return false;
}

std::optional<LanCandidate> LanDiscoveryCore::on_datagram(ByteView datagram, const std::string& from, SteadyTime now) {
  if (!started_ || peers_.empty()) return std::nullopt;
  // Refill, then spend one token; without one the datagram is not examined.
  if (now > tokens_at_) {
    double secs = std::chrono::duration<double>(now - tokens_at_).count();
    tokens_ = std::min<double>(config_.max_datagrams_per_second, tokens_ + secs * config_.max_datagrams_per_second);
    tokens_at_ = now;
  }
  if (tokens_ < 1) {
    ++dropped_;
    return std::nullopt;
  }
  tokens_ -= 1;
  auto a = decode_announcement(datagram);
  if (!a.ok()) return std::nullopt;
  // Which paired peer (if any) made one of the tags?
  const PairedPeer* match = nullptr;
  for (const auto& p : peers_) {
    Tag expected = announcement_tag(p.key, p.id.public_key(), *a);
    for (const auto& t : a->tags) {
      if (tags_equal(t, expected)) match = &p;
    }
    if (match != nullptr) break;
  }
  if (match == nullptr) return std::nullopt;
  // Only genuine announcements enter the nonce memory, so a stranger cannot flush it.
  if (seen_nonce(a->nonce)) return std::nullopt;
  if (a->query()) {
    SteadyTime due = last_answer_ == SteadyTime::min() ? now : std::max(now, last_answer_ + config_.answer_gap);
    answer_due_ = std::min(answer_due_, due);
  }
  return LanCandidate{match->id, from, a->link_port};
}

}  // namespace yonder::discovery
