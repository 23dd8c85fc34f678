#include "jobs/sessions/cuda_sessions.h"

#include <utility>  // before Boost.Asio (GCC 12)

#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/post.hpp>
#include <nlohmann/json.hpp>
#include <thread>

#include "crypto/node_id.h"
#include "gpu/vram_guard/ledger.h"
#include "jobs/provider/remote_provider.h"
#include "jobs/sessions/socket_pipe.h"
#include "jobs/sessions/tunnel_listener.h"
#include "os/process.h"

namespace yonder::jobs::sessions {
namespace asio = boost::asio;
using api::Reply;
using api::Request;
using api::Response;
using unix_socket = asio::local::stream_protocol;

// ---- Consumer: a socket the stand-in connects to ----

struct CudaSessions::Listener : TunnelListener<unix_socket> {
  Listener(asio::io_context& io_context, reach::Peers& peers, reach::Peers::Target t, std::string id,
           std::string socket_path)
      : TunnelListener<unix_socket>(io_context, peers), session_id(std::move(id)), path(std::move(socket_path)) {
    target = std::move(t);
    label = "cuda session " + session_id;
    method = "cuda.session";
  }

  std::string session_id;
  std::string path;

  nlohmann::json view() const {
    return {{"session_id", session_id}, {"socket", path}, {"peer", target.name}, {"connections", accepted}};
  }

  void close() {
    closed = true;
    boost::system::error_code ec;
    acceptor.close(ec);
    ::unlink(path.c_str());
  }
};

// ---- Provider: one worker process per session ----

struct CudaSessions::Worker {
  int pid = -1;
  std::string ledger;  // "" without a VRAM cap
  std::string peer_id;
  std::string session_id;
  std::shared_ptr<SocketPipe> pipe;
};

namespace {

// Waits for a worker whose socket is closed (it exits at the end of its
// input), then removes its ledger. A thread of its own: a driver call in
// flight may take a while to return.
void reap(int pid, std::string ledger) {
  std::thread([pid, ledger = std::move(ledger)] {
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (!ledger.empty()) ::unlink(ledger.c_str());
  }).detach();
}

}  // namespace

CudaSessions::CudaSessions(asio::io_context& io, reach::Peers& link, jobs::provider::RemoteProvider& audit,
                           CudaSessionOptions options)
    : io_(io), link_(link), audit_(audit), options_(std::move(options)) {}

CudaSessions::~CudaSessions() {
  stop();
}

void CudaSessions::stop() {
  *alive_ = false;
  for (auto& [_, l] : listeners_) l->close();
  listeners_.clear();
  auto workers = std::move(workers_);
  workers_.clear();
  for (auto& [pipe, w] : workers) {
    w->pipe->fail();  // its worker reads the end of its input and exits
    reap(w->pid, w->ledger);
  }
}

void CudaSessions::register_methods() {
  link_.service().add_tunnel_method(
      "cuda.session", [this](const PublicKeyBytes& peer, const nlohmann::json&, link::TunnelAccept accept) {
        serve(peer, std::move(accept));
      });
}

void CudaSessions::serve(const PublicKeyBytes& peer, link::TunnelAccept accept) {
  std::string peer_id = NodeId(peer).to_string();
  std::string session_id = "cuda-" + std::to_string(next_id_++);
  auto refuse = [&](Error e) {
    audit_.record(peer_id, "cuda.session", session_id, {{"refused", e.message()}, {"code", error_code_name(e.code())}});
    accept(std::move(e));
  };
  if (workers_.size() >= options_.max_sessions) {
    return refuse(make_error(ErrorCode::kResourceExhausted,
                             "this provider serves " + std::to_string(options_.max_sessions) +
                                 " remote CUDA sessions at once already; try again when one ends"));
  }
  if (options_.worker.empty() || ::access(options_.worker.c_str(), X_OK) != 0) {
    return refuse(make_error(ErrorCode::kUnavailable, "this provider cannot serve remote CUDA: " + options_.worker +
                                                          " is missing (reinstall yonder there)"));
  }
  std::optional<Scope> grant = link_.grant_of(peer);
  uint64_t vram = grant ? grant->vram_bytes : 0;
  std::vector<std::string> env;
  std::string ledger;
  if (vram > 0) {
    // The peer's VRAM cap holds the session: the guard charges every
    // allocation the worker makes to a ledger of that budget.
    if (options_.vram_guard.empty() || ::access(options_.vram_guard.c_str(), R_OK) != 0) {
      return refuse(make_error(ErrorCode::kUnavailable,
                               "this provider caps your VRAM but cannot hold a session to it: its VRAM guard (" +
                                   options_.vram_guard + ", setting gpu.vram_guard) is missing"));
    }
    std::error_code ec;
    std::filesystem::create_directories(options_.run_dir, ec);
    ledger = (options_.run_dir / (session_id + ".ledger")).string();
    if (ec || yonder_vram_ledger_create(ledger.c_str(), vram) != 0) {
      return refuse(make_error(ErrorCode::kInternal, "cannot create the session's VRAM ledger " + ledger));
    }
    env = {"LD_PRELOAD=" + options_.vram_guard, "YONDER_VRAM_LEDGER=" + ledger};
  }
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) {
    if (!ledger.empty()) ::unlink(ledger.c_str());
    return refuse(make_error(ErrorCode::kInternal, "socketpair failed"));
  }
  auto pid = os::spawn_with_fd({options_.worker, "--fd", "3", "--driver", options_.driver}, env, pair[1]);
  ::close(pair[1]);
  if (!pid) {
    ::close(pair[0]);
    if (!ledger.empty()) ::unlink(ledger.c_str());
    return refuse(pid.error());
  }
  std::shared_ptr<link::Tunnel> tunnel = accept(nlohmann::json{{"session_id", session_id}});
  if (!tunnel) {
    ::close(pair[0]);  // the worker sees the end of its input
    return reap(*pid, ledger);
  }
  unix_socket::socket socket(io_);
  socket.assign(unix_socket(), pair[0]);
  auto worker = std::make_shared<Worker>(Worker{*pid, ledger, peer_id, session_id, nullptr});
  std::weak_ptr<bool> alive = alive_;
  worker->pipe = std::make_shared<SocketPipe>(std::move(socket), [this, alive](SocketPipe* p) {
    asio::post(io_, [this, alive, p] {
      if (alive.expired() || !*alive.lock()) return;
      auto it = workers_.find(p);
      if (it == workers_.end()) return;
      auto w = it->second;
      workers_.erase(it);
      audit_.record(w->peer_id, "cuda.session.end", w->session_id,
                    {{"bytes_in", p->bytes_to_socket()}, {"bytes_out", p->bytes_from_socket()}});
      reap(w->pid, w->ledger);
    });
  });
  workers_[worker->pipe.get()] = worker;
  audit_.record(peer_id, "cuda.session", session_id, {{"vram_bytes", vram}});
  worker->pipe->start(std::move(tunnel));
}

