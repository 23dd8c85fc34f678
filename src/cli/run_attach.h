// `yonder run` while it is attached to its job: prints the job's output as
// it comes, serves the run's -p forwards while the job runs, and turns
// Ctrl-C (SIGINT) and SIGTERM into a stop of the job or a detach
// (docs/cli.md, "Ctrl-C during run"):
//
//   stdin a terminal: the first Ctrl-C asks "stop the job [s], detach [d],
//     or keep watching [Enter]?"; `s` or a second Ctrl-C stops it.
//   otherwise (scripts, CI): SIGINT and SIGTERM stop the job.
//
// A stopped job is followed to its end, so the command never returns while
// the job is in an unknown state. The signal handler only writes to a
// self-pipe; the long poll for output gives up as soon as that pipe is
// readable (os::HttpRequestOptions::interrupt_fd), so the reaction is
// immediate.
//
// Threading: the CLI's one thread.
#pragma once

#include <string>
#include <vector>

#include "cli/context.h"
#include "cli/run_options.h"

namespace yonder::cli {

struct AttachOptions {
  std::vector<PortPair> forwards;  // opened once the job runs, closed when we return
  bool prompt = false;             // the first Ctrl-C asks what to do (stdin is a terminal)
  bool raw = false;                // the job's control sequences pass unfiltered (`run --raw`)
};

struct Attached {
  bool detached = false;  // we stopped watching; the job runs on
  int stopped_by = 0;     // the signal for which we stopped the job (SIGINT, SIGTERM); 0: none
};

// Returns once the job has ended (its output all printed) or we detached.
Result<Attached> attach_to_job(const Context& ctx, const std::string& job, const AttachOptions& options);

}  // namespace yonder::cli
