// Two Channel ends joined in memory, for simulations of many nodes on one
// event loop (tests/sim): what one end writes, the other reads, in order,
// with no socket, no TLS and no kernel in between. A TEST DOUBLE of the
// carriers (tls_channel.h, net/quic), for tests only: it authenticates
// nothing and encrypts nothing.
//
// What a simulation can do to the pair, deterministically:
//   - chunking: each read takes 1..max_read bytes, drawn from a seeded
//     generator, so partial reads and frame boundaries split anywhere;
//   - cut(): a network partition, both ends' reads fail at once
//     (connection_reset) and later writes fail (broken_pipe);
//   - async_shutdown(): an orderly end, the other end reads eof.
// export_keying_material gives both ends the same bytes (from the pair's
// seed), so the session's check digits agree as over TLS.
//
// Event-loop thread only (the executor given), like every Channel.
#pragma once

#include <utility>  // before Boost.Asio (GCC 12)

#include <boost/asio/any_io_executor.hpp>
#include <cstdint>
#include <memory>
#include <random>

#include "net/link/channel.h"

namespace yonder::link {

class MemoryChannel;

struct MemoryPair {
  std::shared_ptr<MemoryChannel> a, b;
  // A network partition: both ends fail, now and from now on.
  void cut();
};

// max_read: the most bytes one read returns (at least 1).
MemoryPair memory_channel_pair(boost::asio::any_io_executor executor, uint64_t seed, size_t max_read = 64 * 1024);

class MemoryChannel final : public Channel, public std::enable_shared_from_this<MemoryChannel> {
 public:
  struct Shared;
  MemoryChannel(boost::asio::any_io_executor executor, std::shared_ptr<Shared> shared, int side);

  boost::asio::any_io_executor get_executor() override { return executor_; }
  void async_read_some(uint8_t* buffer, size_t size, IoHandler done) override;
  void async_write(ByteView data, IoHandler done) override;
  void async_shutdown(Handler done) override;
  void close() override;
  bool export_keying_material(std::string_view label, uint8_t* out, size_t size) override;

  // Bytes written by this end so far.
  uint64_t bytes_written() const;

 private:
  friend struct MemoryPair;
  void deliver();  // completes this end's pending read if it can

  boost::asio::any_io_executor executor_;
  std::shared_ptr<Shared> shared_;
  int side_;  // 0 or 1
};

}  // namespace yonder::link
