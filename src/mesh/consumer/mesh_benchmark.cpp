#include "mesh/consumer/mesh_benchmark.h"

#include <utility>  // before Boost.Asio (GCC 12)

#include <spdlog/spdlog.h>
#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include "base/bytes.h"
#include "jobs/consumer/remote_consumer.h"
#include "jobs/metering/verifications.h"
#include "mesh/core/advertisement.h"
#include "mesh/core/benchmark.h"
#include "mesh/consumer/mesh_opinions.h"

namespace yonder::mesh {
namespace asio = boost::asio;
using api::Reply;
using api::Request;
using api::Response;

namespace {

constexpr int64_t kLogWaitMs = 5'000;  // one long-poll of the job's log
constexpr int kMaxLogErrors = 30;      // consecutive failed log reads before giving up (no verdict)
constexpr size_t kMaxOutputBytes = 64 * 1024;
constexpr std::chrono::seconds kRetryAfter{1};

std::string subject_for(const std::string& job_id) {
  std::string s = "bench-";
  for (char c : job_id) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
              c == '-' || c == ':' || c == '/';
    s += ok ? c : '_';
  }
  return s.substr(0, 64);
}

Result<int64_t> non_negative(const config::Config& cfg, const char* key, int64_t max) {
  int64_t v = cfg.get_int(key);
  if (v < 0 || v > max) {
    return make_error(ErrorCode::kInvalidArgument,
                      std::string(key) + " must be between 0 and " + std::to_string(max) + "; fix it in config.toml");
  }
  return v;
}

}  // namespace

Result<BenchmarkSettings> benchmark_settings_from_config(const config::Config& cfg) {
  BenchmarkSettings s;
  s.image = cfg.get("mesh.benchmark_image");
  s.gpu_image = cfg.get("mesh.gpu_benchmark_image");
  auto size = non_negative(cfg, "mesh.benchmark_size", mesh::kMaxBenchmarkSize);
  if (!size) return std::move(size).error();
  if (*size == 0) return make_error(ErrorCode::kInvalidArgument, "mesh.benchmark_size must be at least 1");
  s.size = static_cast<uint32_t>(*size);
  auto interval = non_negative(cfg, "mesh.benchmark_interval_s", 365ll * 24 * 3600);
  if (!interval) return std::move(interval).error();
  s.interval = std::chrono::seconds(*interval);
  auto timeout = non_negative(cfg, "mesh.benchmark_timeout_s", 24ll * 3600);
  if (!timeout) return std::move(timeout).error();
  s.timeout = std::chrono::seconds(std::max<int64_t>(1, *timeout));
  return s;
}

struct MeshBenchmark::Run {
  explicit Run(asio::io_context& io) : timer(io) {}
  reach::Peers::Target target;
  mesh::BenchmarkSpec spec;
  std::string image;
  std::string gpu_model;  // as the provider advertises it ("" when it did not say)
  bool gpu = false;       // the GPU check
  std::string job_id;
  uint64_t offset = 0;
  std::string out;  // stdout, bounded
  int errors = 0;
  std::string failure;  // why the check failed before the output was looked at
  std::chrono::steady_clock::time_point deadline;
  std::function<void(Result<nlohmann::json>)> done;
  asio::steady_timer timer;
};

MeshBenchmark::MeshBenchmark(asio::io_context& io, reach::Peers& link, jobs::consumer::RemoteConsumer& remote,
                             jobs::metering::Verifications& verifications, MeshOpinions& opinions,
                             BenchmarkSettings settings)
    : io_(io),
      link_(link),
      remote_(remote),
      verifications_(verifications),
      opinions_(opinions),
      settings_(std::move(settings)),
      random_(std::random_device{}()) {}

MeshBenchmark::~MeshBenchmark() {
  *alive_ = false;
  if (timer_) timer_->cancel();
}

