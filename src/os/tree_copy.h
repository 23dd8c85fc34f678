// Copies a folder's contents into another folder, giving every copy to
// uid:gid: how uploaded files get into a job's workspace (which belongs to
// the job's user). Only folders and regular files are copied; links and
// special files are skipped. Blocking: worker threads only.
#pragma once

#include <string>

#include "base/error.h"

namespace yonder::os {

// ENOSPC is kResourceExhausted ("does not fit").
Status copy_tree(const std::string& from, const std::string& to, int uid, int gid);

}  // namespace yonder::os
