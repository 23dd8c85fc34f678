// The known-answer benchmark: this node, as a consumer, checks a
// provider by running a job whose answer it knows (mesh/core/benchmark.h: a
// seeded matrix product mod a prime, checked against the answer computed
// here) through the ordinary remote-job path (RemoteConsumer::submit; the
// job is in `yonder jobs`, and its end brings the provider-signed receipt,
// countersigned here like any other). The outcome, passed or failed, with
// the time, the rate and the GPU model the provider advertises, is recorded
// as a known_answer verification signed by this node (jobs/metering/verifications.h).
// The receipt plus that signed outcome is the benchmark's result; peers see
// both through mesh.opinions, and a failure costs the provider reputation.
//
// Two checks:
//  - the CPU check (mesh.benchmark_image, the awk program): the answer and
//    a rate, on no GPU (the job asks for none);
//  - the GPU check (mesh.gpu_benchmark_image, the PyTorch program): the
//    same product on one leased GPU of the provider, which must also name
//    the model the provider's advertisement claims. Its outcome, with the
//    model, is what confirms or refutes a GPU claim (mesh/core/gpu_claims.h):
//    details {"gpu": true, "gpu_model", "device"}.
//
// Local route:
//   POST /v1/mesh/verify {"peer", "size"?, "gpu"?}  runs one check on `peer`
//       ("gpu": true the GPU check, false the CPU check, absent: the GPU
//       check when mesh.gpu_benchmark_image is set and the provider
//       advertises GPUs) and answers when it is over: {"outcome",
//       "verification", "job_id", "provider": {"node_id", "name"}}. A job
//       that could not be submitted (no `run` scope, an image the provider
//       refuses) is an error and records nothing; a job that ran and printed
//       a wrong answer or another GPU's name, exited non-zero or ran past
//       mesh.benchmark_timeout_s is a failed check.
//
// When it runs on its own: every mesh.benchmark_interval_s (0: never) with
// jitter (each wait drawn from [0.5, 1.5] x the interval), on one paired
// peer drawn at random; and when a provider joins a group this node owns or
// administers (on_member_joined; same switch). Either picks the check as
// the route does when "gpu" is absent.
//
// Threading: event loop only.
#pragma once

#include <utility>  // before Boost.Asio (GCC 12)

#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <random>
#include <string>

#include <nlohmann/json.hpp>

#include "api/module.h"
#include "api/server.h"
#include "config/config.h"
#include "net/reach/peers.h"

namespace yonder::jobs::consumer {
class RemoteConsumer;
}

namespace yonder::jobs::metering {
class Verifications;
}

namespace yonder::mesh {

class MeshOpinions;

struct BenchmarkSettings {
  std::string image;                  // mesh.benchmark_image
  std::string gpu_image;              // mesh.gpu_benchmark_image; empty: no GPU checks
  uint32_t size = 64;                 // mesh.benchmark_size: n of the n x n product
  std::chrono::seconds interval{0};   // mesh.benchmark_interval_s; 0: no automatic benchmarks
  std::chrono::seconds timeout{600};  // mesh.benchmark_timeout_s: a job past it fails the check
};
Result<BenchmarkSettings> benchmark_settings_from_config(const config::Config& cfg);

class MeshBenchmark : public api::Module {
 public:
  std::string_view module_name() const override { return "mesh benchmark"; }
  MeshBenchmark(boost::asio::io_context& io, reach::Peers& link, jobs::consumer::RemoteConsumer& remote,
                jobs::metering::Verifications& verifications, MeshOpinions& opinions, BenchmarkSettings settings);
  ~MeshBenchmark();
  void add_routes(api::Router& router) override;
  // Starts the periodic benchmarks (no-op when the interval is 0).
  Status start() override;
  // A member joined a group this node owns or administers: benchmark it
  // (when automatic benchmarks are on and it is a paired peer).
  void on_member_joined(const PublicKeyBytes& member);
  enum class Check { kCpu, kGpu, kAuto };
  // Runs one check; `done` gets the route's answer or why it could not run.
  void verify(const reach::Peers::Target& target, uint32_t size, Check check,
              std::function<void(Result<nlohmann::json>)> done);

 private:
  struct Run;
  void follow(std::shared_ptr<Run> run);
  void finish(std::shared_ptr<Run> run, nlohmann::json view);
  void schedule();

  boost::asio::io_context& io_;
  reach::Peers& link_;
  jobs::consumer::RemoteConsumer& remote_;
  jobs::metering::Verifications& verifications_;
  MeshOpinions& opinions_;
  BenchmarkSettings settings_;
  std::mt19937_64 random_;
  std::unique_ptr<boost::asio::steady_timer> timer_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace yonder::mesh
