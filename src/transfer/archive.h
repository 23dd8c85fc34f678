// The workspace archive: the byte stream a consumer sends to put a folder
// into a job's workspace. Deliberately smaller than tar: no owners, links,
// devices or times travel, only folders and regular files with their
// permission bits, so extracting one can create nothing but plain files
// under the target folder.
//
// Format (integers big-endian):
//   "YAR1"                                   magic
//   entries, each:
//     u8 type   'D' folder, 'F' file, 'S' file with holes, 'E' end of archive
//     'D','F','S': u16 mode (permission bits, masked to 0777), u16 path length, path
//     'F':      u64 size, then size bytes of content
//     'S':      u64 logical size, then extents, each u64 offset, u64 length
//               and length bytes of content: offsets ascending, each extent
//               within the logical size and after the one before; what lies
//               between extents is a hole (reads as zeros). An extent of
//               length 0 whose offset is the logical size ends the file.
//   The 'E' entry ends the archive; a stream without it was cut short, and
//   bytes after it are an error.
// 'S' entries exist only where both ends agreed to them (ArchiveLimits::holes:
// a fetch asks for them), so a reader from before them never meets one. They
// let a 3 GiB file that is one 4 KiB block of data travel, and land, as that
// block: the receiver writes each extent at its offset and sets the logical
// size, so the holes stay holes.
// A path is relative, '/'-separated, at most kMaxArchivePath bytes, without
// empty, "." or ".." components or NUL; a folder comes before what is in it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/bytes.h"
#include "base/error.h"

namespace yonder::transfer {

inline constexpr std::string_view kArchiveMagic = "YAR1";
inline constexpr size_t kMaxArchivePath = 4096;

enum class EntryType : uint8_t { kDir = 'D', kFile = 'F', kSparse = 'S', kEnd = 'E' };

struct ArchiveLimits {
  uint64_t max_bytes = 1ull << 30;  // file content (extents' data, not holes), all files together
  uint64_t max_entries = 200'000;
  uint64_t max_files = ~uint64_t{0};  // 'F' and 'S' entries
  // 'S' entries: read only when true (else "unknown entry type"); written by
  // BeneathPacker for files with holes only when true.
  bool holes = false;
  uint64_t max_extents_per_file = 65'536;
  uint64_t max_logical_size = 1ull << 44;  // of one 'S' file (16 TiB, ext4's largest file)
};

// The header of one entry (the content of a file follows it; for kSparse
// `size` is the logical size and extents follow).
Bytes encode_entry(EntryType type, uint32_t mode, std::string_view path, uint64_t size);
// One extent of an 'S' entry (its `length` bytes of content follow);
// encode_extent(logical size, 0) ends the entry.
Bytes encode_extent(uint64_t offset, uint64_t length);
// kInvalidArgument unless `path` follows the rules above.
Status check_archive_path(std::string_view path);

class ArchiveVisitor {
 public:
  virtual ~ArchiveVisitor() = default;
  virtual Status on_dir(const std::string& path, uint32_t mode) = 0;
  // `size`: the file's logical size (for an 'S' entry more than its data).
  virtual Status on_file_begin(const std::string& path, uint32_t mode, uint64_t size) = 0;
  // An 'S' entry's next extent starts at `offset` (ascending, within the
  // size): the data that follows goes there. Only where ArchiveLimits::holes
  // is set; a visitor that cannot take holes keeps this refusal.
  virtual Status on_file_extent(uint64_t offset);
  virtual Status on_file_data(ByteView data) = 0;
  virtual Status on_file_end() = 0;
};

// Sans-I/O reader: feed bytes in any split; the visitor sees each entry.
// The first error (malformed, over a limit, or the visitor's own) sticks.
class ArchiveReader {
 public:
  explicit ArchiveReader(ArchiveLimits limits) : limits_(limits) {}
  Status feed(ByteView in, ArchiveVisitor& visitor);
  // True once the 'E' entry has been read.
  bool complete() const { return state_ == State::kDone; }
  uint64_t files() const { return files_; }
  uint64_t bytes() const { return bytes_; }

 private:
  enum class State { kMagic, kType, kHeader, kPath, kSize, kExtent, kData, kDone };
  Status fail(Error e);
  Status step(ByteView& in, ArchiveVisitor& visitor);

  ArchiveLimits limits_;
  State state_ = State::kMagic;
  Bytes need_;           // bytes gathered for the current fixed-size field
  EntryType type_ = EntryType::kEnd;
  uint32_t mode_ = 0;
  size_t path_len_ = 0;
  std::string path_;
  uint64_t left_ = 0;    // content bytes left of the current file (or extent)
  uint64_t logical_ = 0, end_ = 0;  // 'S': the logical size, the end of the last extent
  uint64_t extents_ = 0;            // 'S': extents so far
  uint64_t files_ = 0, entries_ = 0, bytes_ = 0;
  std::optional<Error> failed_;
};

}  // namespace yonder::transfer
