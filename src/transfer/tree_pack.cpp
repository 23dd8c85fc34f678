#include "transfer/tree_pack.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "transfer/ignore_rules.h"

namespace yonder::transfer {
namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  if (!in) return {};
  std::ostringstream s;
  s << in.rdbuf();
  std::string text = s.str();
  if (text.size() > (1 << 20)) text.resize(1 << 20);
  return text;
}

Status walk(const std::string& root, const std::string& rel, const IgnoreRules& rules, const ArchiveLimits& limits,
            TreeListing& out, int depth) {
  if (depth > 64) return make_error(ErrorCode::kResourceExhausted, "folders nested deeper than 64 levels under " + root);
  std::string dir = rel.empty() ? root : root + "/" + rel;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return make_error(ErrorCode::kPermissionDenied, "cannot read folder " + dir + ": " + std::strerror(errno));
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(n);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  for (const auto& n : names) {
    std::string child = rel.empty() ? n : rel + "/" + n;
    struct stat st {};
    if (::lstat((root + "/" + child).c_str(), &st) != 0) continue;  // vanished meanwhile
    bool is_dir = S_ISDIR(st.st_mode);
    // A folder marked as outputs (an array's out/, which grows while its
    // tasks run) is never part of an upload.
    bool outputs = is_dir && ::access((root + "/" + child + "/" + kOutputsMarker).c_str(), F_OK) == 0;
    if ((!is_dir && !S_ISREG(st.st_mode)) || outputs || rules.ignored(child, is_dir) || !check_archive_path(child)) {
      ++out.skipped;
      if (S_ISLNK(st.st_mode)) {
        ++out.links;
      } else if (!is_dir && !S_ISREG(st.st_mode)) {
        ++out.special;
      }
      continue;
    }
    if (out.entries.size() >= limits.max_entries) {
      return make_error(ErrorCode::kResourceExhausted, root + " holds more than " + std::to_string(limits.max_entries) +
                                                           " files and folders; add a .yonderignore for what the job "
                                                           "does not need");
    }
    TreeEntry e{child, is_dir, static_cast<uint32_t>(st.st_mode & 0777), is_dir ? 0 : static_cast<uint64_t>(st.st_size)};
    out.entries.push_back(e);
    if (is_dir) {
      YONDER_TRY(walk(root, child, rules, limits, out, depth + 1));
      continue;
    }
    out.bytes += e.size;
    ++out.files;
    if (out.bytes > limits.max_bytes) {
      return make_error(ErrorCode::kResourceExhausted,
                        root + " holds more than " + std::to_string(limits.max_bytes >> 20) +
                            " MiB to upload; add a .yonderignore (same patterns as .gitignore) for what the job "
                            "does not need, or ask for more disk");
    }
  }
  return ok_status();
}

}  // namespace

IgnoreRules read_ignore_rules(const std::string& root) {
  IgnoreRules rules;
  rules.add(read_text(root + "/.gitignore"));
  rules.add(read_text(root + "/.yonderignore"));
  return rules;
}

Result<TreeListing> list_tree(const std::string& root, const ArchiveLimits& limits) {
  IgnoreRules rules = read_ignore_rules(root);
  TreeListing out;
  out.root = root;
  YONDER_TRY(walk(root, "", rules, limits, out, 0));
  return out;
}

TreePacker::TreePacker(TreeListing listing) : listing_(std::move(listing)) {}

TreePacker::~TreePacker() {
  if (fd_ >= 0) ::close(fd_);
}

Result<Bytes> TreePacker::next(size_t max) {
  Bytes out;
  out.reserve(max + 512);  // one allocation: the chunk plus an entry header
  if (!magic_sent_) {
    out.insert(out.end(), kArchiveMagic.begin(), kArchiveMagic.end());
    magic_sent_ = true;
  }
  while (out.size() < max && !end_sent_) {
    if (fd_ >= 0) {
      const TreeEntry& e = listing_.entries[index_ - 1];
      size_t want = static_cast<size_t>(std::min<uint64_t>(left_, max - out.size()));
      size_t at = out.size();
      out.resize(at + want);
      ssize_t n = ::read(fd_, out.data() + at, want);
      if (n < 0 && errno == EINTR) {
        out.resize(at);
        continue;
      }
      if (n <= 0) {
        return make_error(ErrorCode::kFailedPrecondition,
                          listing_.root + "/" + e.path + " shrank or became unreadable while it was being uploaded");
      }
      out.resize(at + static_cast<size_t>(n));
      left_ -= static_cast<uint64_t>(n);
      sent_ += static_cast<uint64_t>(n);
      if (left_ == 0) {
        ::close(fd_);
        fd_ = -1;
      }
      continue;
    }
    if (index_ == listing_.entries.size()) {
      Bytes end = encode_entry(EntryType::kEnd, 0, {}, 0);
      out.insert(out.end(), end.begin(), end.end());
      end_sent_ = true;
      break;
    }
    const TreeEntry& e = listing_.entries[index_++];
    uint64_t offset = std::min(e.offset, e.size);
    if (!e.dir && e.size > offset) {
      fd_ = ::open((listing_.root + "/" + e.path).c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
      if (fd_ < 0) {
        return make_error(ErrorCode::kFailedPrecondition, "cannot read " + listing_.root + "/" + e.path + ": " +
                                                              std::strerror(errno));
      }
      if (offset > 0 && ::lseek(fd_, static_cast<off_t>(offset), SEEK_SET) < 0) {
        return make_error(ErrorCode::kFailedPrecondition, "cannot read " + listing_.root + "/" + e.path + ": " +
                                                              std::strerror(errno));
      }
      left_ = e.size - offset;
    }
    Bytes h = encode_entry(e.dir ? EntryType::kDir : EntryType::kFile, e.mode, e.path, e.dir ? 0 : e.size - offset);
    out.insert(out.end(), h.begin(), h.end());
  }
  return out;
}

}  // namespace yonder::transfer
