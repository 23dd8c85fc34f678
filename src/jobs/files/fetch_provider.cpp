#include "jobs/files/fetch_provider.h"

#include <utility>  // before Boost.Asio (GCC 12)

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "crypto/node_id.h"
#include "jobs/provider/provider_jobs.h"
#include "transfer/tree_fetch.h"
#include "transfer/workspace_files.h"

namespace yonder::jobs::files {
namespace asio = boost::asio;

namespace {

constexpr size_t kChunk = 256 * 1024;
constexpr size_t kMaxPaths = 256;
constexpr size_t kMaxHave = 20000;
constexpr int64_t kFetchProviderMiB = 1 << 20;

}  // namespace

struct FetchProvider::Pump {
  std::string peer_id, job_id;
  nlohmann::json paths;
  std::unique_ptr<transfer::BeneathPacker> packer;
  bool mounted = false;  // holds the workspace (released by finish)
  std::shared_ptr<link::Tunnel> tunnel;
  uint64_t files = 0, bytes_out = 0;  // sent so far (event loop)
  bool reading = false, done = false;
  bool release_pending = false;  // finish_quietly() waits for the read in flight
};

FetchProvider::FetchProvider(asio::io_context& io, asio::thread_pool& pool, reach::Peers& link,
                             jobs::provider::ProviderService& provider, jobs::provider::RemoteProvider& audit,
                             WorkspaceMounts& mounts, const config::Config& cfg)
    : io_(io),
      pool_(pool),
      link_(link),
      provider_(provider),
      audit_(audit),
      mounts_(mounts),
      max_bytes_(static_cast<uint64_t>(std::max<int64_t>(1, cfg.get_int("jobs.max_disk_mib"))) * kFetchProviderMiB) {}

void FetchProvider::register_methods() {
  link_.service().add_tunnel_method("run.fetch", [this](const PublicKeyBytes& peer, const nlohmann::json& params,
                                                        link::TunnelAccept accept) { fetch(peer, params, std::move(accept)); });
}

void FetchProvider::fetch(const PublicKeyBytes& peer, const nlohmann::json& params, link::TunnelAccept accept) {
  std::string peer_id = NodeId(peer).to_string();
  auto refuse = [this, peer_id, accept](const std::string& job, Error e) {
    audit_.record(peer_id, "run.fetch", job, {{"refused", e.message()}, {"code", error_code_name(e.code())}});
    (void)accept(std::move(e));
  };
  if (!params.is_object() || !params.contains("job_id") || !params["job_id"].is_string() ||
      params["job_id"].get_ref<const std::string&>().empty() || params["job_id"].get_ref<const std::string&>().size() > 64) {
    return refuse("", make_error(ErrorCode::kInvalidArgument, "run.fetch needs {\"job_id\"}"));
  }
  std::string job_id = params["job_id"];
  std::vector<std::string> paths;
  if (params.contains("paths")) {
    if (!params["paths"].is_array() || params["paths"].size() > kMaxPaths) {
      return refuse(job_id, make_error(ErrorCode::kInvalidArgument, "'paths' must be a list of at most " +
                                                                        std::to_string(kMaxPaths) + " paths"));
    }
    for (const auto& p : params["paths"]) {
      if (!p.is_string()) return refuse(job_id, make_error(ErrorCode::kInvalidArgument, "'paths' must be strings"));
      auto n = transfer::normalize_request_path(p.get<std::string>());
      if (!n) return refuse(job_id, std::move(n).error());
      if (n->empty()) {
        paths.clear();  // "." asks for everything
        break;
      }
      paths.push_back(*n);
    }
  }
  auto have = transfer::manifest_from_json(params.value("have", nlohmann::json()), kMaxHave);
  bool holes = params.contains("holes") && params["holes"].is_boolean() && params["holes"].get<bool>();
  if (!have) return refuse(job_id, std::move(have).error());

  auto p = std::make_shared<Pump>();
  p->peer_id = peer_id;
  p->job_id = job_id;
  p->paths = paths;
  asio::post(pool_, [this, p, paths, holes, have = std::move(*have), accept, refuse]() mutable {
    auto listing = [&]() -> Result<transfer::WorkspaceSelection> {
      auto jobs = provider_.ready();
      if (!jobs) return std::move(jobs).error();
      auto v = (*jobs)->get(JobId(p->job_id));
      if (!v || v->value("peer_id", "") != p->peer_id) {
        return make_error(ErrorCode::kNotFound, "no job " + p->job_id + " of yours on this provider");
      }
      std::string state = v->value("state", "");
      if (state != "running" && state != "exited" && state != "stopped" && state != "failed") {
        return make_error(ErrorCode::kFailedPrecondition, "job " + p->job_id + " is " + state +
                                                              "; its files can be copied once it runs");
      }
      auto dir = mounts_.acquire(JobId(p->job_id));
      if (!dir) return std::move(dir).error();
      p->mounted = true;
      transfer::ArchiveLimits limits;
      limits.max_bytes = max_bytes_;
      limits.holes = holes;
      auto root = transfer::FolderRoot::open(*dir);
      if (!root) return std::move(root).error();
      auto l = transfer::select_beneath(*root, paths, have, limits);
      if (l) p->packer = std::make_unique<transfer::BeneathPacker>(std::move(*root), *l, limits);
      return l;
    }();
    asio::post(io_, [this, p, listing = std::move(listing), accept, refuse]() mutable {
      if (!listing) {
        finish_quietly(p);
        return refuse(p->job_id, std::move(listing).error());
      }
      nlohmann::json head = {{"files", listing->files}, {"bytes", listing->bytes}, {"skipped", listing->skipped},
                             {"links", listing->links}, {"special", listing->special}};
      p->tunnel = accept(std::move(head));
      if (!p->tunnel) return finish(p, make_error(ErrorCode::kUnavailable, "the caller went away"));
      // The handlers hold the pump (the tunnel's state is its only owner
      // between chunks); finish() drops our tunnel reference, and the link
      // drops the handlers when the stream is gone.
      std::shared_ptr<Pump> self = p;
      link::Tunnel::Handlers h;
      h.data = [self](Bytes) {
        if (self->tunnel) self->tunnel->resume();  // the caller sends nothing; drop it
      };
      // The caller half-closes once it has read everything: only then may
      // our end go (dropping it earlier resets the stream and can lose the
      // archive's tail).
      h.eof = [self] { self->tunnel.reset(); };
      h.drained = [this, self] {
        pump(self);
      };
      h.ended = [this, self](const std::string& why) {
        finish(self, make_error(ErrorCode::kUnavailable, "the fetch stream ended: " + why));
      };
      p->tunnel->start(std::move(h));
      pump(p);
    });
  });
}

// Event loop: reads the next chunk on the pool and writes it to the tunnel.
void FetchProvider::pump(const std::shared_ptr<Pump>& p) {
  if (p->done || p->reading) return;
  p->reading = true;
  asio::post(pool_, [this, p] {
    auto chunk = p->packer->next(kChunk);
    uint64_t files = p->packer->sent_files(), bytes = p->packer->sent_bytes();
    asio::post(io_, [this, p, chunk = std::move(chunk), files, bytes]() mutable {
      p->reading = false;
      p->files = files;
      p->bytes_out = bytes;
      if (p->release_pending) return finish_quietly(p);
      if (p->done || !p->tunnel) return;
      if (!chunk) {
        p->tunnel->reset("reading the job's files failed: " + chunk.error().message());
        return finish(p, chunk.error());
      }
      if (chunk->empty()) {
        p->tunnel->close();
        return finish(p, ok_status());
      }
      if (p->tunnel->write(*chunk)) pump(p);  // else drained() asks for the next
    });
  });
}

void FetchProvider::finish(const std::shared_ptr<Pump>& p, const Status& result) {
  if (p->done) return;
  p->done = true;
  nlohmann::json detail = {{"paths", p->paths}, {"files", p->files}, {"bytes_out", p->bytes_out}};
  if (!result) detail["error"] = result.error().message();
  audit_.record(p->peer_id, "run.fetch", p->job_id, std::move(detail));
  if (result) {
    // What the consumer wanted came home: an ended job's workspace may now
    // go before its retention when ended workspaces are over their cap.
    asio::post(pool_, [this, job_id = p->job_id] {
      if (auto jobs = provider_.ready()) (*jobs)->outputs_fetched(JobId(job_id));
    });
  }
  if (!result) p->tunnel.reset();  // on success it stays until the caller's eof (or the link's end)
  finish_quietly(p);
}

void FetchProvider::finish_quietly(const std::shared_ptr<Pump>& p) {
  // The packer may be in use on the pool: let that read end first.
  p->release_pending = p->reading;
  if (p->reading) return;
  asio::post(pool_, [this, p] {
    p->packer.reset();  // closes the files it holds before the unmount
    if (p->mounted) mounts_.release(JobId(p->job_id));
    p->mounted = false;
  });
}

}  // namespace yonder::jobs::files
