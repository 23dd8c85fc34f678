// The local API routes of ProviderService (see provider_service.h). Every
// handler posts its blocking work (Docker, SQLite, file reads) to the pool
// and posts the reply back to the event loop, which never blocks.
#include <utility>  // before Boost.Asio (GCC 12)

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <charconv>
#include <map>
#include <nlohmann/json.hpp>

#include "base/bytes.h"
#include "jobs/provider/provider_jobs.h"
#include "jobs/provider/provider_service.h"

namespace yonder::jobs::provider {
namespace asio = boost::asio;
using jobs::provider::ProviderJobs;

namespace {

constexpr size_t kDefaultLogBytes = 256 * 1024;
constexpr size_t kMaxLogBytes = 1 << 20;
constexpr int64_t kMaxWaitMs = 60000;
constexpr size_t kMaxExecOutput = 1 << 20;

Result<int64_t> query_int(const std::map<std::string, std::string>& q, const std::string& key, int64_t fallback,
                          int64_t max) {
  auto it = q.find(key);
  if (it == q.end()) return fallback;
  int64_t v = 0;
  auto [p, ec] = std::from_chars(it->second.data(), it->second.data() + it->second.size(), v);
  if (ec != std::errc() || p != it->second.data() + it->second.size() || v < 0 || v > max) {
    return make_error(ErrorCode::kInvalidArgument, "query parameter '" + key + "' must be an integer from 0 to " +
                                                       std::to_string(max));
  }
  return v;
}

Result<std::string> body_job_id(const nlohmann::json& j) {
  auto it = j.find("job_id");
  if (it == j.end() || !it->is_string()) return make_error(ErrorCode::kInvalidArgument, "'job_id' (a string) is required");
  return it->get<std::string>();
}

const char* stream_name(exec::LogStream s) {
  switch (s) {
    case exec::LogStream::kStdout: return "stdout";
    case exec::LogStream::kStderr: return "stderr";
    case exec::LogStream::kSystem: return "notice";
    case exec::LogStream::kStdin: return "stdin";
  }
  return "?";
}

struct LogPoll {
  LogPoll(asio::io_context& io, api::Reply r) : timer(io), reply(std::move(r)) {}
  asio::steady_timer timer;
  api::Reply reply;
  std::string id;
  uint64_t offset = 0;
  size_t max = kDefaultLogBytes;
  int64_t wait_ms = 0;
};

}  // namespace

void ProviderService::add_routes(api::Router& router, asio::io_context& io, asio::thread_pool& pool) {
  // Runs `work(jobs) -> Result<json>` on the pool and replies on the loop.
  auto blocking = [this, &io, &pool](api::Reply reply, std::function<Result<nlohmann::json>(ProviderJobs&)> work) {
    asio::post(pool, [this, &io, reply = std::move(reply), work = std::move(work)]() mutable {
      auto jobs = ready();
      Result<nlohmann::json> result = jobs ? work(**jobs) : Result<nlohmann::json>(std::move(jobs).error());
      asio::post(io, [reply = std::move(reply), result = std::move(result)] {
        reply(result ? api::Response::json(200, *result) : api::Response::error(result.error()));
      });
    });
  };

  router.add("GET", "/v1/provider/executor", [blocking](const api::Request&, api::Reply reply) {
    blocking(std::move(reply), [](ProviderJobs& jobs) -> Result<nlohmann::json> { return jobs.executor_status(); });
  });

  router.add("POST", "/v1/provider/jobs", [blocking](const api::Request& req, api::Reply reply) {
    blocking(std::move(reply), [body = req.body](ProviderJobs& jobs) -> Result<nlohmann::json> {
      auto j = api::parse_json_body(body);
      if (!j) return std::move(j).error();
      std::string peer = "local";
      if (auto p = j->find("peer_id"); p != j->end()) {
        if (!p->is_string() || p->get_ref<const std::string&>().empty() || p->get_ref<const std::string&>().size() > 128) {
          return make_error(ErrorCode::kInvalidArgument, "'peer_id' must be a non-empty string of at most 128 bytes");
        }
        peer = p->get<std::string>();
      }
      auto request = jobs::protocol::parse_job_request(*j);
      if (!request) return std::move(request).error();
      return jobs.submit(PeerId(peer), *request);
    });
  });

  router.add("GET", "/v1/provider/jobs", [blocking](const api::Request& req, api::Reply reply) {
    auto q = api::parse_query(req.query);
    blocking(std::move(reply), [id = q.count("id") ? q["id"] : std::string()](ProviderJobs& jobs) -> Result<nlohmann::json> {
      return id.empty() ? jobs.list() : jobs.get(JobId(id));
    });
  });

  router.add("POST", "/v1/provider/jobs/stop", [blocking](const api::Request& req, api::Reply reply) {
    blocking(std::move(reply), [body = req.body](ProviderJobs& jobs) -> Result<nlohmann::json> {
      auto j = api::parse_json_body(body);
      if (!j) return std::move(j).error();
      auto id = body_job_id(*j);
      if (!id) return std::move(id).error();
      return jobs.stop(JobId(*id));
    });
  });

  router.add("POST", "/v1/provider/jobs/remove", [blocking](const api::Request& req, api::Reply reply) {
    blocking(std::move(reply), [body = req.body](ProviderJobs& jobs) -> Result<nlohmann::json> {
      auto j = api::parse_json_body(body);
      if (!j) return std::move(j).error();
      auto id = body_job_id(*j);
      if (!id) return std::move(id).error();
      YONDER_TRY(jobs.remove(JobId(*id)));
      return nlohmann::json{{"removed", *id}};
    });
  });

  router.add("POST", "/v1/provider/jobs/exec", [blocking](const api::Request& req, api::Reply reply) {
    blocking(std::move(reply), [body = req.body](ProviderJobs& jobs) -> Result<nlohmann::json> {
      auto j = api::parse_json_body(body);
      if (!j) return std::move(j).error();
      auto id = body_job_id(*j);
      if (!id) return std::move(id).error();
      exec::ExecSpec spec;
      auto cmd = j->find("command");
      if (cmd == j->end() || !cmd->is_array() || cmd->empty() || cmd->size() > 256) {
        return make_error(ErrorCode::kInvalidArgument, "'command' must be a non-empty array of strings");
      }
      for (const auto& a : *cmd) {
        if (!a.is_string()) return make_error(ErrorCode::kInvalidArgument, "'command' must be an array of strings");
        spec.command.push_back(a.get<std::string>());
      }
      auto session = jobs.exec(JobId(*id), spec);
      if (!session) return std::move(session).error();
      (*session)->close_stdin();
      std::string out, err;
      while (true) {
        auto chunk = (*session)->read(std::chrono::seconds(60));
        if (!chunk) return std::move(chunk).error().with_context("exec");
        if (!*chunk) break;
        std::string& target = (*chunk)->first == exec::LogStream::kStderr ? err : out;
        if (out.size() + err.size() + (*chunk)->second.size() > kMaxExecOutput) {
          return make_error(ErrorCode::kResourceExhausted, "exec output is larger than 1 MiB; use the job's logs");
        }
        target += (*chunk)->second;
      }
      auto code = (*session)->exit_code();
      if (!code) return std::move(code).error();
      return nlohmann::json{{"exit_code", *code}, {"stdout_b64", base64_encode(as_bytes(out))},
                            {"stderr_b64", base64_encode(as_bytes(err))}};
    });
  });

  router.add("GET", "/v1/provider/jobs/logs", [this, &io, &pool](const api::Request& req, api::Reply reply) {
    auto q = api::parse_query(req.query);
    auto poll = std::make_shared<LogPoll>(io, std::move(reply));
    auto offset = query_int(q, "offset", 0, INT64_MAX);
    auto max = query_int(q, "max", kDefaultLogBytes, kMaxLogBytes);
    auto wait = query_int(q, "wait_ms", 0, kMaxWaitMs);
    if (!offset || !max || !wait || !q.count("id")) {
      Error e = !offset ? offset.error() : !max ? max.error() : !wait ? wait.error()
                                         : make_error(ErrorCode::kInvalidArgument, "query parameter 'id' is required");
      poll->reply(api::Response::error(e));
      return;
    }
    poll->id = q["id"];
    poll->offset = static_cast<uint64_t>(*offset);
    poll->max = static_cast<size_t>(std::max<int64_t>(*max, 1));
    poll->wait_ms = *wait;
    // attempt(first): read; if nothing yet and allowed to wait, arm the
    // timer and a log watcher (whichever fires first), then read once more.
    // The closure holds itself weakly; what is in flight (posted work, the
    // timer's handler) holds it strongly, so it dies with the last of them
    // even if the loop stops mid-poll.
    auto attempt = std::make_shared<std::function<void(bool)>>();
    *attempt = [this, &io, &pool, poll, weak_self = std::weak_ptr<std::function<void(bool)>>(attempt)](bool first) {
      auto self = weak_self.lock();
      if (!self) return;
      asio::post(pool, [this, &io, poll, attempt = self, first] {
        auto jobs = ready();
        auto read = jobs ? (*jobs)->read_log(JobId(poll->id), poll->offset, poll->max)
                         : Result<jobs::provider::LogRead>(std::move(jobs).error());
        if (read && first && poll->wait_ms > 0 && read->slice.records.empty() && !read->ended) {
          std::weak_ptr<LogPoll> weak = poll;
          asio::post(io, [poll, attempt] {
            poll->timer.expires_after(std::chrono::milliseconds(poll->wait_ms));
            poll->timer.async_wait([attempt](boost::system::error_code) { (*attempt)(false); });
          });
          (void)(*jobs)->watch_log(JobId(poll->id), poll->offset, [&io, weak] {
            asio::post(io, [weak] {
              if (auto p = weak.lock()) p->timer.cancel();
            });
          });
          return;
        }
        nlohmann::json body;
        if (read) {
          nlohmann::json records = nlohmann::json::array();
          for (const auto& r : read->slice.records) {
            records.push_back({{"stream", stream_name(r.stream)}, {"t", r.unix_ns}, {"data", base64_encode(as_bytes(r.data))}});
          }
          body = {{"job_id", poll->id}, {"records", records}, {"next_offset", read->slice.next_offset}, {"ended", read->ended}};
        }
        asio::post(io, [poll, read = read.ok(), error = read ? std::optional<Error>() : std::optional<Error>(read.error()),
                        body = std::move(body)]() mutable {
          poll->reply(read ? api::Response::json(200, body) : api::Response::error(*error));
        });
      });
    };
    (*attempt)(true);
  });
  // The same records pushed over a WebSocket (the dashboard's live logs).
  api::add_websocket_follow(router, "/v1/provider/jobs/logs/ws", "/v1/provider/jobs/logs");
}

}  // namespace yonder::jobs::provider
