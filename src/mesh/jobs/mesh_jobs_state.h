// The supervisor's state for one mesh job (mesh/jobs/mesh_jobs.h), shared by
// mesh_jobs.cpp (placing, watching, requeueing) and mesh_jobs_quorum.cpp
// (gathering replicas' answers and deciding). Private to those two files.
#pragma once

#include <utility>  // before Boost.Asio (GCC 12)

#include <boost/asio/io_context.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/strand.hpp>
#include <chrono>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "base/loop_timers.h"
#include "base/strong_id.h"
#include "mesh/jobs/mesh_jobs.h"

namespace yonder::mesh {
namespace asio = boost::asio;

struct MeshJobs::Writer {
  explicit Writer(const asio::any_io_executor& blocking) : strand(asio::make_strand(blocking)) {}
  asio::strand<asio::any_io_executor> strand;
};

// One replica of the job (one for a plain mesh job): its attempts run one
// after another, each on one provider. The fields the decisions read and
// write are supervisor::Slot's (mesh/jobs/supervisor_core.h): MeshJobs hands
// them to the core and takes them back after each event.
struct MeshJobs::Slot {
  explicit Slot(int r) : replica(r) {}
  int replica;
  std::unique_ptr<LoopTimers::Timer> timer;  // the next tick or placement retry
  int current = -1;  // index in row.attempts of the attempt in flight; -1: none
  LeaseId lease_id;
  std::set<std::string> failed_on;  // providers that lost or failed it
  bool allow_failed = false;        // nobody else could take it: try them again
  uint32_t placement_failures = 0;
  int inspecting = 0;    // the attempt number an inspect is in flight for
  int fetching = 0;      // the attempt number a checkpoint fetch is in flight for
  bool done = false;     // has its answer, or gave up
  int answer = -1;       // index in row.attempts of the attempt that answered
  bool waiting = false;  // to be placed once a sibling's placement is over
  std::optional<std::chrono::steady_clock::time_point> last_answer;     // of its provider, while running
  std::optional<std::chrono::steady_clock::time_point> place_again_at;  // a placement retry is pending
  std::chrono::steady_clock::time_point last_checkpoint;
};

struct MeshJobs::Live {
  MeshJobRow row;
  std::vector<std::unique_ptr<Slot>> slots;
  size_t checkpoint_files = 0;  // in the last checkpoint synced
  bool stopping = false;
  bool verifying = false;
  bool done = false;

  int replicas() const { return static_cast<int>(slots.size()); }
  MeshAttempt* attempt(const Slot& s) {
    return s.current < 0 ? nullptr : &row.attempts[static_cast<size_t>(s.current)];
  }
};

// One replica's answer while the quorum is being gathered.
struct MeshJobs::Answer {
  int replica = 0;
  MeshAttempt attempt;
  std::string folder;
  std::string out, err;       // the job's stdout and stderr
  std::string hash;           // "" when its outputs could not be had
  std::optional<bool> valid;  // the validator's verdict
  std::string problem;
};

}  // namespace yonder::mesh
