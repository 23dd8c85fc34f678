#include "jobs/sessions/forward_consumer.h"

#include <utility>  // before Boost.Asio (GCC 12)

#include <sodium.h>
#include <spdlog/spdlog.h>
#include <array>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/write.hpp>
#include <nlohmann/json.hpp>

#include "jobs/consumer/consumer_jobs.h"
#include "jobs/protocol/exec_frames.h"
#include "jobs/sessions/socket_pipe.h"
#include "jobs/sessions/tunnel_listener.h"

namespace yonder::jobs::sessions {
namespace asio = boost::asio;
using api::Reply;
using api::Request;
using api::Response;
using asio::ip::tcp;
using jobs::protocol::encode_exec_frame;
using jobs::protocol::encode_exit;
using jobs::protocol::ExecFrameType;

namespace {

constexpr size_t kTokenBytes = 32;  // hex characters the CLI sends first on an exec relay

}  // namespace

struct ForwardConsumer::Listener : TunnelListener<tcp> {
  Listener(asio::io_context& context, reach::Peers& peer_link) : TunnelListener<tcp>(context, peer_link) {}

  std::string forward_id, job_id;  // job_id "": a port on the provider host itself (forward.host)
  int remote_port = 0;

  nlohmann::json view() const {
    boost::system::error_code ec;
    auto ep = acceptor.local_endpoint(ec);
    return {{"forward_id", forward_id},
            {"job_id", job_id},
            {"provider", target.name},
            {"address", "127.0.0.1:" + std::to_string(ec ? 0 : ep.port())},
            {"local_port", ec ? 0 : ep.port()},
            {"remote_port", remote_port},
            {"connections", conns.size()},
            {"accepted", accepted},
            {"to", job_id.empty() ? "host" : "job"}};
  }

  void close() {
    closed = true;
    boost::system::error_code ec;
    acceptor.close(ec);
    auto all = std::move(conns);
    conns.clear();
    for (auto& [p, pipe] : all) pipe->fail();
  }
};

// One `yonder exec` session: a one-shot listener on 127.0.0.1 for the CLI,
// which proves it asked for it by sending the token first (another local
// user could connect to the port); then the connection is relayed unchanged
// over an exec.session tunnel (the frames are end to end, CLI to provider).
struct ForwardConsumer::ExecRelay : std::enable_shared_from_this<ExecRelay> {
  ExecRelay(asio::io_context& context, reach::Peers& peer_link)
      : link(peer_link), acceptor(context), socket(context), timer(context) {}

  reach::Peers& link;
  tcp::acceptor acceptor;
  tcp::socket socket;
  asio::steady_timer timer;
  reach::Peers::Target target;
  nlohmann::json params;
  std::string token;
  std::array<char, kTokenBytes> got{};
  std::shared_ptr<SocketPipe> pipe;
  std::function<void()> done;

  void start() {
    auto self = shared_from_this();
    timer.expires_after(std::chrono::seconds(30));
    timer.async_wait([self](boost::system::error_code ec) {
      if (!ec) self->finish();  // the CLI never came (or never proved itself)
    });
    acceptor.async_accept(socket, [self](boost::system::error_code ec) {
      boost::system::error_code ignored;
      self->acceptor.close(ignored);
      if (ec) return self->finish();
      asio::async_read(self->socket, asio::buffer(self->got), [self](boost::system::error_code e2, size_t) {
        if (e2 || sodium_memcmp(self->got.data(), self->token.data(), kTokenBytes) != 0) return self->finish();
        self->timer.cancel();
        self->relay();
      });
    });
  }

  void relay() {
    std::weak_ptr<ExecRelay> weak = weak_from_this();
    pipe = std::make_shared<SocketPipe>(std::move(socket), [weak](SocketPipe*) {
      if (auto self = weak.lock()) self->finish();
    });
    link.service().open_tunnel(
        target.key, target.addresses, "exec.session", params, [weak](Result<link::TunnelOpened> r) {
          auto self = weak.lock();
          if (!self || !self->pipe) return;
          if (!r) {
            spdlog::warn("exec: {}", r.error().message());
            return self->pipe->fail_with(
                encode_exec_frame(ExecFrameType::kStderr, "yonder: " + r.error().message() + "\n") + encode_exit(125));
          }
          self->pipe->start(std::move(r->tunnel));
        });
  }

