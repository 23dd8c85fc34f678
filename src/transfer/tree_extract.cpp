#include "transfer/tree_extract.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace yonder::transfer {
namespace {

Error io_error(const std::string& what, const std::string& path) {
  int e = errno;
  ErrorCode code = e == ENOSPC || e == EDQUOT ? ErrorCode::kResourceExhausted : ErrorCode::kInternal;
  return make_error(code, what + " " + path + ": " + std::strerror(e));
}

}  // namespace

Result<std::unique_ptr<TreeExtractor>> TreeExtractor::create(const std::string& dir, ArchiveLimits limits) {
  if (::mkdir(dir.c_str(), 0700) != 0) {
    if (errno == EEXIST) return make_error(ErrorCode::kAlreadyExists, "upload folder " + dir + " exists already");
    return io_error("cannot create the upload folder", dir);
  }
  return std::unique_ptr<TreeExtractor>(new TreeExtractor(dir, limits));
}

TreeExtractor::~TreeExtractor() {
  if (fd_ >= 0) ::close(fd_);
}

Status TreeExtractor::on_dir(const std::string& path, uint32_t mode) {
  std::string p = dir_ + "/" + path;
  if (::mkdir(p.c_str(), 0700) != 0 && errno != EEXIST) return io_error("cannot create folder", path);
  if (::chmod(p.c_str(), static_cast<mode_t>((mode & 0755) | 0700)) != 0) return io_error("cannot set the mode of", path);
  return ok_status();
}

Status TreeExtractor::on_file_begin(const std::string& path, uint32_t mode, uint64_t size) {
  current_ = path;
  size_ = size;
  // O_EXCL: a path twice in one archive is refused; O_NOFOLLOW: belt and braces.
  fd_ = ::open((dir_ + "/" + path).c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
               (mode & 0755) | 0600);
  if (fd_ < 0) return io_error("cannot create file", path);
  // Explicitly: the daemon's umask (077) must not hide the files from the job's user.
  if (::fchmod(fd_, static_cast<mode_t>((mode & 0755) | 0600)) != 0) return io_error("cannot set the mode of", path);
  return ok_status();
}

Status TreeExtractor::on_file_extent(uint64_t offset) {
  // The reader has checked the offset against the size (at most 16 TiB).
  if (::lseek(fd_, static_cast<off_t>(offset), SEEK_SET) < 0) return io_error("cannot write", current_);
  return ok_status();
}

Status TreeExtractor::on_file_data(ByteView data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd_, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return io_error("cannot write", current_);
    data = data.subspan(static_cast<size_t>(n));
  }
  return ok_status();
}

Status TreeExtractor::on_file_end() {
  int fd = fd_;
  fd_ = -1;
  // A file with holes may end in one: its size is set, not written (for a
  // plain file this is the size it has already).
  if (::ftruncate(fd, static_cast<off_t>(size_)) != 0) {
    Error e = io_error("cannot write", current_);
    ::close(fd);
    return e;
  }
  if (::close(fd) != 0) return io_error("cannot write", current_);
  return ok_status();
}

Result<nlohmann::json> TreeExtractor::finish() {
  if (!reader_.complete()) {
    return make_error(ErrorCode::kInvalidArgument, "the upload ended before the end of its archive (cut short)");
  }
  return nlohmann::json{{"files", reader_.files()}, {"bytes", reader_.bytes()}};
}

}  // namespace yonder::transfer
