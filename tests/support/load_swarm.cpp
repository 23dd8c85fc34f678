#include "support/load_swarm.h"

#include <utility>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <set>
#include <thread>

#include <spdlog/spdlog.h>

#include "base/bytes.h"
#include "crypto/identity.h"
#include "crypto/share_link.h"
#include "net/link/link_service.h"

namespace yonder::testing {

namespace asio = boost::asio;
using nlohmann::json;

namespace {

// A consumer pins the one provider it paired with and serves nothing.
class ConsumerPolicy final : public link::TrustPolicy {
 public:
  link::KeyVerdict classify(const PublicKeyBytes& key) override {
    return pinned_.count(key) ? link::KeyVerdict::kPinned : link::KeyVerdict::kReject;
  }
  Result<json> redeem(const LinkIdBytes&, const LinkSecret&, const PublicKeyBytes&, const std::string&,
                      const std::string&) override {
    return make_error(ErrorCode::kNotFound, "a load consumer shares nothing");
  }
  Status authorize(const PublicKeyBytes&, const std::string&) override {
    return make_error(ErrorCode::kPermissionDenied, "a load consumer serves no requests");
  }
  void seen(const PublicKeyBytes&) override {}
  void pin(const PublicKeyBytes& key) { pinned_.insert(key); }

 private:
  std::set<PublicKeyBytes> pinned_;
};

struct Session {
  Identity id = Identity::generate().value();
  ConsumerPolicy policy;
  std::unique_ptr<link::LinkService> service;
};

// The stdout text of a run.logs answer's records (stderr is kept apart).
std::string stdout_of(const json& records, std::string* other) {
  std::string out;
  if (!records.is_array()) return out;
  for (const auto& r : records) {
    auto bytes = base64_decode(r.value("data", ""));
    if (!bytes) continue;
    std::string text(bytes->begin(), bytes->end());
    if (r.value("stream", "") == "stdout") {
      out += text;
    } else if (other != nullptr) {
      *other += text;
    }
  }
  return out;
}

}  // namespace

struct Swarm::Impl {
  asio::io_context io;
  asio::executor_work_guard<asio::io_context::executor_type> work{io.get_executor()};
  std::vector<std::unique_ptr<Session>> sessions;
  PublicKeyBytes provider{};
  std::vector<std::string> addresses;
  std::thread thread;