void MeshBenchmark::add_routes(api::Router& router) {
  router.add("POST", "/v1/mesh/verify", [this](const Request& req, Reply reply) {
    auto b = nlohmann::json::parse(req.body, nullptr, false);
    if (!b.is_object() || !b.contains("peer") || !b["peer"].is_string()) {
      return reply(Response::error(make_error(ErrorCode::kInvalidArgument, "the body needs \"peer\"")));
    }
    uint32_t size = settings_.size;
    if (b.contains("size")) {
      if (!b["size"].is_number_unsigned() || b["size"].get<uint64_t>() == 0 ||
          b["size"].get<uint64_t>() > mesh::kMaxBenchmarkSize) {
        return reply(Response::error(
            make_error(ErrorCode::kInvalidArgument, "\"size\" must be 1.." + std::to_string(mesh::kMaxBenchmarkSize))));
      }
      size = static_cast<uint32_t>(b["size"].get<uint64_t>());
    }
    Check check = Check::kAuto;
    if (b.contains("gpu")) {
      if (!b["gpu"].is_boolean()) {
        return reply(Response::error(make_error(ErrorCode::kInvalidArgument, "\"gpu\" must be true or false")));
      }
      check = b["gpu"].get<bool>() ? Check::kGpu : Check::kCpu;
    }
    auto t = link_.target(b["peer"].get<std::string>());
    if (!t) return reply(Response::error(t.error()));
    verify(*t, size, check,
           [reply](Result<nlohmann::json> r) { reply(r ? Response::json(200, *r) : Response::error(r.error())); });
  });
}

Status MeshBenchmark::start() {
  schedule();
  return ok_status();
}

void MeshBenchmark::schedule() {
  if (settings_.interval.count() == 0) return;
  if (!timer_) timer_ = std::make_unique<asio::steady_timer>(io_);
  std::uniform_real_distribution<double> jitter(0.5, 1.5);
  auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(settings_.interval * jitter(random_));
  timer_->expires_after(wait);
  timer_->async_wait([this, alive = alive_](boost::system::error_code ec) {
    if (ec || !*alive) return;
    auto targets = link_.targets();
    if (!targets.empty()) {
      std::uniform_int_distribution<size_t> pick(0, targets.size() - 1);
      const auto& t = targets[pick(random_)];
      spdlog::info("mesh: periodic known-answer benchmark of {}", t.name);
      verify(t, settings_.size, Check::kAuto, [name = t.name](Result<nlohmann::json> r) {
        if (!r) spdlog::info("mesh: the benchmark of {} did not run: {}", name, r.error().message());
      });
    }
    schedule();
  });
}

void MeshBenchmark::on_member_joined(const PublicKeyBytes& member) {
  if (settings_.interval.count() == 0) return;
  // After the pairing that added it has been answered (the hook runs inside it).
  asio::post(io_, [this, alive = alive_, member] {
    if (!*alive) return;
    for (const auto& t : link_.targets()) {
      if (t.key != member) continue;
      spdlog::info("mesh: {} joined a group we administer: known-answer benchmark", t.name);
      verify(t, settings_.size, Check::kAuto, [name = t.name](Result<nlohmann::json> r) {
        // Typical: the newcomer grants us no `run` (it paired with our link, not we with its).
        if (!r) spdlog::info("mesh: the benchmark of {} did not run: {}", name, r.error().message());
      });
    }
  });
}

