#include "transfer/manifest.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

namespace yonder::transfer {
namespace {

constexpr size_t kManifestHashChunk = 1 << 20;
constexpr size_t kMaxHashThreads = 4;
constexpr size_t kDigestRecord = 8 + 32;  // u64 size + SHA-256
constexpr int64_t kRacyNs = 2'000'000'000;
constexpr size_t kMaxCacheFileBytes = 64 << 20;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void put_be64(Bytes& out, uint64_t v) {
  for (int i = 7; i >= 0; --i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

bool parse_hex_digest(const std::string& s, Digest& out) {
  if (s.size() != 64) return false;
  for (size_t i = 0; i < 32; ++i) {
    unsigned v = 0;
    if (std::sscanf(s.c_str() + 2 * i, "%2x", &v) != 1) return false;
    out[i] = static_cast<uint8_t>(v);
  }
  return digest_hex(out) == s;  // lowercase, canonical
}

}  // namespace

std::string digest_hex(const Digest& d) { return hex_encode(ByteView(d.data(), d.size())); }

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) { EVP_DigestInit_ex(static_cast<EVP_MD_CTX*>(ctx_), EVP_sha256(), nullptr); }
Sha256::~Sha256() { EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(ctx_)); }
void Sha256::update(ByteView data) { EVP_DigestUpdate(static_cast<EVP_MD_CTX*>(ctx_), data.data(), data.size()); }
Digest Sha256::final() {
  Digest d{};
  unsigned len = 0;
  EVP_DigestFinal_ex(static_cast<EVP_MD_CTX*>(ctx_), d.data(), &len);
  EVP_DigestInit_ex(static_cast<EVP_MD_CTX*>(ctx_), EVP_sha256(), nullptr);
  return d;
}

Result<Digest> hash_file(const std::string& path, const std::function<void(uint64_t)>& progress) {
  int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return make_error(ErrorCode::kFailedPrecondition, "cannot read " + path + ": " + std::strerror(errno));
  Sha256 h;
  std::vector<uint8_t> buf(kManifestHashChunk);
  while (true) {
    ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int e = errno;
      ::close(fd);
      return make_error(ErrorCode::kFailedPrecondition, "cannot read " + path + ": " + std::strerror(e));
    }
    if (n == 0) break;
    h.update(ByteView(buf.data(), static_cast<size_t>(n)));
    if (progress) progress(static_cast<uint64_t>(n));
  }
  ::close(fd);
  return h.final();
}

// --- HashCache ---------------------------------------------------------------

HashCache::HashCache(std::string file) : file_(std::move(file)) {
  std::ifstream in(file_, std::ios::binary);
  if (!in) return;
  std::ostringstream s;
  s << in.rdbuf();
  std::string text = s.str();
  if (text.size() > kMaxCacheFileBytes) return;
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_object() || !j.contains("files") || !j["files"].is_object()) return;  // damaged: start over
  for (const auto& [path, v] : j["files"].items()) {
    if (!v.is_array() || v.size() != 4 || !v[0].is_number_unsigned() || !v[1].is_number_integer() ||
        !v[2].is_number_unsigned() || !v[3].is_string()) {
      continue;
    }
    Entry e{v[0].get<uint64_t>(), v[1].get<int64_t>(), v[2].get<uint64_t>(), {}};
    if (parse_hex_digest(v[3].get<std::string>(), e.digest)) loaded_[path] = e;
  }
}

bool HashCache::lookup(const std::string& abs_path, uint64_t size, int64_t mtime_ns, uint64_t ino, Digest& out) const {
  auto it = loaded_.find(abs_path);
  if (it == loaded_.end() || it->second.size != size || it->second.mtime_ns != mtime_ns || it->second.ino != ino) {
    return false;
  }
  out = it->second.digest;
  used_[abs_path] = it->second;
  return true;
}

void HashCache::store(const std::string& abs_path, uint64_t size, int64_t mtime_ns, uint64_t ino, const Digest& d) {
  if (now_ns() - mtime_ns < kRacyNs) return;  // may still change within the same mtime
  used_[abs_path] = {size, mtime_ns, ino, d};
}

Status HashCache::save() {
  nlohmann::json files = nlohmann::json::object();
  for (const auto& [path, e] : used_) files[path] = {e.size, e.mtime_ns, e.ino, digest_hex(e.digest)};
  std::string text = nlohmann::json{{"version", 1}, {"files", files}}.dump();
  std::string tmp = file_ + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return make_error(ErrorCode::kInternal, "cannot write " + tmp);
    out << text;
    if (!out.flush()) return make_error(ErrorCode::kInternal, "cannot write " + tmp);
  }
  if (std::rename(tmp.c_str(), file_.c_str()) != 0) {
    return make_error(ErrorCode::kInternal, "cannot replace " + file_ + ": " + std::strerror(errno));
  }
  return ok_status();
}

// --- Manifest ----------------------------------------------------------------