  // Runs `f` on the swarm thread and waits for its result.
  template <typename F>
  auto on_loop(F f) {
    std::promise<decltype(f())> p;
    asio::post(io, [&] { p.set_value(f()); });
    return p.get_future().get();
  }
  void call(int s, const std::string& method, const json& params, std::function<void(Result<json>)> done) {
    sessions[static_cast<size_t>(s)]->service->call(provider, addresses, method, params, std::move(done));
  }
};

Swarm::Swarm(int sessions) : impl_(std::make_unique<Impl>()) {
  // A hundred sessions' info lines (dialled, ended) drown a test's output.
  spdlog::set_level(spdlog::level::warn);
  for (int i = 0; i < sessions; ++i) {
    auto s = std::make_unique<Session>();
    link::LinkConfig config;
    config.name = "load-" + std::to_string(i);
    // Generous: the provider under test is slow to answer by design.
    config.request_timeout = std::chrono::seconds(60);
    config.connect_timeout = std::chrono::seconds(30);
    s->service = std::make_unique<link::LinkService>(impl_->io, s->id, s->policy, config);
    impl_->sessions.push_back(std::move(s));
  }
  impl_->thread = std::thread([this] { impl_->io.run(); });
}

Swarm::~Swarm() {
  asio::post(impl_->io, [this] {
    for (auto& s : impl_->sessions) s->service->stop();
    impl_->work.reset();
  });
  impl_->thread.join();
  // Handlers still queued (timers, closes) hold references into the sessions.
  impl_->io.restart();
  impl_->io.run();
  impl_->sessions.clear();
}

int Swarm::size() const { return static_cast<int>(impl_->sessions.size()); }

Status Swarm::pair_all(const std::string& link_text) {
  auto link = decode_share_link(link_text);
  if (!link) return std::move(link).error();
  impl_->provider = link->provider_key;
  impl_->addresses = link->addresses;
  std::promise<Status> all;
  impl_->on_loop([&] {
    auto left = std::make_shared<int>(size());
    auto first_error = std::make_shared<Status>(ok_status());
    for (auto& s : impl_->sessions) {
      Session* session = s.get();
      session->policy.pin(link->provider_key);
      session->service->pair(*link, [&all, left, first_error](Result<link::PairResult> r) {
        if (!r && first_error->ok()) *first_error = std::move(r).error().with_context("pairing a load session");
        if (--*left == 0) all.set_value(*first_error);
      });
    }
    return 0;
  });
  return all.get_future().get();
}

Result<json> Swarm::call(int session, const std::string& method, const json& params) {
  std::promise<Result<json>> answer;
  asio::post(impl_->io, [&] { impl_->call(session, method, params, [&](Result<json> r) { answer.set_value(std::move(r)); }); });
  return answer.get_future().get();
}

std::vector<LoadJob> Swarm::run_jobs(int count, const std::string& image, LoadClock::time_point deadline) {
  std::vector<LoadJob> jobs(static_cast<size_t>(count));
  std::promise<void> finished;
  auto left = std::make_shared<int>(count);
  Impl* impl = impl_.get();
  // Marks job i accounted for (or not: `error`); the last one ends the run.
  auto settle = [&jobs, left, &finished](size_t i, std::string error) {
    jobs[i].error = std::move(error);
    jobs[i].ended_at = LoadClock::now();
    if (--*left == 0) finished.set_value();
  };
  // follow(i, offset): one long-poll; on "ended", run.inspect.
  auto follow = std::make_shared<std::function<void(size_t, uint64_t)>>();
  *follow = [impl, &jobs, settle, deadline, weak = std::weak_ptr<std::function<void(size_t, uint64_t)>>(follow)](
                size_t i, uint64_t offset) {
    auto self = weak.lock();
    if (!self) return;
    LoadJob& job = jobs[i];
    json params = {{"job_id", job.job_id}, {"offset", offset}, {"wait_ms", 15000}};
    impl->call(job.session, "run.logs", params, [impl, &job, settle, deadline, self, i, offset](Result<json> r) {
      if (!r) {
        // A dropped or timed-out poll is repeated (and counted); the log
        // is on the provider's disk, so nothing is lost by asking again.
        if (++job.log_retries > 20 || LoadClock::now() > deadline) {
          return settle(i, "run.logs: " + r.error().to_string());
        }
        return (*self)(i, offset);
      }
      std::string other;
      job.stdout_text += stdout_of((*r)["records"], &other);
      uint64_t next = r->value("next_offset", offset);
      if (!r->value("ended", false)) {
        if (LoadClock::now() > deadline) return settle(i, "the job had not ended by the deadline");
        return (*self)(i, next);
      }
      impl->call(job.session, "run.inspect", {{"job_id", job.job_id}}, [&job, settle, i](Result<json> v) {
        if (!v) return settle(i, "run.inspect: " + v.error().to_string());
        job.state = v->value("state", "");
        job.exit_code = (*v)["exit_code"].is_number_integer() ? (*v)["exit_code"].get<int>() : -1;
        settle(i, "");
      });
    });
  };
  asio::post(impl->io, [&, follow] {
    for (size_t i = 0; i < jobs.size(); ++i) {
      LoadJob& job = jobs[i];
      job.index = static_cast<int>(i);
      job.session = static_cast<int>(i % impl->sessions.size());
      job.submitted_at = LoadClock::now();
      json request = {{"image", image}, {"command", {"echo", "job-" + std::to_string(i)}}};
      impl->call(job.session, "run.submit", {{"job", request}}, [&job, settle, follow, i](Result<json> r) {
        job.submit_latency = LoadClock::now() - job.submitted_at;
        if (!r) return settle(i, "run.submit: " + r.error().to_string());
        job.job_id = r->value("job_id", "");
        (*follow)(i, 0);
      });
    }
  });
  auto done = finished.get_future();
  // The swarm's own deadline checks end every chain; this is the backstop
  // for a provider that stops answering at all (the link times calls out).
  if (done.wait_until(deadline + std::chrono::seconds(90)) != std::future_status::ready) {
    // Leave `jobs` alive for the callbacks still queued: stop the sessions.
    impl->on_loop([&] {
      for (auto& s : impl->sessions) s->service->stop();
      return 0;
    });
    done.wait();
  }
  // `follow` and `settle` captured references to locals: drain the loop.
  impl->on_loop([] { return 0; });
  return jobs;
}

Result<std::string> Swarm::read_log(const std::string& job_id, std::chrono::milliseconds pause,
                                    std::function<bool()> slow, LoadClock::time_point deadline,
                                    std::function<void(uint64_t)> progress) {
  std::promise<Result<std::string>> done;
  auto text = std::make_shared<std::string>();
  auto timer = std::make_shared<asio::steady_timer>(impl_->io);
  auto step = std::make_shared<std::function<void(uint64_t)>>();
  Impl* impl = impl_.get();
  *step = [impl, &done, text, timer, pause, slow, deadline, progress, job_id,
           weak = std::weak_ptr<std::function<void(uint64_t)>>(step)](uint64_t offset) {
    auto self = weak.lock();
    if (!self) return;
    impl->call(0, "run.logs", {{"job_id", job_id}, {"offset", offset}, {"wait_ms", 5000}},
               [&done, text, timer, pause, slow, deadline, progress, self, offset](Result<json> r) {
                 if (!r) return done.set_value(std::move(r).error().with_context("slow reader"));
                 *text += stdout_of((*r)["records"], nullptr);
                 if (progress) progress(text->size());
                 uint64_t next = r->value("next_offset", offset);
                 if (r->value("ended", false)) return done.set_value(*text);
                 if (LoadClock::now() > deadline) {
                   return done.set_value(make_error(ErrorCode::kUnavailable, "slow reader: past the deadline"));
                 }
                 if (!slow()) return (*self)(next);
                 // Deliberately slow: the point of this reader.
                 timer->expires_after(pause);
                 timer->async_wait([self, next](boost::system::error_code) { (*self)(next); });
               });
  };
  asio::post(impl->io, [step] { (*step)(0); });
  auto result = done.get_future().get();
  impl->on_loop([step] {
    *step = nullptr;
    return 0;
  });
  return result;
}

ProcessMemory read_process_memory(int pid) {
  ProcessMemory m;
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    auto kib = [&line](const char* key, uint64_t& out) {
      if (line.rfind(key, 0) == 0) out = std::strtoull(line.c_str() + std::char_traits<char>::length(key), nullptr, 10);
    };
    kib("VmRSS:", m.rss_kib);
    kib("VmHWM:", m.hwm_kib);
  }
  return m;
}

int count_open_fds(int pid) {
  std::error_code ec;
  int n = 0;
  for (std::filesystem::directory_iterator it("/proc/" + std::to_string(pid) + "/fd", ec), end; !ec && it != end;
       it.increment(ec)) {
    ++n;
  }
  return ec ? -1 : n;
}

double percentile_ms(std::vector<std::chrono::nanoseconds> samples, double p) {
  if (samples.empty()) return 0;
  std::sort(samples.begin(), samples.end());
  size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(samples.size())));
  rank = std::clamp<size_t>(rank, 1, samples.size());
  return std::chrono::duration<double, std::milli>(samples[rank - 1]).count();
}

}  // namespace yonder::testing
