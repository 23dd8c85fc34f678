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
//             move_tree_into(fresh, dir, policy) puts each file the policy
//             takes (outputs_policy.h: never .git, ignore files, excluded
//             paths or local files that were not uploaded, unless --out names
//             them; no execute bit unless named) in place, refusing to pass
//             through a symbolic link or replace a folder, so nothing is ever
//             written outside `dir`.
//
// Blocking (file reads and hashing): worker threads only.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "transfer/outputs_policy.h"
#include "transfer/tree_pack.h"

namespace yonder::transfer {

struct FileDigest {
  uint64_t size = 0;
  std::string sha256;  // lowercase hex
};
using HaveManifest = std::map<std::string, FileDigest>;

Result<std::string> sha256_file(const std::string& path);

// The files of `listing` (list_tree) with their digests, stopping (without
// error) once the JSON form would pass `max_json_bytes`: a file left out is
// merely sent again.
HaveManifest have_manifest(const TreeListing& listing, size_t max_json_bytes);
nlohmann::json manifest_to_json(const HaveManifest& m);
// Strict: every path must pass check_archive_path; at most `max_entries`.
Result<HaveManifest> manifest_from_json(const nlohmann::json& j, size_t max_entries);

// A requested path: relative, no "..", no leading "/" (check_archive_path),
// "." or "" meaning the whole folder. kInvalidArgument naming it otherwise.
Result<std::string> normalize_request_path(const std::string& path);

// What move_tree_into did.
struct MovedOutputs {
  std::vector<std::string> files;     // relative paths put in place
  std::vector<std::string> replaced;  // those of them that replaced a file here
  OutputSkips skipped;                // refused by the policy (left in `from`)
};

// The policy for bringing a job's files into a folder: the ignore rules of
// `rules_root` (the folder the upload was made from; usually the target),
// the files the upload would send from the target (`target_listing`, its
// list_tree; null when it could not be listed), and the --out paths.
// Blocking (reads the ignore files).
OutputsPolicy outputs_policy_for(const TreeListing* target_listing, const std::string& rules_root,
                                 std::vector<std::string> named);

// Moves every file under `from` that `policy` takes to the same relative
// path under `into`, with the policy's mode, creating folders as needed and
// replacing files. Refuses (kFailedPrecondition, naming the path) to go
// through a symbolic link or anything that is not a folder, or to replace a
// folder. `dry_run`: decides and checks the same, but moves, makes and
// changes nothing (`yonder cp --dry-run`: what would come home).
Result<MovedOutputs> move_tree_into(const std::string& from, const std::string& into, const OutputsPolicy& policy,
                                    bool dry_run = false);

}  // namespace yonder::transfer
