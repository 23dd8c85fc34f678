#include "jobs/sessions/forward_provider.h"

#include <utility>  // before Boost.Asio (GCC 12)

#include <spdlog/spdlog.h>
#include <unistd.h>
#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "crypto/node_id.h"
#include "jobs/protocol/exec_frames.h"
#include "jobs/provider/provider_jobs.h"
#include "jobs/sessions/socket_pipe.h"

namespace yonder::jobs::sessions {
namespace asio = boost::asio;
using jobs::protocol::ExecFrame;
using jobs::protocol::ExecFrameReader;
using jobs::protocol::ExecFrameType;
using jobs::protocol::decode_resize;
using jobs::protocol::encode_exec_frame;
using jobs::protocol::encode_exit;

// One forwarded connection: a tunnel end (event loop) joined to an `nc`
// process in the job. Bytes from the tunnel are written to the process one
// chunk at a time and the tunnel is resumed only after each write, and the
// reader waits for each chunk to be taken by the tunnel before reading the
// next: the mux windows carry the back-pressure both ways.
//
// Framed (exec.session): the tunnel carries jobs/protocol/exec_frames.h's frames
// instead of raw bytes: stdin, resizes and stdin EOF one way; output,
// stderr and finally the exit code the other.
class ExecPipe : public std::enable_shared_from_this<ExecPipe> {
 public:
  ExecPipe(asio::io_context& io, std::unique_ptr<exec::ExecSession> proc, bool framed,
           std::function<void(ExecPipe*)> done)
      : io_(io), proc_(std::move(proc)), framed_(framed), done_(std::move(done)) {}

  ~ExecPipe() {
    stop();
    if (reader_.joinable()) reader_.join();
    if (writer_.joinable()) writer_.join();
  }

  // Event loop.
  void start(std::shared_ptr<link::Tunnel> tunnel) {
    tunnel_ = std::move(tunnel);
    std::weak_ptr<ExecPipe> weak = weak_from_this();
    link::Tunnel::Handlers h;
    h.data = [weak](Bytes b) {
      if (auto self = weak.lock()) self->push(std::move(b), false);
    };
    h.eof = [weak] {
      if (auto self = weak.lock()) self->push({}, true);
    };
    h.drained = [weak] {
      if (auto self = weak.lock()) self->taken();
    };
    h.ended = [weak](const std::string& why) {
      if (auto self = weak.lock()) {
        spdlog::debug("forward: tunnel ended: {}", why);
        self->tunnel_.reset();
        self->finish();
      }
    };
    tunnel_->start(std::move(h));
    reader_ = std::thread([this] { read_loop(); });
    writer_ = std::thread([this] { write_loop(); });
  }

 private:
  void push(Bytes b, bool eof) {
    std::lock_guard lock(mutex_);
    if (eof) {
      in_eof_ = true;
    } else {
      inbox_.push_back(std::move(b));
    }
    cv_.notify_all();
  }

  void taken() {
    std::lock_guard lock(mutex_);
    out_taken_ = true;
    cv_.notify_all();
  }

