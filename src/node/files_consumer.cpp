#include "node/files_consumer.h"

#include <utility>  // before Boost.Asio (GCC 12)

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <nlohmann/json.hpp>

#include "jobs/consumer/consumer_jobs.h"
#include "transfer/tree_fetch.h"
#include "transfer/workspace_files.h"

namespace yonder::node {
namespace asio = boost::asio;
using api::Reply;
using api::Request;
using api::Response;

namespace {

constexpr size_t kChunk = 256 * 1024;
constexpr uint64_t kMaxPutBytes = 64ull << 30;
constexpr size_t kMaxAnswer = 1 << 20;

}  // namespace

struct FilesConsumer::Put {
  std::string job_id, src, dir;
  std::unique_ptr<transfer::BeneathPacker> packer;  // lives as long as the copy (a read may be in flight)
  std::shared_ptr<link::Tunnel> tunnel;
  std::string answer;  // the provider's JSON line
  Reply reply;
  bool reading = false, sent = false, done = false;
};

FilesConsumer::FilesConsumer(asio::io_context& io, asio::thread_pool& pool, PeerLink& link,
                             std::shared_ptr<jobs::consumer::ConsumerJobStore> store)
    : io_(io), pool_(pool), link_(link), store_(std::move(store)) {}

void FilesConsumer::add_routes(api::Router& router) {
  router.add("POST", "/v1/jobs/put", [this](const Request& req, Reply reply) { put(req, std::move(reply)); });
}

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
  p->reply = std::move(reply);
  asio::post(pool_, [this, p, parent = src.substr(0, slash == 0 ? 1 : slash), name = src.substr(slash + 1)] {
    auto job = [&]() -> Result<jobs::consumer::ConsumerJob> {
      auto found = store_->find(p->job_id);
      if (!found) return std::move(found).error();
      if (!transfer::check_archive_path(name)) {
        return make_error(ErrorCode::kInvalidArgument, p->src + " cannot be copied (its name)");
      }
      auto root = transfer::FolderRoot::open(parent);
      if (!root) return std::move(root).error();
      transfer::ArchiveLimits limits;
      limits.max_bytes = kMaxPutBytes;
      auto selection = transfer::select_beneath(*root, {name}, {}, limits);
      if (!selection) {
        if (selection.error().code() == ErrorCode::kNotFound) {
          return make_error(ErrorCode::kNotFound, p->src + " does not exist (or is not a file or folder)");
        }
        return std::move(selection).error().with_context("reading " + p->src);
      }
      p->packer = std::make_unique<transfer::BeneathPacker>(std::move(*root), std::move(*selection), limits);
      return found;
    }();
    asio::post(io_, [this, p, job = std::move(job)]() mutable {
      if (!job) return fail(p, job.error());
      p->job_id = job->job_id;
      auto t = link_.target(job->provider_id);
      if (!t) {
        return fail(p, make_error(ErrorCode::kFailedPrecondition,
                                  "job " + p->job_id + " runs on a provider this node is no longer paired with"));
      }
      link_.service().open_tunnel(
          t->key, t->addresses, "files.put", {{"job_id", p->job_id}, {"dir", p->dir}},
          [this, p](Result<link::TunnelOpened> r) {
            if (!r) return fail(p, std::move(r).error());
            p->tunnel = std::move(r->tunnel);
            std::shared_ptr<Put> self = p;  // the handlers hold the copy until the stream is gone
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
              self->reply(Response::json(200, a));
            };
            h.drained = [this, self] { pump(self); };
            h.ended = [this, self](const std::string& why) {
              self->tunnel.reset();
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
  if (p->done || p->reading || p->sent) return;
  p->reading = true;
  asio::post(pool_, [this, p] {
    auto chunk = p->packer->next(kChunk);
    asio::post(io_, [this, p, chunk = std::move(chunk)]() mutable {
      p->reading = false;
      if (p->done || !p->tunnel) return;
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

void FilesConsumer::fail(const std::shared_ptr<Put>& p, const Error& e) {
  if (p->done) return;
  p->done = true;
  if (p->tunnel) p->tunnel->reset("the copy failed here");
  p->tunnel.reset();
  p->reply(Response::error(e));
}

}  // namespace yonder::node