void MeshBenchmark::verify(const reach::Peers::Target& target, uint32_t size, Check check,
                           std::function<void(Result<nlohmann::json>)> done) {
  if (check == Check::kGpu && settings_.gpu_image.empty()) {
    return done(make_error(ErrorCode::kFailedPrecondition,
                           "no GPU benchmark image: set mesh.gpu_benchmark_image to an image with Python, PyTorch "
                           "and CUDA that the provider allows (`yonder config set mesh.gpu_benchmark_image IMAGE`)"));
  }
  if (check == Check::kCpu && settings_.image.empty()) {
    return done(make_error(ErrorCode::kFailedPrecondition,
                           "no benchmark image: set mesh.benchmark_image to an image the provider allows"));
  }
  auto run = std::make_shared<Run>(io_);
  run->target = target;
  run->spec.n = size;
  std::uniform_int_distribution<uint32_t> seed(1, 2147483646u);
  run->spec.seed = seed(random_);
  run->done = std::move(done);
  // The GPU model it claims, from its signed advertisement (best effort:
  // a peer that grants `run` but not `mesh` is still checked on the CPU).
  link_.service().call(
      target.key, target.addresses, "mesh.advertisement", nlohmann::json::object(),
      [this, alive = alive_, run, check](Result<nlohmann::json> r) {
        if (!*alive) return;
        if (r && r->is_object() && r->contains("advertisement") && (*r)["advertisement"].is_string()) {
          auto ad = mesh::decode_advertisement((*r)["advertisement"].get_ref<const std::string&>());
          if (ad && ad->provider == run->target.key && mesh::verify_advertisement(*ad).ok() && !ad->gpus.empty()) {
            run->gpu_model = ad->gpus.front().model;
          }
        }
        run->gpu = check == Check::kGpu || (check == Check::kAuto && !settings_.gpu_image.empty() &&
                                            !run->gpu_model.empty());
        if (run->gpu && run->gpu_model.empty()) {
          return run->done(make_error(ErrorCode::kFailedPrecondition,
                                      run->target.name + " advertises no GPU (or grants us no `mesh`, so its "
                                                         "advertisement cannot be read): there is no GPU claim to check"));
        }
        if (!run->gpu && settings_.image.empty()) {
          return run->done(make_error(ErrorCode::kFailedPrecondition,
                                      "no benchmark image: set mesh.benchmark_image to an image the provider allows"));
        }
        run->image = run->gpu ? settings_.gpu_image : settings_.image;
        std::string command = run->gpu ? mesh::gpu_benchmark_command(run->spec) : mesh::benchmark_command(run->spec);
        jobs::protocol::JobRequest job;
        job.image = run->image;
        job.command = {"sh", "-c", command};
        job.gpus = run->gpu ? 1 : 0;
        remote_.submit(run->target, job, "", "", [this, alive, run](Result<nlohmann::json> submitted) {
          if (!*alive) return;
          if (!submitted) {
            return run->done(
                std::move(submitted).error().with_context("submitting the benchmark to " + run->target.name));
          }
          run->job_id = submitted->value("job_id", "");
          run->deadline = std::chrono::steady_clock::now() + settings_.timeout;
          spdlog::info("mesh: known-answer {} benchmark on {}: job {} ({}x{} mod {})", run->gpu ? "GPU" : "CPU",
                       run->target.name, run->job_id, run->spec.n, run->spec.n, mesh::kBenchmarkModulus);
          follow(run);
        });
      });
}

void MeshBenchmark::follow(std::shared_ptr<Run> run) {
  if (std::chrono::steady_clock::now() > run->deadline) {
    run->failure = "ran past mesh.benchmark_timeout_s (" + std::to_string(settings_.timeout.count()) + " s)";
    remote_.call_job(run->job_id, "run.stop", nlohmann::json::object(), true, [](Result<nlohmann::json>) {});
    return finish(run, nlohmann::json::object());
  }
  nlohmann::json params = {{"offset", run->offset}, {"wait_ms", kLogWaitMs}};
  remote_.call_job(run->job_id, "run.logs", params, false, [this, alive = alive_, run](Result<nlohmann::json> r) {
    if (!*alive) return;
    if (!r || !r->is_object()) {
      if (++run->errors > kMaxLogErrors) {
        return run->done(make_error(ErrorCode::kUnavailable, "lost track of benchmark job " + run->job_id + " on " +
                                                                 run->target.name + ": " +
                                                                 (r ? "bad log answers" : r.error().message())));
      }
      run->timer.expires_after(kRetryAfter);
      run->timer.async_wait([this, alive, run](boost::system::error_code ec) {
        if (!ec && *alive) follow(run);
      });
      return;
    }
    run->errors = 0;
    if ((*r).contains("records") && (*r)["records"].is_array()) {
      for (const auto& rec : (*r)["records"]) {
        if (!rec.is_object() || rec.value("stream", "") != "stdout" || !rec.contains("data") ||
            !rec["data"].is_string())
          continue;
        auto data = base64_decode(rec["data"].get_ref<const std::string&>());
        if (!data || run->out.size() >= kMaxOutputBytes) continue;
        run->out.append(reinterpret_cast<const char*>(data->data()),
                        std::min(data->size(), kMaxOutputBytes - run->out.size()));
      }
    }
    if ((*r).contains("next_offset") && (*r)["next_offset"].is_number_unsigned()) {
      run->offset = (*r)["next_offset"].get<uint64_t>();
    }
    if (!r->value("ended", false)) return follow(run);
    // The end: the job's final view (recorded here, which also fetches its receipt).
    remote_.call_job(run->job_id, "run.inspect", nlohmann::json::object(), true,
                     [this, alive, run](Result<nlohmann::json> view) {
                       if (!*alive) return;
                       finish(run, view ? *view : nlohmann::json::object());
                     });
  });
}

