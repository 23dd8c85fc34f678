#include "cli/cp_paths.h"

#include <sys/stat.h>

#include <filesystem>

#include "transfer/tree_fetch.h"

namespace yonder::cli {

Result<std::string> workspace_relative(const std::string& in_job) {
  std::string p = in_job;
  if (!p.empty() && p.front() == '/') {
    constexpr std::string_view kWorkspace = "/workspace";
    if (p.compare(0, kWorkspace.size(), kWorkspace) != 0 || (p.size() > kWorkspace.size() && p[kWorkspace.size()] != '/')) {
      return make_error(ErrorCode::kInvalidArgument,
                        "\"" + in_job.substr(0, 256) +
                            "\" is outside the job's workspace: only /workspace (where the job runs) can be copied; "
                            "give a path under it, or relative to it");
    }
    p = p.substr(kWorkspace.size());
    while (!p.empty() && p.front() == '/') p.erase(0, 1);
  }
  return transfer::normalize_request_path(p);
}

Result<CpOut> cp_out_target(const std::string& local) {
  if (local == "-") return CpOut::kToStdout;
  std::string path = local.empty() ? "." : local;
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return CpOut::kIntoFolder;
    if (S_ISREG(st.st_mode)) return CpOut::kToFile;
    return make_error(ErrorCode::kInvalidArgument, path + " is neither a folder nor a regular file: give a folder to "
                                                          "copy into, a file name to write, or - for standard output");
  }
  if (!path.empty() && path.back() == '/') {
    return make_error(ErrorCode::kInvalidArgument, path + " is not a folder here: create it first (mkdir -p " + path + ")");
  }
  std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (parent.empty()) parent = ".";
  if (::stat(parent.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return make_error(ErrorCode::kInvalidArgument,
                      "the folder of " + path + " does not exist: create it first (mkdir -p " + parent.string() + ")");
  }
  return CpOut::kToFile;
}

}  // namespace yonder::cli
