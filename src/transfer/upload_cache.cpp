#include "transfer/upload_cache.h"

#include <dirent.h>
#include <fcntl.h>
#include <sodium.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

namespace yonder::transfer {
namespace fs = std::filesystem;
namespace {

constexpr size_t kMaxResumeEntries = 4096;
constexpr size_t kCopyChunk = 1 << 20;

Error upload_cache_io_error(const std::string& what, const std::string& path) {
  int e = errno;
  ErrorCode code = e == ENOSPC || e == EDQUOT ? ErrorCode::kResourceExhausted : ErrorCode::kInternal;
  return make_error(code, what + " " + path + ": " + std::strerror(e));
}

Status mkdir_if_missing(const std::string& p, mode_t mode) {
  if (::mkdir(p.c_str(), mode) != 0 && errno != EEXIST) return upload_cache_io_error("cannot create folder", p);
  return ok_status();
}

std::string random_name() {
  uint8_t b[8];
  randombytes_buf(b, sizeof b);
  return hex_encode(ByteView(b, sizeof b));
}

Status write_all(int fd, ByteView data, const std::string& what) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return upload_cache_io_error("cannot write", what);
    data = data.subspan(static_cast<size_t>(n));
  }
  return ok_status();
}

// Copies `from` into a new file `to` with `mode` (copy_file_range: a
// reflink or in-kernel copy where the file system can).
Status copy_file(const std::string& from, const std::string& to, mode_t mode) {
  int in = ::open(from.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (in < 0) return upload_cache_io_error("cannot read", from);
  int out = ::open(to.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
  if (out < 0) {
    ::close(in);
    return upload_cache_io_error("cannot create file", to);
  }
  Status st = ok_status();
  while (true) {
    ssize_t n = ::copy_file_range(in, nullptr, out, nullptr, kCopyChunk, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      st = upload_cache_io_error("cannot copy into", to);
      break;
    }
    if (n == 0) break;
  }
  if (st && ::fchmod(out, mode) != 0) st = upload_cache_io_error("cannot set the mode of", to);
  ::close(in);
  if (::close(out) != 0 && st) st = upload_cache_io_error("cannot write", to);
  return st;
}

mode_t file_mode(uint32_t mode) { return static_cast<mode_t>((mode & 0755) | 0600); }

}  // namespace

// --- UploadPlan --------------------------------------------------------------

UploadPlan::~UploadPlan() {
  if (!cache_) return;
  std::lock_guard lock(cache_->mutex_);
  for (const auto& d : claimed_) cache_->claimed_.erase(d);
  --cache_->in_flight_;
}

nlohmann::json UploadPlan::to_json() const {
  Bytes bits((need_.size() + 7) / 8, 0);
  for (size_t i = 0; i < need_.size(); ++i) {
    if (need_[i]) bits[i / 8] |= static_cast<uint8_t>(1u << (i % 8));
  }
  nlohmann::json resume = nlohmann::json::array();
  for (const auto& [i, off] : resume_) resume.push_back({i, off});
  return {{"need", base64_encode(bits)}, {"resume", resume},        {"need_files", need_files_},
          {"need_bytes", need_bytes_},    {"files", need_.size()},  {"bytes", manifest_ ? manifest_->bytes : 0}};
}

Result<PlanReply> parse_plan_reply(const nlohmann::json& j, const Manifest& m) {
  auto bad = [](const std::string& why) { return make_error(ErrorCode::kInternal, "the provider's upload plan is malformed: " + why); };
  if (!j.is_object() || !j.contains("need") || !j["need"].is_string()) return bad("no 'need'");
  auto bits = base64_decode(j["need"].get<std::string>());
  size_t files = static_cast<size_t>(m.files);
  if (!bits || bits->size() != (files + 7) / 8) return bad("'need' does not cover the files");
  PlanReply r;
  r.need.resize(files);
  for (size_t i = 0; i < files; ++i) r.need[i] = ((*bits)[i / 8] >> (i % 8)) & 1;
  std::vector<uint64_t> sizes;
  for (const auto& e : m.entries) {
    if (!e.dir) sizes.push_back(e.size);
  }
  if (j.contains("resume")) {
    const auto& res = j["resume"];
    if (!res.is_array() || res.size() > kMaxResumeEntries) return bad("'resume'");
    for (const auto& p : res) {
      if (!p.is_array() || p.size() != 2 || !p[0].is_number_integer() || !p[1].is_number_integer() || p[0].get<int64_t>() < 0 ||
          p[1].get<int64_t>() < 0) {
        return bad("'resume' entry");
      }
      size_t i = p[0].get<size_t>();
      uint64_t off = p[1].get<uint64_t>();
      if (i >= files || !r.need[i] || off >= sizes[i]) return bad("'resume' entry out of range");
      r.resume[i] = off;
    }
  }
  return r;
}

// --- UploadCache -------------------------------------------------------------

std::shared_ptr<UploadCache> UploadCache::open(std::string root) {
  return std::shared_ptr<UploadCache>(new UploadCache(std::move(root)));
}

std::string UploadCache::object_path(const Digest& d) const {
  std::string hex = digest_hex(d);
  return root_ + "/objects/" + hex.substr(0, 2) + "/" + hex;
}

std::string UploadCache::part_path(const Digest& d) const { return root_ + "/parts/" + digest_hex(d); }

Result<std::unique_ptr<UploadPlan>> UploadCache::plan(const Manifest& m) {
  fs::path root(root_);
  std::error_code ec;
  fs::create_directories(root / "objects", ec);
  fs::create_directories(root / "parts", ec);
  fs::create_directories(root / "tmp", ec);
  if (ec) return make_error(ErrorCode::kInternal, "cannot create the upload cache in " + root_ + ": " + ec.message());

  std::unique_ptr<UploadPlan> p(new UploadPlan());
  p->cache_ = shared_from_this();
  p->manifest_ = &m;
  std::lock_guard lock(mutex_);
  ++in_flight_;
  std::set<std::string> planned;  // a digest listed twice is sent once
  for (size_t e = 0; e < m.entries.size(); ++e) {
    const ManifestEntry& me = m.entries[e];
    if (me.dir) continue;
    size_t i = p->file_entry_.size();
    p->file_entry_.push_back(e);
    p->need_.push_back(false);
    if (me.size == 0) continue;
    std::string hex = digest_hex(me.digest);
    if (planned.count(hex)) continue;
    struct stat st {};
    if (::stat(object_path(me.digest).c_str(), &st) == 0 && static_cast<uint64_t>(st.st_size) == me.size) continue;
    planned.insert(hex);
    p->need_[i] = true;
    ++p->need_files_;
    uint64_t have = 0;
    if (!claimed_.count(hex)) {  // else another upload writes that part: ours goes to tmp/, from the start
      claimed_.insert(hex);
      p->claimed_.insert(hex);
      if (::stat(part_path(me.digest).c_str(), &st) == 0 && static_cast<uint64_t>(st.st_size) < me.size &&
          p->resume_.size() < kMaxResumeEntries) {
        have = static_cast<uint64_t>(st.st_size);
      }
    }
    if (have > 0) p->resume_[i] = have;
    p->need_bytes_ += me.size - have;
  }
  return p;
}

Result<std::unique_ptr<UploadReceiver>> UploadCache::receive(UploadPlan& plan) {
  ArchiveLimits limits;
  limits.max_bytes = plan.need_bytes_;
  limits.max_entries = plan.need_files_ + 1;
  return std::unique_ptr<UploadReceiver>(new UploadReceiver(plan, limits));
}

Result<nlohmann::json> UploadCache::materialize(const Manifest& m, const std::string& dir) {
  if (::mkdir(dir.c_str(), 0700) != 0) {
    if (errno == EEXIST) return make_error(ErrorCode::kAlreadyExists, "upload folder " + dir + " exists already");
    return upload_cache_io_error("cannot create the upload folder", dir);
  }
  uint64_t files = 0, bytes = 0;
  for (const auto& e : m.entries) {
    std::string p = dir + "/" + e.path;
    if (e.dir) {
      if (::mkdir(p.c_str(), 0700) != 0 && errno != EEXIST) return upload_cache_io_error("cannot create folder", e.path);
      if (::chmod(p.c_str(), static_cast<mode_t>((e.mode & 0755) | 0700)) != 0) return upload_cache_io_error("cannot set the mode of", e.path);
      continue;
    }
    ++files;
    bytes += e.size;
    mode_t mode = file_mode(e.mode);
    if (e.size == 0) {
      int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
      if (fd < 0 || ::fchmod(fd, mode) != 0) {
        if (fd >= 0) ::close(fd);
        return upload_cache_io_error("cannot create file", e.path);
      }
      ::close(fd);
      continue;
    }
    std::string obj = object_path(e.digest);
    struct stat st {};
    if (::stat(obj.c_str(), &st) != 0 || static_cast<uint64_t>(st.st_size) != e.size) {
      return make_error(ErrorCode::kFailedPrecondition,
                        "the upload cache lost " + e.path + " before the workspace was made; upload again");
    }
    ::utimensat(AT_FDCWD, obj.c_str(), nullptr, 0);  // recently used: kept longest by trim()
    // A hard link costs nothing; the job gets a copy of this folder, never
    // the folder itself. A different mode (or too many links) needs a copy.
    if ((st.st_mode & 07777) == mode && ::link(obj.c_str(), p.c_str()) == 0) continue;
    YONDER_TRY(copy_file(obj, p, mode));
  }
  return nlohmann::json{{"files", files}, {"bytes", bytes}};
}

Result<uint64_t> UploadCache::trim(uint64_t cap_bytes, std::chrono::seconds part_ttl) {
  {
    std::lock_guard lock(mutex_);
    if (in_flight_ > 0) return 0;
  }
  struct Obj {
    fs::file_time_type at;
    uint64_t size;
    fs::path path;
  };
  std::vector<Obj> objs;
  uint64_t total = 0;
  std::error_code ec;
  auto now = fs::file_time_type::clock::now();
  for (const auto& sub : fs::directory_iterator(fs::path(root_) / "objects", ec)) {
    std::error_code e2;
    for (const auto& f : fs::directory_iterator(sub.path(), e2)) {
      std::error_code e3;
      auto at = f.last_write_time(e3);
      auto size = f.file_size(e3);
      if (e3) continue;
      objs.push_back({at, size, f.path()});
      total += size;
    }
  }
  for (auto dir : {"parts", "tmp"}) {
    for (const auto& f : fs::directory_iterator(fs::path(root_) / dir, ec)) {
      std::error_code e2;
      if (now - f.last_write_time(e2) > part_ttl && !e2) fs::remove(f.path(), e2);
    }
  }
  if (total <= cap_bytes) return total;
  std::sort(objs.begin(), objs.end(), [](const Obj& a, const Obj& b) { return a.at < b.at; });
  for (const auto& o : objs) {
    if (total <= cap_bytes) break;
    std::error_code e2;
    if (fs::remove(o.path, e2)) total -= o.size;
  }
  return total;
}

// --- UploadReceiver ----------------------------------------------------------

UploadReceiver::UploadReceiver(UploadPlan& plan, ArchiveLimits limits) : plan_(plan), reader_(limits) {
  got_.assign(plan.need_.size(), false);
  for (size_t i = 0; i < plan.need_.size(); ++i) {
    if (plan.need_[i]) index_of_[plan.manifest_->entries[plan.file_entry_[i]].path] = i;
  }
}

UploadReceiver::~UploadReceiver() {
  if (fd_ >= 0) {
    ::close(fd_);
    // A part stays for the next attempt to resume; a private copy does not.
    if (private_) ::unlink(part_.c_str());
  }
}

Status UploadReceiver::on_dir(const std::string& path, uint32_t) {
  return make_error(ErrorCode::kInvalidArgument, "the upload sent folder " + path + ", which the plan did not ask for");
}

Status UploadReceiver::on_file_begin(const std::string& path, uint32_t, uint64_t size) {
  auto it = index_of_.find(path);
  if (it == index_of_.end() || got_[it->second]) {
    return make_error(ErrorCode::kInvalidArgument, "the upload sent " + path + ", which the plan did not ask for");
  }
  file_ = it->second;
  path_ = path;
  const ManifestEntry& e = plan_.manifest_->entries[plan_.file_entry_[file_]];
  auto r = plan_.resume_.find(file_);
  uint64_t offset = r == plan_.resume_.end() ? 0 : r->second;
  if (size != e.size - offset) {
    return make_error(ErrorCode::kInvalidArgument, "the upload sent " + path + " with " + std::to_string(size) +
                                                       " bytes where the plan asked for " + std::to_string(e.size - offset));
  }
  UploadCache& cache = *plan_.cache_;
  bool ours = plan_.claimed_.count(digest_hex(e.digest)) > 0;
  private_ = !ours;
  part_ = ours ? cache.part_path(e.digest) : cache.root() + "/tmp/" + random_name();
  if (offset == 0) {
    fd_ = ::open(part_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd_ < 0) return upload_cache_io_error("cannot create", part_);
    return ok_status();
  }
  // Resuming: the bytes already here count towards the digest.
  int in = ::open(part_.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (in < 0) return upload_cache_io_error("cannot reopen", part_);
  std::vector<uint8_t> buf(kCopyChunk);
  uint64_t left = offset;
  while (left > 0) {
    ssize_t n = ::read(in, buf.data(), static_cast<size_t>(std::min<uint64_t>(left, buf.size())));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ::close(in);
      return make_error(ErrorCode::kFailedPrecondition, "the partial upload of " + path + " shrank; upload again");
    }
    hash_.update(ByteView(buf.data(), static_cast<size_t>(n)));
    left -= static_cast<uint64_t>(n);
  }
  ::close(in);
  fd_ = ::open(part_.c_str(), O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd_ < 0 || ::ftruncate(fd_, static_cast<off_t>(offset)) != 0 || ::lseek(fd_, 0, SEEK_END) < 0) {
    return upload_cache_io_error("cannot reopen", part_);
  }
  return ok_status();
}

Status UploadReceiver::on_file_data(ByteView data) {
  hash_.update(data);
  received_bytes_ += data.size();
  return write_all(fd_, data, path_);
}

Status UploadReceiver::on_file_end() {
  int fd = fd_;
  fd_ = -1;
  const ManifestEntry& e = plan_.manifest_->entries[plan_.file_entry_[file_]];
  Digest d = hash_.final();
  bool closed = ::close(fd) == 0;
  if (d != e.digest) {
    ::unlink(part_.c_str());
    return make_error(ErrorCode::kFailedPrecondition,
                      path_ + " changed while it was being uploaded (its bytes no longer match its digest); run again");
  }
  if (!closed) return upload_cache_io_error("cannot write", part_);
  std::string obj = plan_.cache_->object_path(e.digest);
  YONDER_TRY(mkdir_if_missing(obj.substr(0, obj.rfind('/')), 0700));
  if (::chmod(part_.c_str(), 0644) != 0) return upload_cache_io_error("cannot set the mode of", part_);
  if (::rename(part_.c_str(), obj.c_str()) != 0) return upload_cache_io_error("cannot store", obj);
  got_[file_] = true;
  ++received_files_;
  return ok_status();
}

Result<nlohmann::json> UploadReceiver::finish() {
  if (!reader_.complete()) {
    return make_error(ErrorCode::kInvalidArgument, "the upload ended before the end of its archive (cut short)");
  }
  for (size_t i = 0; i < got_.size(); ++i) {
    if (plan_.need_[i] && !got_[i]) {
      return make_error(ErrorCode::kInvalidArgument,
                        "the upload left out " + plan_.manifest_->entries[plan_.file_entry_[i]].path + ", which the plan asked for");
    }
  }
  // On disk before acknowledged: the consumer forgets what it sent once this
  // reply arrives, so a host crash after it must not lose a file. One
  // syncfs for the whole upload (every file and the folders they were
  // renamed into) costs far less than an fsync per file.
  if (received_files_ > 0) {
    int dir = ::open(plan_.cache_->root().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    bool synced = dir >= 0 && ::syncfs(dir) == 0;
    int e = errno;
    if (dir >= 0) ::close(dir);
    if (!synced) {
      return make_error(ErrorCode::kResourceExhausted, "the provider could not write the upload to its disk (" +
                                                           std::string(std::strerror(e)) + "); try again later");
    }
  }
  return nlohmann::json{{"received_files", received_files_}, {"received_bytes", received_bytes_}};
}

}  // namespace yonder::transfer