Result<Manifest> build_manifest(const TreeListing& listing, HashCache* cache, const std::function<void(uint64_t)>& hashed) {
  Manifest m;
  m.entries.reserve(listing.entries.size());
  // First the cheap part, in order: stat every file and take what the cache
  // knows. The files it does not know are hashed afterwards, several at once.
  struct Miss {
    size_t entry;
    std::string abs;
    uint64_t size;
    int64_t mtime;
    ino_t ino;
  };
  std::vector<Miss> misses;
  for (const auto& e : listing.entries) {
    ManifestEntry me{e.path, e.dir, e.mode, e.size, {}};
    if (!e.dir) {
      std::string abs = listing.root + "/" + e.path;
      struct stat st {};
      if (::lstat(abs.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
        return make_error(ErrorCode::kFailedPrecondition, abs + " vanished or changed while the upload was prepared; run again");
      }
      if (static_cast<uint64_t>(st.st_size) != e.size) {
        return make_error(ErrorCode::kFailedPrecondition, abs + " changed size while the upload was prepared; run again");
      }
      int64_t mtime = static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
      if (cache == nullptr || !cache->lookup(abs, e.size, mtime, st.st_ino, me.digest)) {
        misses.push_back({m.entries.size(), std::move(abs), e.size, mtime, st.st_ino});
      } else if (hashed) {
        hashed(e.size);
      }
      ++m.files;
      m.bytes += e.size;
    }
    m.entries.push_back(std::move(me));
  }
  // SHA-256 runs at about 1.7 GB/s per core here: a first upload of a big
  // tree spends most of its preparation in it, so every core takes files.
  std::atomic<size_t> next{0};
  std::mutex failed_mutex;
  std::optional<Error> failed;
  auto work = [&] {
    for (size_t i = next++; i < misses.size(); i = next++) {
      {
        std::lock_guard lock(failed_mutex);
        if (failed) return;
      }
      auto d = hash_file(misses[i].abs, hashed);
      if (!d) {
        std::lock_guard lock(failed_mutex);
        if (!failed) failed = std::move(d).error();
        return;
      }
      m.entries[misses[i].entry].digest = *d;
    }
  };
  size_t workers = std::min<size_t>({kMaxHashThreads, std::max(1u, std::thread::hardware_concurrency()), misses.size()});
  std::vector<std::thread> threads;
  for (size_t i = 1; i < workers; ++i) threads.emplace_back(work);
  work();
  for (auto& t : threads) t.join();
  if (failed) return std::move(*failed);
  if (cache != nullptr) {
    for (const auto& miss : misses) cache->store(miss.abs, miss.size, miss.mtime, miss.ino, m.entries[miss.entry].digest);
  }
  return m;
}

Bytes encode_manifest(const Manifest& m) {
  Bytes out(kArchiveMagic.begin(), kArchiveMagic.end());
  for (const auto& e : m.entries) {
    Bytes h = encode_entry(e.dir ? EntryType::kDir : EntryType::kFile, e.mode, e.path, e.dir ? 0 : kDigestRecord);
    out.insert(out.end(), h.begin(), h.end());
    if (e.dir) continue;
    put_be64(out, e.size);
    out.insert(out.end(), e.digest.begin(), e.digest.end());
  }
  Bytes end = encode_entry(EntryType::kEnd, 0, {}, 0);
  out.insert(out.end(), end.begin(), end.end());
  return out;
}

class ManifestReader::Collector final : public ArchiveVisitor {
 public:
  explicit Collector(uint64_t max_bytes) : max_bytes_(max_bytes) {}
  Status on_dir(const std::string& path, uint32_t mode) override {
    YONDER_TRY(claim(path));
    dirs_.insert(path);
    m.entries.push_back({path, true, mode, 0, {}});
    return ok_status();
  }
  Status on_file_begin(const std::string& path, uint32_t mode, uint64_t size) override {
    if (size != kDigestRecord) return bad("file entry " + path + " is not a 40-byte digest record");
    YONDER_TRY(claim(path));
    m.entries.push_back({path, false, mode, 0, {}});
    record_.clear();
    return ok_status();
  }
  Status on_file_data(ByteView data) override {
    record_.insert(record_.end(), data.begin(), data.end());
    return ok_status();
  }
  Status on_file_end() override {
    ManifestEntry& e = m.entries.back();
    uint64_t size = 0;
    for (size_t i = 0; i < 8; ++i) size = (size << 8) | record_[i];
    std::copy(record_.begin() + 8, record_.end(), e.digest.begin());
    e.size = size;
    if (size > max_bytes_ - std::min(m.bytes, max_bytes_)) {
      return make_error(ErrorCode::kResourceExhausted,
                        "the upload is larger than the " + std::to_string(max_bytes_ >> 20) +
                            " MiB this provider accepts for a workspace; add a .yonderignore or ask for more disk");
    }
    m.bytes += size;
    ++m.files;
    return ok_status();
  }
  Manifest m;

 private:
  static Error bad(const std::string& why) { return make_error(ErrorCode::kInvalidArgument, "malformed upload manifest: " + why); }
  Status claim(const std::string& path) {
    if (!paths_.insert(path).second) return bad("path " + path + " is listed twice");
    size_t slash = path.rfind('/');
    if (slash != std::string::npos && !dirs_.count(path.substr(0, slash))) {
      return bad("path " + path + " comes before its folder");
    }
    return ok_status();
  }
  uint64_t max_bytes_;
  Bytes record_;
  std::set<std::string> paths_, dirs_;
};

namespace {
ArchiveLimits manifest_limits(ArchiveLimits l) {
  // The archive reader bounds the records (40 bytes per file); the
  // collector bounds the sizes they declare by the caller's max_bytes.
  l.max_bytes = l.max_entries * kDigestRecord;
  return l;
}
}  // namespace

ManifestReader::ManifestReader(ArchiveLimits limits)
    : collector_(std::make_unique<Collector>(limits.max_bytes)), reader_(manifest_limits(limits)) {}
ManifestReader::~ManifestReader() = default;

Status ManifestReader::feed(ByteView in) { return reader_.feed(in, *collector_); }

bool ManifestReader::complete() const { return reader_.complete(); }

Result<Manifest> ManifestReader::take() {
  if (!reader_.complete()) return make_error(ErrorCode::kInvalidArgument, "the upload manifest was cut short");
  return std::move(collector_->m);
}

}  // namespace yonder::transfer
