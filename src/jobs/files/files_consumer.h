// The consumer's side of copying files into a running job
// (`yonder cp LOCAL JOB:PATH`):
//
//   POST /v1/jobs/put {"job_id", "src": absolute local path, "dir"?: folder in the workspace}
//       -> {"job_id", "dir", "files", "bytes", "paths": [written, relative to the workspace]}
//
// `src` (a file or a folder with everything in it; links and special files
// inside are left out) goes into `dir` (default the workspace itself) under
// its own name, over a files.put tunnel (jobs/files/files_provider.h). "src" is
// read by this daemon (same user as the CLI, same machine). When the link
// drops mid-copy (a relay restarting, a network cut) the copy is sent again
// from the start once the link is back (1 s doubling, five attempts in all):
// the provider renames each file into place whole and drops the one cut
// short, so nothing half-written is ever left and a file sent twice is only
// replaced. The reply then carries "attempts".
//
// Threading: the route runs on the event loop; listing and reading on the
// pool, one chunk at a time: the next is read when the tunnel has taken the
// last (the mux window paces the reads).
#pragma once

#include <memory>

#include "api/module.h"
#include "api/server.h"
#include "net/reach/peers.h"

namespace boost::asio {
class io_context;
class thread_pool;
}  // namespace boost::asio

namespace yonder::jobs::consumer {
class ConsumerJobStore;
}

namespace yonder::jobs::files {

class FilesConsumer : public api::Module {
 public:
  std::string_view module_name() const override { return "files into jobs (consumer)"; }
  FilesConsumer(boost::asio::io_context& io, boost::asio::thread_pool& pool, reach::Peers& link,
                std::shared_ptr<jobs::consumer::ConsumerJobStore> store);
  void add_routes(api::Router& router) override;

 private:
  struct Put;
  void put(const api::Request& req, api::Reply reply);
  void attempt(const std::shared_ptr<Put>& p);
  void pump(const std::shared_ptr<Put>& p);
  void dropped(const std::shared_ptr<Put>& p, const std::string& why);
  void fail(const std::shared_ptr<Put>& p, const Error& e);

  boost::asio::io_context& io_;
  boost::asio::thread_pool& pool_;
  reach::Peers& link_;
  std::shared_ptr<jobs::consumer::ConsumerJobStore> store_;
};

}  // namespace yonder::jobs::files
