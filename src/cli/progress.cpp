#include "cli/progress.h"

#include <sodium.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <thread>

#include "base/bytes.h"
#include "base/terminal_text.h"
#include "crypto/scope.h"
#include "cli/exit_codes.h"
#include "os/unix_http.h"

namespace yonder::cli {
namespace {

constexpr auto kRedraw = std::chrono::milliseconds(200);
constexpr int kBarWidth = 24;

std::string bar(double fraction) {
  int filled = static_cast<int>(fraction * kBarWidth + 0.5);
  filled = std::max(0, std::min(kBarWidth, filled));
  return "[" + std::string(static_cast<size_t>(filled), '#') + std::string(static_cast<size_t>(kBarWidth - filled), '.') + "]";
}

std::string rate(double bytes, double seconds) {
  if (seconds <= 0.2) return "";
  return format_size(static_cast<uint64_t>(bytes / seconds)) + "/s";
}

}  // namespace

std::string new_transfer_id() {
  uint8_t b[8];
  randombytes_buf(b, sizeof b);
  return "cli-" + hex_encode(ByteView(b, sizeof b));
}

std::string describe_transfer(const nlohmann::json& t, double elapsed_s) {
  std::string phase = t.value("phase", "");
  uint64_t files = t.value("files", uint64_t{0}), bytes = t.value("bytes", uint64_t{0});
  if (phase == "waiting") return "waiting for another upload of this folder to the same provider...";
  if (phase == "listing") return "listing files to upload...";
  if (phase == "hashing") {
    uint64_t hashed = t.value("hashed_bytes", uint64_t{0});
    double f = bytes > 0 ? static_cast<double>(hashed) / static_cast<double>(bytes) : 1.0;
    return "checking  " + bar(f) + " " + format_size(hashed) + "/" + format_size(bytes) + " in " + std::to_string(files) + " file(s)";
  }
  if (phase == "planning") return "asking the provider what it already has...";
  if (phase == "retrying") {
    std::string why = t.value("error", "");
    return (why.empty() ? std::string("the link dropped") : terminal_safe(why)) + "; resuming the upload (attempt " +
           std::to_string(t.value("attempt", 0) + 1) + ")...";
  }
  uint64_t need = t.value("need_bytes", uint64_t{0}), sent = t.value("sent_bytes", uint64_t{0});
  double f = need > 0 ? std::min(1.0, static_cast<double>(sent) / static_cast<double>(need)) : 1.0;
  std::string verb = t.value("kind", "") == "download" ? "bringing home " : "uploading ";
  std::string line = verb + bar(f) + " " + std::to_string(static_cast<int>(f * 100)) + "%  " + format_size(sent) + "/" +
                     format_size(need);
  std::string r = rate(static_cast<double>(sent), elapsed_s);
  if (!r.empty()) line += "  " + r;
  uint64_t need_files = t.value("need_files", uint64_t{0});
  if (need_files < files) line += "  (" + std::to_string(files - need_files) + " unchanged file(s) not sent)";
  return line;
}

Result<nlohmann::json> with_transfer_progress(const Context& ctx, const std::string& id,
                                              const std::function<Result<nlohmann::json>()>& call) {
  if (!isatty(STDERR_FILENO)) return call();
  std::mutex m;
  std::condition_variable cv;
  bool stop = false;
  std::thread drawer([&] {
    auto sending_since = std::chrono::steady_clock::time_point{};
    bool drawn = false;
    std::unique_lock lock(m);
    while (!cv.wait_for(lock, kRedraw, [&] { return stop; })) {
      lock.unlock();
      os::HttpRequestOptions opts;
      opts.timeout = std::chrono::seconds(2);
      opts.bearer_token = ctx.api_token;
      auto r = os::unix_http_request(ctx.socket_path(), "GET", "/v1/transfers?id=" + id, "", opts);
      lock.lock();
      if (stop || !r || r->status != 200) continue;
      auto j = nlohmann::json::parse(r->body, nullptr, false);
      if (!j.is_object() || !j.contains("transfers") || !j["transfers"].is_array() || j["transfers"].empty()) continue;
      const auto& t = j["transfers"][0];
      auto now = std::chrono::steady_clock::now();
      std::string phase = t.value("phase", "");
      if ((phase == "sending" || phase == "receiving") && sending_since == std::chrono::steady_clock::time_point{}) sending_since = now;
      double elapsed = sending_since == std::chrono::steady_clock::time_point{}
                           ? 0
                           : std::chrono::duration<double>(now - sending_since).count();
      std::string line = describe_transfer(t, elapsed);
      std::fprintf(stderr, "\r\033[K%s", line.c_str());
      std::fflush(stderr);
      drawn = true;
    }
    if (drawn) {
      std::fprintf(stderr, "\r\033[K");
      std::fflush(stderr);
    }
  });
  auto result = call();
  {
    std::lock_guard lock(m);
    stop = true;
  }
  cv.notify_all();
  drawer.join();
  return result;
}

int cmd_transfers(const Context& ctx) {
  os::HttpRequestOptions opts;
  opts.timeout = std::chrono::seconds(10);
  opts.bearer_token = ctx.api_token;
  auto r = os::unix_http_request(ctx.socket_path(), "GET", "/v1/transfers", "", opts);
  if (!r) return report_daemon_error(ctx, r.error());
  auto j = nlohmann::json::parse(r->body, nullptr, false);
  if (r->status != 200 || !j.is_object() || !j.contains("transfers")) {
    return print_error(make_error(ErrorCode::kInternal, "yonderd answered HTTP " + std::to_string(r->status)), kExitError);
  }
  if (ctx.json) {
    std::printf("%s\n", j.dump(2).c_str());
    return kExitOk;
  }
  if (j["transfers"].empty()) std::printf("no transfers in flight\n");
  for (const auto& t : j["transfers"]) {
    std::printf("%-8s %-16s %s\n  %s\n", t.value("kind", "").c_str(), t.value("peer", "").substr(0, 16).c_str(),
                t.value("dir", "").c_str(), describe_transfer(t, 0).c_str());
  }
  return kExitOk;
}

}  // namespace yonder::cli
