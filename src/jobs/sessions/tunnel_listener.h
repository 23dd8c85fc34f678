// A local listener whose every accepted connection is carried over a link
// tunnel of its own to a paired peer (`method` with `params`), joined by a
// SocketPipe: the consumer's side of `yonder forward` (TCP on 127.0.0.1)
// and of `yonder cuda` (a unix socket the stand-in driver connects to).
// The owner fills in the acceptor (open, bind, listen), the target, the
// method and its parameters, then calls accept_next().
//
// Threading: event loop only.
#pragma once

#include <utility>  // before Boost.Asio (GCC 12)

#include <spdlog/spdlog.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "jobs/sessions/socket_pipe.h"
#include "net/reach/peers.h"

namespace yonder::jobs::sessions {

template <class Protocol>
struct TunnelListener : std::enable_shared_from_this<TunnelListener<Protocol>> {
  TunnelListener(boost::asio::io_context& context, reach::Peers& peers) : io(context), link(peers), acceptor(context) {}
  virtual ~TunnelListener() = default;

  boost::asio::io_context& io;
  reach::Peers& link;
  typename Protocol::acceptor acceptor;
  reach::Peers::Target target;
  std::string label;   // for the log: the forward's or the session's id
  std::string method;  // the tunnel method each connection opens
  nlohmann::json params = nlohmann::json::object();
  uint64_t accepted = 0;
  bool closed = false;
  std::map<SocketPipe*, std::shared_ptr<SocketPipe>> conns;

  void accept_next() {
    acceptor.async_accept(
        [self = this->shared_from_this()](boost::system::error_code ec, typename Protocol::socket socket) {
          if (self->closed) return;
          if (ec) {
            spdlog::warn("{}: accept failed: {}", self->label, ec.message());
            return self->accept_next();
          }
          self->accepted++;
          self->connect(std::move(socket));
          self->accept_next();
        });
  }

  void connect(typename Protocol::socket socket) {
    std::weak_ptr<TunnelListener> weak = this->weak_from_this();
    auto pipe = std::make_shared<SocketPipe>(std::move(socket), [weak](SocketPipe* p) {
      // Posted: the pipe is inside one of its own callbacks.
      if (auto self = weak.lock()) {
        boost::asio::post(self->io, [weak, p] {
          if (auto s = weak.lock()) s->conns.erase(p);
        });
      }
    });
    conns[pipe.get()] = pipe;
    link.service().open_tunnel(target.key, target.addresses, method, params,
                               [weak, pipe](Result<link::TunnelOpened> r) {
                                 auto self = weak.lock();
                                 if (!self || self->closed) return;
                                 if (!r) {
                                   spdlog::warn("{}: {}", self->label, r.error().message());
                                   return pipe->fail();
                                 }
                                 pipe->start(std::move(r->tunnel));
                               });
  }
};

}  // namespace yonder::jobs::sessions
