// The consumer's side of port forwarding (like `ssh -L`): the daemon listens
// on a local port and carries each accepted TCP connection over its own
// tunnel stream to the provider, which connects it to a port inside the job
// (jobs/sessions/forward_provider.h) or, when the target is a paired provider rather
// than a job, to 127.0.0.1:PORT on the provider host itself where the
// provider has opened that port to peers (jobs/sessions/host_forward.h).
//
//   POST /v1/forwards        {"target": JOB or PEER, "remote_port", "local_port"?}  -> the forward
//                            (with "address"; "to": "job" or "host"); a job wins over a peer of the same name
//   GET  /v1/forwards                                                   -> {"forwards": [...]}
//   POST /v1/forwards/stop   {"forward_id"}                             -> closes the listener and its connections
//   POST /v1/jobs/exec       {"job_id", "command", "tty", "rows", "cols"} -> {"address", "token"}: a one-shot
//        listener for `yonder exec`, which connects, sends the token, then jobs/protocol/exec_frames.h's frames
//
// The listener binds 127.0.0.1 only (port 0 picks one). Forwards live as long
// as the daemon (they are not persisted); a job that ends makes new
// connections fail, which is reported per connection in the daemon log.
//
// Threading: everything on the event loop; the job lookup on the pool.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "api/module.h"
#include "api/server.h"
#include "net/reach/peers.h"

namespace boost::asio {
class io_context;
class thread_pool;
}  // namespace boost::asio

namespace yonder::jobs::consumer {
class ConsumerJobStore;
}

namespace yonder::jobs::sessions {

class ForwardConsumer : public api::Module {
 public:
  std::string_view module_name() const override { return "port forwarding (consumer)"; }
  ForwardConsumer(boost::asio::io_context& io, boost::asio::thread_pool& pool, reach::Peers& link,
                  std::shared_ptr<jobs::consumer::ConsumerJobStore> store);
  ~ForwardConsumer();
  void add_routes(api::Router& router) override;

  struct Listener;   // forward_consumer.cpp
  struct ExecRelay;  // forward_consumer.cpp

 private:
  void create(const api::Request& req, api::Reply reply);
  void exec(const api::Request& req, api::Reply reply);
  // Listens on 127.0.0.1:local for a forward to `job_id` ("" the provider host).
  void open_listener(const reach::Peers::Target& t, const std::string& job_id, int64_t remote, int64_t local,
                     const api::Reply& reply);

  boost::asio::io_context& io_;
  boost::asio::thread_pool& pool_;
  reach::Peers& link_;
  std::shared_ptr<jobs::consumer::ConsumerJobStore> store_;
  std::map<std::string, std::shared_ptr<Listener>> listeners_;  // by forward id
  std::map<ExecRelay*, std::shared_ptr<ExecRelay>> sessions_;
  uint64_t next_id_ = 1;
};

}  // namespace yonder::jobs::sessions
