// The streaming calls of DockerExecutor: logs (follow, resume from a time)
// and exec (with or without a TTY, with resize). Split from
// docker_executor.cpp to keep each file readable.
#include <algorithm>
#include <nlohmann/json.hpp>

#include "exec/docker/docker_executor.h"
#include "exec/docker/docker_json.h"
#include "exec/docker/log_frames.h"
#include "exec/docker/stream_cancel.h"

namespace yonder::exec::docker {
namespace {

class DockerExecSession final : public ExecSession {
 public:
  DockerExecSession(DockerApi api, std::string exec_id, bool tty, std::unique_ptr<os::HttpStream> stream)
      : api_(std::move(api)), exec_id_(std::move(exec_id)), tty_(tty), stream_(std::move(stream)) {}

  Status write(std::string_view bytes) override { return stream_->write_all(bytes); }
  void close_stdin() override { stream_->close_write(); }
  void cancel() override { stream_->cancel(); }

  Result<std::optional<std::pair<LogStream, std::string>>> read(std::chrono::milliseconds timeout) override {
    char buf[16384];
    while (true) {
      if (!ready_.empty()) {
        auto front = std::move(ready_.front());
        ready_.erase(ready_.begin());
        return std::optional<std::pair<LogStream, std::string>>(std::move(front));
      }
      if (ended_) return std::optional<std::pair<LogStream, std::string>>();
      auto n = stream_->read_some(buf, sizeof buf, timeout);
      if (!n) return std::move(n).error();
      if (*n == 0) {
        ended_ = true;
        continue;
      }
      if (tty_) {
        ready_.emplace_back(LogStream::kStdout, std::string(buf, *n));
        continue;
      }
      YONDER_TRY(decoder_.feed(std::string_view(buf, *n), [&](LogStream s, std::string_view payload) {
        ready_.emplace_back(s, std::string(payload));
      }));
    }
  }

  Status resize(int rows, int cols) override {
    if (rows <= 0 || cols <= 0 || rows > 1000 || cols > 1000) {
      return make_error(ErrorCode::kInvalidArgument, "terminal size must be 1..1000 rows and columns");
    }
    auto r = api_.call("POST", "/exec/" + exec_id_ + "/resize?h=" + std::to_string(rows) + "&w=" + std::to_string(cols),
                       "resize the exec terminal");
    if (!r) return std::move(r).error();
    return ok_status();
  }

  Result<int> exit_code() override {
    auto r = api_.call("GET", "/exec/" + exec_id_ + "/json", "inspect the exec process");
    if (!r) return std::move(r).error();
    auto info = parse_exec_inspect(r->body);
    if (!info) return std::move(info).error();
    if (info->running) return make_error(ErrorCode::kFailedPrecondition, "the exec process is still running");
    return info->exit_code;
  }

