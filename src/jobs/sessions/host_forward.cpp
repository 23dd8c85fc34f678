#include "jobs/sessions/host_forward.h"

#include <utility>  // before Boost.Asio (GCC 12)

#include <spdlog/spdlog.h>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <charconv>
#include <nlohmann/json.hpp>

#include "crypto/node_id.h"
#include "jobs/sessions/socket_pipe.h"

namespace yonder::jobs::sessions {
namespace asio = boost::asio;
using asio::ip::tcp;

Result<std::set<int>> HostForward::parse_ports(const std::string& text) {
  std::set<int> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    std::string item = text.substr(start, comma - start);
    start = comma + 1;
    while (!item.empty() && item.front() == ' ') item.erase(0, 1);
    while (!item.empty() && item.back() == ' ') item.pop_back();
    if (item.empty()) continue;
    int port = 0;
    auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), port);
    if (ec != std::errc() || ptr != item.data() + item.size() || port < 1 || port > 65535) {
      return make_error(ErrorCode::kInvalidArgument, "forward.host_ports: \"" + item.substr(0, 32) +
                                                         "\" is not a port (1-65535); give a comma-separated list "
                                                         "like 11434,8888");
    }
    out.insert(port);
  }
  return out;
}

HostForward::HostForward(asio::io_context& io, reach::Peers& link, jobs::provider::RemoteProvider& audit,
                         std::set<int> ports)
    : io_(io), link_(link), audit_(audit), ports_(std::move(ports)), alive_(std::make_shared<bool>(true)) {}

HostForward::~HostForward() {
  *alive_ = false;
  auto pipes = std::move(pipes_);
  for (auto& [p, pipe] : pipes) pipe->fail();
}

void HostForward::register_methods() {
  link::LinkService& service = link_.service();
  service.add_method(
      "forward.host_check", [this](const PublicKeyBytes& peer, const nlohmann::json& params, link::RpcReply reply) {
        auto port = allowed_port(params);
        if (!port) {
          audit_.record(NodeId(peer).to_string(), "forward.host", "",
                        {{"port", params.is_object() ? params.value("port", nlohmann::json(nullptr)) : nullptr},
                         {"refused", port.error().message()},
                         {"code", error_code_name(port.error().code())}});
          return reply(std::move(port).error());
        }
        reply(nlohmann::json{{"port", *port}});
      });
  service.add_tunnel_method(
      "forward.host", [this](const PublicKeyBytes& peer, const nlohmann::json& params, link::TunnelAccept accept) {
        open(peer, params, std::move(accept));
      });
}

Result<int> HostForward::allowed_port(const nlohmann::json& params) const {
  auto it = params.is_object() ? params.find("port") : params.end();
  if (!params.is_object() || it == params.end() || !it->is_number_integer() || it->get<int64_t>() < 1 ||
      it->get<int64_t>() > 65535) {
    return make_error(ErrorCode::kInvalidArgument, "forward.host needs {\"port\" (1-65535)}");
  }
  int port = static_cast<int>(it->get<int64_t>());
  if (ports_.count(port) == 0) {
    return make_error(ErrorCode::kPermissionDenied,
                      "port " + std::to_string(port) +
                          " on this provider is not open to peers: the provider lists the ports of its own host that "
                          "peers may reach in the forward.host_ports setting (`yonder config set forward.host_ports " +
                          std::to_string(port) + "` there, then restart yonderd)");
  }
  return port;
}

void HostForward::open(const PublicKeyBytes& peer, const nlohmann::json& params, link::TunnelAccept accept) {
  std::string peer_id = NodeId(peer).to_string();
  auto refuse = [this, peer_id, &params, &accept](Error e) {
    audit_.record(peer_id, "forward.host", "",
                  {{"port", params.is_object() ? params.value("port", nlohmann::json(nullptr)) : nullptr},
                   {"refused", e.message()},
                   {"code", error_code_name(e.code())}});
    (void)accept(std::move(e));
  };
  auto port = allowed_port(params);
  if (!port) return refuse(std::move(port).error());
  if (pipes_.size() >= kMaxConnections) {
    return refuse(make_error(ErrorCode::kResourceExhausted, "this provider serves at most " +
                                                                std::to_string(kMaxConnections) +
                                                                " connections to its own ports at once; retry later"));
  }
  // 127.0.0.1 only: the provider opened a port of its own loopback, not a
  // way into its network.
  auto socket = std::make_shared<tcp::socket>(io_);
  tcp::endpoint ep(asio::ip::make_address_v4("127.0.0.1"), static_cast<uint16_t>(*port));
  socket->async_connect(
      ep, [this, alive = alive_, socket, accept, peer_id, port = *port](boost::system::error_code ec) {
        if (!*alive) return;
        auto refused = [&](Error e) {
          audit_.record(peer_id, "forward.host", "",
                        {{"port", port}, {"refused", e.message()}, {"code", error_code_name(e.code())}});
          (void)accept(std::move(e));
        };
        if (ec) {
          return refused(
              make_error(ErrorCode::kUnavailable, "nothing accepts connections on 127.0.0.1:" + std::to_string(port) +
                                                      " on the provider (" + ec.message() + ")"));
        }
        auto tunnel = accept(nlohmann::json{{"port", port}});
        if (!tunnel) return;  // the caller gave up; the socket closes with us
        auto pipe = std::make_shared<SocketPipe>(std::move(*socket), [this, alive, peer_id, port](SocketPipe* p) {
          // Posted: the pipe is inside one of its own callbacks.
          asio::post(io_, [this, alive, p, peer_id, port] {
            if (!*alive) return;
            auto it = pipes_.find(p);
            if (it == pipes_.end()) return;
            audit_.record(peer_id, "forward.host", "",
                          {{"port", port}, {"bytes_in", p->bytes_to_socket()}, {"bytes_out", p->bytes_from_socket()}});
            pipes_.erase(it);
          });
        });
        pipes_[pipe.get()] = pipe;
        spdlog::info("forward: peer {} connected to 127.0.0.1:{} on this host", peer_id, port);
        pipe->start(std::move(tunnel));
      });
}

}  // namespace yonder::jobs::sessions
