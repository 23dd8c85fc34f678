// The executor contract: what every exec::Executor backend must do,
// written once (executor_contract.cpp) and run against each backend: the
// FakeExecutor (tests/exec/fake/fake_executor_test.cpp, always, in fake
// time), Docker (docker_executor_test.cpp, real dockerd) and Podman
// (podman_executor_test.cpp, a private podman service). A test of the
// provider queue against the fake is only as good as this suite's hold on
// the fake, so a behaviour the queue relies on belongs here, not in one
// backend's file; what only one backend does (hardening, Podman's
// refusals, the fake's scripting) stays in that backend's file.
//
// Each backend supplies a ContractBackend: how to make its executor, task
// specs for the few programs the suite needs, and how time passes (the
// fake moves its manual clock; real engines wait with wait_until). The
// suite is a value-parameterised gtest suite; a backend's test file
// instantiates it:
//
//   INSTANTIATE_TEST_SUITE_P(Docker, ExecutorContract,
//                            ::testing::Values(ContractBackendFactory{"docker", [] { return ...; }}),
//                            contract_backend_name);
//
// Real engines run each test in a container or two; the suite is kept small
// (eight tests, eight containers) because CI runs it per engine and
// again under ASan.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "base/clock.h"
#include "exec/executor.h"

namespace yonder::exec::contract {

// An exec session read to its end: what came on stdout (or the TTY) and on
// stderr; the read's error if one failed first.
struct SessionOutput {
  std::string out, err;
};
inline Result<SessionOutput> read_to_end(ExecSession& session, std::chrono::milliseconds per_read) {
  SessionOutput got;
  while (true) {
    auto chunk = session.read(per_read);
    if (!chunk) return std::move(chunk).error();
    if (!*chunk) return got;
    ((*chunk)->first == LogStream::kStderr ? got.err : got.out) += (*chunk)->second;
  }
}

// One line a task or exec process writes: `text` and a '\n', on `stream`,
// after a pause of `pause_before` (whole seconds: real engines run `sleep`).
struct Line {
  LogStream stream = LogStream::kStdout;
  std::string text;
  std::chrono::seconds pause_before{0};
};

// Why a backend cannot run here; `required` turns the skip into a failure
// (YONDER_REQUIRE_DOCKER=1, YONDER_REQUIRE_PODMAN=1 in CI).
struct Unavailable {
  std::string why;
  bool required = false;
};

class ContractBackend {
 public:
  virtual ~ContractBackend() = default;

  // Called from SetUp; nullopt when the backend is ready.
  virtual std::optional<Unavailable> prepare() = 0;
  virtual Executor& executor() = 0;
  // Another owner's executor on the same engine: it must see none of
  // executor()'s tasks.
  virtual std::unique_ptr<Executor> other_owner() = 0;

  // A task that writes `lines` in order and exits with `exit_code`.
  virtual TaskSpec prints_and_exits(const std::vector<Line>& lines, int exit_code) = 0;
  // A task that runs until it is stopped. With `ignoring_sigterm` it first
  // arranges to ignore SIGTERM, then writes "ready\n": only SIGKILL ends it.
  virtual TaskSpec runs_until_stopped(bool ignoring_sigterm) = 0;
  // A task the kernel kills for memory; nullopt where the backend's test
  // setup cannot cause one.
  virtual std::optional<TaskSpec> runs_out_of_memory() = 0;
  // A task whose start() fails.
  virtual TaskSpec fails_to_start() = 0;
  // An exec command that writes `lines` and exits with `exit_code`.
  virtual ExecSpec exec_prints_and_exits(const std::vector<Line>& lines, int exit_code) = 0;

  // The backend's time: the fake's manual clock, or the system clock.
  virtual TimePoint now() = 0;
  // Lets time pass until `ready()` holds; false if `limit` passes first.
  virtual bool pass_time_until(const std::function<bool()>& ready, std::chrono::seconds limit) = 0;
};

struct ContractBackendFactory {
  std::string name;  // the instance's name in test names: "fake", "docker", "podman"
  std::function<std::unique_ptr<ContractBackend>()> make;
};

inline void PrintTo(const ContractBackendFactory& f, std::ostream* os) { *os << f.name; }

inline std::string contract_backend_name(const ::testing::TestParamInfo<ContractBackendFactory>& info) {
  return info.param.name;
}

// The suite. Its tests are in executor_contract.cpp.
class ExecutorContract : public ::testing::TestWithParam<ContractBackendFactory> {
 protected:
  void SetUp() override;
  void TearDown() override;

  struct Output {
    std::vector<std::pair<LogStream, std::string>> entries;
    std::vector<int64_t> times;
    std::string stream(LogStream s) const;
  };
  // The task's logs (non-follow unless `options` says so), checked to succeed.
  Output read_logs(const TaskHandle& h, LogOptions options = {});

  Executor& ex() { return backend_->executor(); }

  std::unique_ptr<ContractBackend> backend_;
  bool ready_ = false;
};

}  // namespace yonder::exec::contract
