#include "jobs/provider/workspace_digest.h"

#include <dirent.h>
#include <fcntl.h>
#include <sodium.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

namespace yonder::jobs::provider {
namespace {

constexpr char kLabel[] = "yonder-workspace-outputs-v1\n";
constexpr uint64_t kMaxDigestFileBytes = 256ull << 20;

std::string to_hex(const uint8_t* d, size_t n) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * n);
  for (size_t i = 0; i < n; ++i) {
    out.push_back(kHex[d[i] >> 4]);
    out.push_back(kHex[d[i] & 15]);
  }
  return out;
}

bool from_hex(const std::string& hex, uint8_t out[crypto_hash_sha256_BYTES]) {
  if (hex.size() != 2 * crypto_hash_sha256_BYTES) return false;
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  for (size_t i = 0; i < crypto_hash_sha256_BYTES; ++i) {
    int hi = nibble(hex[2 * i]), lo = nibble(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    out[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return true;
}

// Hashes `len` bytes of `fd` from `offset` into `st`; false on a read error.
bool hash_range(int fd, off_t offset, uint64_t len, crypto_hash_sha256_state& st, std::vector<uint8_t>& buf) {
  while (len > 0) {
    ssize_t n = ::pread(fd, buf.data(), static_cast<size_t>(std::min<uint64_t>(len, buf.size())), offset);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    if (n == 0) break;  // shrank while read: what is there is hashed
    crypto_hash_sha256_update(&st, buf.data(), static_cast<size_t>(n));
    offset += n;
    len -= static_cast<uint64_t>(n);
  }
  return true;
}

// SHA-256 of the open file `fd` (closed here). A file with holes (a job can
// make a 16 TiB file that holds one block) is hashed by its data extents
// and its size, "sparse" first, so the work is what the file holds on disk,
// never its length in zeros.
std::optional<std::string> hash_fd(int fd) {
  crypto_hash_sha256_state st;
  crypto_hash_sha256_init(&st);
  std::vector<uint8_t> buf(1 << 20);
  struct stat sb {};
  bool ok = ::fstat(fd, &sb) == 0;
  off_t size = ok ? sb.st_size : 0;
  off_t first_hole = ok && size > 0 ? ::lseek(fd, 0, SEEK_HOLE) : size;
  if (!ok) {
    ::close(fd);
    return std::nullopt;
  }
  if (first_hole < 0 || first_hole >= size) {
    ok = hash_range(fd, 0, static_cast<uint64_t>(size), st, buf);  // no holes: the plain content hash
  } else {
    std::string head = "sparse\n" + std::to_string(size) + "\n";
    crypto_hash_sha256_update(&st, reinterpret_cast<const uint8_t*>(head.data()), head.size());
    for (off_t pos = 0; ok && pos < size;) {
      off_t data = ::lseek(fd, pos, SEEK_DATA);
      if (data < 0) break;  // ENXIO: only a hole is left
      off_t hole = ::lseek(fd, data, SEEK_HOLE);
      if (hole < 0) hole = size;
      std::string extent = std::to_string(data) + "+" + std::to_string(hole - data) + "\n";
      crypto_hash_sha256_update(&st, reinterpret_cast<const uint8_t*>(extent.data()), extent.size());
      ok = hash_range(fd, data, static_cast<uint64_t>(hole - data), st, buf);
      pos = hole;
    }
  }
  ::close(fd);
  if (!ok) return std::nullopt;
  uint8_t d[crypto_hash_sha256_BYTES];
  crypto_hash_sha256_final(&st, d);
  return to_hex(d, sizeof d);
}

// Walks the folder open as `dir_fd` (closed here), `prefix` its relative path ("" or "a/b/").
void walk(int dir_fd, const std::string& prefix, TreeDigests& out) {
  DIR* dir = ::fdopendir(dir_fd);
  if (dir == nullptr) {
    ::close(dir_fd);
    out.complete = false;
    return;
  }
  std::vector<std::string> names;
  while (dirent* e = ::readdir(dir)) {
    std::string name = e->d_name;
    if (name != "." && name != "..") names.push_back(std::move(name));
  }
  for (const auto& name : names) {
    if (out.files.size() >= kMaxDigestFiles) {
      out.complete = false;
      break;
    }
    struct stat st {};
    if (::fstatat(::dirfd(dir), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      out.complete = false;
      continue;
    }
    if (S_ISDIR(st.st_mode)) {
      int sub = ::openat(::dirfd(dir), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (sub < 0) {
        out.complete = false;
        continue;
      }
      walk(sub, prefix + name + "/", out);
    } else if (S_ISREG(st.st_mode)) {
      int fd = ::openat(::dirfd(dir), name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
      auto hex = fd < 0 ? std::nullopt : hash_fd(fd);
      if (!hex) {
        out.complete = false;
        continue;
      }
      out.files[prefix + name] = *hex;
    }
    // Links and special files: not outputs.
  }
  ::closedir(dir);
}

}  // namespace

Result<TreeDigests> digest_tree(const std::string& root) {
  int fd = ::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    return make_error(ErrorCode::kNotFound, "cannot open the workspace " + root + ": " + std::strerror(errno));
  }
  TreeDigests out;
  walk(fd, "", out);
  return out;
}

std::string outputs_digest(const TreeDigests& after, const FileDigests& before) {
  crypto_hash_sha256_state st;
  crypto_hash_sha256_init(&st);
  crypto_hash_sha256_update(&st, reinterpret_cast<const uint8_t*>(kLabel), sizeof kLabel - 1);
  for (const auto& [path, hex] : after.files) {  // std::map: byte order of the paths
    auto was = before.find(path);
    if (was != before.end() && was->second == hex) continue;
    uint8_t len[4] = {static_cast<uint8_t>(path.size() >> 24), static_cast<uint8_t>(path.size() >> 16),
                      static_cast<uint8_t>(path.size() >> 8), static_cast<uint8_t>(path.size())};
    uint8_t digest[crypto_hash_sha256_BYTES];
    if (!from_hex(hex, digest)) std::memset(digest, 0, sizeof digest);  // never: digest_tree writes hex
    crypto_hash_sha256_update(&st, len, sizeof len);
    crypto_hash_sha256_update(&st, reinterpret_cast<const uint8_t*>(path.data()), path.size());
    crypto_hash_sha256_update(&st, digest, sizeof digest);
  }
  if (!after.complete) {
    static constexpr uint8_t kPartial[4] = {0xff, 0xff, 0xff, 0xff};  // no path is that long
    crypto_hash_sha256_update(&st, kPartial, sizeof kPartial);
  }
  uint8_t d[crypto_hash_sha256_BYTES];
  crypto_hash_sha256_final(&st, d);
  return to_hex(d, sizeof d);
}

std::string empty_outputs_digest() {
  return outputs_digest(TreeDigests{}, {});
}

Status write_file_digests(const std::string& path, const FileDigests& digests) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [p, hex] : digests) j[p] = hex;
  std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::trunc);
    f << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    if (!f.flush()) return make_error(ErrorCode::kInternal, "cannot write " + tmp);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    return make_error(ErrorCode::kInternal, "cannot rename " + tmp + ": " + std::strerror(errno));
  }
  return ok_status();
}

Result<FileDigests> read_file_digests(const std::string& path) {
  std::ifstream f(path);
  if (!f) return make_error(ErrorCode::kNotFound, "no seed digests at " + path);
  std::ostringstream text;
  text << f.rdbuf();
  if (text.str().size() > kMaxDigestFileBytes) {
    return make_error(ErrorCode::kInvalidArgument, path + " is larger than any seed digest file this node writes");
  }
  auto j = nlohmann::json::parse(text.str(), nullptr, false);
  if (!j.is_object() || j.size() > kMaxDigestFiles) {
    return make_error(ErrorCode::kInvalidArgument, path + " is not a seed digest file");
  }
  FileDigests out;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (!it->is_string()) return make_error(ErrorCode::kInvalidArgument, path + " is not a seed digest file");
    out[it.key()] = it->get<std::string>();
  }
  return out;
}

}  // namespace yonder::jobs::provider
