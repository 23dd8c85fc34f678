// The provider's side of a workspace upload: the `run.upload` tunnel.
//
// One tunnel carries the whole exchange (so one stream's flow control paces
// it, and a dropped link ends it cleanly):
//
//   consumer -> manifest   what the folder holds, by content (transfer/manifest.h)
//   provider -> message    the plan: which files to send, from which offset
//   consumer -> archive    just those files (transfer/archive.h)
//   provider -> message    {"upload_id", "files", "bytes", "sent_files", "sent_bytes", "reused_files"}
//
// A message is a u32 big-endian length and a JSON object; an error is
// {"error", "code"} and ends the exchange. Files arrive into the peer's own
// content store (transfer/upload_cache.h): a complete file is kept by its
// digest, so the next upload of it sends nothing, and a file cut short stays
// as a part the next plan resumes. The workspace folder is then made from
// the store and held for run.submit (RemoteProvider::add_upload).
//
// The manifest is bounded by the caller's disk scope and jobs.max_disk_mib;
// every upload is audited with the bytes that crossed the link.
//
// Threading: tunnel events on the event loop; decoding, hashing and writing
// on the pool by one worker at a time per upload. The stream is read ahead
// of the disk by at most 8 MiB (then paused until the worker catches up, so
// the mux window paces the sender); reading on meanwhile keeps the sender's
// window open while files are written.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "api/module.h"
#include "config/config.h"
#include "net/reach/peers.h"

namespace boost::asio {
class io_context;
class thread_pool;
}  // namespace boost::asio

namespace yonder::transfer {
class UploadCache;
}

namespace yonder::jobs::provider {
class RemoteProvider;
}

namespace yonder::jobs::files {

class UploadProvider : public api::Module {
 public:
  std::string_view module_name() const override { return "uploads (provider)"; }
  UploadProvider(boost::asio::io_context& io, boost::asio::thread_pool& pool, reach::Peers& link,
                 jobs::provider::RemoteProvider& owner, const config::Config& cfg, std::string cache_dir,
                 std::string uploads_dir);
  ~UploadProvider();
  void register_methods() override;

  struct Session;

 private:
  void on_data(const std::shared_ptr<Session>& s, Bytes bytes);
  void drain(const std::shared_ptr<Session>& s);
  Status absorb(const std::shared_ptr<Session>& s, const Bytes& bytes, std::optional<nlohmann::json>& message, bool& last);
  void release_pool_state(const std::shared_ptr<Session>& s);
  void fail(const std::shared_ptr<Session>& s, const Error& e);
  std::shared_ptr<transfer::UploadCache> cache_of(const std::string& peer_id);

  boost::asio::io_context& io_;
  boost::asio::thread_pool& pool_;
  reach::Peers& link_;
  jobs::provider::RemoteProvider& owner_;
  uint64_t max_upload_bytes_;
  uint64_t cache_cap_bytes_;
  std::string cache_dir_, uploads_dir_;
  std::mutex mutex_;  // guards caches_
  std::map<std::string, std::shared_ptr<transfer::UploadCache>> caches_;
};

// Frames a message of the upload tunnel: u32 big-endian length, JSON.
Bytes encode_upload_message(const nlohmann::json& m);

}  // namespace yonder::jobs::files
