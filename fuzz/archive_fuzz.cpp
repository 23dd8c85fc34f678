// Fuzzes the workspace archive reader (src/transfer/archive.h), the bytes a
// peer uploads into a job's workspace or a provider sends home as a job's
// outputs (with files with holes): it must never crash, accept a path the
// path rules refuse, deliver more content than its limits allow, or put an
// extent out of order or past its file's size, whatever the split of the
// input.
#include <cstdint>
#include <string>

#include "transfer/archive.h"

using namespace yonder;
using namespace yonder::transfer;

namespace {

class Checker final : public ArchiveVisitor {
 public:
  Status on_dir(const std::string& path, uint32_t mode) override { return check(path, mode); }
  Status on_file_begin(const std::string& path, uint32_t mode, uint64_t size) override {
    size_ = size;
    at_ = 0;
    return check(path, mode);
  }
  Status on_file_extent(uint64_t offset) override {
    if (offset < at_ || offset > size_) __builtin_trap();
    at_ = offset;
    ++extents;
    return ok_status();
  }
  Status on_file_data(ByteView data) override {
    content += data.size();
    at_ += data.size();
    if (at_ > size_) __builtin_trap();  // no data past the file's (logical) size
    return ok_status();
  }
  Status on_file_end() override { return ok_status(); }
  uint64_t content = 0, extents = 0;

 private:
  uint64_t size_ = 0, at_ = 0;
  static Status check(const std::string& path, uint32_t mode) {
    if (!check_archive_path(path) || mode > 0777) __builtin_trap();
    return ok_status();
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 1 << 20) return 0;
  ArchiveLimits limits{4096, 64};
  limits.holes = (size & 1) != 0;  // both kinds of receiver
  limits.max_extents_per_file = 16;
  limits.max_files = 32;
  Checker whole, split;
  ArchiveReader a(limits), b(limits);
  auto st = a.feed(ByteView(data, size), whole);
  // The same bytes, one at a time, must give the same outcome.
  Status st2 = ok_status();
  for (size_t i = 0; i < size && st2; ++i) st2 = b.feed(ByteView(data + i, 1), split);
  if (st.ok() != st2.ok() || a.complete() != b.complete() || whole.content != split.content ||
      whole.extents != split.extents) {
    __builtin_trap();
  }
  if (whole.content > limits.max_bytes || a.bytes() > limits.max_bytes) __builtin_trap();
  return 0;
}
