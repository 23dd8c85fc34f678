#include "jobs/provider/remote_provider.h"

#include <utility>  // before Boost.Asio (GCC 12)

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "base/bytes.h"
#include "base/clock.h"
#include "crypto/node_id.h"
#include "crypto/scope.h"
#include "jobs/provider/provider_jobs.h"
#include "net/link/message.h"
#include "os/files.h"

namespace yonder::jobs::provider {
namespace asio = boost::asio;
using jobs::provider::JobRequest;
using jobs::provider::ProviderJobs;
using jobs::provider::ProviderLimits;

namespace {

constexpr size_t kLogReadBytes = 64 * 1024;      // payload per run.logs reply
constexpr size_t kLogReplyBudget = 160 * 1024;   // JSON per reply, well under the link's message limit
constexpr int64_t kRemoteProviderMaxWaitMs = 20000;            // under the caller's request timeout
constexpr int64_t kUploadTtlS = 3600;            // an upload no job claimed is deleted after this

void append_audit(audit::AuditLog& audit, int64_t at, const std::string& peer_id, const std::string& action,
                  const std::string& subject, const nlohmann::json& detail) {
  if (auto r = audit.append(at, peer_id.empty() ? "local" : peer_id, action, subject, detail); !r) {
    spdlog::error("audit log: cannot record {} by {}: {}", action, peer_id, r.error().to_string());
  }
}

Result<std::string> job_id_param(const nlohmann::json& p) {
  auto it = p.find("job_id");
  if (it == p.end() || !it->is_string() || it->get_ref<const std::string&>().empty() ||
      it->get_ref<const std::string&>().size() > 64) {
    return make_error(ErrorCode::kInvalidArgument, "'job_id' (a string) is required");
  }
  return it->get<std::string>();
}

// The job, if it is this peer's; otherwise "not found" (never "forbidden").
Result<nlohmann::json> owned_job(ProviderJobs& jobs, const std::string& job_id, const std::string& peer_id) {
  auto v = jobs.get(JobId(job_id));
  if (!v || v->value("peer_id", "") != peer_id) {
    return make_error(ErrorCode::kNotFound, "no job " + job_id + " of yours on this provider");
  }
  return v;
}

const char* remote_stream_name(exec::LogStream s) {
  switch (s) {
    case exec::LogStream::kStdout: return "stdout";
    case exec::LogStream::kStderr: return "stderr";
    default: return "notice";
  }
}

// The reply of run.logs: records within the JSON budget; next_offset is the
// record boundary after the last one included.
nlohmann::json encode_logs(const jobs::provider::LogRead& read, uint64_t offset) {
  nlohmann::json records = nlohmann::json::array();
  size_t budget = 0;
  uint64_t next = offset;
  bool all = true;
  for (const auto& r : read.slice.records) {
    size_t cost = 48 + (r.data.size() + 2) / 3 * 4;
    if (!records.empty() && budget + cost > kLogReplyBudget) {
      all = false;
      break;
    }
    budget += cost;
    records.push_back({{"stream", remote_stream_name(r.stream)}, {"t", r.unix_ns}, {"data", base64_encode(as_bytes(r.data))}});
    next += jobs::provider::kLogRecordHeader + r.data.size();
  }
  if (all) next = read.slice.next_offset;
  return {{"records", records}, {"next_offset", next}, {"ended", read.ended && all}};
}

}  // namespace

RemoteProvider::RemoteProvider(asio::io_context& io, asio::thread_pool& pool, reach::Peers& link,
                               ProviderService& provider, std::string uploads_dir)
    : io_(io), pool_(pool), link_(link), provider_(provider), uploads_dir_(std::move(uploads_dir)) {
  // Uploads an earlier run left behind: a queued job may still hold one as
  // its workspace seed, so only those past the upload lifetime go.
  std::error_code ec;
  auto cutoff = std::filesystem::file_time_type::clock::now() - std::chrono::seconds(kUploadTtlS);
  for (const auto& e : std::filesystem::directory_iterator(uploads_dir_, ec)) {
    std::error_code e2;
    if (e.last_write_time(e2) < cutoff && !e2) std::filesystem::remove_all(e.path(), e2);
  }
}

RemoteProvider::~RemoteProvider() {
  if (auto* jobs = hooked_.load()) jobs->set_on_finished(nullptr);
}

void RemoteProvider::add_upload(const std::string& id, const std::string& peer_id, const std::string& dir) {
  std::lock_guard lock(mutex_);
  uploads_[id] = {peer_id, dir, unix_now_s()};
}

Result<std::string> RemoteProvider::take_upload(const std::string& id, const std::string& peer_id) {
  std::lock_guard lock(mutex_);
  auto it = uploads_.find(id);
  if (it == uploads_.end() || it->second.peer_id != peer_id) {
    return make_error(ErrorCode::kNotFound, "no upload " + id.substr(0, 32) + " of yours on this provider (it expires "
                                                                             "an hour after it was sent); upload again");
  }
  std::string dir = it->second.dir;
  uploads_.erase(it);
  return dir;
}

void RemoteProvider::prune_uploads() {
  std::vector<std::string> stale;
  {
    std::lock_guard lock(mutex_);
    for (auto it = uploads_.begin(); it != uploads_.end();) {
      if (unix_now_s() - it->second.created_at < kUploadTtlS) {
        ++it;
        continue;
      }
      stale.push_back(it->second.dir);
      it = uploads_.erase(it);
    }
  }
  for (const auto& d : stale) {
    std::error_code ec;
    std::filesystem::remove_all(d, ec);
  }
}

void RemoteProvider::register_methods() {
  link::LinkService& service = link_.service();
  link_.on_refused([this](const PublicKeyBytes& key, const std::string& method, const Error& why) {
    record(NodeId(key).to_string(), method.substr(0, 64), "",
           {{"refused", why.message()}, {"code", error_code_name(why.code())}});
  });
  // Refusals (not the owner, bad request) are audited; what was done is
  // audited by `work` itself where it changes something.
  auto blocking = [this](const char* method, const PublicKeyBytes& peer, const nlohmann::json& params,
                         link::RpcReply reply, std::function<Result<nlohmann::json>(ProviderJobs&)> work) {
    asio::post(pool_, [this, method, peer_id = NodeId(peer).to_string(), job = params.value("job_id", nlohmann::json("")),
                       reply = std::move(reply), work = std::move(work)]() mutable {
      auto jobs = ready();
      Result<nlohmann::json> r = jobs ? work(**jobs) : Result<nlohmann::json>(std::move(jobs).error());
      if (!r) {
        record(peer_id, method, job.is_string() ? job.get<std::string>().substr(0, 64) : "",
               {{"refused", r.error().message()}, {"code", error_code_name(r.error().code())}});
      }
      asio::post(io_, [reply = std::move(reply), r = std::move(r)]() mutable { reply(std::move(r)); });
    });
  };

  service.add_method("run.submit", [this](const PublicKeyBytes& peer, const nlohmann::json& params, link::RpcReply reply) {
    submit(peer, params, std::move(reply));
  });

  service.add_method("run.list", [blocking](const PublicKeyBytes& peer, const nlohmann::json& params, link::RpcReply reply) {
    blocking("run.list", peer, params, std::move(reply), [peer_id = NodeId(peer).to_string()](ProviderJobs& jobs) -> Result<nlohmann::json> {
      auto mine = jobs.list(PeerId(peer_id));
      if (!mine) return std::move(mine).error();
      return nlohmann::json{{"jobs", std::move(*mine)}};
    });
  });

  service.add_method("run.inspect", [blocking](const PublicKeyBytes& peer, const nlohmann::json& params, link::RpcReply reply) {
    auto id = job_id_param(params);
    if (!id) return reply(std::move(id).error());
    blocking("run.inspect", peer, params, std::move(reply), [peer_id = NodeId(peer).to_string(), id = *id](ProviderJobs& jobs) {
      return owned_job(jobs, id, peer_id);
    });
  });

  // `yonder stats`: the job's use of the host now, for its owner only.
  service.add_method("run.stats", [blocking](const PublicKeyBytes& peer, const nlohmann::json& params, link::RpcReply reply) {
    auto id = job_id_param(params);
    if (!id) return reply(std::move(id).error());
    blocking("run.stats", peer, params, std::move(reply), [peer_id = NodeId(peer).to_string(), id = *id](ProviderJobs& jobs) -> Result<nlohmann::json> {
      YONDER_TRY(owned_job(jobs, id, peer_id));
      return jobs.stats(JobId(id));
    });
  });

  // The same answer for a caller about to forward to the job: asked under
  // the `forward` capability, so `yonder forward` without it fails at once
  // instead of opening a listener whose every connection is refused.
  service.add_method("forward.inspect", [blocking](const PublicKeyBytes& peer, const nlohmann::json& params, link::RpcReply reply) {
    auto id = job_id_param(params);
    if (!id) return reply(std::move(id).error());
    blocking("forward.inspect", peer, params, std::move(reply), [peer_id = NodeId(peer).to_string(), id = *id](ProviderJobs& jobs) {
      return owned_job(jobs, id, peer_id);
    });
  });

  service.add_method("run.stop", [this, blocking](const PublicKeyBytes& peer, const nlohmann::json& params, link::RpcReply reply) {
    auto id = job_id_param(params);
    if (!id) return reply(std::move(id).error());
    blocking("run.stop", peer, params, std::move(reply), [this, peer_id = NodeId(peer).to_string(), id = *id](ProviderJobs& jobs) -> Result<nlohmann::json> {
      YONDER_TRY(owned_job(jobs, id, peer_id));
      spdlog::info("job {} stopped by its owner {}", id, peer_id);
      auto r = jobs.stop(JobId(id));
      if (r) record(peer_id, "run.stop", id, {{"state", r->value("state", "")}});
      return r;
    });
  });

  // Holding and releasing a queued job of one's own (`yonder hold`, `yonder release`).
  for (bool held : {true, false}) {
    const char* method = held ? "run.hold" : "run.release";
    service.add_method(method, [this, blocking, method, held](const PublicKeyBytes& peer, const nlohmann::json& params,
                                                              link::RpcReply reply) {
      auto id = job_id_param(params);
      if (!id) return reply(std::move(id).error());
      blocking(method, peer, params, std::move(reply),
               [this, method, held, peer_id = NodeId(peer).to_string(), id = *id](ProviderJobs& jobs) -> Result<nlohmann::json> {
                 YONDER_TRY(owned_job(jobs, id, peer_id));
                 auto r = jobs.set_held(JobId(id), held);
                 if (r) record(peer_id, method, id, {{"held", held}});
                 return r;
               });
    });
  }

  service.add_method("run.logs", [this](const PublicKeyBytes& peer, const nlohmann::json& params, link::RpcReply reply) {
    logs(NodeId(peer).to_string(), params, std::move(reply));
  });
  service.add_tunnel_method("run.logs.follow", [this](const PublicKeyBytes& peer, const nlohmann::json& params,
                                                      link::TunnelAccept accept) {
    follow_logs(NodeId(peer).to_string(), params, std::move(accept));
  });

  // What this peer may ask of us and what we have (`yonder gpu PEER`): the
  // GPUs and which are in use, the per-job maxima, the images allowed, the
  // queue, and the peer's own scope as it is now. Nothing of other peers.
  service.add_method("run.offer", [this, blocking](const PublicKeyBytes& peer, const nlohmann::json& params, link::RpcReply reply) {
    auto grant = link_.grant_of(peer);  // the scope as it is now (event loop)
    nlohmann::json scope = grant ? scope_to_json(*grant) : nlohmann::json();
    blocking("run.offer", peer, params, std::move(reply), [this, scope](ProviderJobs& jobs) -> Result<nlohmann::json> {
      nlohmann::json offer = jobs.offer();
      offer["scope"] = scope;
      offer["images"] = provider_.allowed_images();
      if (!provider_.isolation_notice().empty()) offer["notice"] = provider_.isolation_notice();
      return offer;
    });
  });
}

void RemoteProvider::record(const std::string& peer_id, const std::string& action, const std::string& subject,
                            nlohmann::json detail) {
  if (audit_ == nullptr) return;
  asio::post(pool_, [audit = audit_, at = unix_now_s(), peer_id, action, subject, detail = std::move(detail)] {
    append_audit(*audit, at, peer_id, action, subject, detail);
  });
}

void RemoteProvider::record_now(const std::string& peer_id, const std::string& action, const std::string& subject,
                                const nlohmann::json& detail) {
  if (audit_ != nullptr) append_audit(*audit_, unix_now_s(), peer_id, action, subject, detail);
}

Result<ProviderJobs*> RemoteProvider::ready() {
  auto jobs = provider_.ready();
  if (!jobs || hooked_.load() == *jobs) return jobs;
  hooked_ = *jobs;
  (*jobs)->set_on_finished([this](const nlohmann::json& v) {
    job_ended_.fire(v);
    // A job's end: duration and GPU-seconds for the provider's accounting.
    int64_t started = v.value("started_at", int64_t{0});
    int64_t finished = v.value("finished_at", int64_t{0});
    int64_t duration = started > 0 && finished >= started ? finished - started : 0;
    size_t gpus = v.contains("gpus") && v["gpus"].is_array() ? v["gpus"].size() : 0;
    record(v.value("peer_id", ""), "run.end", v.value("job_id", ""),
           {{"image", v.value("image", "")},
            {"image_id", v.value("image_id", "")},
            {"command", v.value("command", nlohmann::json::array())},
            {"gpus", gpus},
            {"state", v.value("state", "")},
            {"reason", v.value("reason", "")},
            {"exit_code", v.contains("exit_code") ? v["exit_code"] : nlohmann::json(nullptr)},
            {"duration_s", duration},
            {"gpu_seconds", duration * static_cast<int64_t>(gpus)}});
  });
  return jobs;
}

void RemoteProvider::submit(const PublicKeyBytes& peer, const nlohmann::json& params, link::RpcReply reply) {
  auto grant = link_.grant_of(peer);  // the scope as it is now (event loop)
  if (!grant) return reply(make_error(ErrorCode::kPermissionDenied, "this provider no longer accepts requests from this node"));
  if (!params.is_object() || !params.contains("job")) {
    return reply(make_error(ErrorCode::kInvalidArgument, "run.submit needs {\"job\": {...}}"));
  }
  auto request = jobs::protocol::parse_job_request(params["job"]);
  if (!request) return reply(std::move(request).error());
  if (params["job"].contains("peer_id")) {
    return reply(make_error(ErrorCode::kInvalidArgument, "job request: 'peer_id' is set by the provider"));
  }
  std::string upload = params.contains("upload_id") && params["upload_id"].is_string() ? params["upload_id"].get<std::string>() : "";
  std::string peer_id = NodeId(peer).to_string();
  asio::post(pool_, [this, reply = std::move(reply), request = std::move(*request), scope = *grant, upload, peer_id]() mutable {
    auto result = [&]() -> Result<nlohmann::json> {
      auto jobs = ready();
      if (!jobs) return std::move(jobs).error();
      YONDER_TRY(apply_scope(request, scope, (*jobs)->options().limits));
      std::string seed;
      if (!upload.empty()) {
        auto dir = take_upload(upload, peer_id);
        if (!dir) return std::move(dir).error();
        seed = *dir;
      }
      auto view = (*jobs)->submit(PeerId(peer_id), request, seed, scope.max_jobs);
      if (!view && !seed.empty()) {
        std::error_code ec;
        std::filesystem::remove_all(seed, ec);
      }
      if (view) spdlog::info("job {} submitted by peer {}: {}", view->value("job_id", ""), peer_id, request.image);
      if (view && !provider_.isolation_notice().empty()) (*view)["notice"] = provider_.isolation_notice();
      return view;
    }();
    nlohmann::json detail = {{"image", request.image}, {"command", request.command}, {"gpus", request.gpus}};
    if (result) {
      detail["upload_id"] = upload;
      // In the log before the peer hears "accepted": a crash cannot leave
      // an acknowledged job without its audit entry.
      record_now(peer_id, "run.submit", result->value("job_id", ""), detail);
    } else {
      spdlog::info("run request from peer {} refused: {}", peer_id, result.error().message());
      detail["refused"] = result.error().message();
      detail["code"] = error_code_name(result.error().code());
      record_now(peer_id, "run.submit", "", detail);
    }
    if (!result && result.error().code() == ErrorCode::kResourceExhausted &&
        (result.error().message().find("disk full") != std::string::npos ||
         result.error().message().find("disk is full") != std::string::npos)) {
      // The operator's log and audit have the folder; the peer needs only
      // the fact, not the provider's file system layout.
      spdlog::warn("refusing jobs: {}", result.error().message());
      result = make_error(ErrorCode::kResourceExhausted,
                          "the provider has run out of disk space; try again later, or tell its owner");
    }
    asio::post(io_, [this, reply = std::move(reply), result = std::move(result)]() mutable {
      bool accepted = result.ok();
      reply(std::move(result));
      if (accepted) job_submitted_.fire();
    });
  });
}

void RemoteProvider::logs(const std::string& peer_id, const nlohmann::json& params, link::RpcReply reply) {
  auto id = job_id_param(params);
  if (!id) return reply(std::move(id).error());
  uint64_t offset = params.value("offset", uint64_t{0});
  int64_t wait_ms = std::clamp<int64_t>(params.value("wait_ms", int64_t{0}), 0, kRemoteProviderMaxWaitMs);
  struct Poll {
    explicit Poll(asio::io_context& io) : timer(io) {}
    asio::steady_timer timer;
    link::RpcReply reply;
  };
  auto poll = std::make_shared<Poll>(io_);
  poll->reply = std::move(reply);
  // read(wait): on the pool; with `wait`, an empty read arms the timer and a
  // log watcher (whichever fires first cancels the wait) and reads again.
  auto read = std::make_shared<std::function<void(bool)>>();
  *read = [this, poll, peer_id, job = *id, offset, wait_ms, weak = std::weak_ptr<std::function<void(bool)>>(read)](bool wait) {
    auto self = weak.lock();
    if (!self) return;
    asio::post(pool_, [this, poll, peer_id, job, offset, wait_ms, wait, self] {
      auto jobs = ready();
      Result<nlohmann::json> owned = jobs ? owned_job(**jobs, job, peer_id) : Result<nlohmann::json>(jobs.error());
      auto got =
          owned ? (*jobs)->read_log(JobId(job), offset, kLogReadBytes) : Result<jobs::provider::LogRead>(owned.error());
      if (got && wait && wait_ms > 0 && got->slice.records.empty() && !got->ended) {
        std::weak_ptr<Poll> weak_poll = poll;
        asio::post(io_, [poll, self, wait_ms] {
          poll->timer.expires_after(std::chrono::milliseconds(wait_ms));
          poll->timer.async_wait([self](boost::system::error_code) { (*self)(false); });
        });
        (void)(*jobs)->watch_log(JobId(job), offset, [this, weak_poll] {
          asio::post(io_, [weak_poll] {
            if (auto p = weak_poll.lock()) p->timer.cancel();
          });
        });
        return;
      }
      if (!got) record(peer_id, "run.logs", job, {{"refused", got.error().message()}, {"code", error_code_name(got.error().code())}});
      Result<nlohmann::json> r = got ? Result<nlohmann::json>(encode_logs(*got, offset)) : Result<nlohmann::json>(got.error());
      asio::post(io_, [poll, r = std::move(r)]() mutable { poll->reply(std::move(r)); });
    });
  };
  (*read)(true);
}

void RemoteProvider::follow_logs(const std::string& peer_id, const nlohmann::json& params,
                                 link::TunnelAccept accept) {
  auto id = job_id_param(params);
  if (!id) return (void)accept(std::move(id).error());
  struct Follow {
    std::string job;
    uint64_t offset = 0;
    std::shared_ptr<link::Tunnel> tunnel;  // dropped at the end (its handlers hold this)
    bool reading = false;  // a run.logs read is in flight
    bool blocked = false;  // the last push waits for the consumer's credit (drained() goes on)
    std::function<void()> step;
    // Ends the stream: cleanly after the job's end, else with `why`.
    void finish(const std::string& why) {
      auto t = std::move(tunnel);
      tunnel = nullptr;
      step = nullptr;
      if (!t) return;
      if (why.empty()) {
        t->close();
      } else {
        t->reset(why);
      }
    }
    // Pushes a read's answer if it says anything; true while the job runs.
    bool push(const nlohmann::json& reply) {
      bool ended = reply.value("ended", false);
      if (!reply["records"].empty() || ended) {
        offset = reply.value("next_offset", offset);
        blocked = !tunnel->write(link::encode_message(reply));
      }
      if (ended) finish("");
      return !ended;
    }
  };
  auto f = std::make_shared<Follow>();
  f->job = *id;
  f->offset = params.value("offset", uint64_t{0});
  std::weak_ptr<Follow> weak = f;
  // One long poll at a time; its answer is pushed and the next one follows,
  // unless the push waits for credit.
  f->step = [this, weak, peer_id] {
    auto me = weak.lock();
    if (!me || !me->tunnel || me->reading || me->blocked) return;
    me->reading = true;
    logs(peer_id, {{"job_id", me->job}, {"offset", me->offset}, {"wait_ms", kRemoteProviderMaxWaitMs}},
         [me](Result<nlohmann::json> r) {
           me->reading = false;
           if (!me->tunnel) return;
           if (!r) return me->finish(r.error().message());
           if (me->push(*r) && me->step) me->step();
         });
  };
  // The first read answers the request: a refusal (not this peer's job, no
  // such job) refuses the tunnel in run.logs' own words.
  logs(peer_id, {{"job_id", f->job}, {"offset", f->offset}, {"wait_ms", 0}},
       [f, accept = std::move(accept)](Result<nlohmann::json> first) {
         if (!first) return (void)accept(std::move(first).error());
         f->tunnel = accept(nlohmann::json{{"job_id", f->job}});
         if (!f->tunnel) return;
         link::Tunnel::Handlers h;
         h.data = [f](Bytes) {  // the consumer sends nothing: ignored
           if (f->tunnel) f->tunnel->resume();
         };
         h.eof = [f] { f->finish(""); };
         h.drained = [f] {
           f->blocked = false;
           if (f->step) f->step();
         };
         h.ended = [f](const std::string&) { f->finish(""); };
         f->tunnel->start(std::move(h));
         if (f->push(*first) && f->step) f->step();
       });
}

}  // namespace yonder::jobs::provider
