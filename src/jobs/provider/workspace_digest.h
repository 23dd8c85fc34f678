// What a job wrote to its workspace, by content: the files part of the
// metering receipt's output hash (JobLog::output_sha256, mesh/core/receipt.h).
//
// The outputs are the workspace files the job created or changed: every
// regular file in the workspace when the job has ended whose path and
// SHA-256 are not those of a file the workspace started with (the uploaded
// seed). That is the set `yonder run` brings home by default after an
// upload (the files that differ from the local folder); files the job
// deleted are not part of it. Folders, symbolic links and special files are
// left out (links are never followed: a link the job planted to a host file
// is not read).
//
// Canonical digest (64 lower-case hex):
//   SHA-256("yonder-workspace-outputs-v1\n" + for each output file, by path
//           in byte order: u32 big-endian length of the path + the path
//           (relative, '/'-separated) + the file's 32-byte SHA-256)
// so the same files give the same digest whatever the file system's listing
// order, times, owners or modes; no files: the digest of the label alone.
//
// Blocking (reads every file): the job's runner thread, after the job's
// task has exited (nothing writes the workspace any more) and before the
// executor unmounts it.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "base/error.h"

namespace yonder::jobs::provider {

// Relative path -> SHA-256 (64 lower-case hex).
using FileDigests = std::map<std::string, std::string>;

// Most files digest_tree() looks at; past it the walk stops and the result
// says so (`complete` false), which the digest then commits to as well.
inline constexpr size_t kMaxDigestFiles = 1'000'000;

struct TreeDigests {
  FileDigests files;
  bool complete = true;  // false: more than kMaxDigestFiles files, or a part could not be read
};

// Every regular file under `root` (not following links). A missing `root`
// is an error; an unreadable entry below it is skipped (`complete` false).
Result<TreeDigests> digest_tree(const std::string& root);

// The canonical digest of the files in `after` that `before` does not have
// with the same digest. `complete` false (a partial walk) is committed to
// by a trailing marker, so it never equals a complete one.
std::string outputs_digest(const TreeDigests& after, const FileDigests& before);

// The digest of no outputs (a job that never had a workspace).
std::string empty_outputs_digest();

// The seed's digests, kept in the job's folder while the job runs (so a
// restarted provider still knows what the workspace started with). A JSON
// object {path: hex}; read back bounded (kMaxDigestFiles entries, 256 MiB).
Status write_file_digests(const std::string& path, const FileDigests& digests);
Result<FileDigests> read_file_digests(const std::string& path);

}  // namespace yonder::jobs::provider
