#include "transfer/workspace_files.h"

#include <dirent.h>
#include <fcntl.h>
#include <sodium.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>

namespace yonder::transfer {
namespace {

constexpr size_t kWorkspaceFilesHashChunk = 256 * 1024;
constexpr int kMaxDepth = 64;

Error workspace_io_error(const std::string& what, const std::string& path) {
  int e = errno;
  if (e == ENOSPC || e == EDQUOT) {
    return make_error(ErrorCode::kResourceExhausted, what + " " + path + ": the job's workspace is full");
  }
  return make_error(ErrorCode::kFailedPrecondition, what + " " + path + ": " + std::strerror(e));
}

std::string join(const std::string& dir, const std::string& name) {
  return dir.empty() ? name : dir + "/" + name;
}

// Opens a regular file for reading without blocking on a FIFO the job may
// have put in its place; kNotFound unless it is a regular file.
Result<os::UniqueFd> open_regular(int root, const std::string& rel, struct stat& st) {
  auto fd = os::open_beneath(root, rel, O_RDONLY | O_NONBLOCK | O_NOCTTY);
  if (!fd) return std::move(fd).error();
  if (::fstat(fd->get(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return make_error(ErrorCode::kNotFound, "\"" + rel + "\" is no longer a regular file");
  }
  return fd;
}

Result<std::string> sha256_fd(int fd) {
  crypto_hash_sha256_state st;
  crypto_hash_sha256_init(&st);
  std::vector<uint8_t> buf(kWorkspaceFilesHashChunk);
  while (true) {
    ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return make_error(ErrorCode::kFailedPrecondition, std::string("cannot read: ") + std::strerror(errno));
    if (n == 0) break;
    crypto_hash_sha256_update(&st, buf.data(), static_cast<size_t>(n));
  }
  uint8_t out[crypto_hash_sha256_BYTES];
  crypto_hash_sha256_final(&st, out);
  return hex_encode(ByteView(out, sizeof out));
}

// A file whose blocks hold less than its size has holes (a file's blocks
// round up, so a plain small file does not look like one).
bool has_holes(const struct stat& st) {
  return st.st_size > 0 && static_cast<uint64_t>(st.st_blocks) * 512 < static_cast<uint64_t>(st.st_size);
}

// What a file costs to send: its data, or with holes at most its blocks.
uint64_t bytes_to_send(const struct stat& st, bool holes) {
  uint64_t size = static_cast<uint64_t>(st.st_size);
  return holes && has_holes(st) ? static_cast<uint64_t>(st.st_blocks) * 512 : size;
}

std::string random_suffix() {
  uint8_t b[8];
  randombytes_buf(b, sizeof b);
  return hex_encode(ByteView(b, sizeof b));
}

class Selector {
 public:
  Selector(const FolderRoot& root, const HaveManifest& have, const ArchiveLimits& limits)
      : root_(root), have_(have), limits_(limits) {}

  // One requested path ("" the whole folder).
  Status select(const std::string& rel) {
    // Without O_NOFOLLOW: a link as the last part is ELOOP too (with it, O_PATH
    // would open the link itself).
    auto fd = os::open_beneath(root_.fd(), rel, O_PATH);
    if (!fd) {
      if (fd.error().code() == ErrorCode::kNotFound) {
        return make_error(ErrorCode::kNotFound, "the job's workspace has no \"" + rel + "\"");
      }
      if (fd.error().code() == ErrorCode::kPermissionDenied) {
        return make_error(ErrorCode::kPermissionDenied, "\"" + rel +
                                                            "\" in the job's workspace is (or passes through) "
                                                            "a symbolic link; links there are never followed");
      }
      return std::move(fd).error();
    }
    struct stat st {};
    if (::fstat(fd->get(), &st) != 0) return workspace_io_error("cannot read", rel);
    if (S_ISREG(st.st_mode)) return add_file(rel, st);
    if (!S_ISDIR(st.st_mode)) return make_error(ErrorCode::kNotFound, "\"" + rel + "\" is not a file or folder");
    if (!rel.empty()) add_dir(rel, st.st_mode);
    return walk(rel, 0);
  }

  WorkspaceSelection take() {
    for (auto& [path, e] : entries_) out_.entries.push_back(std::move(e));
    return std::move(out_);
  }

 private:
  void add_parents(const std::string& rel) {
    for (size_t slash = rel.find('/'); slash != std::string::npos; slash = rel.find('/', slash + 1)) {
      std::string d = rel.substr(0, slash);
      if (!entries_.count(d)) entries_[d] = WorkspaceEntry{d, true, 0755};
    }
  }

  void add_dir(const std::string& rel, mode_t mode) {
    add_parents(rel);
    if (!entries_.count(rel)) entries_[rel] = WorkspaceEntry{rel, true, static_cast<uint32_t>((mode & 0755) | 0700)};
  }

  Status add_file(const std::string& rel, const struct stat& listed) {
    if (entries_.count(rel)) return ok_status();
    auto h = have_.find(rel);
    if (h != have_.end() && h->second.size == static_cast<uint64_t>(listed.st_size)) {
      struct stat st {};
      auto fd = open_regular(root_.fd(), rel, st);
      auto digest = fd ? sha256_fd(fd->get()) : Result<std::string>(fd.error());
      if (digest && *digest == h->second.sha256) {
        ++out_.skipped;
        return ok_status();
      }
    }
    add_parents(rel);
    entries_[rel] = WorkspaceEntry{rel, false, static_cast<uint32_t>(listed.st_mode & 0755)};
    out_.bytes += bytes_to_send(listed, limits_.holes);
    ++out_.files;
    if (out_.bytes > limits_.max_bytes || entries_.size() > limits_.max_entries) {
      return make_error(ErrorCode::kResourceExhausted,
                        "the files asked for are more than this provider sends at once (" +
                            std::to_string(limits_.max_bytes >> 20) + " MiB, " + std::to_string(limits_.max_entries) +
                            " entries); ask for less (--out PATH)");
    }
    return ok_status();
  }

  Status walk(const std::string& rel, int depth) {
    if (depth > kMaxDepth) {
      return make_error(ErrorCode::kResourceExhausted,
                        "folders nested deeper than " + std::to_string(kMaxDepth) + " levels in the job's workspace");
    }
    auto fd = os::open_beneath(root_.fd(), rel, O_RDONLY | O_DIRECTORY);
    if (!fd) {
      // Replaced by a link or removed since it was seen: nothing to send.
      if (depth > 0) {
        ++out_.skipped;
        return ok_status();
      }
      return std::move(fd).error();
    }
    DIR* d = ::fdopendir(fd->get());
    if (d == nullptr) return workspace_io_error("cannot list", rel.empty() ? "the workspace" : rel);
    int dfd = fd->release();  // owned by `d` now
    std::vector<std::string> names;
    while (dirent* e = ::readdir(d)) {
      std::string n = e->d_name;
      if (n != "." && n != "..") names.push_back(std::move(n));
    }
    std::sort(names.begin(), names.end());
    Status result = ok_status();
    for (const auto& n : names) {
      std::string child = join(rel, n);
      struct stat st {};
      if (::fstatat(dfd, n.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !check_archive_path(child)) {
        ++out_.skipped;  // vanished meanwhile, or a name the archive cannot carry
        continue;
      }
      if (S_ISDIR(st.st_mode)) {
        add_dir(child, st.st_mode);
        result = walk(child, depth + 1);
      } else if (S_ISREG(st.st_mode)) {
        result = add_file(child, st);
      } else {
        ++out_.skipped;  // links and special files stay behind
        ++(S_ISLNK(st.st_mode) ? out_.links : out_.special);
      }
      if (!result) break;
    }
    ::closedir(d);
    return result;
  }

  const FolderRoot& root_;
  const HaveManifest& have_;
  const ArchiveLimits& limits_;
  WorkspaceSelection out_;
  std::map<std::string, WorkspaceEntry> entries_;  // map order: each folder before its contents
};

}  // namespace

Result<FolderRoot> FolderRoot::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    int e = errno;
    return make_error(e == ENOENT ? ErrorCode::kNotFound : ErrorCode::kFailedPrecondition,
                      "cannot open the folder " + path + ": " + std::strerror(e));
  }
  os::UniqueFd owned(fd);
  struct stat st {};
  if (::fstat(fd, &st) != 0) return make_error(ErrorCode::kFailedPrecondition, "cannot read the folder " + path);
  return FolderRoot(std::move(owned), path, st.st_uid, st.st_gid);
}

Result<WorkspaceSelection> select_beneath(const FolderRoot& root, const std::vector<std::string>& paths,
                                          const HaveManifest& have, const ArchiveLimits& limits) {
  Selector s(root, have, limits);
  if (paths.empty()) {
    YONDER_TRY(s.select(""));
  } else {
    for (const auto& p : paths) YONDER_TRY(s.select(p));
  }
  return s.take();
}

BeneathPacker::BeneathPacker(FolderRoot root, WorkspaceSelection selection, ArchiveLimits limits)
    : root_(std::move(root)), selection_(std::move(selection)), limits_(limits) {}

Result<Bytes> BeneathPacker::next(size_t max) {
  Bytes out;
  if (!magic_sent_) {
    out.insert(out.end(), kArchiveMagic.begin(), kArchiveMagic.end());
    magic_sent_ = true;
  }
  while (out.size() < max && !end_sent_) {
    if (file_.valid()) {
      if (sparse_ && left_ == 0) {
        YONDER_TRY(next_extent(out));
        continue;
      }
      size_t want = static_cast<size_t>(std::min<uint64_t>(left_, max - std::min(max, out.size())));
      if (want == 0) break;
      size_t at = out.size();
      out.resize(at + want);
      ssize_t n = ::pread(file_.get(), out.data() + at, want, static_cast<off_t>(at_));
      if (n < 0 && errno == EINTR) {
        out.resize(at);
        continue;
      }
      if (n <= 0) {
        return make_error(ErrorCode::kFailedPrecondition, "\"" + current_ +
                                                              "\" shrank while it was being copied (the job is "
                                                              "changing it); copy it again");
      }
      out.resize(at + static_cast<size_t>(n));
      left_ -= static_cast<uint64_t>(n);
      at_ += static_cast<uint64_t>(n);
      sent_ += static_cast<uint64_t>(n);
      if (left_ == 0 && !sparse_) file_ = os::UniqueFd();
      continue;
    }
    if (index_ == selection_.entries.size()) {
      Bytes end = encode_entry(EntryType::kEnd, 0, {}, 0);
      out.insert(out.end(), end.begin(), end.end());
      end_sent_ = true;
      break;
    }
    const WorkspaceEntry& e = selection_.entries[index_++];
    uint64_t size = 0;
    if (!e.dir) {
      struct stat st {};
      auto fd = open_regular(root_.fd(), e.path, st);
      if (!fd) {
        if (fd.error().code() == ErrorCode::kNotFound || fd.error().code() == ErrorCode::kPermissionDenied) {
          ++selection_.skipped;  // removed, or now a link or something else: not sent
          continue;
        }
        return std::move(fd).error();
      }
      size = static_cast<uint64_t>(st.st_size);
      sparse_ = limits_.holes && has_holes(st);
      if (!sparse_ && sent_ + size > limits_.max_bytes) {
        return make_error(ErrorCode::kResourceExhausted, "the files grew past what this provider sends at once (" +
                                                             std::to_string(limits_.max_bytes >> 20) +
                                                             " MiB) while they were being copied; ask for less");
      }
      // Back to blocking reads (O_NONBLOCK only guarded the open).
      (void)::fcntl(fd->get(), F_SETFL, 0);
      if (size > 0) {
        file_ = std::move(*fd);
        current_ = e.path;
        left_ = sparse_ ? 0 : size;
        at_ = 0;
        logical_ = size;
        extents_ = 0;
      }
      ++files_;
    }
    EntryType type = e.dir ? EntryType::kDir : sparse_ && size > 0 ? EntryType::kSparse : EntryType::kFile;
    Bytes h = encode_entry(type, e.mode, e.path, size);
    out.insert(out.end(), h.begin(), h.end());
  }
  return out;
}

Status BeneathPacker::next_extent(Bytes& out) {
  auto end_file = [&] {
    Bytes end = encode_extent(logical_, 0);
    out.insert(out.end(), end.begin(), end.end());
    file_ = os::UniqueFd();
    sparse_ = false;
    return ok_status();
  };
  if (at_ >= logical_) return end_file();
  off_t data = ::lseek(file_.get(), static_cast<off_t>(at_), SEEK_DATA);
  if (data < 0 && errno == ENXIO) return end_file();  // only a hole is left
  if (data < 0) return workspace_io_error("cannot read", current_);
  if (static_cast<uint64_t>(data) >= logical_) return end_file();
  off_t hole = ::lseek(file_.get(), data, SEEK_HOLE);
  if (hole < 0) return workspace_io_error("cannot read", current_);
  uint64_t stop = std::min<uint64_t>(static_cast<uint64_t>(hole), logical_);
  // Bounded: past the last extent allowed, the rest goes as data.
  if (++extents_ >= kMaxPackedExtents) stop = logical_;
  uint64_t length = stop - static_cast<uint64_t>(data);
  if (sent_ + length > limits_.max_bytes) {
    return make_error(ErrorCode::kResourceExhausted, "the files grew past what this provider sends at once (" +
                                                         std::to_string(limits_.max_bytes >> 20) +
                                                         " MiB) while they were being copied; ask for less");
  }
  Bytes h = encode_extent(static_cast<uint64_t>(data), length);
  out.insert(out.end(), h.begin(), h.end());
  at_ = static_cast<uint64_t>(data);
  left_ = length;
  return ok_status();
}

Result<std::unique_ptr<BeneathWriter>> BeneathWriter::create(FolderRoot root, const std::string& into,
                                                             ArchiveLimits limits) {
  if (!into.empty()) YONDER_TRY(check_archive_path(into));
  std::unique_ptr<BeneathWriter> w(new BeneathWriter(std::move(root), into, limits));
  auto fd = w->ensure_dir(w->root_.fd(), into, 0755);
  if (!fd) return std::move(fd).error();
  w->into_fd_ = std::move(*fd);
  return w;
}

BeneathWriter::~BeneathWriter() {
  discard_temp();
}

void BeneathWriter::discard_temp() {
  file_ = os::UniqueFd();
  if (parent_.valid() && !temp_.empty()) (void)::unlinkat(parent_.get(), temp_.c_str(), 0);
  temp_.clear();
  parent_ = os::UniqueFd();
}

Status BeneathWriter::own(int fd, const std::string& path) {
  if (::fchown(fd, root_.uid(), root_.gid()) != 0) return workspace_io_error("cannot give the job's user", path);
  return ok_status();
}

Result<os::UniqueFd> BeneathWriter::ensure_dir(int base_fd, const std::string& rel, uint32_t mode) {
  auto cur = os::open_beneath(base_fd, "", O_RDONLY | O_DIRECTORY);
  if (!cur) return std::move(cur).error();
  std::string walked;
  size_t start = 0;
  while (start < rel.size()) {
    size_t slash = rel.find('/', start);
    if (slash == std::string::npos) slash = rel.size();
    std::string part = rel.substr(start, slash - start);
    start = slash + 1;
    walked = join(walked, part);
    bool made = ::mkdirat(cur->get(), part.c_str(), 0700) == 0;
    if (!made && errno != EEXIST) return workspace_io_error("cannot create the folder", walked);
    auto next = os::open_beneath(cur->get(), part, O_RDONLY | O_DIRECTORY);
    if (!next) {
      return make_error(ErrorCode::kFailedPrecondition, "not writing into \"" + walked +
                                                            "\": in the job's workspace it is a symbolic link or not "
                                                            "a folder");
    }
    if (made) {
      YONDER_TRY(own(next->get(), walked));
      if (::fchmod(next->get(), static_cast<mode_t>((mode & 0755) | 0700)) != 0) {
        return workspace_io_error("cannot set the mode of", walked);
      }
    }
    cur = std::move(next);
  }
  return cur;
}

Status BeneathWriter::on_dir(const std::string& path, uint32_t mode) {
  auto fd = ensure_dir(into_fd_.get(), path, mode);
  if (!fd) return std::move(fd).error();
  return ok_status();
}

Status BeneathWriter::on_file_begin(const std::string& path, uint32_t mode, uint64_t) {
  current_ = join(into_, path);
  size_t slash = path.rfind('/');
  std::string dir = slash == std::string::npos ? std::string() : path.substr(0, slash);
  name_ = slash == std::string::npos ? path : path.substr(slash + 1);
  auto parent = ensure_dir(into_fd_.get(), dir, 0755);
  if (!parent) return std::move(parent).error();
  parent_ = std::move(*parent);
  // A fresh name, then rename over the target: a link the job put there is
  // replaced rather than written through, and a reader never sees half a file.
  temp_ = ".yonder-cp-" + random_suffix();
  auto fd = os::open_beneath(parent_.get(), temp_, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0600);
  if (!fd) {
    temp_.clear();
    return std::move(fd).error().with_context("writing " + current_);
  }
  file_ = std::move(*fd);
  YONDER_TRY(own(file_.get(), current_));
  // Explicitly: the daemon's umask (077) must not hide the file from the job.
  if (::fchmod(file_.get(), static_cast<mode_t>((mode & 0755) | 0600)) != 0)
    return workspace_io_error("cannot set the mode of", current_);
  return ok_status();
}

Status BeneathWriter::on_file_data(ByteView data) {
  while (!data.empty()) {
    ssize_t n = ::write(file_.get(), data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return workspace_io_error("cannot write", current_);
    data = data.subspan(static_cast<size_t>(n));
  }
  return ok_status();
}

Status BeneathWriter::on_file_end() {
  if (::close(file_.release()) != 0) return workspace_io_error("cannot write", current_);
  if (::renameat(parent_.get(), temp_.c_str(), parent_.get(), name_.c_str()) != 0) {
    int e = errno;
    Error err = e == EISDIR || e == ENOTEMPTY || e == EEXIST
                    ? make_error(ErrorCode::kFailedPrecondition,
                                 "not writing \"" + current_ + "\": it is a folder in the job's workspace")
                    : workspace_io_error("cannot put in place", current_);
    discard_temp();
    return err;
  }
  temp_.clear();
  parent_ = os::UniqueFd();
  written_.push_back(current_);
  return ok_status();
}

Result<nlohmann::json> BeneathWriter::finish() {
  if (!reader_.complete()) {
    return make_error(ErrorCode::kInvalidArgument, "the copy ended before the end of its archive (cut short)");
  }
  return nlohmann::json{{"files", reader_.files()}, {"bytes", reader_.bytes()}, {"paths", written_}};
}

}  // namespace yonder::transfer
