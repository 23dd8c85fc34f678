#include "transfer/tree_fetch.h"

#include <fcntl.h>
#include <sodium.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <set>

namespace yonder::transfer {
namespace fs = std::filesystem;
namespace {

constexpr size_t kHashChunk = 256 * 1024;

bool is_hex_digest(const std::string& s) {
  return s.size() == 64 && std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

std::string rel_path(const fs::path& p, const fs::path& root) { return p.lexically_relative(root).generic_string(); }

}  // namespace

Result<std::string> sha256_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return make_error(ErrorCode::kFailedPrecondition, "cannot read " + path);
  crypto_hash_sha256_state st;
  crypto_hash_sha256_init(&st);
  std::vector<uint8_t> buf(kHashChunk);
  while (true) {
    ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      ::close(fd);
      return make_error(ErrorCode::kFailedPrecondition, "cannot read " + path);
    }
    if (n == 0) break;
    crypto_hash_sha256_update(&st, buf.data(), static_cast<size_t>(n));
  }
  ::close(fd);
  uint8_t out[crypto_hash_sha256_BYTES];
  crypto_hash_sha256_final(&st, out);
  return hex_encode(ByteView(out, sizeof out));
}

HaveManifest have_manifest(const TreeListing& listing, size_t max_json_bytes) {
  HaveManifest m;
  size_t json_bytes = 2;
  for (const auto& e : listing.entries) {
    if (e.dir) continue;
    size_t cost = e.path.size() + 64 + 32;
    if (json_bytes + cost > max_json_bytes) break;
    auto digest = sha256_file(listing.root + "/" + e.path);
    if (!digest) continue;  // changed under us: it is simply fetched again
    m[e.path] = {e.size, *digest};
    json_bytes += cost;
  }
  return m;
}

nlohmann::json manifest_to_json(const HaveManifest& m) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [path, d] : m) j[path] = nlohmann::json::array({d.size, d.sha256});
  return j;
}

Result<HaveManifest> manifest_from_json(const nlohmann::json& j, size_t max_entries) {
  HaveManifest m;
  if (j.is_null()) return m;
  if (!j.is_object() || j.size() > max_entries) {
    return make_error(ErrorCode::kInvalidArgument, "'have' must be an object of at most " + std::to_string(max_entries) + " files");
  }
  for (const auto& [path, v] : j.items()) {
    YONDER_TRY(check_archive_path(path));
    if (!v.is_array() || v.size() != 2 || !v[0].is_number_unsigned() || !v[1].is_string() ||
        !is_hex_digest(v[1].get<std::string>())) {
      return make_error(ErrorCode::kInvalidArgument, "'have' entries are [size, sha256 hex]");
    }
    m[path] = {v[0].get<uint64_t>(), v[1].get<std::string>()};
  }
  return m;
}

Result<std::string> normalize_request_path(const std::string& path) {
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  while (p.rfind("./", 0) == 0) p = p.substr(2);
  if (p.empty() || p == ".") return std::string();
  if (auto st = check_archive_path(p); !st) {
    return make_error(ErrorCode::kInvalidArgument, "\"" + path.substr(0, 256) +
                                                       "\" is not a path inside the job's workspace (relative, without "
                                                       "'..', '.' or empty parts)");
  }
  return p;
}

OutputsPolicy outputs_policy_for(const TreeListing* target_listing, const std::string& rules_root,
                                 std::vector<std::string> named) {
  OutputsPolicy policy;
  policy.ignore = read_ignore_rules(rules_root);
  if (target_listing != nullptr) {
    std::set<std::string> files;
    for (const auto& e : target_listing->entries) {
      if (!e.dir) files.insert(e.path);
    }
    policy.uploaded = std::move(files);
  }
  policy.named = std::move(named);
  return policy;
}

Result<MovedOutputs> move_tree_into(const std::string& from, const std::string& into, const OutputsPolicy& policy,
                                    bool dry_run) {
  MovedOutputs moved;
  fs::path src(from), dst(into);
  std::error_code ec;
  std::vector<fs::path> files;
  for (auto it = fs::recursive_directory_iterator(src, fs::directory_options::none, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_regular_file(ec) && !it->is_symlink(ec)) files.push_back(it->path());
  }
  if (ec) return make_error(ErrorCode::kFailedPrecondition, "cannot read the fetched files: " + ec.message());
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    std::string rel = rel_path(f, src);
    YONDER_TRY(check_archive_path(rel));
    struct stat fresh {};
    if (::lstat(f.c_str(), &fresh) != 0 || !S_ISREG(fresh.st_mode)) continue;
    struct stat here {};
    bool exists_here = ::lstat((dst / rel).c_str(), &here) == 0;
    OutputDecision decision = policy.decide(rel, static_cast<uint32_t>(fresh.st_mode & 07777), exists_here);
    if (decision.refusal != OutputRefusal::kNone) {
      moved.skipped.count(decision.refusal);
      continue;
    }
    // The fresh folder is ours and holds no links (TreeExtractor), so the
    // mode is set on the file that moves.
    if (!dry_run && ::chmod(f.c_str(), static_cast<mode_t>(decision.mode)) != 0) {
      return make_error(ErrorCode::kFailedPrecondition, "cannot set the mode of " + rel + ": " + std::string(strerror(errno)));
    }
    fs::path target = dst;
    fs::path parts(rel);
    auto last = std::prev(parts.end());
    for (auto p = parts.begin(); p != last; ++p) {
      target /= *p;
      struct stat st {};
      if (::lstat(target.c_str(), &st) != 0) {
        if (dry_run) continue;  // it would be made; nothing below it exists either
        if (::mkdir(target.c_str(), 0755) != 0) {
          return make_error(ErrorCode::kFailedPrecondition, "cannot create folder " + target.string());
        }
      } else if (!S_ISDIR(st.st_mode)) {
        return make_error(ErrorCode::kFailedPrecondition, "not writing " + rel + ": " + target.string() +
                                                              " is a symbolic link or not a folder here");
      }
    }
    target /= *last;
    struct stat st {};
    if (::lstat(target.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
      return make_error(ErrorCode::kFailedPrecondition, "not writing " + rel + ": it is a folder here");
    }
    // rename() replaces a link itself, never what it points to.
    if (!dry_run && ::rename(f.c_str(), target.c_str()) != 0) {
      return make_error(ErrorCode::kFailedPrecondition, "cannot put " + rel + " in place: " + std::string(strerror(errno)));
    }
    if (exists_here) moved.replaced.push_back(rel);
    moved.files.push_back(rel);
  }
  return moved;
}

}  // namespace yonder::transfer
