#include "net/link/memory_channel.h"

#include <boost/asio/error.hpp>
#include <boost/asio/post.hpp>
#include <algorithm>
#include <cstring>
#include <deque>
#include <string>

namespace yonder::link {

namespace asio = boost::asio;

// What the two ends share: one inbox per end, and each end's pending read.
struct MemoryChannel::Shared {
  struct End {
    std::deque<uint8_t> inbox;  // bytes the other end wrote, not yet read here
    uint8_t* buffer = nullptr;  // the pending read, if any
    size_t size = 0;
    IoHandler done;
    bool eof = false;     // the other end shut down
    bool closed = false;  // this end closed
    uint64_t written = 0;
  };
  End ends[2];
  bool cut = false;
  uint64_t seed = 0;
  std::mt19937_64 random;
  size_t max_read = 1;
  MemoryChannel* channels[2] = {nullptr, nullptr};
};

MemoryPair memory_channel_pair(asio::any_io_executor executor, uint64_t seed, size_t max_read) {
  auto shared = std::make_shared<MemoryChannel::Shared>();
  shared->seed = seed;
  shared->random.seed(seed);
  shared->max_read = std::max<size_t>(1, max_read);
  MemoryPair pair{std::make_shared<MemoryChannel>(executor, shared, 0),
                  std::make_shared<MemoryChannel>(executor, shared, 1)};
  shared->channels[0] = pair.a.get();
  shared->channels[1] = pair.b.get();
  return pair;
}

void MemoryPair::cut() {
  auto shared = a->shared_;
  shared->cut = true;
  a->deliver();
  b->deliver();
}

MemoryChannel::MemoryChannel(asio::any_io_executor executor, std::shared_ptr<Shared> shared, int side)
    : executor_(std::move(executor)), shared_(std::move(shared)), side_(side) {}

void MemoryChannel::async_read_some(uint8_t* buffer, size_t size, IoHandler done) {
  auto& me = shared_->ends[side_];
  me.buffer = buffer;
  me.size = size;
  me.done = std::move(done);
  deliver();
}

void MemoryChannel::deliver() {
  auto& me = shared_->ends[side_];
  if (!me.done || me.closed) return;
  boost::system::error_code ec;
  size_t n = 0;
  if (shared_->cut) {
    ec = asio::error::connection_reset;
  } else if (!me.inbox.empty()) {
    std::uniform_int_distribution<size_t> take(1, shared_->max_read);
    n = std::min({me.size, me.inbox.size(), take(shared_->random)});
    std::copy_n(me.inbox.begin(), n, me.buffer);
    me.inbox.erase(me.inbox.begin(), me.inbox.begin() + static_cast<std::ptrdiff_t>(n));
  } else if (me.eof) {
    ec = asio::error::eof;
  } else {
    return;  // nothing yet: stays pending
  }
  auto done = std::move(me.done);
  me.done = nullptr;
  me.buffer = nullptr;
  asio::post(executor_, [done = std::move(done), ec, n] { done(ec, n); });
}

void MemoryChannel::async_write(ByteView data, IoHandler done) {
  auto& me = shared_->ends[side_];
  int other = 1 - side_;
  boost::system::error_code ec;
  size_t n = 0;
  if (shared_->cut || me.closed) {
    ec = asio::error::broken_pipe;
  } else {
    auto& peer = shared_->ends[other];
    if (!peer.closed) peer.inbox.insert(peer.inbox.end(), data.begin(), data.end());
    me.written += data.size();
    n = data.size();
    if (auto* c = shared_->channels[other]) c->deliver();
  }
  asio::post(executor_, [done = std::move(done), ec, n] { done(ec, n); });
}

void MemoryChannel::async_shutdown(Handler done) {
  int other = 1 - side_;
  shared_->ends[other].eof = true;
  if (auto* c = shared_->channels[other]) c->deliver();
  close();
  asio::post(executor_, [done = std::move(done)] { done({}); });
}

void MemoryChannel::close() {
  auto& me = shared_->ends[side_];
  if (me.closed) return;
  me.closed = true;
  me.done = nullptr;  // pending handlers are dropped, as the Channel contract says
  int other = 1 - side_;
  shared_->ends[other].eof = true;
  shared_->channels[side_] = nullptr;
  if (auto* c = shared_->channels[other]) c->deliver();
}

bool MemoryChannel::export_keying_material(std::string_view label, uint8_t* out, size_t size) {
  // The same bytes at both ends: the pair's seed and the label, stretched.
  std::seed_seq seq{shared_->seed, static_cast<uint64_t>(std::hash<std::string_view>{}(label))};
  std::mt19937_64 g(seq);
  for (size_t i = 0; i < size; ++i) out[i] = static_cast<uint8_t>(g());
  return true;
}

uint64_t MemoryChannel::bytes_written() const { return shared_->ends[side_].written; }

}  // namespace yonder::link