// ---- Consumer routes ----

void CudaSessions::add_routes(api::Router& router) {
  router.add("POST", "/v1/cuda/sessions", [this](const Request& req, Reply reply) { create(req, std::move(reply)); });
  router.add("GET", "/v1/cuda/sessions", [this](const Request&, Reply reply) {
    nlohmann::json arr = nlohmann::json::array();
    for (const auto& [id, l] : listeners_) arr.push_back(l->view());
    reply(Response::json(200, {{"sessions", arr}}));
  });
  router.add("POST", "/v1/cuda/sessions/stop", [this](const Request& req, Reply reply) {
    auto b = nlohmann::json::parse(req.body, nullptr, false);
    std::string id = b.is_object() && b.contains("session_id") && b["session_id"].is_string()
                         ? b["session_id"].get<std::string>()
                         : "";
    auto it = listeners_.find(id);
    if (it == listeners_.end()) {
      return reply(Response::error(make_error(
          ErrorCode::kNotFound, "no remote CUDA session " + id.substr(0, 32) + " (GET /v1/cuda/sessions lists them)")));
    }
    nlohmann::json v = it->second->view();
    it->second->close();
    listeners_.erase(it);
    v["stopped"] = true;
    reply(Response::json(200, v));
  });
}

void CudaSessions::create(const Request& req, Reply reply) {
  auto b = nlohmann::json::parse(req.body, nullptr, false);
  if (!b.is_object() || !b.contains("target") || !b["target"].is_string()) {
    return reply(Response::error(
        make_error(ErrorCode::kInvalidArgument, "the body needs \"target\": the paired provider whose GPU to use")));
  }
  std::string name = b["target"].get<std::string>();
  auto target = link_.target(name);
  if (!target) {
    return reply(Response::error(
        make_error(ErrorCode::kNotFound, "no paired peer \"" + name.substr(0, 80) + "\"; `yonder peers` lists them")));
  }
  // Said now, before the program starts, rather than as a closed link in
  // the middle of its CUDA initialisation.
  if (target->granted_to_us && !target->granted_to_us->allows(Capability::kCuda)) {
    return reply(Response::error(
        make_error(ErrorCode::kPermissionDenied, target->name +
                                                     " does not let this node use its GPU through remote CUDA (it "
                                                     "allows " +
                                                     target->granted_to_us->capabilities_text() +
                                                     "); ask its owner to run `yonder allow YOUR-NAME cuda`")));
  }
  std::string id = std::to_string(next_id_++);
  std::error_code ec;
  std::filesystem::create_directories(options_.socket_dir, ec);
  std::string path = (options_.socket_dir / ("cuda-" + id + ".sock")).string();
  auto listener = std::make_shared<Listener>(io_, link_, *target, id, path);
  ::unlink(path.c_str());
  boost::system::error_code bec;
  listener->acceptor.open(unix_socket(), bec);
  if (!bec) listener->acceptor.bind(unix_socket::endpoint(path), bec);
  if (!bec) ::chmod(path.c_str(), 0600);  // only this user's programs may use the session
  if (!bec) listener->acceptor.listen(asio::socket_base::max_listen_connections, bec);
  if (bec) {
    return reply(Response::error(make_error(ErrorCode::kInternal, "cannot listen on " + path + ": " + bec.message())));
  }
  listeners_[id] = listener;
  listener->accept_next();
  reply(Response::json(200, listener->view()));
}

}  // namespace yonder::jobs::sessions
