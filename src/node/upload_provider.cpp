#include "node/upload_provider.h"

#include <utility>  // before Boost.Asio (GCC 12)

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sodium.h>
#include <spdlog/spdlog.h>

#include "crypto/node_id.h"
#include "node/remote_provider.h"
#include "os/files.h"
#include "transfer/manifest.h"
#include "transfer/upload_cache.h"

namespace yonder::node {
namespace asio = boost::asio;

namespace {

constexpr int64_t kMiB = 1 << 20;
constexpr auto kPartTtl = std::chrono::hours(24);

std::string random_id() {
  uint8_t b[8];
  randombytes_buf(b, sizeof b);
  return hex_encode(ByteView(b, sizeof b));
}

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
  std::string dir;  // the workspace folder once made

  void drop_pool_state() {
    rx.reset();
    plan.reset();
    reader.reset();
  }
};

UploadProvider::UploadProvider(asio::io_context& io, asio::thread_pool& pool, PeerLink& link, RemoteProvider& owner,
                               const config::Config& cfg, std::string cache_dir, std::string uploads_dir)
    : io_(io),
      pool_(pool),
      link_(link),
      owner_(owner),
      max_upload_bytes_(static_cast<uint64_t>(std::max<int64_t>(1, cfg.get_int("jobs.max_disk_mib"))) * kMiB),
      cache_cap_bytes_(static_cast<uint64_t>(std::max<int64_t>(0, cfg.get_int("jobs.upload_cache_mib"))) * kMiB),
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
    s->id = random_id();
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
      asio::post(pool_, [s] { s->drop_pool_state(); });
    };
    s->tunnel->start(std::move(h));
  });
}

void UploadProvider::on_data(const std::shared_ptr<Session>& s, Bytes bytes) {
  if (s->done) return;
  s->wire_in += bytes.size();
  asio::post(pool_, [this, s, bytes = std::move(bytes)] {
    using Phase = Session::Phase;
    std::optional<nlohmann::json> message;
    bool last = false;
    Status st = [&]() -> Status {
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
    }();
    asio::post(io_, [this, s, st = std::move(st), message = std::move(message), last]() mutable {
      if (!st) return fail(s, st.error());
      if (s->done || !s->tunnel) return;
      if (message) s->tunnel->write(encode_upload_message(*message));
      if (last) {
        s->done = true;
        s->tunnel->close();
      }
      s->tunnel->resume();
    });
  });
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
  asio::post(pool_, [s] { s->drop_pool_state(); });
}

}  // namespace yonder::node
