// The receiving end of an upload: writes an archive stream (archive.h) into
// a folder that must not exist yet, so nothing but what the archive names
// can be in it (no links, hence no way to write outside it). Files are
// created with the archive's permission bits (masked to 0755). A file with
// holes ('S', when the limits allow them) is written extent by extent at
// its offsets and then given its logical size, so its holes stay holes.
//
// Blocking (file writes): worker threads, or the link's thread for short
// writes (see jobs/provider/remote_provider.cpp). One extractor per upload.
#pragma once

#include <nlohmann/json.hpp>
#include <memory>
#include <string>

#include "transfer/archive.h"

namespace yonder::transfer {

class TreeExtractor final : public ArchiveVisitor {
 public:
  // Creates `dir` (mode 0700); kAlreadyExists if it exists.
  static Result<std::unique_ptr<TreeExtractor>> create(const std::string& dir, ArchiveLimits limits);
  ~TreeExtractor() override;

  Status write(ByteView bytes) { return reader_.feed(bytes, *this); }
  // The sender has finished: the archive must be complete.
  // Returns {"files", "bytes"}.
  Result<nlohmann::json> finish();
  const std::string& dir() const { return dir_; }

  Status on_dir(const std::string& path, uint32_t mode) override;
  Status on_file_begin(const std::string& path, uint32_t mode, uint64_t size) override;
  Status on_file_extent(uint64_t offset) override;
  Status on_file_data(ByteView data) override;
  Status on_file_end() override;

 private:
  TreeExtractor(std::string dir, ArchiveLimits limits) : dir_(std::move(dir)), reader_(limits) {}
  std::string dir_;
  ArchiveReader reader_;
  int fd_ = -1;
  uint64_t size_ = 0;  // the current file's logical size
  std::string current_;
};

}  // namespace yonder::transfer
