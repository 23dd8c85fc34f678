#include "jobs/files/upload_provider.h"

#include <utility>  // before Boost.Asio (GCC 12)

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <algorithm>
#include <atomic>
#include <deque>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "crypto/node_id.h"
#include "crypto/random_id.h"
#include "jobs/provider/remote_provider.h"
#include "os/files.h"
#include "transfer/manifest.h"
#include "transfer/upload_cache.h"

namespace yonder::jobs::files {
namespace asio = boost::asio;

namespace {

constexpr int64_t kUploadProviderMiB = 1 << 20;
constexpr auto kPartTtl = std::chrono::hours(24);
// Read ahead of the disk by at most this much per upload.
constexpr size_t kMaxBacklog = 8 << 20;

}  // namespace

Bytes encode_upload_message(const nlohmann::json& m) {
  std::string text = m.dump();
  Bytes out;
  out.reserve(4 + text.size());
  for (int i = 3; i >= 0; --i) out.push_back(static_cast<uint8_t>(text.size() >> (8 * i)));
  out.insert(out.end(), text.begin(), text.end());
  return out;
}

struct UploadProvider::Session {
  std::string id, peer_id;
  std::shared_ptr<link::Tunnel> tunnel;
  bool done = false;  // event loop: replied (or the stream died)
  // Pool side (one task at a time per session).
  std::shared_ptr<transfer::UploadCache> cache;
  std::unique_ptr<transfer::ManifestReader> reader;
  std::unique_ptr<transfer::Manifest> manifest;
  std::unique_ptr<transfer::UploadPlan> plan;  // after manifest: it points into it
  std::unique_ptr<transfer::UploadReceiver> rx;
  enum class Phase { kManifest, kData, kDone } phase = Phase::kManifest;
  uint64_t wire_in = 0, sent_bytes = 0, sent_files = 0;
  // Bytes read from the stream and not yet written (handed from the event
  // loop to one pool worker at a time). The stream is read on while the
  // backlog is small, so the sender's window stays open while files are
  // written; above kMaxBacklog it pauses until the worker catches up.
  std::mutex backlog_mutex;
  std::deque<Bytes> backlog;
  size_t backlog_bytes = 0;
  bool worker = false;   // a pool task is draining the backlog
  bool paused = false;   // event loop: the stream waits for the backlog to shrink
  std::atomic<bool> failed{false};
  std::string dir;  // the workspace folder once made

