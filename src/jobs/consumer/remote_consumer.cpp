#include "jobs/consumer/remote_consumer.h"

#include <utility>  // before Boost.Asio (GCC 12)

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <chrono>
#include <charconv>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <spdlog/spdlog.h>

#include "base/clock.h"
#include "jobs/consumer/consumer_jobs.h"
#include "jobs/protocol/job_request.h"

namespace yonder::jobs::consumer {
namespace asio = boost::asio;
using api::Reply;
using api::Request;
using api::Response;
using jobs::consumer::ConsumerJob;
using jobs::consumer::ConsumerJobStore;

namespace {

// How long a provider may take to answer a read (beyond a log long poll's
// own wait) before the consumer says it is not answering.
constexpr std::chrono::milliseconds kReadDeadline{8000};

// How long `ps` waits for each provider's list of jobs.
constexpr std::chrono::seconds kListDeadline{5};
constexpr std::chrono::seconds kOfferDeadline{10};

uint64_t query_u64(const std::map<std::string, std::string>& q, const std::string& key) {
  auto it = q.find(key);
  uint64_t v = 0;
  if (it != q.end()) std::from_chars(it->second.data(), it->second.data() + it->second.size(), v);
  return v;
}

}  // namespace

RemoteConsumer::RemoteConsumer(asio::io_context& io, asio::thread_pool& pool, reach::Peers& link,
                               std::unique_ptr<ConsumerJobStore> store, std::string hash_cache_dir)
    : io_(io),
      pool_(pool),
      link_(link),
      store_(std::move(store)),
      uploads_(io, pool, link, std::move(hash_cache_dir)),
      log_feeds_(io, link) {}

RemoteConsumer::~RemoteConsumer() = default;

void RemoteConsumer::stop() { log_feeds_.stop(); }

void RemoteConsumer::add_routes(api::Router& router) {
  router.add("POST", "/v1/jobs", [this](const Request& req, Reply reply) { run(req, std::move(reply)); });
  router.add("GET", "/v1/jobs", [this](const Request& req, Reply reply) { list(req, std::move(reply)); });
  transfers_.add_routes(router);
  router.add("GET", "/v1/jobs/inspect", [this](const Request& req, Reply reply) {
    forward(api::parse_query(req.query)["id"], "run.inspect", nlohmann::json::object(), true, std::move(reply));
  });
  router.add("GET", "/v1/jobs/stats", [this](const Request& req, Reply reply) {
    forward(api::parse_query(req.query)["id"], "run.stats", nlohmann::json::object(), false, std::move(reply));
  });
  router.add("POST", "/v1/jobs/stop", [this](const Request& req, Reply reply) {
    auto b = nlohmann::json::parse(req.body, nullptr, false);
    std::string id = b.is_object() && b.contains("job_id") && b["job_id"].is_string() ? b["job_id"].get<std::string>() : "";
    forward(id, "run.stop", nlohmann::json::object(), true, std::move(reply));
  });
  auto job_of = [](const Request& req) {
    auto b = nlohmann::json::parse(req.body, nullptr, false);
    return b.is_object() && b.contains("job_id") && b["job_id"].is_string() ? b["job_id"].get<std::string>() : "";
  };
  router.add("POST", "/v1/jobs/hold", [this, job_of](const Request& req, Reply reply) {
    forward(job_of(req), "run.hold", nlohmann::json::object(), true, std::move(reply));
  });
  router.add("POST", "/v1/jobs/release", [this, job_of](const Request& req, Reply reply) {
    forward(job_of(req), "run.release", nlohmann::json::object(), true, std::move(reply));
  });
  router.add("GET", "/v1/jobs/logs", [this](const Request& req, Reply reply) {
    auto q = api::parse_query(req.query);
    uint64_t wait_ms = std::min<uint64_t>(query_u64(q, "wait_ms"), 20000);
    // A follower (it waits) reads from the job's pushed log stream; a one-off read asks run.logs.
    if (wait_ms > 0) return follow(q["id"], query_u64(q, "offset"), std::chrono::milliseconds(wait_ms), std::move(reply));
    nlohmann::json params = {{"offset", query_u64(q, "offset")}, {"wait_ms", wait_ms}};
    forward(q["id"], "run.logs", params, false, std::move(reply));
  });
  // The same records pushed over a WebSocket (the dashboard's live logs).
  api::add_websocket_follow(router, "/v1/jobs/logs/ws", "/v1/jobs/logs");
  // What a provider has and lets us do (`yonder gpu PEER`): its run.offer.
  router.add("GET", "/v1/peers/offer", [this](const Request& req, Reply reply) {
    std::string peer = api::parse_query(req.query)["peer"];
    if (peer.empty()) return reply(Response::error(make_error(ErrorCode::kInvalidArgument, "give ?peer=NAME")));
    auto t = link_.target(peer);
    if (!t) return reply(Response::error(t.error()));
    link_.call_within(*t, "run.offer", nlohmann::json::object(), kOfferDeadline,
                      [reply, name = t->name, id = t->node_id](Result<nlohmann::json> r) {
                        if (!r) return reply(Response::error(r.error()));
                        (*r)["name"] = name;
                        (*r)["node_id"] = id;
                        reply(Response::json(200, *r));
                      });
  });
}

void RemoteConsumer::run(const Request& req, Reply reply) {
  auto body = nlohmann::json::parse(req.body, nullptr, false);
  if (!body.is_object() || !body.contains("job") || !body.contains("peer") || !body["peer"].is_string()) {
    return reply(Response::error(make_error(ErrorCode::kInvalidArgument, "the body needs \"peer\" and \"job\"")));
  }
  auto target = link_.target(body["peer"].get<std::string>());
  if (!target) return reply(Response::error(target.error()));
  // Checked here too, so a typo fails before anything is uploaded.
  auto request = jobs::protocol::parse_job_request(body["job"]);
  if (!request) return reply(Response::error(request.error()));
  std::string dir = body.contains("dir") && body["dir"].is_string() ? body["dir"].get<std::string>() : "";
  if (!dir.empty() && dir.front() != '/') {
    return reply(Response::error(make_error(ErrorCode::kInvalidArgument, "\"dir\" must be an absolute path")));
  }
  std::string transfer_id = body.contains("transfer_id") && body["transfer_id"].is_string() ? body["transfer_id"].get<std::string>() : "";
  std::string name;
  if (auto n = body.find("name"); n != body.end()) {
    if (!n->is_string()) return reply(Response::error(make_error(ErrorCode::kInvalidArgument, "\"name\" must be a string")));
    name = n->get<std::string>();
    if (auto st = check_job_name(name); !st) return reply(Response::error(st.error()));
  }
  // A claimed name is released once the job is remembered under it (or failed).
  auto go = [this, t = *target, dir, transfer_id, name, reply](Result<jobs::protocol::JobRequest> r) {
    if (!r) {
      if (!name.empty()) release_name(name);
      return reply(Response::error(r.error()));
    }
    submit(t, *r, dir, transfer_id, [this, name, reply](Result<nlohmann::json> answer) {
      if (!name.empty()) release_name(name);
      reply(answer ? Response::json(200, *answer) : Response::error(answer.error()));
    }, name);
  };
  if (request->after.empty() && request->after_ok.empty() && name.empty()) return go(std::move(*request));
  // --after and --after-ok name jobs as everywhere (an id, a name, a unique
  // prefix of an id): the provider gets their full ids, and only jobs
  // submitted from here to the same provider will do.
  asio::post(pool_, [this, t = *target, request = std::move(*request), name, go, reply]() mutable {
    Result<jobs::protocol::JobRequest> resolved = request;
    if (!name.empty()) {
      // Not through `go`: the name is not ours to release.
      if (auto st = claim_name(name); !st) return asio::post(io_, [reply, e = st.error()] { reply(Response::error(e)); });
    }
    for (auto* ids : {&resolved->after, &resolved->after_ok}) {
      for (auto& id : *ids) {
        auto dep = store_->find(id);
        if (!dep) {
          resolved = Error(dep.error()).with_context("--after " + id);
          break;
        }
        if (dep->provider_id != t.node_id) {
          resolved = make_error(ErrorCode::kInvalidArgument,
                                "job " + dep->job_id + " runs on " + dep->spec.value("provider_name", dep->provider_id) +
                                    ", not on " + t.name + ": a job can wait only for jobs on its own provider");
          break;
        }
        id = dep->job_id;
      }
      if (!resolved) break;
    }
    asio::post(io_, [go, resolved = std::move(resolved)]() mutable { go(std::move(resolved)); });
  });
}

Status RemoteConsumer::claim_name(const std::string& name) {
  std::lock_guard lock(naming_mutex_);
  if (naming_.count(name)) {
    return make_error(ErrorCode::kAlreadyExists, "the name \"" + name + "\" is being given to a job submitted just now; pick another");
  }
  auto jobs = store_->list();
  if (!jobs) return std::move(jobs).error();
  for (const auto& j : *jobs) {
    auto n = j.spec.find("name");
    if (j.finished() || n == j.spec.end() || !n->is_string() || *n != name) continue;
    return make_error(ErrorCode::kAlreadyExists,
                      "the name \"" + name + "\" is taken by job " + j.job_id + " (" + j.state + " on " +
                          j.spec.value("provider_name", j.provider_id) +
                          "); pick another, or free it: `yonder stop " + name + "` (a name is free again once its job ended)");
  }
  naming_.insert(name);
  return ok_status();
}

void RemoteConsumer::release_name(const std::string& name) {
  std::lock_guard lock(naming_mutex_);
  naming_.erase(name);
}

void RemoteConsumer::submit(const reach::Peers::Target& t, const jobs::protocol::JobRequest& request,
                            const std::string& dir, const std::string& transfer_id,
                            std::function<void(Result<nlohmann::json>)> answer, const std::string& name) {
  auto progress = transfers_.begin(transfer_id, dir.empty() ? "submit" : "upload", t.name, dir);
  nlohmann::json job = request.to_json();
  // Ends the request once: the transfer's outcome, then the answer.
  auto done = [this, progress, answer = std::move(answer)](Result<nlohmann::json> r, const std::string& outcome) {
    if (!r) progress->error = r.error().message();
    transfers_.end(progress, outcome);
    answer(std::move(r));
  };

  // Submit (after the upload, if any), remember, reply. A cancel that came
  // while the submit was on its way stops the job as soon as its id is known.
  auto submit = [this, t, job, progress, done, name](std::string upload_id, nlohmann::json upload_info) {
    if (progress->cancel_requested) {
      return done(make_error(ErrorCode::kFailedPrecondition, "cancelled before the job was submitted"), "cancelled");
    }
    nlohmann::json params = {{"job", job}};
    if (!upload_id.empty()) params["upload_id"] = upload_id;
    progress->phase = jobs::files::TransferProgress::Phase::kFinishing;
    link_.service().call(t.key, t.addresses, "run.submit", params, [this, t, job, progress, done, upload_info, name](Result<nlohmann::json> r) {
      if (!r) return done(r.error(), "failed");
      nlohmann::json view = *r;
      progress->job_id = view.value("job_id", "");
      if (progress->cancel_requested) {
        link_.service().call(t.key, t.addresses, "run.stop", {{"job_id", progress->job_id}}, [id = progress->job_id](Result<nlohmann::json> s) {
          if (!s) spdlog::warn("job {} was cancelled while it was submitted, but stopping it failed: {}", id, s.error().message());
        });
      }
      asio::post(pool_, [this, t, job, progress, done, view, upload_info, name] {
        ConsumerJob c;
        c.job_id = view.value("job_id", "");
        c.provider_id = t.node_id;
        c.state = view.value("state", "pending");
        c.spec = {{"request", job}, {"provider_name", t.name}, {"upload", upload_info}};
        if (!name.empty()) c.spec["name"] = name;
        c.last = view;
        c.created_at = unix_now_s();
        if (c.state == "running") c.observed.first_running_ms = unix_now_ms();
        auto saved = store_->save(c);
        if (!saved) spdlog::warn("job {} runs on {} but could not be remembered: {}", c.job_id, t.name, saved.error().to_string());
        nlohmann::json out = c.to_json();
        out["upload"] = upload_info;
        asio::post(io_, [progress, done, out] {
          if (progress->cancel_requested) {
            return done(make_error(ErrorCode::kFailedPrecondition, "cancelled: job " + progress->job_id +
                                                                       " had been submitted and is being stopped"),
                        "stopped");
          }
          done(out, "submitted");
        });
      });
    });
  };
  if (dir.empty()) return submit("", nullptr);

  uploads_.upload(t, dir, progress, [progress, submit, done](Result<nlohmann::json> r) {
    if (!r) return done(std::move(r).error().with_context("upload"), progress->cancel_requested ? "cancelled" : "failed");
    submit(r->value("upload_id", ""), *r);  // jobs::files::UploadConsumer fails an upload whose reply names no id
  });
}

void RemoteConsumer::list(const Request& req, Reply reply) {
  bool all = api::parse_query(req.query)["all"] == "1";
  struct Gather {
    std::vector<ConsumerJob> jobs;
    std::vector<nlohmann::json> views;
    std::set<std::string> unreachable;
    std::map<std::string, std::string> why;         // provider id -> why it is not in this answer
    std::map<std::string, std::string> unfinished;  // job id -> provider id, before asking
    size_t pending = 0;
  };
  auto g = std::make_shared<Gather>();
  // 3. record what the providers said (pool), list again, reply.
  auto finish = [this, g, all, reply] {
    asio::post(pool_, [this, g, all, reply] {
      std::vector<std::pair<std::string, std::string>> ended;
      for (const auto& v : g->views) {
        auto was = g->unfinished.find(v.value("job_id", ""));
        // A job that had ended when we asked keeps what we saw of it; only
        // the provider's cleanup of its files is news.
        if (was == g->unfinished.end()) {
          (void)store_->record_cleanup(v);
          continue;
        }
        (void)store_->update_from_view(v, unix_now_ms());
        std::string state = v.value("state", "");
        if (was != g->unfinished.end() && (state == "exited" || state == "stopped" || state == "failed")) {
          ended.emplace_back(was->second, was->first);
        }
      }
      if (!ended.empty()) {
        asio::post(io_, [this, ended] {
          for (const auto& [provider, job] : ended) {
            job_ended_.fire(PeerId(provider), JobId(job));
          }
        });
      }
      auto jobs = store_->list();
      Result<nlohmann::json> out = [&]() -> Result<nlohmann::json> {
        if (!jobs) return std::move(jobs).error();
        nlohmann::json arr = nlohmann::json::array();
        for (const auto& j : *jobs) {
          if (!all && j.finished()) continue;
          auto v = j.to_json();
          v["provider_reachable"] = !g->unreachable.count(j.provider_id);
          arr.push_back(v);
        }
        nlohmann::json unanswered = nlohmann::json::array();
        for (const auto& [provider, why] : g->why) unanswered.push_back({{"provider", provider}, {"why", why}});
        return nlohmann::json{{"jobs", arr}, {"unanswered", unanswered}};
      }();
      asio::post(io_, [reply, out = std::move(out)] {
        reply(out ? Response::json(200, *out) : Response::error(out.error()));
      });
    });
  };
  // 1. what we remember (pool); 2. ask each provider with unfinished jobs (loop).
  asio::post(pool_, [this, g, all, reply, finish] {
    auto jobs = store_->list();
    asio::post(io_, [this, g, all, reply, finish, jobs = std::move(jobs)]() mutable {
      if (!jobs) return reply(Response::error(jobs.error()));
      std::set<std::string> providers;
      for (const auto& j : *jobs) {
        if (!j.finished()) {
          providers.insert(j.provider_id);
          g->unfinished[j.job_id] = j.provider_id;
        } else if (all && !(j.last.contains("workspace_removed_at") && j.last.contains("log_removed_at"))) {
          providers.insert(j.provider_id);  // `ps --all`: has it cleaned the job up since?
        }
      }
      if (providers.empty()) return finish();
      g->pending = providers.size();
      for (const auto& p : providers) {
        auto t = link_.target(p);
        if (!t) {
          g->unreachable.insert(p);
          if (--g->pending == 0) finish();
          continue;
        }
        // A provider that does not answer soon is shown as last seen
        // (marked), rather than holding up `ps` for the link's timeout.
        link_.call_within(*t, "run.list", nlohmann::json::object(), kListDeadline,
                          [g, p, finish](Result<nlohmann::json> r) {
                            if (r && r->contains("jobs") && (*r)["jobs"].is_array()) {
                              for (auto& v : (*r)["jobs"]) g->views.push_back(v);
                            } else {
                              g->unreachable.insert(p);
                              g->why[p] = r ? "an answer without jobs" : r.error().message();
                            }
                            if (--g->pending == 0) finish();
                          });
      }
    });
  });
}

void RemoteConsumer::forward(const std::string& id, const std::string& method, nlohmann::json params, bool record,
                             Reply reply) {
  call_job(id, method, std::move(params), record, [reply](Result<nlohmann::json> r) {
    reply(r ? Response::json(200, *r) : Response::error(r.error()));
  });
}

void RemoteConsumer::call_job(const std::string& id, const std::string& method, nlohmann::json params, bool record,
                              std::function<void(Result<nlohmann::json>)> answer) {
  std::function<void(Result<nlohmann::json>)> reply = std::move(answer);
  if (id.empty()) return reply(make_error(ErrorCode::kInvalidArgument, "a job id is required"));
  asio::post(pool_, [this, id, method, params, record, reply]() mutable {
    auto job = store_->find(id);
    asio::post(io_, [this, job = std::move(job), method, params, record, reply]() mutable {
      if (!job) return reply(job.error());
      auto t = link_.target(job->provider_id);
      if (!t) {
        return reply(make_error(ErrorCode::kFailedPrecondition,
                                "job " + job->job_id + " runs on a provider this node is no longer paired with"));
      }
      params["job_id"] = job->job_id;
      // Reads that a stopped provider would leave hanging get a deadline
      // that names it: a log long poll its wait plus a margin, an inspect
      // a few seconds. Stops and the like keep the link's own timeout.
      auto deadline = method == "run.logs"
                          ? std::chrono::milliseconds(params.value("wait_ms", int64_t{0})) + kReadDeadline
                      : method == "run.inspect" ? kReadDeadline
                                                : std::chrono::milliseconds(0);
      auto answered = [this, record, reply, provider = PeerId(job->provider_id), job_id = JobId(job->job_id)](Result<nlohmann::json> r) {
        if (!r) return reply(r.error());
        if (!record) {
          if (r->is_object() && r->value("ended", false)) seen_ending(provider, job_id);
          return reply(*r);
        }
        asio::post(pool_, [this, reply, view = *r, provider, job_id] {
          (void)store_->update_from_view(view, unix_now_ms());
          auto found = store_->find(view.value("job_id", ""));
          nlohmann::json out = found ? found->to_json() : view;
          bool ended = found && found->finished();
          asio::post(io_, [this, reply, out, ended, provider, job_id] {
            if (ended) job_ended_.fire(provider, job_id);
            reply(out);
          });
        });
      };
      if (deadline.count() > 0) return link_.call_within(*t, method, params, deadline, std::move(answered));
      link_.service().call(t->key, t->addresses, method, params, std::move(answered));
    });
  });
}

void RemoteConsumer::follow(const std::string& id, uint64_t offset, std::chrono::milliseconds wait, Reply reply) {
  if (id.empty()) return reply(Response::error(make_error(ErrorCode::kInvalidArgument, "a job id is required")));
  auto by_rpc = [this, id, offset, wait, reply] {
    forward(id, "run.logs", {{"offset", offset}, {"wait_ms", wait.count()}}, false, reply);
  };
  asio::post(pool_, [this, id, offset, wait, reply, by_rpc] {
    auto job = store_->find(id);
    asio::post(io_, [this, job = std::move(job), offset, wait, reply, by_rpc] {
      if (!job) return reply(Response::error(job.error()));
      auto t = link_.target(job->provider_id);
      if (!t) return by_rpc();  // says what is wrong
      PeerId provider(job->provider_id);
      JobId job_id(job->job_id);
      log_feeds_.poll(
          *t, job->job_id, offset, wait,
          [this, reply, provider, job_id](Result<nlohmann::json> r) {
            if (!r) return reply(Response::error(r.error()));
            if (r->value("ended", false)) seen_ending(provider, job_id);
            reply(Response::json(200, *r));
          },
          by_rpc);
    });
  });
}

void RemoteConsumer::seen_ending(const PeerId& provider, const JobId& job_id) {
  // The log stream says only that the job ended: ask for its view now, so the
  // end and the exit code are recorded as seen while following, before the
  // receipt is fetched and judged against them.
  auto t = link_.target(provider.value());
  if (!t) {
    job_ended_.fire(provider, job_id);
    return;
  }
  link_.service().call(t->key, t->addresses, "run.inspect", {{"job_id", job_id.value()}},
                       [this, provider, job_id](Result<nlohmann::json> r) {
                         if (!r) {
                           job_ended_.fire(provider, job_id);
                           return;
                         }
                         asio::post(pool_, [this, view = *r, provider, job_id] {
                           (void)store_->update_from_view(view, unix_now_ms());
                           asio::post(io_, [this, provider, job_id] {
                             job_ended_.fire(provider, job_id);
                           });
                         });
                       });
}

}  // namespace yonder::jobs::consumer
