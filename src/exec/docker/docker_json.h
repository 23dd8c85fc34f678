// Decoders for the JSON the Docker Engine API (v1.41) sends back. Docker's
// replies are untrusted input: each decoder takes the raw body, refuses
// bodies over a bound, never throws, checks every type it reads and ignores
// fields it does not know. All of them are exercised by
// fuzz/docker_json_fuzz.cpp.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "exec/executor.h"

namespace yonder::exec::docker {

constexpr size_t kMaxJsonBody = 4 << 20;

struct ContainerInfo {
  std::string id;
  std::string status;        // "created", "running", "exited", "dead", ...
  bool running = false;
  int pid = 0;
  int exit_code = 0;
  bool oom_killed = false;
  std::string error;
  int64_t started_at_ns = 0;
  int64_t finished_at_ns = 0;
  std::map<std::string, std::string> labels;
  bool tty = false;  // Config.Tty: logs and attach are raw bytes, not frames
  // HostConfig.Runtime: the OCI runtime the engine will run it with. Podman
  // 4.3 says "oci" whatever was asked for, which is how a dropped runtime
  // request shows.
  std::string runtime;
};

struct WaitResult {
  int status_code = -1;
  std::string error;
};

struct EngineVersion {
  std::string version;
  std::string api_version;
  bool podman = false;
};

struct EngineInfo {
  std::vector<std::string> runtimes;
  std::string default_runtime;
  int cgroup_version = 0;
};

struct ListedContainer {
  std::string id;
  std::string state;
  std::map<std::string, std::string> labels;
};

struct ExecInfo {
  bool running = false;
  int exit_code = -1;
};

struct ImageInfo {
  std::string id;                         // "sha256:..." (config digest)
  std::vector<std::string> repo_digests;  // "repo@sha256:..."
};

// {"message": "..."} of an error reply; the raw text (cut) when not JSON.
std::string parse_error_message(std::string_view body);
Result<std::string> parse_create_response(std::string_view body);  // the new container's Id
Result<ContainerInfo> parse_inspect(std::string_view body);
Result<WaitResult> parse_wait(std::string_view body);
Result<EngineVersion> parse_version(std::string_view body);
Result<EngineInfo> parse_info(std::string_view body);
Result<std::vector<ListedContainer>> parse_container_list(std::string_view body);
Result<TaskStats> parse_stats(std::string_view body);
Result<std::string> parse_exec_create(std::string_view body);  // the exec Id
Result<ExecInfo> parse_exec_inspect(std::string_view body);
Result<ImageInfo> parse_image_inspect(std::string_view body);
// One line of the progress stream of POST /images/create: the error it
// reports, or "" (progress lines and unparseable lines give "").
std::string parse_pull_progress_error(std::string_view line);

}  // namespace yonder::exec::docker
