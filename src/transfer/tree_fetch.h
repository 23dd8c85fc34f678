// Bringing files back out of a job's workspace (`yonder run --out`, the
// default "what changed", `yonder cp JOB:PATH`): what to send, and putting
// what came into the caller's folder.
//
//   consumer: have_manifest(dir)  -> {path: size + SHA-256} of what it has
//   provider: select_beneath(workspace, paths, have) and BeneathPacker
//             (workspace_files.h: the workspace may be in use by the job):
//             the requested paths (or everything), leaving out files whose
//             size and SHA-256 match `have`
//   consumer: the archive goes into a fresh folder (TreeExtractor), then
//             move_tree_into(fresh, dir) puts each file in place, refusing to
//             pass through a symbolic link or replace a folder, so nothing
//             is ever written outside `dir`.
//
// Blocking (file reads and hashing): worker threads only.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "transfer/tree_pack.h"

namespace yonder::transfer {

struct FileDigest {
  uint64_t size = 0;
  std::string sha256;  // lowercase hex
};
using HaveManifest = std::map<std::string, FileDigest>;

Result<std::string> sha256_file(const std::string& path);

// The files of `root` under list_tree's rules, with their digests, stopping
// (without error) once the JSON form would pass `max_json_bytes`: a file
// left out is merely sent again.
Result<HaveManifest> have_manifest(const std::string& root, const ArchiveLimits& limits, size_t max_json_bytes);
nlohmann::json manifest_to_json(const HaveManifest& m);
// Strict: every path must pass check_archive_path; at most `max_entries`.
Result<HaveManifest> manifest_from_json(const nlohmann::json& j, size_t max_entries);

// A requested path: relative, no "..", no leading "/" (check_archive_path),
// "." or "" meaning the whole folder. kInvalidArgument naming it otherwise.
Result<std::string> normalize_request_path(const std::string& path);

// Moves every file under `from` to the same relative path under `into`,
// creating folders as needed and replacing files. Refuses (kFailedPrecondition,
// naming the path) to go through a symbolic link or anything that is not a
// folder, or to replace a folder. Returns the relative paths moved.
Result<std::vector<std::string>> move_tree_into(const std::string& from, const std::string& into);

}  // namespace yonder::transfer
