#include "transfer/archive.h"

#include <algorithm>

namespace yonder::transfer {
namespace {

Error bad(const std::string& why) { return make_error(ErrorCode::kInvalidArgument, "workspace archive: " + why); }

uint64_t be(ByteView b) {
  uint64_t v = 0;
  for (uint8_t x : b) v = (v << 8) | x;
  return v;
}

void put_be(Bytes& out, uint64_t v, int n) {
  for (int i = n - 1; i >= 0; --i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

}  // namespace

Status check_archive_path(std::string_view path) {
  if (path.empty() || path.size() > kMaxArchivePath) return bad("a path is empty or longer than 4096 bytes");
  if (path.front() == '/') return bad("path '" + std::string(path.substr(0, 80)) + "' is absolute");
  if (path.find('\0') != std::string_view::npos) return bad("a path contains a NUL byte");
  size_t start = 0;
  while (start <= path.size()) {
    size_t slash = path.find('/', start);
    if (slash == std::string_view::npos) slash = path.size();
    std::string_view part = path.substr(start, slash - start);
    if (part.empty() || part == "." || part == "..") {
      return bad("path '" + std::string(path.substr(0, 80)) + "' has an empty, '.' or '..' component");
    }
    start = slash + 1;
  }
  return ok_status();
}

Bytes encode_entry(EntryType type, uint32_t mode, std::string_view path, uint64_t size) {
  Bytes out;
  out.push_back(static_cast<uint8_t>(type));
  if (type == EntryType::kEnd) return out;
  put_be(out, mode & 0777, 2);
  put_be(out, path.size(), 2);
  out.insert(out.end(), path.begin(), path.end());
  if (type == EntryType::kFile || type == EntryType::kSparse) put_be(out, size, 8);
  return out;
}

Bytes encode_extent(uint64_t offset, uint64_t length) {
  Bytes out;
  put_be(out, offset, 8);
  put_be(out, length, 8);
  return out;
}

Status ArchiveVisitor::on_file_extent(uint64_t) {
  return bad("a file with holes where none were asked for");
}

Status ArchiveReader::fail(Error e) {
  failed_ = e;
  return e;
}

Status ArchiveReader::feed(ByteView in, ArchiveVisitor& visitor) {
  if (failed_) return *failed_;
  while (!in.empty()) {
    if (state_ == State::kDone) return fail(bad("bytes after the end of the archive"));
    if (auto st = step(in, visitor); !st) return fail(std::move(st).error());
  }
  return ok_status();
}

// Consumes some of `in` for the current state.
Status ArchiveReader::step(ByteView& in, ArchiveVisitor& visitor) {
  auto gather = [&](size_t n) -> bool {  // true once need_ holds n bytes
    size_t take = std::min(n - need_.size(), in.size());
    need_.insert(need_.end(), in.begin(), in.begin() + static_cast<long>(take));
    in = in.subspan(take);
    return need_.size() == n;
  };
  switch (state_) {
    case State::kMagic:
      if (!gather(4)) return ok_status();
      if (std::string_view(reinterpret_cast<const char*>(need_.data()), 4) != kArchiveMagic) {
        return bad("not a yonder workspace archive (bad magic)");
      }
      need_.clear();
      state_ = State::kType;
      return ok_status();
    case State::kType: {
      uint8_t t = in[0];
      in = in.subspan(1);
      if (t == static_cast<uint8_t>(EntryType::kEnd)) {
        state_ = State::kDone;
        return ok_status();
      }
      bool sparse = t == static_cast<uint8_t>(EntryType::kSparse) && limits_.holes;
      if (t != static_cast<uint8_t>(EntryType::kDir) && t != static_cast<uint8_t>(EntryType::kFile) && !sparse) {
        return bad("unknown entry type " + std::to_string(t));
      }
      if (++entries_ > limits_.max_entries) {
        return make_error(ErrorCode::kResourceExhausted,
                          "the upload has more than " + std::to_string(limits_.max_entries) +
                              " files and folders; add a .yonderignore for what the job does not need");
      }
      type_ = static_cast<EntryType>(t);
      state_ = State::kHeader;
      return ok_status();
    }
    case State::kHeader:
      if (!gather(4)) return ok_status();
      mode_ = static_cast<uint32_t>(be(ByteView(need_.data(), 2))) & 0777;
      path_len_ = static_cast<size_t>(be(ByteView(need_.data() + 2, 2)));
      need_.clear();
      if (path_len_ == 0 || path_len_ > kMaxArchivePath) return bad("a path is empty or longer than 4096 bytes");
      path_.clear();
      state_ = State::kPath;
      return ok_status();
    case State::kPath: {
      size_t take = std::min(path_len_ - path_.size(), in.size());
      path_.append(reinterpret_cast<const char*>(in.data()), take);
      in = in.subspan(take);
      if (path_.size() < path_len_) return ok_status();
      YONDER_TRY(check_archive_path(path_));
      if (type_ == EntryType::kDir) {
        state_ = State::kType;
        return visitor.on_dir(path_, mode_);
      }
      state_ = State::kSize;
      return ok_status();
    }
    case State::kSize:
      if (!gather(8)) return ok_status();
      left_ = be(need_);
      need_.clear();
      if (files_ >= limits_.max_files) {
        return make_error(ErrorCode::kResourceExhausted, "more than " + std::to_string(limits_.max_files) +
                                                             " files came, more than this side takes at once; send fewer");
      }
      if (type_ == EntryType::kSparse) {
        if (left_ > limits_.max_logical_size) return bad("a file with holes is larger than 16 TiB");
        logical_ = left_;
        end_ = 0;
        extents_ = 0;
        left_ = 0;
        ++files_;
        state_ = State::kExtent;
        return visitor.on_file_begin(path_, mode_, logical_);
      }
      if (left_ > limits_.max_bytes - std::min(bytes_, limits_.max_bytes)) {
        return make_error(ErrorCode::kResourceExhausted,
                          "the upload is larger than the " + std::to_string(limits_.max_bytes >> 20) +
                              " MiB this provider accepts for a workspace; add a .yonderignore or ask for more disk");
      }
      bytes_ += left_;
      ++files_;
      YONDER_TRY(visitor.on_file_begin(path_, mode_, left_));
      state_ = left_ == 0 ? State::kType : State::kData;
      if (left_ == 0) return visitor.on_file_end();
      return ok_status();
    case State::kExtent: {
      if (!gather(16)) return ok_status();
      uint64_t offset = be(ByteView(need_.data(), 8)), length = be(ByteView(need_.data() + 8, 8));
      need_.clear();
      if (length == 0) {
        if (offset != logical_) return bad("a file with holes ends at " + std::to_string(offset) + ", not at its size");
        state_ = State::kType;
        return visitor.on_file_end();
      }
      if (offset < end_ || offset > logical_ || length > logical_ - offset) {
        return bad("an extent of a file with holes is out of order or past the file's size");
      }
      if (++extents_ > limits_.max_extents_per_file) {
        return bad("a file with holes has more than " + std::to_string(limits_.max_extents_per_file) + " extents");
      }
      if (length > limits_.max_bytes - std::min(bytes_, limits_.max_bytes)) {
        return make_error(ErrorCode::kResourceExhausted,
                          "the files are larger than the " + std::to_string(limits_.max_bytes >> 20) +
                              " MiB this side takes at once; send less");
      }
      bytes_ += length;
      end_ = offset + length;
      left_ = length;
      state_ = State::kData;
      return visitor.on_file_extent(offset);
    }
    case State::kData: {
      size_t take = static_cast<size_t>(std::min<uint64_t>(left_, in.size()));
      YONDER_TRY(visitor.on_file_data(in.subspan(0, take)));
      in = in.subspan(take);
      left_ -= take;
      if (left_ > 0) return ok_status();
      if (type_ == EntryType::kSparse) {
        state_ = State::kExtent;
        return ok_status();
      }
      state_ = State::kType;
      return visitor.on_file_end();
    }
    case State::kDone:
      return bad("bytes after the end of the archive");
  }
  return ok_status();
}

}  // namespace yonder::transfer