  void stop() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
      cv_.notify_all();
    }
    proc_->cancel();
  }

  // Event loop: both directions are over (or one failed).
  void finish() {
    if (finished_) return;
    finished_ = true;
    stop();
    if (tunnel_) tunnel_->reset("the forwarded connection ended");
    tunnel_.reset();
    auto done = std::move(done_);
    if (done) done(this);  // may destroy us; posted by the owner
  }

  void maybe_finish() {
    if (reader_done_ && writer_done_) {
      if (tunnel_) tunnel_->close();
      tunnel_.reset();
      finish();
    }
  }

  // Own thread: tunnel -> process stdin.
  void write_loop() {
    bool stdin_closed = false;
    while (true) {
      Bytes b;
      bool eof = false;
      {
        std::unique_lock lock(mutex_);
        cv_.wait(lock, [&] { return stopping_ || !inbox_.empty() || in_eof_; });
        if (stopping_) return;
        if (!inbox_.empty()) {
          b = std::move(inbox_.front());
          inbox_.pop_front();
        } else {
          eof = true;
        }
      }
      if (eof) {
        if (!stdin_closed) proc_->close_stdin();
        asio::post(io_, [weak = weak_from_this()] {
          if (auto self = weak.lock()) {
            self->writer_done_ = true;
            self->maybe_finish();
          }
        });
        return;
      }
      std::string_view bytes(reinterpret_cast<const char*>(b.data()), b.size());
      Status st = framed_ ? write_frames(bytes, stdin_closed) : proc_->write(bytes);
      asio::post(io_, [weak = weak_from_this(), ok = static_cast<bool>(st)] {
        auto self = weak.lock();
        if (!self) return;
        if (!ok) return self->finish();
        if (self->tunnel_) self->tunnel_->resume();
      });
      if (!st) return;
    }
  }

  // Writer thread: applies the frames in `bytes` to the process.
  Status write_frames(std::string_view bytes, bool& stdin_closed) {
    frames_.feed(bytes);
    while (true) {
      auto f = frames_.next();
      if (!f) return std::move(f).error();
      if (!*f) return ok_status();
      const ExecFrame& frame = **f;
      if (frame.type == ExecFrameType::kData && !stdin_closed) {
        YONDER_TRY(proc_->write(frame.payload));
      } else if (frame.type == ExecFrameType::kResize) {
        auto size = decode_resize(frame.payload);
        if (size) (void)proc_->resize(size->first, size->second);  // a bad size is not fatal
      } else if (frame.type == ExecFrameType::kStdinEof && !stdin_closed) {
        stdin_closed = true;
        proc_->close_stdin();
      }
    }
  }

  // Reader thread: hands `bytes` to the tunnel and waits until it took them.
  bool send_and_wait(std::string bytes) {
    {
      std::lock_guard lock(mutex_);
      out_taken_ = false;
    }
    asio::post(io_, [weak = weak_from_this(), b = std::move(bytes)] {
      auto self = weak.lock();
      if (!self) return;
      bool all = !self->tunnel_ || self->tunnel_->write(ByteView(reinterpret_cast<const uint8_t*>(b.data()), b.size()));
      if (all) self->taken();
    });
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [&] { return stopping_ || out_taken_; });
    return !stopping_;
  }

  // Framed reader: output frames, then the exit code, then half-close.
  void read_frames() {
    while (true) {
      auto r = proc_->read(std::chrono::milliseconds(-1));
      {
        std::lock_guard lock(mutex_);
        if (stopping_) return;
      }
      if (!r) {
        asio::post(io_, [weak = weak_from_this(), why = r.error().message()] {
          if (auto self = weak.lock()) {
            if (self->tunnel_) self->tunnel_->reset(why);
            self->tunnel_.reset();
            self->finish();
          }
        });
        return;
      }
      if (!*r) break;
      auto& [stream, bytes] = **r;
      auto type = stream == exec::LogStream::kStderr ? ExecFrameType::kStderr : ExecFrameType::kData;
      if (!send_and_wait(encode_exec_frame(type, bytes))) return;
    }
    // The output ended; the engine may take a moment to record the exit.
    Result<int> code = make_error(ErrorCode::kUnavailable, "no exit code");
    for (int i = 0; i < 100; ++i) {
      {
        std::lock_guard lock(mutex_);
        if (stopping_) return;
      }
      code = proc_->exit_code();
      if (code || code.error().code() != ErrorCode::kFailedPrecondition) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (!send_and_wait(encode_exit(code ? *code : 125))) return;
    asio::post(io_, [weak = weak_from_this()] {
      auto self = weak.lock();
      if (!self) return;
      self->reader_done_ = true;
      if (self->tunnel_) self->tunnel_->close();
      self->maybe_finish();
    });
  }

  // Own thread: process stdout -> tunnel. Its stderr (nc's "connection
  // refused") is kept and becomes the reset reason if nothing else came.
  void read_loop() {
    if (framed_) return read_frames();
    std::string errors;
    bool any_output = false;
    while (true) {
      auto r = proc_->read(std::chrono::milliseconds(-1));
      {
        std::lock_guard lock(mutex_);
        if (stopping_) return;
      }
      if (!r || !*r) {
        std::string why = !r ? r.error().message() : errors;
        bool clean = r && (any_output || errors.empty());
        asio::post(io_, [weak = weak_from_this(), clean, why] {
          auto self = weak.lock();
          if (!self) return;
          if (!clean) {
            if (self->tunnel_) self->tunnel_->reset(why.empty() ? "the forwarding process failed" : why);
            self->tunnel_.reset();
            return self->finish();
          }
          self->reader_done_ = true;
          if (self->tunnel_) self->tunnel_->close();  // half-close: the job's side is done sending
          self->maybe_finish();
        });
        return;
      }
      auto& [stream, bytes] = **r;
      if (stream != exec::LogStream::kStdout) {
        if (errors.size() < 512) errors += bytes.substr(0, 512 - errors.size());
        continue;
      }
      any_output = true;
      {
        std::lock_guard lock(mutex_);
        out_taken_ = false;
      }
      asio::post(io_, [weak = weak_from_this(), b = std::move(bytes)] {
        auto self = weak.lock();
        if (!self) return;
        bool all =
            !self->tunnel_ || self->tunnel_->write(ByteView(reinterpret_cast<const uint8_t*>(b.data()), b.size()));
        if (all) self->taken();
      });
      std::unique_lock lock(mutex_);
      cv_.wait(lock, [&] { return stopping_ || out_taken_; });
      if (stopping_) return;
    }
  }

  asio::io_context& io_;
  std::unique_ptr<exec::ExecSession> proc_;
  bool framed_;
  ExecFrameReader frames_;  // writer thread
  std::function<void(ExecPipe*)> done_;
  std::shared_ptr<link::Tunnel> tunnel_;                               // event loop only
  bool finished_ = false, reader_done_ = false, writer_done_ = false;  // event loop only
  std::mutex mutex_;                                                   // guards the fields below
  std::condition_variable cv_;
  std::deque<Bytes> inbox_;
  bool in_eof_ = false;
  bool out_taken_ = false;
  bool stopping_ = false;
  std::thread reader_, writer_;
};

