// The consumer's side of a workspace upload (the `run.upload` tunnel; the
// exchange is described in jobs/files/upload_provider.h).
//
//   1. list the folder (.yonderignore, .gitignore, no .git) and hash every
//      file, taking digests of unchanged files from a local cache
//      ($YONDER_HOME/cache/upload-hashes), so a re-upload reads nothing new;
//   2. send the manifest, receive the plan, send only what it asks for
//      (from the offset it names for a file cut short before);
//   3. when the link drops mid-way, wait and try again (up to five times,
//      1 s doubling): the provider kept what had arrived, so each attempt
//      sends only the rest.
//
// Uploads of the same folder to the same provider run one after another
// (phase "waiting" meanwhile): the later one then finds the earlier one's
// files in the provider's store and sends nothing. An array's tasks all
// upload one input folder, often to one provider at once. When the one
// in front fails, those waiting start at once, each on its own.
//
// Progress (hashing, sending, bytes) is shared with the local API
// (GET /v1/transfers) so `yonder run` can draw a progress bar.
//
// Threading: tunnel events on the event loop; listing, hashing and file
// reads on the pool.
#pragma once

#include <atomic>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "jobs/files/transfers.h"
#include "net/reach/peers.h"

namespace boost::asio {
class io_context;
class thread_pool;
}  // namespace boost::asio

namespace yonder::jobs::files {

class UploadConsumer {
 public:
  UploadConsumer(boost::asio::io_context& io, boost::asio::thread_pool& pool, reach::Peers& link,
                 std::string hash_cache_dir);
  ~UploadConsumer();

  // Uploads `dir` (absolute) to `target`; `done` (event loop) gets the
  // provider's final reply: {"upload_id", "files", "bytes", "sent_files",
  // "sent_bytes", "reused_files", "skipped", "attempts"}.
  void upload(const reach::Peers::Target& target, const std::string& dir, std::shared_ptr<TransferProgress> progress,
              std::function<void(Result<nlohmann::json>)> done);

  struct State;

 private:
  void start(const std::shared_ptr<State>& s);
  void leave_lane(const std::shared_ptr<State>& s, bool succeeded);
  void attempt(const std::shared_ptr<State>& s);
  // (Re)starts the wait for the provider's plan of the current attempt.
  void arm_plan_deadline(const std::shared_ptr<State>& s);
  void on_message(const std::shared_ptr<State>& s, const nlohmann::json& m);
  void pump(const std::shared_ptr<State>& s);
  void ended(const std::shared_ptr<State>& s, Error e, bool retryable);
  void finish(const std::shared_ptr<State>& s, Result<nlohmann::json> r);

  boost::asio::io_context& io_;
  boost::asio::thread_pool& pool_;
  reach::Peers& link_;
  std::string hash_cache_dir_;
  // provider node id + '\n' + folder -> its uploads; the front one runs.
  std::mutex lanes_mutex_;
  std::map<std::string, std::deque<std::shared_ptr<State>>> lanes_;
};

}  // namespace yonder::jobs::files
