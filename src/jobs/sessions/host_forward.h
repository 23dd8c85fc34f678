// The provider's side of `yonder forward PEER LOCAL:PORT`: a forward to a
// TCP port on the provider host itself (an Ollama or a Jupyter the provider
// runs outside Yonder), not into a job.
//
//   forward.host_check {"port"}          -> {"port"}: may the caller reach it (asked once by `yonder forward`)
//   forward.host (tunnel) {"port"}       -> {"port"}, then the raw TCP bytes both ways
//
// This reaches past the job sandbox into the provider's own machine, so it
// is closed unless the provider opens it port by port: the caller's scope
// must include `forward` (checked by LinkService, as for every forward.*
// method) AND the port must be listed in the provider's forward.host_ports
// setting (default: none). The connection is made to 127.0.0.1:PORT only,
// never another address, so a peer cannot use the provider to reach its
// network. Refusals name the setting and are audited; each connection is
// audited when it ends, with the bytes carried.
//
// Threading: event loop only (the connect, the pipes).
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>

#include "api/module.h"
#include "jobs/provider/remote_provider.h"
#include "net/reach/peers.h"

namespace boost::asio {
class io_context;
}  // namespace boost::asio

namespace yonder::jobs::sessions {

class SocketPipe;

class HostForward : public api::Module {
 public:
  std::string_view module_name() const override { return "host port forwarding"; }
  // At most this many connections to host ports at once, all peers together.
  static constexpr size_t kMaxConnections = 64;

  // "11434, 8888" -> {11434, 8888}; "" -> {}. kInvalidArgument names a bad entry.
  static Result<std::set<int>> parse_ports(const std::string& text);

  HostForward(boost::asio::io_context& io, reach::Peers& link, jobs::provider::RemoteProvider& audit,
              std::set<int> ports);
  ~HostForward();
  void register_methods() override;

 private:
  // The port from params, if this provider opens it; the error otherwise.
  Result<int> allowed_port(const nlohmann::json& params) const;
  void open(const PublicKeyBytes& peer, const nlohmann::json& params, link::TunnelAccept accept);

  boost::asio::io_context& io_;
  reach::Peers& link_;
  jobs::provider::RemoteProvider& audit_;
  std::set<int> ports_;
  std::shared_ptr<bool> alive_;
  std::map<SocketPipe*, std::shared_ptr<SocketPipe>> pipes_;
};

}  // namespace yonder::jobs::sessions