ForwardProvider::ForwardProvider(asio::io_context& io, asio::thread_pool& pool, reach::Peers& link,
                                 jobs::provider::ProviderService& provider, jobs::provider::RemoteProvider& audit)
    : io_(io), pool_(pool), link_(link), provider_(provider), audit_(audit), alive_(std::make_shared<bool>(true)) {}

ForwardProvider::~ForwardProvider() {
  *alive_ = false;
  pipes_.clear();
  for (auto& [_, p] : socket_pipes_) p->fail();
  socket_pipes_.clear();
}

void ForwardProvider::register_methods() {
  link::LinkService& service = link_.service();
  service.add_tunnel_method(
      "forward.tcp", [this](const PublicKeyBytes& peer, const nlohmann::json& params, link::TunnelAccept accept) {
        open(peer, params, std::move(accept));
      });
  service.add_tunnel_method(
      "exec.session", [this](const PublicKeyBytes& peer, const nlohmann::json& params, link::TunnelAccept accept) {
        open_session(peer, params, std::move(accept));
      });
}

namespace {

Result<std::string> job_param(const nlohmann::json& params) {
  auto it = params.find("job_id");
  if (it == params.end() || !it->is_string() || it->get_ref<const std::string&>().empty() ||
      it->get_ref<const std::string&>().size() > 64) {
    return make_error(ErrorCode::kInvalidArgument, "'job_id' (a string) is required");
  }
  return it->get<std::string>();
}

}  // namespace