  void finish() {
    boost::system::error_code ec;
    acceptor.close(ec);
    socket.close(ec);
    timer.cancel();
    auto d = std::move(done);
    done = nullptr;
    if (d) d();  // posted by the owner
  }
};

ForwardConsumer::ForwardConsumer(asio::io_context& io, asio::thread_pool& pool, reach::Peers& link,
                                 std::shared_ptr<jobs::consumer::ConsumerJobStore> store)
    : io_(io), pool_(pool), link_(link), store_(std::move(store)) {}

ForwardConsumer::~ForwardConsumer() {
  for (auto& [id, l] : listeners_) l->close();
  auto sessions = std::move(sessions_);
  for (auto& [p, s] : sessions) {
    if (s->pipe) s->pipe->fail();
    s->done = nullptr;
    s->finish();
  }
}

void ForwardConsumer::exec(const Request& req, Reply reply) {
  auto b = nlohmann::json::parse(req.body, nullptr, false);
  if (!b.is_object() || !b.contains("job_id") || !b["job_id"].is_string() || !b.contains("command") ||
      !b["command"].is_array() || b["command"].empty()) {
    return reply(Response::error(
        make_error(ErrorCode::kInvalidArgument, "the body needs \"job_id\" and \"command\" (a non-empty array)")));
  }
  std::string job = b["job_id"].get<std::string>();
  asio::post(pool_, [this, job, b, reply] {
    auto found = store_->find(job);
    asio::post(io_, [this, found = std::move(found), b, reply]() mutable {
      if (!found) return reply(Response::error(found.error()));
      auto t = link_.target(found->provider_id);
      if (!t) {
        return reply(Response::error(
            make_error(ErrorCode::kFailedPrecondition,
                       "job " + found->job_id + " runs on a provider this node is no longer paired with")));
      }
      auto relay = std::make_shared<ExecRelay>(io_, link_);
      boost::system::error_code ec;
      tcp::endpoint ep(asio::ip::make_address_v4("127.0.0.1"), 0);
      relay->acceptor.open(ep.protocol(), ec);
      if (!ec) relay->acceptor.bind(ep, ec);
      if (!ec) relay->acceptor.listen(1, ec);
      if (ec)
        return reply(
            Response::error(make_error(ErrorCode::kUnavailable, "cannot listen on 127.0.0.1: " + ec.message())));
      uint8_t raw[kTokenBytes / 2];
      randombytes_buf(raw, sizeof raw);
      relay->token = hex_encode(ByteView(raw, sizeof raw));
      relay->target = *t;
      relay->params = {{"job_id", found->job_id},
                       {"command", b["command"]},
                       {"tty", b.value("tty", false)},
                       {"rows", b.value("rows", 24)},
                       {"cols", b.value("cols", 80)}};
      ExecRelay* key = relay.get();
      relay->done = [this, key] { asio::post(io_, [this, key] { sessions_.erase(key); }); };
      sessions_[key] = relay;
      relay->start();
      reply(Response::json(200, {{"job_id", found->job_id},
                                 {"address", "127.0.0.1:" + std::to_string(relay->acceptor.local_endpoint(ec).port())},
                                 {"port", relay->acceptor.local_endpoint(ec).port()},
                                 {"token", relay->token}}));
    });
  });
}

void ForwardConsumer::add_routes(api::Router& router) {
  router.add("POST", "/v1/forwards", [this](const Request& req, Reply reply) { create(req, std::move(reply)); });
  router.add("POST", "/v1/jobs/exec", [this](const Request& req, Reply reply) { exec(req, std::move(reply)); });
  router.add("GET", "/v1/forwards", [this](const Request&, Reply reply) {
    nlohmann::json arr = nlohmann::json::array();
    for (const auto& [id, l] : listeners_) arr.push_back(l->view());
    reply(Response::json(200, {{"forwards", arr}}));
  });
  router.add("POST", "/v1/forwards/stop", [this](const Request& req, Reply reply) {
    auto b = nlohmann::json::parse(req.body, nullptr, false);
    std::string id = b.is_object() && b.contains("forward_id") && b["forward_id"].is_string()
                         ? b["forward_id"].get<std::string>()
                         : "";
    auto it = listeners_.find(id);
    if (it == listeners_.end()) {
      return reply(Response::error(
          make_error(ErrorCode::kNotFound, "no forward " + id.substr(0, 32) + " (yonder forward --list shows them)")));
    }
    nlohmann::json v = it->second->view();
    it->second->close();
    listeners_.erase(it);
    v["stopped"] = true;
    reply(Response::json(200, v));
  });
}

void ForwardConsumer::create(const Request& req, Reply reply) {
  auto b = nlohmann::json::parse(req.body, nullptr, false);
  auto int_field = [&](const char* key, int64_t fallback) -> int64_t {
    if (!b.is_object() || !b.contains(key)) return fallback;
    return b[key].is_number_integer() ? b[key].get<int64_t>() : -1;
  };
  int64_t remote = int_field("remote_port", -1);
  int64_t local = int_field("local_port", 0);
  const char* key = b.is_object() && b.contains("target") ? "target" : "job_id";
  if (!b.is_object() || !b.contains(key) || !b[key].is_string() || remote < 1 || remote > 65535 || local < 0 ||
      local > 65535) {
    return reply(Response::error(make_error(ErrorCode::kInvalidArgument,
                                            "the body needs \"target\" (a job or a paired peer), \"remote_port\" "
                                            "(1-65535) and optionally \"local_port\" (0-65535, 0 picks one)")));
  }
  std::string target = b[key].get<std::string>();
  asio::post(pool_, [this, target, remote, local, reply] {
    auto found = store_->find(target);
    asio::post(io_, [this, found = std::move(found), target, remote, local, reply]() mutable {
      if (!found) {
        // Not one of our jobs: a paired provider, to a port on that host.
        auto peer = link_.target(target);
        if (!peer) {
          return reply(Response::error(
              make_error(ErrorCode::kNotFound, "no job and no paired peer \"" + target.substr(0, 80) +
                                                   "\"; `yonder ps --all` lists jobs, `yonder peers` peers")));
        }
        // The provider says now whether it opens that port to us (and
        // audits a refusal), rather than on every connection.
        return link_.service().call(peer->key, peer->addresses, "forward.host_check", {{"port", remote}},
                                    [this, t = *peer, remote, local, reply](Result<nlohmann::json> r) {
                                      if (!r) return reply(Response::error(r.error()));
                                      open_listener(t, "", remote, local, reply);
                                    });
      }
      auto t = link_.target(found->provider_id);
      if (!t) {
        return reply(Response::error(
            make_error(ErrorCode::kFailedPrecondition,
                       "job " + found->job_id + " runs on a provider this node is no longer paired with")));
      }
      // Ask the provider once now, so a job that is not running (or not
      // ours), or a scope without `forward`, fails here rather than on the
      // first connection. An older provider without forward.inspect is
      // asked run.inspect instead.
      std::string job_id = found->job_id;
      auto checked = [this, t = *t, job_id, remote, local, reply](Result<nlohmann::json> r) {
        if (!r) return reply(Response::error(r.error()));
        // A job about to run may be forwarded to: connections made
        // before its server listens are closed, and the client retries.
        std::string state = r->value("state", "");
        if (state != "running" && state != "starting" && state != "pending" && state != "queued") {
          return reply(Response::error(
              make_error(ErrorCode::kFailedPrecondition,
                         "job " + job_id + " is " + state + "; only a pending or running job can be forwarded to")));
        }
        open_listener(t, job_id, remote, local, reply);
      };
      link_.service().call(
          t->key, t->addresses, "forward.inspect", {{"job_id", job_id}},
          [this, t = *t, job_id, checked](Result<nlohmann::json>&& r) {
            if (!r && r.error().code() == ErrorCode::kInvalidArgument &&
                r.error().message().find("does not support") != std::string::npos) {
              return link_.service().call(t.key, t.addresses, "run.inspect", {{"job_id", job_id}}, checked);
            }
            checked(std::move(r));
          });
    });
  });
}

void ForwardConsumer::open_listener(const reach::Peers::Target& t, const std::string& job_id, int64_t remote,
                                    int64_t local, const Reply& reply) {
  auto l = std::make_shared<Listener>(io_, link_);
  boost::system::error_code ec;
  tcp::endpoint ep(asio::ip::make_address_v4("127.0.0.1"), static_cast<uint16_t>(local));
  l->acceptor.open(ep.protocol(), ec);
  if (!ec) l->acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) l->acceptor.bind(ep, ec);
  if (!ec) l->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return reply(Response::error(
        make_error(ErrorCode::kFailedPrecondition, "cannot listen on 127.0.0.1:" + std::to_string(local) + ": " +
                                                       ec.message() + "; pick another local port (0 picks one)")));
  }
  l->target = t;
  l->job_id = job_id;
  l->remote_port = static_cast<int>(remote);
  l->forward_id = "fwd-" + std::to_string(next_id_++);
  l->label = "forward " + l->forward_id;
  l->method = job_id.empty() ? "forward.host" : "forward.tcp";
  l->params = {{"port", remote}};
  if (!job_id.empty()) l->params["job_id"] = job_id;
  listeners_[l->forward_id] = l;
  l->accept_next();
  if (job_id.empty()) {
    spdlog::info("forward {}: {} -> 127.0.0.1:{} on provider {}", l->forward_id,
                 l->view()["address"].get<std::string>(), remote, t.name);
  } else {
    spdlog::info("forward {}: {} -> port {} of job {} on {}", l->forward_id, l->view()["address"].get<std::string>(),
                 remote, job_id, t.name);
  }
  reply(Response::json(200, l->view()));
}

}  // namespace yonder::jobs::sessions
