// The provider's side of port forwarding: the `forward.tcp` tunnel method.
//
//   forward.tcp  {"job_id", "port"}  -> {"job_id", "port"}, then the raw TCP bytes both ways
//   exec.session {"job_id", "command", "tty", "rows", "cols"} -> {"job_id", "tty"}, then
//                jobs/protocol/exec_frames.h's frames both ways (`yonder exec`; capability `exec`)
//
// LinkService has already checked that the caller's scope includes
// `forward`. The job must be the caller's and running ("not found"
// otherwise, as for run.*). Jobs run with NetworkMode none, so nothing
// outside the container can connect to them. Each forwarded connection is
// instead made from inside the job's own network namespace: a socket to
// 127.0.0.1:PORT created there (os/netns.h, ProviderJobs::connect) and
// joined to the tunnel (SocketPipe): kernel TCP, no process in the job. Where
// that is not possible (yonderd without CAP_SYS_ADMIN, gVisor jobs whose
// network lives in the sandbox) it execs `nc 127.0.0.1 PORT` inside the job
// (the executor's exec, no TTY) and joins its stdin/stdout to the tunnel;
// the image then needs an `nc` (busybox's will do). Both reach only the
// job's loopback and need no network for the job.
//
// Every session and forwarded connection, and every refusal, is audited
// (exec.session with its command; forward.tcp with the port).
//
// Threading: the handler runs on the event loop; the exec call goes to the
// pool. Each live connection owns two threads of its own (one blocks reading
// the process's output, one writes its input), not pool threads: a
// connection may live for hours and the pool is small.
#pragma once

#include <map>
#include <memory>

#include "api/module.h"
#include "exec/executor.h"
#include "jobs/provider/provider_service.h"
#include "jobs/provider/remote_provider.h"
#include "net/reach/peers.h"

namespace boost::asio {
class io_context;
class thread_pool;
}  // namespace boost::asio

namespace yonder::jobs::sessions {

class ExecPipe;
class SocketPipe;

class ForwardProvider : public api::Module {
 public:
  std::string_view module_name() const override { return "port forwarding (provider)"; }
  // At most this many forwarded connections at once, for all peers.
  static constexpr size_t kMaxConnections = 64;

  ForwardProvider(boost::asio::io_context& io, boost::asio::thread_pool& pool, reach::Peers& link,
                  jobs::provider::ProviderService& provider, jobs::provider::RemoteProvider& audit);
  ~ForwardProvider();
  void register_methods() override;
  // false: always relay through `nc` in the job (setting forward.direct).
  void set_direct(bool direct) { direct_ = direct; }

 private:
  void open(const PublicKeyBytes& peer, const nlohmann::json& params, link::TunnelAccept accept);
  void open_session(const PublicKeyBytes& peer, const nlohmann::json& params, link::TunnelAccept accept);
  // Checks ownership and starts `spec` in the job (pool), then answers.
  void launch(const PublicKeyBytes& peer, const std::string& job_id, exec::ExecSpec spec, bool framed,
              nlohmann::json answer, link::TunnelAccept accept);

  boost::asio::io_context& io_;
  boost::asio::thread_pool& pool_;
  reach::Peers& link_;
  jobs::provider::ProviderService& provider_;
  jobs::provider::RemoteProvider& audit_;
  std::shared_ptr<bool> alive_;
  std::map<ExecPipe*, std::shared_ptr<ExecPipe>> pipes_;  // event loop only
  std::map<SocketPipe*, std::shared_ptr<SocketPipe>> socket_pipes_;  // direct forwards (event loop only)
  bool direct_ = true;
};

}  // namespace yonder::jobs::sessions