  void drop_pool_state() {
    rx.reset();
    plan.reset();
    reader.reset();
  }
};

UploadProvider::UploadProvider(asio::io_context& io, asio::thread_pool& pool, reach::Peers& link,
                               jobs::provider::RemoteProvider& owner, const config::Config& cfg, std::string cache_dir,
                               std::string uploads_dir)
    : io_(io),
      pool_(pool),
      link_(link),
      owner_(owner),
      max_upload_bytes_(static_cast<uint64_t>(std::max<int64_t>(1, cfg.get_int("jobs.max_disk_mib"))) *
                        kUploadProviderMiB),
      cache_cap_bytes_(static_cast<uint64_t>(std::max<int64_t>(0, cfg.get_int("jobs.upload_cache_mib"))) *
                       kUploadProviderMiB),
      cache_dir_(std::move(cache_dir)),
      uploads_dir_(std::move(uploads_dir)) {}

UploadProvider::~UploadProvider() = default;

std::shared_ptr<transfer::UploadCache> UploadProvider::cache_of(const std::string& peer_id) {
  std::lock_guard lock(mutex_);
  auto& c = caches_[peer_id];
  if (!c) c = transfer::UploadCache::open(cache_dir_ + "/" + peer_id);
  return c;
}

void UploadProvider::register_methods() {
  link_.service().add_tunnel_method("run.upload", [this](const PublicKeyBytes& peer, const nlohmann::json&,
                                                         link::TunnelAccept accept) {
    std::string peer_id = NodeId(peer).to_string();
    auto grant = link_.grant_of(peer);
    if (!grant) {
      Error e = make_error(ErrorCode::kPermissionDenied, "this provider no longer accepts requests from this node");
      owner_.record(peer_id, "run.upload", "", {{"refused", e.message()}, {"code", error_code_name(e.code())}});
      (void)accept(std::move(e));
      return;
    }
    owner_.prune_uploads();
    if (auto st = os::make_dirs(uploads_dir_, 0700); !st) {
      (void)accept(st.error());
      return;
    }
    transfer::ArchiveLimits limits;
    limits.max_bytes = grant->disk_bytes > 0 ? std::min<uint64_t>(grant->disk_bytes, max_upload_bytes_) : max_upload_bytes_;
    auto s = std::make_shared<Session>();
    s->id = random_hex_id(8);
    s->peer_id = peer_id;
    s->cache = cache_of(peer_id);
    s->reader = std::make_unique<transfer::ManifestReader>(limits);
    s->tunnel = accept(nlohmann::json{{"upload_id", s->id}});
    if (!s->tunnel) return;
    // The handlers hold the session until the stream is gone.
    link::Tunnel::Handlers h;
    h.data = [this, s](Bytes b) { on_data(s, std::move(b)); };
    h.eof = [s] { s->tunnel.reset(); };  // the consumer read our last message
    h.drained = [] {};
    h.ended = [this, s](const std::string& why) {
      s->tunnel.reset();
      if (s->done) return;
      s->done = true;
      // Parts received so far stay in the store: the next upload resumes.
      owner_.record(s->peer_id, "run.upload", s->id, {{"error", "the upload stream ended: " + why}, {"bytes_in", s->wire_in}});
      release_pool_state(s);
    };
    s->tunnel->start(std::move(h));
  });
}

void UploadProvider::on_data(const std::shared_ptr<Session>& s, Bytes bytes) {
  if (s->done) return;
  s->wire_in += bytes.size();
  bool start_worker = false;
  size_t backlog = 0;
  {
    std::lock_guard lock(s->backlog_mutex);
    s->backlog_bytes += bytes.size();
    s->backlog.push_back(std::move(bytes));
    backlog = s->backlog_bytes;
    start_worker = !std::exchange(s->worker, true);
  }
  if (start_worker) asio::post(pool_, [this, s] { drain(s); });
  if (backlog < kMaxBacklog) {
    if (s->tunnel) s->tunnel->resume();
  } else {
    s->paused = true;
  }
}

// Pool: writes what the backlog holds, in order, until it is empty. One
// worker per session at a time (Session::worker).
void UploadProvider::drain(const std::shared_ptr<Session>& s) {
  while (true) {
    std::deque<Bytes> batch;
    {
      std::lock_guard lock(s->backlog_mutex);
      if (s->failed) {  // the stream ended or failed: nothing more is written
        s->worker = false;
        s->backlog.clear();
        s->backlog_bytes = 0;
        s->drop_pool_state();
        return;
      }
      if (s->backlog.empty()) {
        s->worker = false;
        return;
      }
      batch.swap(s->backlog);
    }
    size_t batch_bytes = 0;
    for (auto& bytes : batch) {
      batch_bytes += bytes.size();
      std::optional<nlohmann::json> message;
      bool last = false;
      Status st = absorb(s, bytes, message, last);
      if (!st) s->failed = true;
      if (!st || message) {
        asio::post(io_, [this, s, st = std::move(st), message = std::move(message), last]() mutable {
          if (!st) return fail(s, st.error());
          if (s->done || !s->tunnel) return;
          if (message) s->tunnel->write(encode_upload_message(*message));
          if (last) {
            s->done = true;
            s->tunnel->close();
            s->tunnel->resume();
          }
        });
      }
      if (!st) break;
    }
    size_t left = 0;
    {
      std::lock_guard lock(s->backlog_mutex);
      s->backlog_bytes -= std::min(s->backlog_bytes, batch_bytes);
      left = s->backlog_bytes;
    }
    if (left < kMaxBacklog) {
      asio::post(io_, [s] {
        if (!s->paused || s->done || !s->tunnel) return;
        s->paused = false;
        s->tunnel->resume();
      });
    }
  }
}

// Pool: one piece of the stream: the manifest (answered with the plan), then
// the files the plan asked for (answered with the summary at the end).
Status UploadProvider::absorb(const std::shared_ptr<Session>& s, const Bytes& bytes, std::optional<nlohmann::json>& message,
                              bool& last) {
  using Phase = Session::Phase;
  switch (s->phase) {
    case Phase::kManifest: {
      YONDER_TRY(s->reader->feed(bytes));
      if (!s->reader->complete()) return ok_status();
      auto m = s->reader->take();
      if (!m) return std::move(m).error();
      s->manifest = std::make_unique<transfer::Manifest>(std::move(*m));
      auto plan = s->cache->plan(*s->manifest);
      if (!plan) return std::move(plan).error();
      s->plan = std::move(*plan);
      auto rx = s->cache->receive(*s->plan);
      if (!rx) return std::move(rx).error();
      s->rx = std::move(*rx);
      s->phase = Phase::kData;
      message = s->plan->to_json();
      return ok_status();
    }
    case Phase::kData: {
      YONDER_TRY(s->rx->write(bytes));
      if (!s->rx->complete()) return ok_status();
      auto got = s->rx->finish();
      if (!got) return std::move(got).error();
      s->sent_files = got->value("received_files", uint64_t{0});
      s->sent_bytes = got->value("received_bytes", uint64_t{0});
      s->dir = uploads_dir_ + "/" + s->id;
      auto made = s->cache->materialize(*s->manifest, s->dir);
      if (!made) {
        std::error_code ec;
        std::filesystem::remove_all(s->dir, ec);
        return std::move(made).error();
      }
      s->phase = Phase::kDone;
      uint64_t files = s->manifest->files;
      message = nlohmann::json{{"upload_id", s->id},          {"files", files},
                               {"bytes", s->manifest->bytes}, {"sent_files", s->sent_files},
                               {"sent_bytes", s->sent_bytes}, {"reused_files", files - s->sent_files}};
      last = true;
      owner_.add_upload(s->id, s->peer_id, s->dir);
      owner_.record(s->peer_id, "run.upload", s->id,
                    {{"files", files}, {"bytes", s->manifest->bytes}, {"sent_files", s->sent_files},
                     {"bytes_in", s->wire_in}});
      s->drop_pool_state();
      if (auto kept = s->cache->trim(cache_cap_bytes_, kPartTtl); !kept) {
        spdlog::warn("upload cache of {}: {}", s->peer_id, kept.error().to_string());
      }
      return ok_status();
    }
    case Phase::kDone:
      return make_error(ErrorCode::kInvalidArgument, "the upload sent bytes after its end");
  }
  return ok_status();
}

void UploadProvider::fail(const std::shared_ptr<Session>& s, const Error& e) {
  if (s->done) return;
  s->done = true;
  owner_.record(s->peer_id, "run.upload", s->id,
                {{"refused", e.message()}, {"code", error_code_name(e.code())}, {"bytes_in", s->wire_in}});
  if (s->tunnel) {
    s->tunnel->write(encode_upload_message({{"error", e.message()}, {"code", error_code_name(e.code())}}));
    s->tunnel->close();
    s->tunnel->resume();
  }
  release_pool_state(s);
}

// Event loop, once the session is over: the pool state goes with the worker
// that holds it, or now on the pool when none runs.
void UploadProvider::release_pool_state(const std::shared_ptr<Session>& s) {
  {
    std::lock_guard lock(s->backlog_mutex);
    s->failed = true;
    if (s->worker) return;  // drain() drops it when it sees `failed`
  }
  asio::post(pool_, [s] {
    std::lock_guard lock(s->backlog_mutex);
    if (!s->worker) s->drop_pool_state();
  });
}

}  // namespace yonder::jobs::files
