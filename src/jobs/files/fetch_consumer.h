// The consumer's side of bringing files home from a job's workspace:
//
//   POST /v1/jobs/fetch {"job_id", "dir", "paths"?: [...], "base"?: folder, "outputs_limit"?: "off"}
//       -> {"files": [relative paths written], "replaced": [those that replaced a
//           local file], "bytes", "left_out": n, "left_out_why": "...",
//           "links"/"special": what the provider left behind}
//
// Without "paths", fetches what changed: the files of the job's workspace
// that differ from (or are missing in) `dir`, judged by size and SHA-256
// against a manifest of `dir` (or of "base" when given: an array task's
// outputs are judged against its input folder) sent with the request
// (list_tree's rules).
// What may come home is decided by transfer/outputs_policy.h ("paths" are
// the --out names: never .git; ignore files, excluded paths, local files that
// were not uploaded and execute bits only when named).
// The archive goes into a fresh `dir/.yonder-fetch-*` folder first (nothing
// in it can be a link), then each file is moved into place without passing
// through a symbolic link or replacing a folder (transfer/tree_fetch.h), so
// nothing is written outside `dir`. "dir" is read and written by this daemon
// (same user as the CLI, same machine).
// The provider is untrusted about sizes too: files with holes come as holes
// (the fetch asks for 'S' entries, transfer/archive.h), and before anything
// is written the files and bytes it announces are checked against the free
// space of `dir` and the budget of settings outputs.max_files and
// outputs.max_mib (transfer/outputs_policy.h: check_outputs_fit), which
// "paths" or "outputs_limit": "off" lift; the archive is then held to what
// was allowed, whatever the provider sends.
//
// Threading: the route runs on the event loop; hashing, moving and clean-up
// on the pool; archive bytes are written as they arrive on the loop (one
// chunk, then the tunnel is resumed: the mux window paces the provider).
#pragma once

#include <memory>

#include "api/answer.h"
#include "api/module.h"
#include "api/server.h"
#include "config/config.h"
#include "jobs/files/transfers.h"
#include "net/reach/peers.h"
#include "transfer/outputs_policy.h"

namespace boost::asio {
class io_context;
class thread_pool;
}  // namespace boost::asio

namespace yonder::jobs::consumer {
class ConsumerJobStore;
}

namespace yonder::jobs::files {

class FetchConsumer : public api::Module {
 public:
  std::string_view module_name() const override { return "fetches (consumer)"; }
  FetchConsumer(boost::asio::io_context& io, boost::asio::thread_pool& pool, reach::Peers& link,
                std::shared_ptr<jobs::consumer::ConsumerJobStore> store, const config::Config& cfg);
  void add_routes(api::Router& router) override;
  // Brings a job's files home: `body` is what POST /v1/jobs/fetch takes
  // ({"job_id", "dir", "paths"?, "base"?, "outputs_limit"?, "transfer_id"?});
  // `answer` (event loop) gets what the route answers. The route and the
  // mesh's own fetches (mesh/jobs) both call this.
  void fetch_into(nlohmann::json body, api::Answer answer);
  // Where fetches report their progress ("transfer_id" in the request).
  void set_transfers(Transfers* t) { transfers_ = t; }

 private:
  boost::asio::io_context& io_;
  boost::asio::thread_pool& pool_;
  reach::Peers& link_;
  std::shared_ptr<jobs::consumer::ConsumerJobStore> store_;
  Transfers* transfers_ = nullptr;
  transfer::OutputsBudget budget_;  // from the settings
};

}  // namespace yonder::jobs::files
