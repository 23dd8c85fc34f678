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

// Creates a `bytes`-sized ext4 image at `image` whose root directory
// belongs to uid:gid, with no blocks reserved for root. Its blocks are
// allocated on the host (fallocate: fast, nothing written), so the space a
// job was promised cannot be taken by anyone else while it runs;
// kResourceExhausted when the volume has not that much free. Replaces
// nothing: kAlreadyExists when the file exists.
Status create_ext4_image(const std::string& image, int64_t bytes, int uid, int gid);

// Gives the free blocks of the file system mounted on `dir` back to its
// image's host volume (FITRIM through the loop device, which punches holes
// in the image): an ended job keeps only the space its files use.
Status trim_free_space(const std::string& dir);

// The space a file occupies on its volume (its allocated blocks, not its
// length); 0 when it does not exist.
uint64_t allocated_bytes(const std::string& path);

struct VolumeSpace {
  uint64_t total_bytes = 0;
  uint64_t free_bytes = 0;  // available to an unprivileged writer
};
// The volume holding `path` (statvfs).
Result<VolumeSpace> volume_space(const std::string& path);

// Mounts `image` on `dir` (created if missing) with nosuid,nodev. The loop
// device is released automatically at unmount.
Status mount_loop(const std::string& image, const std::string& dir);

// Unmounts `dir`; not mounted is not an error. A mount still in use (open
// files) leaves the tree at once and ends when the last file closes.
Status unmount(const std::string& dir);

// True when `dir` is a mount point (per /proc/self/mountinfo).
bool is_mount_point(const std::string& dir);

}  // namespace yonder::os
