// What a job may bring home into the consumer's folder, decided per file.
//
// The job, and the provider that runs it, are untrusted: whatever comes home
// must not be able to run code here or change what the next upload sends.
// For each file the fetch received this decides, without touching a file:
//
//   - anything under a `.git` folder: never (hooks and `core.fsmonitor` in
//     `.git/config` run on the consumer's next `git status`), not even when
//     `--out` names it;
//   - `.gitignore` / `.yonderignore` anywhere: only when `--out` names them
//     (a rewritten ignore file would make the next upload send the secrets
//     it used to exclude);
//   - a path the consumer's ignore rules exclude (it was never uploaded, and
//     the local one may be a secret): only when `--out` names it;
//   - a file that exists here but was not part of the upload: never replaced
//     unless `--out` names it;
//   - the mode: rw-r--r-- unless `--out` names the file (or a folder above
//     it), so nothing that comes home is executable by default.
//
// "Named" means a `--out` path equal to the file's path or to a folder above
// it; `--out .` (the whole workspace) names nothing in particular.
//
// Pure: no I/O, no clock. The caller (fetch_consumer) lists the folder and
// applies the decisions (tree_fetch.h: move_tree_into).
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "transfer/ignore_rules.h"

namespace yonder::transfer {

enum class OutputRefusal {
  kNone,          // taken
  kGitFolder,     // under .git/
  kIgnoreFile,    // .gitignore / .yonderignore, not named
  kExcluded,      // excluded by the consumer's ignore rules, not named
  kNotUploaded,   // would replace a local file the upload did not send, not named
};

struct OutputDecision {
  OutputRefusal refusal = OutputRefusal::kNone;
  uint32_t mode = 0644;  // the mode to give the file here when taken
  bool named = false;    // a --out path names it
};

struct OutputsPolicy {
  IgnoreRules ignore;  // the consumer folder's .gitignore + .yonderignore
  // The files of the consumer's folder the upload would send (list_tree);
  // nullopt when the folder could not be listed: then no existing file is
  // replaced unless named.
  std::optional<std::set<std::string>> uploaded;
  std::vector<std::string> named;  // --out paths, normalized (normalize_request_path), "" = the whole workspace

  // `path`: relative, '/'-separated, checked (check_archive_path);
  // `mode`: as the archive carried it; `exists_here`: a file of that path
  // exists in the consumer's folder.
  OutputDecision decide(std::string_view path, uint32_t mode, bool exists_here) const;
};

// The files refused, by reason: for one line of output.
struct OutputSkips {
  uint64_t git = 0, ignore_files = 0, excluded = 0, not_uploaded = 0;
  uint64_t total() const { return git + ignore_files + excluded + not_uploaded; }
  void count(OutputRefusal r);
};

// "left out 2 files under .git, 1 ignore file (.gitignore/.yonderignore)";
// empty when nothing was left out.
std::string describe(const OutputSkips& s);

// true when `path` is `.git` or lies under a `.git` folder.
bool under_git_folder(std::string_view path);

// How much one fetch may bring home without the user's word. A hostile
// provider can make a job's outputs any size (100,000 small files, a
// 3 GiB file of zeros), so before anything is written the consumer compares
// what the provider announced (files, and bytes of data: holes cost
// nothing) with this budget and with the free space of the target folder.
// `yonder run` asks on a terminal and otherwise refuses; the flag, or --out
// / `yonder cp` naming what to fetch, lifts the budget; nothing lifts the
// free-space check.
inline constexpr std::string_view kOutputsLimitFlag = "--no-outputs-limit";

struct OutputsBudget {
  uint64_t max_files = 10'000;      // setting outputs.max_files
  uint64_t max_bytes = 4ull << 30;  // setting outputs.max_mib
  bool lifted = false;              // the user asked for these files by name or with the flag
};

// kResourceExhausted when `files` or `bytes` are over `budget` (unless
// lifted), or `bytes` over `free_bytes` (always); the message names the
// numbers and what lifts the refusal.
Status check_outputs_fit(uint64_t files, uint64_t bytes, uint64_t free_bytes, const OutputsBudget& budget);
// true for check_outputs_fit's refusal over the budget (one the user may
// lift), false for the free space and anything else.
bool is_over_outputs_budget(const Error& e);

}  // namespace yonder::transfer
