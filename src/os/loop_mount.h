// A size-limited file system in a file: an ext4 image, loop-mounted. The
// provider gives each job one as its writable workspace, because Docker's
// StorageOpt size does not work on overlay2 over ext4 (measured), and a full
// image gives the job ENOSPC without touching the host's disk.
//
// Uses mkfs.ext4 (e2fsprogs), then the loop and mount system calls, so it
// needs root, or CAP_SYS_ADMIN and access to /dev/loop* (the group disk);
// errors say so. Blocking: call from a worker thread.
#pragma once

#include <cstdint>
#include <string>

#include "base/error.h"

namespace yonder::os {

// Creates a sparse `bytes`-sized ext4 image at `image` whose root directory
// belongs to uid:gid, with no blocks reserved for root. Replaces nothing:
// kAlreadyExists when the file exists.
Status create_ext4_image(const std::string& image, int64_t bytes, int uid, int gid);

// Mounts `image` on `dir` (created if missing) with nosuid,nodev. The loop
// device is released automatically at unmount.
Status mount_loop(const std::string& image, const std::string& dir);

// Unmounts `dir`; not mounted is not an error. A mount still in use (open
// files) leaves the tree at once and ends when the last file closes.
Status unmount(const std::string& dir);

// True when `dir` is a mount point (per /proc/self/mountinfo).
bool is_mount_point(const std::string& dir);

}  // namespace yonder::os
