// The sending end of an upload: lists a folder (leaving out `.git`, what
// .gitignore/.yonderignore exclude, symbolic links and special files) and
// turns it into the archive stream (archive.h) chunk by chunk, reading each
// file as it goes, so memory stays at one chunk whatever the folder's size.
//
// Blocking (file reads): worker threads only. One TreePacker per upload,
// used by one thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/bytes.h"
#include "base/error.h"
#include "transfer/archive.h"
#include "transfer/ignore_rules.h"

namespace yonder::transfer {

struct TreeEntry {
  std::string path;  // relative, '/'-separated
  bool dir = false;
  uint32_t mode = 0644;
  uint64_t size = 0;
  // TreePacker sends the file from here on (an upload resuming a file the
  // receiver has the start of); the entry's size is then size - offset.
  uint64_t offset = 0;
};

struct TreeListing {
  std::string root;
  std::vector<TreeEntry> entries;  // folders before their contents
  uint64_t bytes = 0;
  uint64_t files = 0;
  uint64_t skipped = 0;  // ignored, links, special files
  uint64_t links = 0;    // of those, symbolic links
  uint64_t special = 0;  // of those, sockets, FIFOs and devices
};

// A folder holding a file of this name is left out of every listing (and so
// of uploads): an array job's out/ folder, which fills while its tasks run
// in the folder being uploaded.
inline constexpr const char* kOutputsMarker = ".yonder-outputs";

// The rules of `root`'s .gitignore then .yonderignore (missing files: none).
IgnoreRules read_ignore_rules(const std::string& root);

// kResourceExhausted when the folder holds more than `limits` allow (the
// message says to add a .yonderignore).
Result<TreeListing> list_tree(const std::string& root, const ArchiveLimits& limits);

class TreePacker {
 public:
  explicit TreePacker(TreeListing listing);
  ~TreePacker();
  // The next part of the stream, at most about `max` bytes; empty once the
  // whole archive (end entry included) has been returned. A file that
  // shrank or vanished since it was listed is an error naming it.
  Result<Bytes> next(size_t max);
  uint64_t sent_bytes() const { return sent_; }

 private:
  TreeListing listing_;
  size_t index_ = 0;
  bool magic_sent_ = false, end_sent_ = false;
  int fd_ = -1;           // the file being read
  uint64_t left_ = 0;     // its bytes left to send
  uint64_t sent_ = 0;     // content bytes so far
};

}  // namespace yonder::transfer