void MeshBenchmark::finish(std::shared_ptr<Run> run, nlohmann::json view) {
  uint32_t expected = mesh::benchmark_expected(run->spec);
  auto parsed = mesh::parse_benchmark_output(run->out);
  nlohmann::json exit_code =
      view.is_object() && view.contains("exit_code") ? view["exit_code"] : nlohmann::json(nullptr);
  std::string reason = run->failure;
  if (reason.empty() && !(exit_code.is_number_integer() && exit_code.get<int64_t>() == 0)) {
    reason = "the job did not exit 0 (" + (exit_code.is_null() ? std::string("no exit code") : exit_code.dump()) +
             ", state " + view.value("state", std::string("unknown")) + ")";
  }
  if (reason.empty() && !parsed) {
    auto why = mesh::benchmark_error(run->out);
    reason = why ? "the job could not run the check: " + *why : "the job printed no result line";
  }
  if (reason.empty() && (parsed->n != run->spec.n || parsed->seed != run->spec.seed)) {
    reason = "the job answered another problem (n or seed differ)";
  }
  if (reason.empty() && parsed->checksum != expected) {
    reason = "wrong answer: checksum " + std::to_string(parsed->checksum) + ", expected " + std::to_string(expected);
  }
  // The GPU check must have run on the model the advertisement claims.
  if (reason.empty() && run->gpu && parsed->gpu_name != run->gpu_model) {
    reason = parsed->gpu_name.empty()
                 ? "the job did not name its GPU"
                 : "the job ran on a \"" + parsed->gpu_name + "\", the advertisement claims \"" + run->gpu_model + "\"";
  }
  bool passed = reason.empty();
  nlohmann::json details = {{"job_id", run->job_id}, {"n", run->spec.n},    {"seed", run->spec.seed},
                            {"expected", expected},  {"image", run->image}, {"gpu_model", run->gpu_model},
                            {"exit_code", exit_code}, {"gpu", run->gpu}};
  if (parsed) details["answer"] = parsed->checksum;
  if (run->gpu && parsed && !parsed->gpu_name.empty()) details["device"] = parsed->gpu_name;
  // Seconds as the job timed itself; else the provider's whole-second start and end.
  std::optional<double> seconds = parsed ? parsed->seconds : std::nullopt;
  if (!seconds && view.is_object() && view.contains("started_at") && view.contains("finished_at") &&
      view["started_at"].is_number() && view["finished_at"].is_number()) {
    seconds = std::max(0.0, view["finished_at"].get<double>() - view["started_at"].get<double>());
  }
  if (seconds) {
    details["seconds"] = *seconds;
    double madds = static_cast<double>(run->spec.n) * run->spec.n * run->spec.n;
    details["rate_madds_per_s"] = madds / std::max(*seconds, 0.01);  // /proc/uptime ticks are 10 ms
  }
  if (!passed) details["reason"] = reason;
  auto row = verifications_.record(run->target.node_id, mesh::CheckKind::kKnownAnswer, subject_for(run->job_id),
                                   passed ? mesh::CheckOutcome::kPassed : mesh::CheckOutcome::kFailed, details);
  if (!row) return run->done(std::move(row).error());
  spdlog::info("mesh: known-answer benchmark of {} {}{}", run->target.name, passed ? "passed" : "failed",
               passed ? "" : ": " + reason);
  nlohmann::json answer = {{"outcome", passed ? "passed" : "failed"},
                           {"verification", row->to_json()},
                           {"job_id", run->job_id},
                           {"provider", {{"node_id", run->target.node_id}, {"name", run->target.name}}}};
  // The new outcome counts at once in this node's reputation.
  opinions_.recompute([run, answer] { run->done(answer); });
}

}  // namespace yonder::mesh
