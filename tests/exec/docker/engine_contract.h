// The executor contract (tests/exec/executor_contract.h) on a Docker-API
// engine: dockerd, or Podman's compatible service. Tasks are the test
// image's busybox shell and its `probe` helper, with small_task's limits;
// time passes in real time, waited for with wait_until.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "exec/docker/docker_executor.h"
#include "exec/docker/small_task.h"
#include "exec/executor_contract.h"
#include "support/docker_env.h"
#include "support/temp_dir.h"
#include "support/wait_until.h"

namespace yonder::exec::docker {

// Whether dockerd answers and has the test image (Podman's tests copy the
// image from it too); `required` when YONDER_REQUIRE_DOCKER=1.
inline std::optional<contract::Unavailable> docker_unavailable() {
  if (!testing::docker_answers()) {
    bool required = testing::docker_required();
    return contract::Unavailable{"no Docker engine answers at " + testing::docker_socket() +
                                     (required ? " but YONDER_REQUIRE_DOCKER=1; run scripts/services.sh"
                                               : " (start one with scripts/services.sh, or set YONDER_REQUIRE_DOCKER=1 "
                                                 "to fail)"),
                                 required};
  }
  if (std::string error = testing::ensure_test_image(); !error.empty()) return contract::Unavailable{error, true};
  return std::nullopt;
}

class EngineContractBackend final : public contract::ContractBackend {
 public:
  struct Engine {
    // Whether the engine can run here: nullopt when it can (it may start it).
    std::function<std::optional<contract::Unavailable>()> prepare;
    std::function<std::string()> socket;  // valid once prepare() said yes
    // A task spec whose start fails after the executor has made its
    // workspace (so the clean-up on failure is exercised); `scratch` is a
    // folder it may write into.
    std::function<TaskSpec(const std::string& scratch)> refused;
  };

  explicit EngineContractBackend(Engine engine) : engine_(std::move(engine)) {}

  std::optional<contract::Unavailable> prepare() override {
    if (auto unavailable = engine_.prepare()) return unavailable;
    executor_ = make("test-" + random_hex(12));
    return std::nullopt;
  }
  Executor& executor() override { return *executor_; }
  std::unique_ptr<Executor> other_owner() override { return make("test-" + random_hex(12)); }

  TaskSpec prints_and_exits(const std::vector<contract::Line>& lines, int exit_code) override {
    return small_task({"sh", "-c", script(lines, exit_code)});
  }
  TaskSpec runs_until_stopped(bool ignoring_sigterm) override {
    // `probe trapterm` ignores SIGTERM, then prints "ready".
    return small_task(ignoring_sigterm ? std::vector<std::string>{"probe", "trapterm"}
                                       : std::vector<std::string>{"sleep", "100"});
  }
  std::optional<TaskSpec> runs_out_of_memory() override {
    TaskSpec s = small_task({"probe", "mem", "200"});  // 200 MiB into 32
    s.limits.memory_bytes = 32 << 20;
    return s;
  }
  TaskSpec fails_to_start() override { return engine_.refused(scratch_.path()); }
  ExecSpec exec_prints_and_exits(const std::vector<contract::Line>& lines, int exit_code) override {
    ExecSpec e;
    e.command = {"sh", "-c", script(lines, exit_code)};
    return e;
  }

  TimePoint now() override { return std::chrono::system_clock::now(); }
  bool pass_time_until(const std::function<bool()>& ready, std::chrono::seconds limit) override {
    return testing::wait_until(ready, limit, std::chrono::milliseconds(50));
  }

 private:
  std::unique_ptr<DockerExecutor> make(const std::string& owner) {
    DockerOptions o;
    o.socket = engine_.socket();
    o.owner = owner;
    o.jobs_dir = dir_.path();
    o.images = *ImagePolicy::parse("yonder-test/*", "never");
    return std::make_unique<DockerExecutor>(std::move(o));
  }
  // A shell script writing `lines` (single-quoted) and exiting.
  static std::string script(const std::vector<contract::Line>& lines, int exit_code) {
    std::string s;
    for (const auto& l : lines) {
      if (l.pause_before.count() > 0) s += "sleep " + std::to_string(l.pause_before.count()) + "; ";
      std::string quoted = "'";
      for (char c : l.text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
      quoted += "'";
      s += "echo " + quoted + (l.stream == LogStream::kStderr ? " >&2; " : "; ");
    }
    return s + "exit " + std::to_string(exit_code);
  }

  Engine engine_;
  testing::TempDir dir_;      // the executor's jobs_dir
  testing::TempDir scratch_;
  std::unique_ptr<DockerExecutor> executor_;
};

}  // namespace yonder::exec::docker
