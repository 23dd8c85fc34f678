// What the two sides of `yonder cp` mean, in docker's forms on our
// workspace: a path in the job as a docker user writes it, and whether
// LOCAL is a folder to copy into, a file name to write, or standard output.
#pragma once

#include <string>

#include "base/error.h"

namespace yonder::cli {

// A path in the job's workspace as given after `JOB:` ("results/a",
// "./results/", "/workspace/results", "" or "." or "/workspace" for all of
// it), relative to the workspace: "" for all of it. Any other absolute path
// is refused, naming the workspace; `..` and empty parts are refused.
Result<std::string> workspace_relative(const std::string& in_job);

enum class CpOut {
  kIntoFolder,  // LOCAL is a folder (or not given: "."): the path keeps its place under it
  kToFile,      // LOCAL names a file (new, or one to replace) in a folder that exists
  kToStdout,    // LOCAL is "-": one file's bytes to standard output
};

// What `cp JOB:PATH LOCAL` writes to (reads the local file system).
// kInvalidArgument when LOCAL's folder does not exist or LOCAL is something
// other than a folder or a regular file.
Result<CpOut> cp_out_target(const std::string& local);

}  // namespace yonder::cli
