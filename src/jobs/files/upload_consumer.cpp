#include "jobs/files/upload_consumer.h"

#include <utility>  // before Boost.Asio (GCC 12)

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <chrono>
#include <optional>
#include <vector>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "os/files.h"
#include "transfer/manifest.h"
#include "transfer/tree_pack.h"
#include "transfer/upload_cache.h"

namespace yonder::jobs::files {
namespace asio = boost::asio;

namespace {

constexpr size_t kUploadConsumerChunk = 256 * 1024;
constexpr size_t kMaxMessageBytes = 16 << 20;  // the plan of 200k files is well under this
constexpr int kUploadConsumerMaxAttempts = 5;
// How long an upload may wait for the provider without progress before the
// tunnel opens and its plan comes: each time the file list drains onto the
// link the wait starts again (a big list on a slow link is progress). A
// provider that stopped (SIGSTOP, a hung disk) keeps its connection open,
// so without this the upload would wait for as long as the user does.
constexpr std::chrono::seconds kPlanDeadline{30};
constexpr uint64_t kMaxListBytes = 1ull << 40;  // the provider sets the real bound

}  // namespace

struct UploadConsumer::State {
  explicit State(asio::io_context& io) : timer(io), answer_timer(io) {}
  reach::Peers::Target target;
  std::string dir;
  std::shared_ptr<TransferProgress> progress;
  std::function<void(Result<nlohmann::json>)> done;
  transfer::TreeListing listing;
  std::shared_ptr<const transfer::Manifest> manifest;
  std::shared_ptr<const Bytes> manifest_wire;
  asio::steady_timer timer;
  asio::steady_timer answer_timer;  // the provider's plan must come within kPlanDeadline
  bool finished = false;
  // The current attempt (event loop).
  int attempts = 0;
  std::shared_ptr<link::Tunnel> tunnel;
  Bytes inbox;
  int messages = 0;
  std::shared_ptr<transfer::TreePacker> packer;  // used on the pool, one read at a time
  bool reading = false, all_sent = false;
  // The next chunk, read while the one before waits for the provider's
  // credit (blocked), so reading the disk overlaps sending.
  std::optional<Bytes> ready;
  bool blocked = false;
  uint64_t sent_before = 0;  // progress of earlier attempts
  std::string lane;          // its key in lanes_
};

UploadConsumer::UploadConsumer(asio::io_context& io, asio::thread_pool& pool, reach::Peers& link,
                               std::string hash_cache_dir)
    : io_(io), pool_(pool), link_(link), hash_cache_dir_(std::move(hash_cache_dir)) {}

UploadConsumer::~UploadConsumer() = default;

void UploadConsumer::upload(const reach::Peers::Target& target, const std::string& dir,
                            std::shared_ptr<TransferProgress> progress,
                            std::function<void(Result<nlohmann::json>)> done) {
  auto s = std::make_shared<State>(io_);
  s->target = target;
  s->dir = dir;
  s->progress = std::move(progress);
  s->done = std::move(done);
  s->lane = target.node_id + "\n" + dir;
  // A cancel (event loop) ends the upload where it is; nothing is submitted.
  s->progress->on_cancel = [this, weak = std::weak_ptr<State>(s)] {
    if (auto st = weak.lock()) ended(st, make_error(ErrorCode::kFailedPrecondition, "the upload was cancelled"), false);
  };
  bool first = false;
  {
    std::lock_guard lock(lanes_mutex_);
    auto& lane = lanes_[s->lane];
    lane.push_back(s);
    first = lane.size() == 1;
  }
  if (first) return start(s);
  s->progress->phase = TransferProgress::Phase::kWaiting;
}

void UploadConsumer::leave_lane(const std::shared_ptr<State>& s, bool succeeded) {
  std::vector<std::shared_ptr<State>> next;
  {
    std::lock_guard lock(lanes_mutex_);
    auto it = lanes_.find(s->lane);
    if (it == lanes_.end()) return;
    auto& lane = it->second;
    bool was_running = !lane.empty() && lane.front() == s;
    std::erase(lane, s);
    if (lane.empty()) {
      lanes_.erase(it);
    } else if (was_running && succeeded) {
      next.push_back(lane.front());
    } else if (was_running) {
      // It failed (a provider gone, a link down): the store did not get
      // the files, so waiting gains nothing. The rest go at once, each on
      // its own, rather than failing one after another.
      next.assign(lane.begin(), lane.end());
      lanes_.erase(it);
    }
  }
  for (auto& n : next) {
    asio::post(io_, [this, n] {
      if (!n->finished) start(n);
    });
  }
}

void UploadConsumer::start(const std::shared_ptr<State>& s) {
  s->progress->phase = TransferProgress::Phase::kListing;
  asio::post(pool_, [this, s] {
    Status st = [&]() -> Status {
      transfer::ArchiveLimits limits;
      limits.max_bytes = kMaxListBytes;
      auto listing = transfer::list_tree(s->dir, limits);
      if (!listing) return std::move(listing).error();
      s->progress->files = listing->files;
      s->progress->bytes = listing->bytes;
      s->progress->phase = TransferProgress::Phase::kHashing;
      (void)os::make_dirs(hash_cache_dir_, 0700);
      transfer::Sha256 name;
      name.update(as_bytes(s->dir));
      transfer::HashCache cache(hash_cache_dir_ + "/" + transfer::digest_hex(name.final()).substr(0, 32) + ".json");
      auto m = transfer::build_manifest(*listing, &cache, [p = s->progress](uint64_t n) { p->hashed_bytes += n; });
      if (!m) return std::move(m).error();
      if (auto saved = cache.save(); !saved) spdlog::warn("upload: cannot keep file digests: {}", saved.error().to_string());
      s->manifest_wire = std::make_shared<Bytes>(transfer::encode_manifest(*m));
      s->manifest = std::make_shared<transfer::Manifest>(std::move(*m));
      s->listing = std::move(*listing);
      return ok_status();
    }();
    asio::post(io_, [this, s, st = std::move(st)] {
      if (s->finished) return;  // cancelled while hashing
      if (!st) return finish(s, st.error());
      attempt(s);
    });
  });
}

void UploadConsumer::arm_plan_deadline(const std::shared_ptr<State>& s) {
  int attempt_no = s->attempts;
  s->answer_timer.expires_after(kPlanDeadline);
  s->answer_timer.async_wait([this, s, attempt_no](boost::system::error_code ec) {
    if (ec || s->finished || s->messages > 0 || s->attempts != attempt_no) return;
    std::string why = "provider \"" + s->target.name.substr(0, 64) + "\" did not answer the upload's file list within " +
                      std::to_string(kPlanDeadline.count()) + " s (it may be stopped or overloaded)";
    s->progress->error = why;
    ended(s, make_error(ErrorCode::kUnavailable, why), true);
  });
}

void UploadConsumer::attempt(const std::shared_ptr<State>& s) {
  ++s->attempts;
  s->progress->attempt = s->attempts;
  s->progress->phase = TransferProgress::Phase::kPlanning;
  s->inbox.clear();
  s->messages = 0;
  s->all_sent = false;
  s->ready.reset();
  s->blocked = false;
  s->packer.reset();
  s->sent_before = s->progress->sent_bytes.load();
  // The tunnel's opening and the provider's plan must come within the
  // deadline: a stopped provider answers neither.
  int attempt_no = s->attempts;
  arm_plan_deadline(s);
  link_.service().open_tunnel(s->target.key, s->target.addresses, "run.upload", nlohmann::json::object(),
                              [this, s, attempt_no](Result<link::TunnelOpened> r) {
                                if (s->finished || s->attempts != attempt_no || s->progress->phase == TransferProgress::Phase::kRetrying) {
                                  if (r && r->tunnel) r->tunnel->reset("the upload was given up");
                                  return;
                                }
                                if (!r) {
                                  bool retry = r.error().code() == ErrorCode::kUnavailable;
                                  return ended(s, std::move(r).error(), retry);
                                }
                                s->tunnel = std::move(r->tunnel);
                                std::weak_ptr<link::Tunnel> mine = s->tunnel;
                                link::Tunnel::Handlers h;
                                h.data = [this, s, mine](Bytes b) {
                                  if (s->finished || s->tunnel != mine.lock()) return;
                                  s->inbox.insert(s->inbox.end(), b.begin(), b.end());
                                  while (s->inbox.size() >= 4 && !s->finished) {
                                    size_t len = 0;
                                    for (int i = 0; i < 4; ++i) len = (len << 8) | s->inbox[static_cast<size_t>(i)];
                                    if (len > kMaxMessageBytes) {
                                      return ended(s, make_error(ErrorCode::kInternal, "the provider sent an oversized upload message"), false);
                                    }
                                    if (s->inbox.size() < 4 + len) break;
                                    auto m = nlohmann::json::parse(s->inbox.begin() + 4, s->inbox.begin() + 4 + static_cast<long>(len),
                                                                   nullptr, false);
                                    s->inbox.erase(s->inbox.begin(), s->inbox.begin() + 4 + static_cast<long>(len));
                                    on_message(s, m);
                                  }
                                  if (!s->finished && s->tunnel) s->tunnel->resume();
                                };
                                h.eof = [] {};
                                h.drained = [this, s, mine] {
                                  if (s->tunnel != mine.lock()) return;
                                  s->blocked = false;
                                  if (s->messages == 0) arm_plan_deadline(s);  // the list is moving
                                  pump(s);
                                };
                                h.ended = [this, s, mine](const std::string& why) {
                                  if (s->finished || s->tunnel != mine.lock()) return;
                                  ended(s, make_error(ErrorCode::kUnavailable, "the link dropped during the upload: " + why), true);
                                };
                                s->tunnel->start(std::move(h));
                                s->tunnel->write(*s->manifest_wire);
                              });
}

void UploadConsumer::on_message(const std::shared_ptr<State>& s, const nlohmann::json& m) {
  if (!m.is_object()) return ended(s, make_error(ErrorCode::kInternal, "the provider sent a malformed upload message"), false);
  if (m.contains("error")) {
    std::string code = m.value("code", "");
    ErrorCode c = error_code_from_name(code);
    return ended(s, make_error(c, m["error"].is_string() ? m["error"].get<std::string>() : "the provider refused the upload"), false);
  }
  if (++s->messages == 1) {
    s->answer_timer.cancel();
    s->progress->error.clear();
    auto plan = transfer::parse_plan_reply(m, *s->manifest);
    if (!plan) return ended(s, std::move(plan).error(), false);
    transfer::TreeListing need;
    need.root = s->listing.root;
    uint64_t need_bytes = 0;
    size_t i = 0;
    for (const auto& e : s->manifest->entries) {
      if (e.dir) continue;
      if (plan->need[i]) {
        transfer::TreeEntry t{e.path, false, e.mode, e.size};
        auto r = plan->resume.find(i);
        if (r != plan->resume.end()) t.offset = r->second;
        need_bytes += e.size - t.offset;
        need.entries.push_back(std::move(t));
        ++need.files;
      }
      ++i;
    }
    s->progress->need_files = need.files;
    s->progress->need_bytes = need_bytes + s->sent_before;
    s->progress->phase = TransferProgress::Phase::kSending;
    s->packer = std::make_shared<transfer::TreePacker>(std::move(need));
    return pump(s);
  }
  // The final reply: it names the upload the job is submitted with.
  if (!m.contains("upload_id") || !m["upload_id"].is_string() || m["upload_id"].get<std::string>().empty()) {
    return ended(s, make_error(ErrorCode::kInternal, "the provider ended the upload without naming it; run again"), false);
  }
  nlohmann::json out = m;
  out["skipped"] = s->listing.skipped;
  out["links"] = s->listing.links;
  out["special"] = s->listing.special;
  out["attempts"] = s->attempts;
  if (s->tunnel) s->tunnel->close();
  finish(s, std::move(out));
}

// Event loop: writes the chunk read ahead while the tunnel takes it, and
// reads the next one on the pool meanwhile.
void UploadConsumer::pump(const std::shared_ptr<State>& s) {
  if (s->finished || !s->packer || !s->tunnel) return;
  if (s->ready && !s->blocked) {
    Bytes chunk = std::move(*s->ready);
    s->ready.reset();
    if (!s->tunnel->write(chunk)) s->blocked = true;  // drained() comes when it has gone
  }
  if (s->reading || s->all_sent || s->ready) return;
  s->reading = true;
  auto packer = s->packer;
  auto tunnel = s->tunnel;
  asio::post(pool_, [this, s, packer, tunnel] {
    auto chunk = packer->next(kUploadConsumerChunk);
    uint64_t sent = packer->sent_bytes();
    asio::post(io_, [this, s, tunnel, sent, chunk = std::move(chunk)]() mutable {
      s->reading = false;
      if (s->finished || s->tunnel != tunnel) return;
      if (!chunk) {
        tunnel->reset("reading the files to upload failed");
        return ended(s, std::move(chunk).error(), false);
      }
      s->progress->sent_bytes = s->sent_before + sent;
      if (chunk->empty()) {
        s->all_sent = true;
        s->progress->phase = TransferProgress::Phase::kFinishing;
        return;
      }
      s->ready = std::move(*chunk);
      pump(s);
    });
  });
}

void UploadConsumer::ended(const std::shared_ptr<State>& s, Error e, bool retryable) {
  if (s->finished) return;
  if (s->tunnel) {
    auto t = std::move(s->tunnel);
    t->reset(e.message().substr(0, 200));
  }
  if (!retryable || s->attempts >= kUploadConsumerMaxAttempts) {
    if (retryable) {
      e = make_error(e.code(), e.message() + " (gave up after " + std::to_string(s->attempts) +
                                   " attempts; run again: what arrived is kept and not sent twice)");
    }
    return finish(s, std::move(e));
  }
  s->progress->phase = TransferProgress::Phase::kRetrying;
  spdlog::info("upload to {}: {}; retrying", s->target.name, e.message());
  s->timer.expires_after(std::chrono::seconds(1 << (s->attempts - 1)));
  s->timer.async_wait([this, s](boost::system::error_code ec) {
    if (ec || s->finished) return;
    attempt(s);
  });
}

void UploadConsumer::finish(const std::shared_ptr<State>& s, Result<nlohmann::json> r) {
  if (s->finished) return;
  s->finished = true;
  s->progress->phase = r ? TransferProgress::Phase::kDone : TransferProgress::Phase::kFailed;
  s->tunnel.reset();
  s->timer.cancel();
  s->answer_timer.cancel();
  auto done = std::move(s->done);
  // The packer holds an open file: let it go on the pool.
  asio::post(pool_, [s] { s->packer.reset(); });
  leave_lane(s, r.ok());
  done(std::move(r));
}

}  // namespace yonder::jobs::files
