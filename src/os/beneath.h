// Opening files inside a folder that someone else may be changing at the
// same time: a running job's workspace, written by the untrusted job while
// the provider reads from it (`yonder cp JOB:PATH`) or writes into it
// (`yonder cp LOCAL JOB:PATH`).
//
// Every path is resolved by the kernel with openat2(2) relative to an fd of
// the folder, with RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
// RESOLVE_NO_MAGICLINKS: no component may be a symbolic link (ELOOP), leave
// the folder through ".." or an absolute path (EXDEV), or go through /proc's
// magic links. Because the check happens in the same lookup that opens the
// file, a job swapping a folder for a link between our check and our open
// gains nothing (no TOCTOU window). Needs Linux 5.6+.
//
// Blocking (file system): worker threads only.
#pragma once

#include <string>
#include <string_view>

#include "base/error.h"
#include "os/unique_fd.h"

namespace yonder::os {

// Opens `path` (relative, '/'-separated; "" or "." is the folder itself)
// beneath the folder `dir_fd` with open(2) `flags` (O_CLOEXEC is added) and
// `mode` for O_CREAT. Errors name `path`:
//   kPermissionDenied  a component is a symbolic link, or the path leaves the folder
//   kNotFound          it does not exist
//   kUnavailable       the kernel has no openat2 (older than 5.6)
//   kFailedPrecondition otherwise (the errno text)
Result<UniqueFd> open_beneath(int dir_fd, std::string_view path, int flags, unsigned mode = 0);

}  // namespace yonder::os
