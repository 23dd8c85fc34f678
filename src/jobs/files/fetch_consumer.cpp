#include "jobs/files/fetch_consumer.h"

#include <utility>  // before Boost.Asio (GCC 12)

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <sys/statvfs.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "crypto/random_id.h"
#include "jobs/consumer/consumer_jobs.h"
#include "transfer/tree_extract.h"
#include "transfer/tree_fetch.h"

namespace yonder::jobs::files {
namespace asio = boost::asio;
using api::Reply;
using api::Request;
using api::Response;

namespace {

constexpr size_t kMaxManifestJson = 200 * 1024;  // under the link's message limit
constexpr size_t kFetchConsumerMaxPaths = 256;
constexpr uint64_t kMaxFetchBytes = 64ull << 30;
constexpr int64_t kFetchConsumerMiB = 1 << 20;

// Bytes the caller may still write under `dir`; unbounded when the file
// system will not say (the writes then fail as they would have).
uint64_t free_bytes(const std::string& dir) {
  struct statvfs v {};
  if (::statvfs(dir.c_str(), &v) != 0) return ~uint64_t{0};
  return static_cast<uint64_t>(v.f_bavail) * static_cast<uint64_t>(v.f_frsize);
}

void remove_tree(const std::string& dir) {
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

// One fetch in flight: the extractor the archive goes into.
struct Fetch {
  std::string job_id, dir, tmp, base;  // base: what "changed" is judged against (default dir)
  std::unique_ptr<transfer::TreeExtractor> x;
  std::shared_ptr<link::Tunnel> tunnel;
  api::Answer reply;
  bool done = false;
  std::string transfer_id;
  std::shared_ptr<TransferProgress> progress;  // once the provider has said how much comes
  transfer::OutputsPolicy policy;  // what may come home (transfer/outputs_policy.h)
  uint64_t links = 0, special = 0;  // what the provider left behind, by its word
  transfer::OutputsBudget budget;   // the settings', lifted by "paths" or "outputs_limit"
  uint64_t free = 0;                // bytes free under `dir` before the fetch
  bool dry_run = false;             // say what would come home; write nothing into `dir`
};

}  // namespace

FetchConsumer::FetchConsumer(asio::io_context& io, asio::thread_pool& pool, reach::Peers& link,
                             std::shared_ptr<jobs::consumer::ConsumerJobStore> store, const config::Config& cfg)
    : io_(io), pool_(pool), link_(link), store_(std::move(store)) {
  budget_.max_files = static_cast<uint64_t>(std::max<int64_t>(0, cfg.get_int("outputs.max_files")));
  budget_.max_bytes = static_cast<uint64_t>(std::max<int64_t>(0, cfg.get_int("outputs.max_mib"))) * kFetchConsumerMiB;
}

void FetchConsumer::add_routes(api::Router& router) {
  router.add("POST", "/v1/jobs/fetch",
             [this](const Request& req, Reply reply) { fetch_into(api::body_json(req), api::answer_with(std::move(reply))); });
}

void FetchConsumer::fetch_into(nlohmann::json body, api::Answer reply) {
  if (!body.is_object() || !body.contains("job_id") || !body["job_id"].is_string() || !body.contains("dir") ||
      !body["dir"].is_string()) {
    return reply(make_error(ErrorCode::kInvalidArgument, "fetch needs {\"job_id\", \"dir\"}"));
  }
  std::string dir = body["dir"];
  if (dir.empty() || dir[0] != '/') {
    return reply(make_error(ErrorCode::kInvalidArgument, "\"dir\" must be an absolute path"));
  }
  nlohmann::json paths = nlohmann::json::array();
  if (body.contains("paths")) {
    if (!body["paths"].is_array() || body["paths"].size() > kFetchConsumerMaxPaths) {
      return reply(make_error(ErrorCode::kInvalidArgument, "\"paths\" must be a list of at most 256"));
    }
    for (const auto& p : body["paths"]) {
      if (!p.is_string()) return reply(make_error(ErrorCode::kInvalidArgument, "\"paths\" must be strings"));
      auto n = transfer::normalize_request_path(p.get<std::string>());
      if (!n) return reply(n.error());
      paths.push_back(n->empty() ? "." : *n);
    }
  }
  auto f = std::make_shared<Fetch>();
  f->budget = budget_;
  // Files asked for by name, or with the user's word, may be more than the
  // budget (the free space still bounds them).
  if (body.contains("outputs_limit")) {
    if (body["outputs_limit"] != "off") {
      return reply(make_error(ErrorCode::kInvalidArgument, "\"outputs_limit\" can only be \"off\""));
    }
    f->budget.lifted = true;
  }
  if (!paths.empty()) f->budget.lifted = true;
  f->job_id = body["job_id"];
  f->dir = dir;
  f->dry_run = body.value("dry_run", false);
  // "base": judge what changed against this folder instead of "dir" (an
  // array task's outputs go to a folder of their own, judged against the
  // task's input folder).
  if (body.contains("base")) {
    if (!body["base"].is_string() || body["base"].get<std::string>().empty() || body["base"].get<std::string>()[0] != '/') {
      return reply(make_error(ErrorCode::kInvalidArgument, "\"base\" must be an absolute path"));
    }
    f->base = body["base"];
  }
  f->reply = std::move(reply);
  if (body.contains("transfer_id") && body["transfer_id"].is_string()) f->transfer_id = body["transfer_id"];
  // Ends the transfer's progress whichever way the fetch ends.
  f->reply = [this, f = f.get(), inner = std::move(f->reply)](Result<nlohmann::json> r) {
    if (f->progress && transfers_ != nullptr) transfers_->end(f->progress);
    f->progress.reset();
    inner(std::move(r));
  };
  asio::post(pool_, [this, f, paths] {
    auto prepared = [&]() -> Result<std::pair<jobs::consumer::ConsumerJob, nlohmann::json>> {
      std::error_code ec;
      if (!std::filesystem::is_directory(f->dir, ec)) {
        return make_error(ErrorCode::kInvalidArgument, f->dir + " is not a folder");
      }
      auto job = store_->find(f->job_id);
      if (!job) return std::move(job).error();
      // One walk of the target serves the policy (which local files the
      // upload sent) and, judged against itself, the "have" manifest.
      transfer::ArchiveLimits unbounded;
      unbounded.max_bytes = ~uint64_t{0};  // which files matters here, not their sizes
      auto target = transfer::list_tree(f->dir, unbounded);
      std::vector<std::string> named;
      for (const auto& p : paths) named.push_back(p == "." ? std::string() : p.get<std::string>());
      f->policy = transfer::outputs_policy_for(target ? &*target : nullptr, f->base.empty() ? f->dir : f->base,
                                               std::move(named));
      // Files with holes come as holes (a provider from before them ignores this).
      nlohmann::json params = {{"job_id", job->job_id}, {"holes", true}};
      if (!paths.empty()) {
        params["paths"] = paths;
      } else {
        auto base = f->base.empty() ? std::move(target) : transfer::list_tree(f->base, unbounded);
        if (base && base->bytes <= kMaxFetchBytes) {  // else too big a folder: fetch it all
          params["have"] = transfer::manifest_to_json(transfer::have_manifest(*base, kMaxManifestJson));
        }
      }
      // Held to what check_outputs_fit will allow, whatever the provider
      // then sends: it may announce less than it sends.
      f->free = free_bytes(f->dir);
      transfer::ArchiveLimits limits;
      limits.holes = true;
      limits.max_bytes = std::min(f->budget.lifted ? kMaxFetchBytes : f->budget.max_bytes, f->free);
      if (!f->budget.lifted) limits.max_files = f->budget.max_files;
      f->tmp = f->dir + "/.yonder-fetch-" + random_hex_id(6);
      auto x = transfer::TreeExtractor::create(f->tmp, limits);
      if (!x) return std::move(x).error().with_context("writing the job's files into " + f->dir);
      f->x = std::move(*x);
      return std::make_pair(std::move(*job), std::move(params));
    }();
    asio::post(io_, [this, f, prepared = std::move(prepared)]() mutable {
      // Ends the fetch once: clean up on the pool, then reply.
      auto fail = [this](const std::shared_ptr<Fetch>& ff, Error e) {
        if (ff->done) return;
        ff->done = true;
        if (ff->tunnel) ff->tunnel->reset("the fetch failed here");
        ff->tunnel.reset();
        asio::post(pool_, [this, ff, e = std::move(e)]() mutable {
          ff->x.reset();
          if (!ff->tmp.empty()) remove_tree(ff->tmp);
          asio::post(io_, [ff, e = std::move(e)] { ff->reply(e); });
        });
      };
      if (!prepared) return fail(f, std::move(prepared).error());
      auto t = link_.target(prepared->first.provider_id);
      if (!t) {
        return fail(f, make_error(ErrorCode::kFailedPrecondition,
                                  "job " + f->job_id + " runs on a provider this node is no longer paired with"));
      }
      link_.service().open_tunnel(
          t->key, t->addresses, "run.fetch", prepared->second,
          [this, f, fail, name = t->name](Result<link::TunnelOpened> r) {
            // A provider that stopped answering is named (the link's
            // request timeout bounds the wait for the head).
            if (!r) return fail(f, Error(std::move(r).error()).with_context("provider \"" + name.substr(0, 64) + "\""));
            f->tunnel = std::move(r->tunnel);
            auto said = [&](const char* key) {  // the provider's word: checked, not trusted
              return r->result.is_object() && r->result.contains(key) && r->result[key].is_number_unsigned()
                         ? r->result[key].get<uint64_t>()
                         : uint64_t{0};
            };
            f->links = said("links");
            f->special = said("special");
            // Before a byte is written: does what it announces fit?
            if (auto fits = transfer::check_outputs_fit(said("files"), said("bytes"), f->free, f->budget); !fits) {
              return fail(f, std::move(fits).error());
            }
            if (transfers_ != nullptr) {
              f->progress = transfers_->begin(f->transfer_id, "download", "", f->dir);
              f->progress->files = f->progress->need_files = said("files");
              f->progress->bytes = f->progress->need_bytes = said("bytes");
              f->progress->phase = TransferProgress::Phase::kReceiving;
            }
            // The handlers hold the fetch until the stream is gone.
            std::shared_ptr<Fetch> self = f;
            link::Tunnel::Handlers h;
            h.data = [self, fail](Bytes b) {
              auto ff = self;
              if (!ff || ff->done) return;
              if (auto st = ff->x->write(b); !st) {
                return fail(ff, std::move(st).error().with_context("writing the job's files into " + ff->dir));
              }
              if (ff->progress) ff->progress->sent_bytes = std::min<uint64_t>(ff->progress->sent_bytes + b.size(), ff->progress->need_bytes);
              if (ff->tunnel) ff->tunnel->resume();
            };
            h.eof = [this, self] {
              auto ff = self;
              if (!ff || ff->done) return;
              ff->done = true;
              if (ff->tunnel) ff->tunnel->close();
              ff->tunnel.reset();
              asio::post(pool_, [this, ff] {
                auto finished = ff->x->finish();
                ff->x.reset();
                Result<transfer::MovedOutputs> moved = finished ? transfer::move_tree_into(ff->tmp, ff->dir, ff->policy, ff->dry_run)
                                                                : Result<transfer::MovedOutputs>(finished.error());
                remove_tree(ff->tmp);
                asio::post(io_, [ff, finished = std::move(finished), moved = std::move(moved)] {
                  if (!moved) return ff->reply(moved.error());
                  nlohmann::json out = {{"files", moved->files},
                                        {"replaced", moved->replaced},
                                        {"bytes", finished->value("bytes", uint64_t{0})},
                                        {"left_out", moved->skipped.total()},
                                        {"links", ff->links},
                                        {"special", ff->special}};
                  if (ff->dry_run) out["dry_run"] = true;
                  std::string why = transfer::describe(moved->skipped);
                  if (!why.empty()) out["left_out_why"] = why;
                  ff->reply(nlohmann::json(out));
                });
              });
            };
            h.drained = [] {};
            h.ended = [self, fail](const std::string& why) {
              fail(self, make_error(ErrorCode::kUnavailable, "the fetch stream ended: " + why));
            };
            f->tunnel->start(std::move(h));
          });
    });
  });
}

}  // namespace yonder::jobs::files