 private:
  DockerApi api_;
  std::string exec_id_;
  bool tty_;
  std::unique_ptr<os::HttpStream> stream_;
  FrameDecoder decoder_;
  std::vector<std::pair<LogStream, std::string>> ready_;
  bool ended_ = false;
};

}  // namespace

Result<std::unique_ptr<ExecSession>> DockerExecutor::exec(const TaskHandle& handle, const ExecSpec& spec) {
  if (spec.command.empty()) return make_error(ErrorCode::kInvalidArgument, "exec needs a command");
  nlohmann::json create = {{"AttachStdin", true},      {"AttachStdout", true}, {"AttachStderr", true},
                           {"Tty", spec.tty},          {"Cmd", spec.command},  {"User", "65534:65534"},
                           {"WorkingDir", "/workspace"}, {"Privileged", false}};
  auto created = api_.call("POST", "/containers/" + handle.task_id + "/exec", "create an exec process", create.dump());
  if (!created) return std::move(created).error();
  auto id = parse_exec_create(created->body);
  if (!id) return std::move(id).error();
  nlohmann::json start = {{"Detach", false}, {"Tty", spec.tty}};
  auto s = api_.stream("POST", "/exec/" + *id + "/start", "start the exec process", start.dump(), true);
  if (!s) return std::move(s).error();
  auto session = std::make_unique<DockerExecSession>(DockerApi(api_.socket()), *id, spec.tty, std::move(*s));
  if (spec.tty) {
    // The size can only be set once the process exists; a failure here is
    // not fatal (the process may already have finished).
    (void)session->resize(spec.rows, spec.cols);
  }
  return std::unique_ptr<ExecSession>(std::move(session));
}

Status DockerExecutor::logs(const TaskHandle& handle, const LogOptions& options, const LogSink& sink,
                            const CancelSlot& on_cancel) {
  auto token = std::make_shared<StreamCancel>();
  if (on_cancel) on_cancel(token);
  // A container with a TTY logs raw bytes, without the stream frames.
  auto inspected = api_.call("GET", "/containers/" + handle.task_id + "/json", "inspect the job's container");
  if (!inspected) return std::move(inspected).error();
  auto info = parse_inspect(inspected->body);
  if (!info) return std::move(info).error();
  bool stop = false;
  int64_t newest = 0;  // the time of the newest entry delivered

  // One read of the log; entries up to and including `after` (unix ns)
  // are dropped. Ok(true) when it read to the end of the stream.
  auto read_pass = [&](bool follow, int64_t after) -> Result<bool> {
    std::string target = "/containers/" + handle.task_id + "/logs?stdout=1&stderr=1&timestamps=1";
    if (follow) target += "&follow=1";
    // Whole seconds: Docker's filter is coarse here; the rest is dropped below.
    if (after > 0) target += "&since=" + std::to_string(after / 1'000'000'000);
    auto s = api_.stream("GET", target, "read the job's logs");
    if (!s) return std::move(s).error();
    if (!token->attach(s->get())) return make_error(ErrorCode::kUnavailable, "cancelled");
    FrameDecoder decoder;
    TtyLogDecoder tty_decoder;
    auto deliver = [&](LogStream stream, int64_t at, std::string_view text) {
      if (stop || (after > 0 && at != 0 && at <= after)) return;
      if (!sink(stream, at, text)) stop = true;
      newest = std::max(newest, at);
    };
    auto on_tty_entry = [&](int64_t at, std::string_view text) { deliver(LogStream::kStdout, at, text); };
    Result<bool> result = false;
    char buf[65536];
    while (!stop) {
      auto n = (*s)->read_some(buf, sizeof buf);
      if (!n) {
        if (!token->cancelled()) result = std::move(n).error();
        break;
      }
      if (*n == 0) {
        if (info->tty) tty_decoder.finish(on_tty_entry);
        result = !stop;
        break;
      }
      if (info->tty) {
        tty_decoder.feed(std::string_view(buf, *n), on_tty_entry);
        continue;
      }
      Status fed = decoder.feed(std::string_view(buf, *n), [&](LogStream stream, std::string_view payload) {
        auto split = split_timestamp(payload);
        deliver(stream, split ? split->first : 0, split ? split->second : payload);
      });
      if (!fed) {
        result = std::move(fed).error();
        break;
      }
    }
    token->detach();
    return result;
  };

  auto to_end = read_pass(options.follow, options.since_unix_ns);
  if (!to_end) return std::move(to_end).error();
  // Docker's follow stream can end with the container before it has sent
  // the last entry, most often a last line without '\n' (measured on Docker
  // 20.10: `printf last` at the end is missing about half the time). The
  // log file has it by then: read on from the newest entry delivered.
  if (options.follow && *to_end) {
    auto caught_up = read_pass(false, newest > 0 ? newest : options.since_unix_ns);
    if (!caught_up) return std::move(caught_up).error();
  }
  return ok_status();
}

}  // namespace yonder::exec::docker
