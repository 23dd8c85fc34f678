#include "jobs/files/files_provider.h"

#include <utility>  // before Boost.Asio (GCC 12)

#include <spdlog/spdlog.h>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <nlohmann/json.hpp>

#include "crypto/node_id.h"
#include "jobs/provider/provider_jobs.h"
#include "transfer/tree_fetch.h"
#include "transfer/workspace_files.h"

namespace yonder::jobs::files {
namespace asio = boost::asio;

namespace {

constexpr int64_t kFilesProviderMiB = 1 << 20;
constexpr size_t kMaxListedPaths = 1000;  // in the reply (it must stay one link message)

}  // namespace

struct FilesProvider::Put {
  std::string peer_id, job_id, dir;
  std::unique_ptr<transfer::BeneathWriter> writer;  // pool, one task at a time
  std::shared_ptr<link::Tunnel> tunnel;             // event loop
  uint64_t received = 0;                            // archive bytes so far
  bool mounted = false;
  bool done = false, writing = false, eof_pending = false, release_pending = false;
};

FilesProvider::FilesProvider(asio::io_context& io, asio::thread_pool& pool, reach::Peers& link,
                             jobs::provider::ProviderService& provider, jobs::provider::RemoteProvider& audit,
                             WorkspaceMounts& mounts, const config::Config& cfg)
    : io_(io),
      pool_(pool),
      link_(link),
      provider_(provider),
      audit_(audit),
      mounts_(mounts),
      max_bytes_(static_cast<uint64_t>(std::max<int64_t>(1, cfg.get_int("jobs.max_disk_mib"))) * kFilesProviderMiB) {}

void FilesProvider::register_methods() {
  link_.service().add_tunnel_method(
      "files.put", [this](const PublicKeyBytes& peer, const nlohmann::json& params, link::TunnelAccept accept) {
        put(peer, params, std::move(accept));
      });
}

void FilesProvider::put(const PublicKeyBytes& peer, const nlohmann::json& params, link::TunnelAccept accept) {
  std::string peer_id = NodeId(peer).to_string();
  auto refuse = [this, peer_id, accept](const std::string& job, const std::string& dir, Error e) {
    audit_.record(peer_id, "files.put", job,
                  {{"dir", dir}, {"refused", e.message()}, {"code", error_code_name(e.code())}});
    (void)accept(std::move(e));
  };
  auto job_it = params.is_object() ? params.find("job_id") : params.end();
  if (!params.is_object() || job_it == params.end() || !job_it->is_string() ||
      job_it->get_ref<const std::string&>().empty() || job_it->get_ref<const std::string&>().size() > 64) {
    return refuse("", "", make_error(ErrorCode::kInvalidArgument, "files.put needs {\"job_id\", \"dir\"}"));
  }
  std::string job_id = *job_it;
  std::string raw_dir = params.contains("dir") && params["dir"].is_string() ? params["dir"].get<std::string>() : "";
  auto dir = transfer::normalize_request_path(raw_dir);
  if (!dir) return refuse(job_id, raw_dir.substr(0, 256), std::move(dir).error());

  auto p = std::make_shared<Put>();
  p->peer_id = peer_id;
  p->job_id = job_id;
  p->dir = *dir;
  asio::post(pool_, [this, p, accept, refuse]() mutable {
    Status ready = [&]() -> Status {
      auto jobs = provider_.ready();
      if (!jobs) return std::move(jobs).error();
      auto v = (*jobs)->get(JobId(p->job_id));
      if (!v || v->value("peer_id", "") != p->peer_id) {
        return make_error(ErrorCode::kNotFound, "no job " + p->job_id + " of yours on this provider");
      }
      std::string state = v->value("state", "");
      if (state != "running") {
        return make_error(ErrorCode::kFailedPrecondition,
                          "job " + p->job_id + " is " + state + "; files can be copied into a running job only");
      }
      auto ws = mounts_.acquire(JobId(p->job_id));
      if (!ws) return std::move(ws).error();
      p->mounted = true;
      auto root = transfer::FolderRoot::open(*ws);
      if (!root) return std::move(root).error();
      transfer::ArchiveLimits limits;
      limits.max_bytes = max_bytes_;
      auto w = transfer::BeneathWriter::create(std::move(*root), p->dir, limits);
      if (!w) return std::move(w).error().with_context("copying into " + (p->dir.empty() ? "the workspace" : p->dir));
      p->writer = std::move(*w);
      return ok_status();
    }();
    asio::post(io_, [this, p, ready = std::move(ready), accept, refuse]() mutable {
      if (!ready) {
        release(p);
        return refuse(p->job_id, p->dir, ready.error());
      }
      p->tunnel = accept(nlohmann::json{{"job_id", p->job_id}, {"dir", p->dir}});
      if (!p->tunnel) return fail(p, make_error(ErrorCode::kUnavailable, "the caller went away"));
      // The handlers hold the copy until the stream is gone.
      std::shared_ptr<Put> self = p;
      link::Tunnel::Handlers h;
      h.data = [this, self](Bytes b) { write_chunk(self, std::move(b)); };
      h.eof = [this, self] {
        if (self->writing) {
          self->eof_pending = true;
        } else {
          finish(self);
        }
      };
      h.drained = [] {};
      h.ended = [this, self](const std::string& why) {
        self->tunnel.reset();
        fail(self, make_error(ErrorCode::kUnavailable, "the copy stream ended: " + why));
      };
      p->tunnel->start(std::move(h));
    });
  });
}

// Event loop: writes one chunk on the pool, then asks the tunnel for more.
void FilesProvider::write_chunk(const std::shared_ptr<Put>& p, Bytes bytes) {
  if (p->done) return;
  p->writing = true;
  p->received += bytes.size();
  asio::post(pool_, [this, p, bytes = std::move(bytes)] {
    Status st = p->writer->write(bytes);
    asio::post(io_, [this, p, st = std::move(st)] {
      p->writing = false;
      if (p->release_pending) return release(p);
      if (p->done) return;
      if (!st) return fail(p, st.error());
      if (p->eof_pending) return finish(p);
      if (p->tunnel) p->tunnel->resume();
    });
  });
}

// Event loop: the caller sent everything; check the archive, answer, close.
void FilesProvider::finish(const std::shared_ptr<Put>& p) {
  if (p->done) return;
  p->writing = true;  // the writer is on the pool until the answer
  asio::post(pool_, [this, p] {
    auto r = p->writer->finish();
    asio::post(io_, [this, p, r = std::move(r)] {
      p->writing = false;
      if (p->release_pending) return release(p);
      if (p->done) return;
      if (!r) return fail(p, r.error());
      p->done = true;
      nlohmann::json paths = nlohmann::json::array();
      for (const auto& path : (*r)["paths"]) {
        if (paths.size() >= kMaxListedPaths) break;
        paths.push_back(path);
      }
      nlohmann::json answer = {{"files", (*r)["files"]}, {"bytes", (*r)["bytes"]}, {"paths", paths}};
      audit_.record(p->peer_id, "files.put", p->job_id,
                    {{"dir", p->dir}, {"files", (*r)["files"]}, {"bytes_in", (*r)["bytes"]}});
      spdlog::info("files.put: peer {} copied {} file(s) into job {}", p->peer_id, (*r)["files"].dump(), p->job_id);
      if (p->tunnel) {
        std::string line = answer.dump() + "\n";
        p->tunnel->write(ByteView(reinterpret_cast<const uint8_t*>(line.data()), line.size()));
        p->tunnel->close();
      }
      p->tunnel.reset();
      release(p);
    });
  });
}

// Event loop: ends the copy with `e` (reset with the reason), audited.
void FilesProvider::fail(const std::shared_ptr<Put>& p, const Error& e) {
  if (p->done) return;
  p->done = true;
  audit_.record(
      p->peer_id, "files.put", p->job_id,
      {{"dir", p->dir}, {"error", e.message()}, {"code", error_code_name(e.code())}, {"bytes_in", p->received}});
  if (p->tunnel) p->tunnel->reset(e.message());
  p->tunnel.reset();
  release(p);
}

void FilesProvider::release(const std::shared_ptr<Put>& p) {
  // The writer may be in use on the pool: let that task end first.
  p->release_pending = p->writing;
  if (p->writing) return;
  asio::post(pool_, [this, p] {
    p->writer.reset();  // removes a half-written file; closes its fds before the unmount
    if (p->mounted) mounts_.release(JobId(p->job_id));
    p->mounted = false;
  });
}

}  // namespace yonder::jobs::files