void ForwardProvider::open(const PublicKeyBytes& peer, const nlohmann::json& params, link::TunnelAccept accept) {
  auto job = job_param(params);
  auto port_it = params.find("port");
  if (!job || port_it == params.end() || !port_it->is_number_integer() || port_it->get<int64_t>() < 1 ||
      port_it->get<int64_t>() > 65535) {
    Error e = make_error(ErrorCode::kInvalidArgument, "forward.tcp needs {\"job_id\", \"port\" (1-65535)}");
    audit_.record(NodeId(peer).to_string(), "forward.tcp", job ? *job : "",
                  {{"refused", e.message()}, {"code", error_code_name(e.code())}});
    accept(std::move(e));
    return;
  }
  int port = static_cast<int>(port_it->get<int64_t>());
  std::string peer_id = NodeId(peer).to_string();
  std::string job_id = *job;
  if (pipes_.size() + socket_pipes_.size() >= kMaxConnections) {
    return launch(peer, job_id, exec::ExecSpec{}, false, {{"job_id", job_id}, {"port", port}}, std::move(accept));  // refuses
  }
  // The direct path first: a socket made in the job's own network namespace
  // (kernel TCP both ways). Without the privilege for it, or for a gVisor
  // job, an `nc` exec'd into the job relays instead.
  asio::post(pool_, [this, alive = alive_, peer, peer_id, job_id, port, accept = std::move(accept)]() mutable {
    auto fd = [&]() -> Result<int> {
      auto jobs = provider_.ready();
      if (!jobs) return std::move(jobs).error();
      auto view = (*jobs)->get(JobId(job_id));
      if (!view || view->value("peer_id", "") != peer_id) {
        return make_error(ErrorCode::kNotFound, "no job " + job_id + " of yours on this provider");
      }
      if (!direct_) return make_error(ErrorCode::kPermissionDenied, "direct forwarding is off (forward.direct)");
      return (*jobs)->connect(JobId(job_id), static_cast<uint16_t>(port));
    }();
    asio::post(io_, [this, alive, peer, peer_id, job_id, port, accept = std::move(accept), fd = std::move(fd)]() mutable {
      if (!*alive) {
        if (fd) ::close(*fd);
        return;
      }
      nlohmann::json detail = {{"port", port}, {"via", "netns"}};
      if (!fd) {
        ErrorCode c = fd.error().code();
        if (c == ErrorCode::kPermissionDenied || c == ErrorCode::kInternal) {
          spdlog::debug("forward into job {}: {}; relaying through nc instead", job_id, fd.error().message());
          exec::ExecSpec spec;
          spec.command = {"nc", "127.0.0.1", std::to_string(port)};
          return launch(peer, job_id, std::move(spec), false, {{"job_id", job_id}, {"port", port}}, std::move(accept));
        }
        detail["refused"] = fd.error().message();
        detail["code"] = error_code_name(c);
        audit_.record(peer_id, "forward.tcp", job_id, std::move(detail));
        accept(std::move(fd).error());
        return;
      }
      asio::ip::tcp::socket socket(io_);
      boost::system::error_code ec;
      socket.assign(asio::ip::tcp::v4(), *fd, ec);
      if (ec) {
        ::close(*fd);
        accept(make_error(ErrorCode::kInternal, "cannot use the connection into the job: " + ec.message()));
        return;
      }
      audit_.record(peer_id, "forward.tcp", job_id, std::move(detail));
      auto tunnel = accept(nlohmann::json{{"job_id", job_id}, {"port", port}});
      if (!tunnel) return;  // the caller gave up; the socket closes with the pipe
      auto pipe = std::make_shared<SocketPipe>(std::move(socket), [this, alive](SocketPipe* p) {
        asio::post(io_, [this, alive, p] {
          if (*alive) socket_pipes_.erase(p);
        });
      });
      socket_pipes_[pipe.get()] = pipe;
      pipe->start(std::move(tunnel));
    });
  });
}

