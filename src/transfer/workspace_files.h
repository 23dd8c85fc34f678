// Files out of and into a job's workspace while the job may be running
// (`yonder cp JOB:PATH LOCAL`, `yonder cp LOCAL JOB:PATH`, and the outputs
// `yonder run` brings home).
//
// A running job writes its workspace while the provider (root) reads and
// writes it, so a path name is never trusted twice: the workspace is opened
// once (FolderRoot) and every later lookup goes through os::open_beneath
// (openat2 with RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)
// relative to that fd; folders are listed through fdopendir on such fds and
// their entries classified with fstatat(AT_SYMLINK_NOFOLLOW). A symbolic
// link the job planted (`ln -s /etc/shadow leak`) is never followed: asked
// for by name it is refused, met inside a folder it is skipped, and a folder
// swapped for a link between the listing and the read is skipped then.
//
//   out: select_beneath(root, paths, have) -> WorkspaceSelection
//        BeneathPacker(root, selection).next() -> the archive (archive.h)
//   in:  BeneathWriter::create(root, "dir").write(archive bytes)...finish():
//        each file goes to a fresh temporary name in its folder and is
//        renamed over the target (a link there is replaced, never followed;
//        a folder there is refused), owned by the workspace's owner (the
//        job's user) so the job can use and change it.
//
// The same code reads the consumer's own folder for `cp LOCAL JOB:PATH`
// (there nothing else writes it, but one walker is simpler than two).
//
// Blocking (file system): worker threads only; one object per transfer,
// used by one thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/bytes.h"
#include "base/error.h"
#include "os/beneath.h"
#include "transfer/archive.h"
#include "transfer/tree_fetch.h"

namespace yonder::transfer {

// A folder opened once (O_PATH | O_DIRECTORY | O_NOFOLLOW): the anchor of
// every lookup below. `path` is only for messages.
class FolderRoot {
 public:
  static Result<FolderRoot> open(const std::string& path);
  int fd() const { return fd_.get(); }
  const std::string& path() const { return path_; }
  // The folder's owner: what files written into it are given to.
  uint32_t uid() const { return uid_; }
  uint32_t gid() const { return gid_; }

 private:
  FolderRoot(os::UniqueFd fd, std::string path, uint32_t uid, uint32_t gid)
      : fd_(std::move(fd)), path_(std::move(path)), uid_(uid), gid_(gid) {}
  os::UniqueFd fd_;
  std::string path_;
  uint32_t uid_ = 0, gid_ = 0;
};

struct WorkspaceEntry {
  std::string path;  // relative, '/'-separated
  bool dir = false;
  uint32_t mode = 0644;
};

struct WorkspaceSelection {
  std::vector<WorkspaceEntry> entries;  // each folder before what is in it
  uint64_t files = 0;
  uint64_t bytes = 0;    // as listed; a running job may change them before they are read.
                         // With ArchiveLimits::holes, the files' data (allocated blocks), not their sizes
  uint64_t skipped = 0;  // links, special files, files the caller has (`have`)
  uint64_t links = 0;    // of those, symbolic links
  uint64_t special = 0;  // of those, sockets, FIFOs and devices
};

// What to send from `root`: each of `paths` (normalize_request_path form; a
// file or a folder with everything in it; the whole folder when empty),
// regular files and folders only, minus files whose size and SHA-256 match
// `have`. A requested path that is (or passes through) a symbolic link is
// refused (kPermissionDenied); a missing one is kNotFound naming it;
// kResourceExhausted past `limits`.
Result<WorkspaceSelection> select_beneath(const FolderRoot& root, const std::vector<std::string>& paths,
                                          const HaveManifest& have, const ArchiveLimits& limits);

// Produces the archive of a selection, reading each file through
// open_beneath as it goes (one chunk of memory). A file the job removed,
// or replaced by a link or anything but a regular file, since it was listed
// is left out; its size is taken when it is opened. Over `limits.max_bytes`
// in total (files grew meanwhile) is kResourceExhausted. With
// `limits.holes`, a file with holes (fewer blocks than its size) goes as an
// 'S' entry: only its data extents (lseek SEEK_DATA/SEEK_HOLE), at most
// kMaxPackedExtents of them (the rest as one extent, holes read as zeros).
inline constexpr uint64_t kMaxPackedExtents = 4096;

class BeneathPacker {
 public:
  BeneathPacker(FolderRoot root, WorkspaceSelection selection, ArchiveLimits limits);
  // The next part of the stream, about `max` bytes at most; empty once the
  // whole archive (end entry included) has been returned.
  Result<Bytes> next(size_t max);
  uint64_t sent_bytes() const { return sent_; }  // file content so far
  uint64_t sent_files() const { return files_; }

 private:
  FolderRoot root_;
  WorkspaceSelection selection_;
  ArchiveLimits limits_;
  size_t index_ = 0;
  bool magic_sent_ = false, end_sent_ = false;
  // The next extent of the file being read, or its end entry: appended to
  // `out`; closes the file after its end.
  Status next_extent(Bytes& out);

  os::UniqueFd file_;  // the file being read
  std::string current_;
  uint64_t left_ = 0;  // of the file (or, with holes, of the extent)
  uint64_t at_ = 0;    // where the next read starts in it
  bool sparse_ = false;
  uint64_t logical_ = 0, extents_ = 0;  // with holes: the size taken at open, extents sent
  uint64_t sent_ = 0, files_ = 0;
};

// Writes an archive under `into` (a folder below `root`, created with its
// parents when missing) of a folder that may be in use: see the top of
// this file. Files are replaced, folders merged; nothing is deleted.
class BeneathWriter final : public ArchiveVisitor {
 public:
  static Result<std::unique_ptr<BeneathWriter>> create(FolderRoot root, const std::string& into, ArchiveLimits limits);
  ~BeneathWriter() override;  // removes a half-written temporary file

  Status write(ByteView bytes) { return reader_.feed(bytes, *this); }
  // The sender has finished: the archive must be complete.
  // Returns {"files", "bytes", "paths": [written, relative to root]}.
  Result<nlohmann::json> finish();

  Status on_dir(const std::string& path, uint32_t mode) override;
  Status on_file_begin(const std::string& path, uint32_t mode, uint64_t size) override;
  Status on_file_data(ByteView data) override;
  Status on_file_end() override;

 private:
  BeneathWriter(FolderRoot root, std::string into, ArchiveLimits limits)
      : root_(std::move(root)), into_(std::move(into)), reader_(limits) {}
  // The folder `rel` below `base_fd`, made (owned by the root's owner) where
  // missing, opened without following links.
  Result<os::UniqueFd> ensure_dir(int base_fd, const std::string& rel, uint32_t mode);
  Status own(int fd, const std::string& path);
  void discard_temp();

  FolderRoot root_;
  std::string into_;      // relative to root ("" for the root itself)
  os::UniqueFd into_fd_;  // the folder `into`
  ArchiveReader reader_;
  // The file being written: its folder, temporary and final names.
  os::UniqueFd parent_, file_;
  std::string temp_, name_, current_;
  std::vector<std::string> written_;
};

}  // namespace yonder::transfer
