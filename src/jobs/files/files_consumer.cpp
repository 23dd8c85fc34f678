#include "jobs/files/files_consumer.h"

#include <utility>  // before Boost.Asio (GCC 12)

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "jobs/consumer/consumer_jobs.h"
#include "transfer/tree_fetch.h"
#include "transfer/workspace_files.h"

namespace yonder::jobs::files {
namespace asio = boost::asio;
using api::Reply;
using api::Request;
using api::Response;

namespace {

constexpr size_t kFilesConsumerChunk = 256 * 1024;
constexpr uint64_t kMaxPutBytes = 64ull << 30;
constexpr size_t kMaxAnswer = 1 << 20;
constexpr int kMaxAttempts = 5;

}  // namespace

struct FilesConsumer::Put {
  std::string job_id, provider_id, src, dir;
  std::string parent, name;  // src split: the folder it is read beneath, and its name there
  // The current attempt's reader; a read in flight on the pool holds it too.
  std::shared_ptr<transfer::BeneathPacker> packer;
  std::shared_ptr<link::Tunnel> tunnel;
  std::string answer;  // the provider's JSON line
  Reply reply;
  bool reading = false, sent = false, done = false;
  int attempts = 0;
  std::unique_ptr<asio::steady_timer> retry;
};

FilesConsumer::FilesConsumer(asio::io_context& io, asio::thread_pool& pool, reach::Peers& link,
                             std::shared_ptr<jobs::consumer::ConsumerJobStore> store)
    : io_(io), pool_(pool), link_(link), store_(std::move(store)) {}

void FilesConsumer::add_routes(api::Router& router) {
  router.add("POST", "/v1/jobs/put", [this](const Request& req, Reply reply) { put(req, std::move(reply)); });
}

namespace {

// Pool: a reader of everything `p->src` holds, from the start.
Result<std::shared_ptr<transfer::BeneathPacker>> pack(const std::string& src, const std::string& parent,
                                                      const std::string& name) {
  auto root = transfer::FolderRoot::open(parent);
  if (!root) return std::move(root).error();
  transfer::ArchiveLimits limits;
  limits.max_bytes = kMaxPutBytes;
  auto selection = transfer::select_beneath(*root, {name}, {}, limits);
  if (!selection) {
    if (selection.error().code() == ErrorCode::kNotFound) {
      return make_error(ErrorCode::kNotFound, src + " does not exist (or is not a file or folder)");
    }
    return std::move(selection).error().with_context("reading " + src);
  }
  return std::make_shared<transfer::BeneathPacker>(std::move(*root), std::move(*selection), limits);
}

// A stream ended because its session did (net/link/link_control.cpp names
// the peer: "link to ID closed: why"), not because the provider reset it.
bool link_lost(const std::string& why) { return why.rfind("link to ", 0) == 0; }

}  // namespace

void FilesConsumer::put(const Request& req, Reply reply) {
  auto body = nlohmann::json::parse(req.body, nullptr, false);
  if (!body.is_object() || !body.contains("job_id") || !body["job_id"].is_string() || !body.contains("src") ||
      !body["src"].is_string()) {
    return reply(Response::error(make_error(ErrorCode::kInvalidArgument, "put needs {\"job_id\", \"src\"}")));
  }
  std::string src = body["src"];
  while (src.size() > 1 && src.back() == '/') src.pop_back();
  size_t slash = src.rfind('/');
  if (src.empty() || src[0] != '/' || slash == std::string::npos || slash + 1 == src.size()) {
    return reply(Response::error(make_error(ErrorCode::kInvalidArgument, "\"src\" must be an absolute path below /")));
  }
  auto dir = transfer::normalize_request_path(body.value("dir", std::string()));
  if (!dir) return reply(Response::error(dir.error()));
  auto p = std::make_shared<Put>();
  p->job_id = body["job_id"];
  p->src = src;
  p->dir = *dir;
  p->parent = src.substr(0, slash == 0 ? 1 : slash);
  p->name = src.substr(slash + 1);
  p->reply = std::move(reply);
  asio::post(pool_, [this, p] {
    auto job = [&]() -> Result<jobs::consumer::ConsumerJob> {
      auto found = store_->find(p->job_id);
      if (!found) return std::move(found).error();
      if (!transfer::check_archive_path(p->name)) {
        return make_error(ErrorCode::kInvalidArgument, p->src + " cannot be copied (its name)");
      }
      return found;
    }();
    asio::post(io_, [this, p, job = std::move(job)]() mutable {
      if (!job) return fail(p, job.error());
      p->job_id = job->job_id;
      p->provider_id = job->provider_id;
      attempt(p);
    });
  });
}

// Event loop: one try at the whole copy, from the start (the provider
// renames each file into place whole, so sending one again only replaces it).
void FilesConsumer::attempt(const std::shared_ptr<Put>& p) {
  ++p->attempts;
  p->answer.clear();
  p->sent = false;
  asio::post(pool_, [this, p] {
    auto packer = pack(p->src, p->parent, p->name);
    asio::post(io_, [this, p, packer = std::move(packer)]() mutable {
      if (p->done) return;
      if (!packer) return fail(p, packer.error());
      p->packer = std::move(*packer);
      auto t = link_.target(p->provider_id);
      if (!t) {
        return fail(p, make_error(ErrorCode::kFailedPrecondition,
                                  "job " + p->job_id + " runs on a provider this node is no longer paired with"));
      }
      link_.service().open_tunnel(
          t->key, t->addresses, "files.put", {{"job_id", p->job_id}, {"dir", p->dir}},
          [this, p](Result<link::TunnelOpened> r) {
            if (p->done) {
              if (r && r->tunnel) r->tunnel->reset("the copy was given up");
              return;
            }
            if (!r) {
              if (r.error().code() == ErrorCode::kUnavailable) return dropped(p, r.error().message());
              return fail(p, std::move(r).error());
            }
            p->tunnel = std::move(r->tunnel);
            std::shared_ptr<Put> self = p;  // the handlers hold the copy until the stream is gone
            std::weak_ptr<link::Tunnel> mine = p->tunnel;
            link::Tunnel::Handlers h;
            h.data = [self](Bytes b) {
              if (self->answer.size() + b.size() <= kMaxAnswer) self->answer.append(b.begin(), b.end());
              if (self->tunnel) self->tunnel->resume();
            };
            h.eof = [this, self] {
              if (self->done) return;
              auto a = nlohmann::json::parse(self->answer, nullptr, false);
              if (!a.is_object() || !self->sent) {
                return fail(self, make_error(ErrorCode::kUnavailable, "the provider ended the copy without an answer"));
              }
              self->done = true;
              if (self->tunnel) self->tunnel->close();
              self->tunnel.reset();
              a["job_id"] = self->job_id;
              a["dir"] = self->dir.empty() ? "." : self->dir;
              if (self->attempts > 1) a["attempts"] = self->attempts;
              self->reply(Response::json(200, a));
            };
            h.drained = [this, self] { pump(self); };
            h.ended = [this, self, mine](const std::string& why) {
              if (self->done || self->tunnel != mine.lock()) return;
              self->tunnel.reset();
              if (link_lost(why)) return dropped(self, why);
              fail(self, make_error(ErrorCode::kFailedPrecondition, "the provider refused the copy: " + why));
            };
            p->tunnel->start(std::move(h));
            pump(p);
          });
    });
  });
}

// Event loop: reads the next chunk on the pool and writes it to the tunnel.
void FilesConsumer::pump(const std::shared_ptr<Put>& p) {
  if (p->done || p->reading || p->sent || !p->tunnel || !p->packer) return;
  p->reading = true;
  asio::post(pool_, [this, p, packer = p->packer, tunnel = p->tunnel] {
    auto chunk = packer->next(kFilesConsumerChunk);
    asio::post(io_, [this, p, tunnel, chunk = std::move(chunk)]() mutable {
      p->reading = false;
      if (p->done) return;
      if (p->tunnel != tunnel) return pump(p);  // a read for an attempt that has ended: the current one goes on
      if (!chunk) return fail(p, Error(chunk.error()).with_context("reading " + p->src));
      if (chunk->empty()) {
        p->sent = true;
        p->tunnel->close();  // half-close: the provider answers, then closes its side
        return;
      }
      if (p->tunnel->write(*chunk)) pump(p);  // else drained() asks for the next
    });
  });
}

// The link to the provider dropped (a relay restarting, a network cut):
// the copy starts over once the link is back, 1 s doubling, up to
// kMaxAttempts in all.
void FilesConsumer::dropped(const std::shared_ptr<Put>& p, const std::string& why) {
  if (p->done) return;
  if (p->tunnel) p->tunnel->reset("the copy is sent again");
  p->tunnel.reset();
  p->packer.reset();
  if (p->attempts >= kMaxAttempts) {
    return fail(p, make_error(ErrorCode::kUnavailable,
                              "the link to the provider dropped while copying " + p->src + " into job " + p->job_id +
                                  ", " + std::to_string(p->attempts) + " times (" + why +
                                  "); files that arrived whole are in place, the one cut short was not kept: run "
                                  "the copy again"));
  }
  spdlog::info("copy of {} into job {}: {}; sending it again", p->src, p->job_id, why);
  if (!p->retry) p->retry = std::make_unique<asio::steady_timer>(io_);
  p->retry->expires_after(std::chrono::seconds(1 << (p->attempts - 1)));
  p->retry->async_wait([this, p](boost::system::error_code ec) {
    if (ec || p->done) return;
    attempt(p);
  });
}

void FilesConsumer::fail(const std::shared_ptr<Put>& p, const Error& e) {
  if (p->done) return;
  p->done = true;
  if (p->tunnel) p->tunnel->reset("the copy failed here");
  p->tunnel.reset();
  if (p->retry) p->retry->cancel();
  p->reply(Response::error(e));
}

}  // namespace yonder::jobs::files