void ForwardProvider::open_session(const PublicKeyBytes& peer, const nlohmann::json& params,
                                   link::TunnelAccept accept) {
  auto job = job_param(params);
  if (!job) {
    audit_.record(NodeId(peer).to_string(), "exec.session", "",
                  {{"refused", job.error().message()}, {"code", error_code_name(job.error().code())}});
    return (void)accept(std::move(job).error());
  }
  exec::ExecSpec spec;
  auto cmd = params.find("command");
  bool ok = cmd != params.end() && cmd->is_array() && !cmd->empty() && cmd->size() <= 256;
  for (size_t i = 0; ok && i < cmd->size(); ++i) {
    ok = (*cmd)[i].is_string() && (*cmd)[i].get_ref<const std::string&>().size() <= 4096;
    if (ok) spec.command.push_back((*cmd)[i].get<std::string>());
  }
  if (!ok) {
    Error e = make_error(ErrorCode::kInvalidArgument, "exec.session needs \"command\": [strings]");
    audit_.record(NodeId(peer).to_string(), "exec.session", *job,
                  {{"refused", e.message()}, {"code", error_code_name(e.code())}});
    return (void)accept(std::move(e));
  }
  spec.tty = params.value("tty", false);
  spec.rows = static_cast<int>(std::clamp<int64_t>(params.value("rows", int64_t{24}), 1, 1000));
  spec.cols = static_cast<int>(std::clamp<int64_t>(params.value("cols", int64_t{80}), 1, 1000));
  nlohmann::json answer = {{"job_id", *job}, {"tty", spec.tty}};
  launch(peer, *job, std::move(spec), true, std::move(answer), std::move(accept));
}

void ForwardProvider::launch(const PublicKeyBytes& peer, const std::string& job_id, exec::ExecSpec spec, bool framed,
                             nlohmann::json answer, link::TunnelAccept accept) {
  std::string peer_id = NodeId(peer).to_string();
  const char* action = framed ? "exec.session" : "forward.tcp";
  // What the audit entry says about the request: the command, or the port.
  nlohmann::json detail = framed ? nlohmann::json{{"command", spec.command}, {"tty", spec.tty}}
                                 : nlohmann::json{{"port", answer.value("port", 0)}, {"via", "exec"}};
  if (pipes_.size() + socket_pipes_.size() >= kMaxConnections || (!framed && spec.command.empty())) {
    Error e = make_error(ErrorCode::kResourceExhausted, "this provider serves at most " + std::to_string(kMaxConnections) +
                                                            " forwarded connections and exec sessions at once; close "
                                                            "some and retry");
    detail["refused"] = e.message();
    detail["code"] = error_code_name(e.code());
    audit_.record(peer_id, action, job_id, detail);
    accept(std::move(e));
    return;
  }
  asio::post(pool_, [this, alive = alive_, accept = std::move(accept), job_id, spec = std::move(spec), framed,
                     answer = std::move(answer), peer_id, action, detail = std::move(detail)]() mutable {
    auto proc = [&]() -> Result<std::unique_ptr<exec::ExecSession>> {
      auto jobs = provider_.ready();
      if (!jobs) return std::move(jobs).error();
      auto view = (*jobs)->get(JobId(job_id));
      if (!view || view->value("peer_id", "") != peer_id) {
        return make_error(ErrorCode::kNotFound, "no job " + job_id + " of yours on this provider");
      }
      return (*jobs)->exec(JobId(job_id), spec);
    }();
    asio::post(io_, [this, alive, accept = std::move(accept), proc = std::move(proc), job_id, framed,
                     answer = std::move(answer), peer_id, action, audited = std::move(detail)]() mutable {
      if (!*alive) return;
      const char* what = framed ? "exec session" : "forward";
      if (!proc) {
        spdlog::info("{} into job {} for peer {} refused: {}", what, job_id, peer_id, proc.error().message());
        audited["refused"] = proc.error().message();
        audited["code"] = error_code_name(proc.error().code());
        audit_.record(peer_id, action, job_id, std::move(audited));
        accept(std::move(proc).error());
        return;
      }
      audit_.record(peer_id, action, job_id, std::move(audited));
      auto tunnel = accept(std::move(answer));
      if (!tunnel) return;  // the caller gave up; the process ends with its stdin
      spdlog::debug("{}: peer {} connected to job {}", what, peer_id, job_id);
      auto pipe = std::make_shared<ExecPipe>(io_, std::move(*proc), framed, [this, alive](ExecPipe* p) {
        asio::post(io_, [this, alive, p] {
          if (*alive) pipes_.erase(p);
        });
      });
      pipes_[pipe.get()] = pipe;
      pipe->start(std::move(tunnel));
    });
  });
}

}  // namespace yonder::jobs::sessions
