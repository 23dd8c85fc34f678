// Remote CUDA sessions over the peer link: a program on the consumer's
// machine, with the stand-in libcuda.so.1 first on its library path
// (src/gpu/remote), drives the provider's GPU through driver calls.
//
//   program ─ stand-in ══ unix socket ══ consumer yonderd ══ tunnel "cuda.session" ══ provider yonderd
//                                                          ══ socket pair ══ yonder-cuda-worker ─ driver ─ GPU
//
// Consumer:
//   POST /v1/cuda/sessions       {"target": PEER} -> {"session_id", "socket", "peer"}: a unix socket (in the
//                                daemon's socket folder, mode 0600) the stand-in connects to; each connection
//                                is one session, carried over a tunnel of its own
//   GET  /v1/cuda/sessions                         -> {"sessions": [...]}
//   POST /v1/cuda/sessions/stop  {"session_id"}    -> closes the socket (connections carry on until they end)
// `yonder cuda --on PEER -- PROGRAM` opens one, runs the program with the
// stand-in and the socket in its environment, and stops it.
//
// Provider: the tunnel method `cuda.session` (capability `cuda`, off unless
// granted). Each session is a yonder-cuda-worker of its own, given one end
// of a socket pair (the other joined to the tunnel), the driver named by
// `gpu.cuda_driver`, and, when the peer's scope caps VRAM, the VRAM guard
// preloaded with a ledger of that budget (so an allocation past it fails
// with CUDA_ERROR_OUT_OF_MEMORY). Sessions at once are capped; each one,
// and each refusal, is audited. The worker runs as a process of yonderd's
// user, not yet in a container of its own and not yet as a job (no `ps`,
// receipts or metering for sessions): grant `cuda` to peers you would
// trust that far.
//
// Threading: event loop only, but for the worker's reaping (a thread per
// session, which waits for the worker to exit once its socket is closed).
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include "api/module.h"
#include "api/server.h"
#include "net/reach/peers.h"

namespace boost::asio {
class io_context;
}  // namespace boost::asio

namespace yonder::jobs::provider {
class RemoteProvider;
}

namespace yonder::jobs::sessions {

class SocketPipe;

struct CudaSessionOptions {
  std::string worker;                // yonder-cuda-worker
  std::string driver;                // what the worker loads (gpu.cuda_driver)
  std::string vram_guard;            // preloaded into workers whose peer has a VRAM cap (gpu.vram_guard)
  std::filesystem::path run_dir;     // the provider's session ledgers
  std::filesystem::path socket_dir;  // the consumer's session sockets
  size_t max_sessions = 16;          // provider: sessions at once, all peers together
};

class CudaSessions : public api::Module {
 public:
  std::string_view module_name() const override { return "remote CUDA sessions"; }
  CudaSessions(boost::asio::io_context& io, reach::Peers& link, jobs::provider::RemoteProvider& audit,
               CudaSessionOptions options);
  ~CudaSessions();
  void register_methods() override;
  void add_routes(api::Router& router) override;
  void stop() override;

  struct Listener;  // cuda_sessions.cpp
  struct Worker;    // cuda_sessions.cpp

 private:
  void serve(const PublicKeyBytes& peer, link::TunnelAccept accept);
  void create(const api::Request& req, api::Reply reply);

  boost::asio::io_context& io_;
  reach::Peers& link_;
  jobs::provider::RemoteProvider& audit_;
  CudaSessionOptions options_;
  std::map<std::string, std::shared_ptr<Listener>> listeners_;  // consumer, by session id
  std::map<SocketPipe*, std::shared_ptr<Worker>> workers_;      // provider, live sessions
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  uint64_t next_id_ = 1;
};

}  // namespace yonder::jobs::sessions
