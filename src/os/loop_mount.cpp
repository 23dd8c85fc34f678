#include "os/loop_mount.h"

#include <fcntl.h>
#include <linux/loop.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include "os/files.h"
#include "os/process.h"
#include "os/unique_fd.h"

namespace yonder::os {
namespace {

// FITRIM from <linux/fs.h>, which clashes with <sys/mount.h> under glibc 2.36.
struct TrimRange {
  uint64_t start = 0;
  uint64_t len = 0;
  uint64_t minlen = 0;
};
constexpr unsigned long kFitrim = _IOWR('X', 121, TrimRange);

std::string first_line(const std::string& text) {
  auto nl = text.find('\n');
  return text.substr(0, nl == std::string::npos ? 300 : std::min<size_t>(nl, 300));
}

Status run_tool(std::vector<std::string> argv, const std::string& purpose) {
  // Daemons started by a user may lack the sbin folders on PATH.
  if (find_in_path(argv[0]).empty()) {
    for (const char* dir : {"/usr/sbin/", "/sbin/", "/usr/bin/", "/bin/"}) {
      if (::access((dir + argv[0]).c_str(), X_OK) == 0) {
        argv[0] = dir + argv[0];
        break;
      }
    }
  }
  auto r = run_capture(argv, std::chrono::seconds(60));
  if (!r) {
    return make_error(r.error().code(), purpose + ": " + argv[0] + " is not installed (" + r.error().message() +
                                            "); install e2fsprogs (Debian: apt-get install e2fsprogs)");
  }
  if (r->exit_code != 0) {
    return make_error(ErrorCode::kInternal, purpose + ": " + argv[0] + " failed: " + first_line(r->output));
  }
  return ok_status();
}

// Unescapes the octal escapes (\040 for a space) of /proc/self/mountinfo.
std::string unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size()) {
      int v = (s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0');
      out.push_back(static_cast<char>(v));
      i += 3;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

}  // namespace

Status create_ext4_image(const std::string& image, int64_t bytes, int uid, int gid) {
  if (bytes < (4 << 20)) {
    return make_error(ErrorCode::kInvalidArgument, "a workspace must be at least 4 MiB, not " + std::to_string(bytes) + " bytes");
  }
  int fd = ::open(image.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    int e = errno;
    return make_error(e == EEXIST ? ErrorCode::kAlreadyExists : ErrorCode::kInternal,
                      "creating workspace image " + image + ": " + std::strerror(e));
  }
  // Allocated, not sparse: a sparse image promises space the host may not
  // have when the job writes (its writes would be lost and the host's
  // volume filled). A file system without fallocate gets a sparse image.
  int rc = ::posix_fallocate(fd, 0, bytes);
  if (rc == EOPNOTSUPP || rc == EINVAL) rc = ::ftruncate(fd, bytes) == 0 ? 0 : errno;
  ::close(fd);
  if (rc != 0) {
    ::unlink(image.c_str());
    return make_error(ErrorCode::kResourceExhausted, "allocating the " + std::to_string(bytes >> 20) +
                                                         " MiB workspace image " + image + ": " + std::strerror(rc));
  }
  // nodiscard: mkfs would otherwise punch the allocation out again.
  auto st = run_tool({"mkfs.ext4", "-q", "-F", "-m", "0", "-E",
                      "root_owner=" + std::to_string(uid) + ":" + std::to_string(gid) +
                          ",lazy_itable_init=1,lazy_journal_init=1,nodiscard",
                      image},
                     "formatting workspace image " + image);
  if (!st) ::unlink(image.c_str());
  return st;
}

Status trim_free_space(const std::string& dir) {
  UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd.valid()) return make_error(ErrorCode::kInternal, "opening " + dir + ": " + std::strerror(errno));
  TrimRange range;
  range.len = UINT64_MAX;
  if (::ioctl(fd.get(), kFitrim, &range) != 0) {
    return make_error(ErrorCode::kInternal, "giving back the free space of " + dir + ": " + std::strerror(errno));
  }
  return ok_status();
}

uint64_t allocated_bytes(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return 0;
  return static_cast<uint64_t>(st.st_blocks) * 512;
}

Result<VolumeSpace> volume_space(const std::string& path) {
  struct statvfs v {};
  if (::statvfs(path.c_str(), &v) != 0) {
    return make_error(ErrorCode::kInternal, "reading the free space of " + path + ": " + std::strerror(errno));
  }
  return VolumeSpace{static_cast<uint64_t>(v.f_blocks) * v.f_frsize, static_cast<uint64_t>(v.f_bavail) * v.f_frsize};
}

namespace {

// What a failed loop or mount call means for the operator.
Error mount_error(const std::string& what, int e) {
  std::string hint;
  if (e == EPERM || e == EACCES) {
    hint = "; loop mounts need root, or CAP_SYS_ADMIN and the group disk (the packaged yonderd.service has both)";
  }
  return make_error(e == ENOSPC || e == ENOMEM ? ErrorCode::kResourceExhausted : ErrorCode::kInternal,
                    what + ": " + std::strerror(e) + hint);
}

// Binds `image` to a free loop device that detaches itself at unmount
// (LO_FLAGS_AUTOCLEAR); returns the device's open descriptor and path.
Result<std::pair<UniqueFd, std::string>> attach_loop(int image_fd, const std::string& image) {
  for (int attempt = 0; attempt < 16; ++attempt) {
    UniqueFd ctl(::open("/dev/loop-control", O_RDWR | O_CLOEXEC));
    if (ctl.get() < 0) return mount_error("opening /dev/loop-control", errno);
    int n = ::ioctl(ctl.get(), LOOP_CTL_GET_FREE);
    if (n < 0) return mount_error("finding a free loop device", errno);
    std::string dev = "/dev/loop" + std::to_string(n);
    UniqueFd fd(::open(dev.c_str(), O_RDWR | O_CLOEXEC));
    if (!fd.valid()) return mount_error("opening " + dev, errno);
    loop_config config{};
    config.fd = static_cast<uint32_t>(image_fd);
    config.info.lo_flags = LO_FLAGS_AUTOCLEAR;
    std::strncpy(reinterpret_cast<char*>(config.info.lo_file_name), image.c_str(), LO_NAME_SIZE - 1);
    if (::ioctl(fd.get(), LOOP_CONFIGURE, &config) == 0) return std::make_pair(std::move(fd), dev);
    int e = errno;
    if (e != EBUSY) return mount_error("attaching " + image + " to " + dev, e);
    // Another process took that device between the two calls: ask again.
  }
  return make_error(ErrorCode::kUnavailable, "attaching " + image + ": every free loop device was taken first; try again");
}

// The loop device still bound to `image`, opened (which keeps it bound), or
// an invalid fd. Our unmount ends the file system only when no other mount
// namespace holds a copy of the mount: a process that cloned the mount table
// meanwhile (every container start does, briefly) keeps it alive, with the
// job's last writes still in its cache and not yet in the image. A second
// loop device on the same image would then show a stale file system (an
// ended job's outputs missing; and two instances writing one image), so the
// device that is still bound is mounted again: the kernel hands back the
// live file system. util-linux's mount reuses a bound device the same way.
std::pair<UniqueFd, std::string> bound_loop(const struct stat& image) {
  std::error_code ec;
  for (std::filesystem::directory_iterator it("/sys/block", ec), end; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (name.rfind("loop", 0) != 0) continue;
    if (::access(("/sys/block/" + name + "/loop/backing_file").c_str(), F_OK) != 0) continue;  // unbound
    std::string dev = "/dev/" + name;
    UniqueFd fd(::open(dev.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd.valid()) continue;
    loop_info64 info{};
    if (::ioctl(fd.get(), LOOP_GET_STATUS64, &info) != 0) continue;  // unbound since, or being torn down
    if (info.lo_device == image.st_dev && info.lo_inode == image.st_ino) return {std::move(fd), dev};
  }
  return {};
}

}  // namespace

// Done with the system calls rather than mount(8): mount(8) refuses any
// user but root, while the packaged service runs as the user yonder with
// CAP_SYS_ADMIN and the group disk.
Status mount_loop(const std::string& image, const std::string& dir) {
  YONDER_TRY(make_dirs(dir, 0700));
  UniqueFd image_fd(::open(image.c_str(), O_RDWR | O_CLOEXEC));
  if (image_fd.get() < 0) return mount_error("opening workspace image " + image, errno);
  struct stat st {};
  if (::fstat(image_fd.get(), &st) != 0) return mount_error("reading workspace image " + image, errno);
  if (auto [held, dev] = bound_loop(st); held.valid()) {
    if (::mount(dev.c_str(), dir.c_str(), "ext4", MS_NOSUID | MS_NODEV, nullptr) != 0) {
      return mount_error("mounting workspace " + image + " (still on " + dev + ") on " + dir, errno);
    }
    return ok_status();
  }
  auto loop = attach_loop(image_fd.get(), image);
  if (!loop) return std::move(loop).error().with_context("mounting workspace " + image);
  const UniqueFd& device = loop->first;
  if (::mount(loop->second.c_str(), dir.c_str(), "ext4", MS_NOSUID | MS_NODEV, nullptr) != 0) {
    int e = errno;
    ::ioctl(device.get(), LOOP_CLR_FD, 0);
    return mount_error("mounting workspace " + image + " on " + dir, e);
  }
  // Closing the device now is right: with AUTOCLEAR it detaches once
  // the file system is unmounted.
  return ok_status();
}

Status unmount(const std::string& dir) {
  if (!is_mount_point(dir)) return ok_status();
  if (::umount2(dir.c_str(), UMOUNT_NOFOLLOW) == 0) return ok_status();
  int e = errno;
  if (e == EINVAL && !is_mount_point(dir)) return ok_status();  // someone else unmounted it meanwhile
  if (e != EBUSY) return mount_error("unmounting workspace " + dir, e);
  // A reader still has files open in it (a fetch of the job's outputs): the
  // mount leaves the tree now and the file system ends when the reader is
  // done. A mount of the image meanwhile gets that same file system
  // (mount_loop reuses the bound loop device), so nothing reads stale.
  // Refusing instead left the mount behind for good.
  if (::umount2(dir.c_str(), UMOUNT_NOFOLLOW | MNT_DETACH) != 0) return mount_error("unmounting workspace " + dir, errno);
  return ok_status();
}

bool is_mount_point(const std::string& dir) {
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string id, parent, devno, root, mount_point;
    if (fields >> id >> parent >> devno >> root >> mount_point) {
      if (unescape(mount_point) == dir) return true;
    }
  }
  return false;
}

}  // namespace yonder::os
