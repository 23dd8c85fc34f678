#include "jobs/provider/job_log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <sodium.h>

#include "jobs/provider/workspace_digest.h"

namespace yonder::jobs::provider {
namespace {

uint64_t get_be(std::string_view b, size_t pos, size_t n) {
  uint64_t v = 0;
  for (size_t i = 0; i < n; ++i) v = (v << 8) | static_cast<uint8_t>(b[pos + i]);
  return v;
}

void put_be(std::string& out, uint64_t v, size_t n) {
  for (size_t i = 0; i < n; ++i) out.push_back(static_cast<char>(v >> (8 * (n - 1 - i))));
}

Error io_error(const std::string& what, const std::string& path) {
  int err = errno;
  if (err == ENOSPC || err == EDQUOT) {
    // Not a fault of ours: the operator can fix it, and the pump waits for that.
    std::string dir = path.substr(0, path.find_last_of('/'));
    return make_error(ErrorCode::kResourceExhausted, "disk full: free space in " + dir + " (" + what + " " + path + ")");
  }
  return make_error(ErrorCode::kInternal, what + " " + path + ": " + std::strerror(err));
}

}  // namespace

std::string encode_log_record(exec::LogStream stream, int64_t unix_ns, std::string_view data) {
  std::string out;
  out.reserve(kLogRecordHeader + data.size());
  out.push_back(static_cast<char>(stream));
  out.append(3, '\0');
  put_be(out, data.size(), 4);
  put_be(out, static_cast<uint64_t>(unix_ns), 8);
  out.append(data);
  return out;
}

Result<std::vector<LogRecord>> decode_log_records(std::string_view bytes, size_t* consumed) {
  std::vector<LogRecord> out;
  size_t pos = 0;
  while (bytes.size() - pos >= kLogRecordHeader) {
    uint8_t stream = static_cast<uint8_t>(bytes[pos]);
    if (stream < 1 || stream > 3 || bytes[pos + 1] != 0 || bytes[pos + 2] != 0 || bytes[pos + 3] != 0) {
      return make_error(ErrorCode::kDataLoss, "job log record at offset " + std::to_string(pos) +
                                                  " has a bad header; use an offset this API returned");
    }
    uint64_t length = get_be(bytes, pos + 4, 4);
    if (length > kMaxRecordPayload) {
      return make_error(ErrorCode::kDataLoss, "job log record at offset " + std::to_string(pos) + " is too long");
    }
    if (bytes.size() - pos - kLogRecordHeader < length) break;
    LogRecord r;
    r.stream = static_cast<exec::LogStream>(stream);
    r.unix_ns = static_cast<int64_t>(get_be(bytes, pos + 8, 8));
    r.data = std::string(bytes.substr(pos + kLogRecordHeader, length));
    out.push_back(std::move(r));
    pos += kLogRecordHeader + length;
  }
  if (consumed != nullptr) *consumed = pos;
  return out;
}

Result<std::unique_ptr<JobLog>> JobLog::open(const std::string& path, uint64_t max_bytes) {
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return io_error("opening job log", path);
  std::unique_ptr<JobLog> log(new JobLog(fd, path, max_bytes));
  // Walk the headers to find the last whole record and the last time.
  struct stat st {};
  if (::fstat(fd, &st) != 0) return io_error("reading job log", path);
  uint64_t pos = 0;
  int64_t last_ns = 0;
  bool truncated = false;
  char header[kLogRecordHeader];
  while (pos + kLogRecordHeader <= static_cast<uint64_t>(st.st_size)) {
    if (::pread(fd, header, sizeof header, static_cast<off_t>(pos)) != static_cast<ssize_t>(sizeof header)) break;
    std::string_view h(header, sizeof header);
    uint8_t stream = static_cast<uint8_t>(h[0]);
    uint64_t length = get_be(h, 4, 4);
    if (stream < 1 || stream > 3 || length > kMaxRecordPayload || pos + kLogRecordHeader + length > static_cast<uint64_t>(st.st_size)) {
      break;
    }
    last_ns = std::max<int64_t>(last_ns, static_cast<int64_t>(get_be(h, 8, 8)));
    if (stream == static_cast<uint8_t>(exec::LogStream::kSystem)) truncated = true;
    pos += kLogRecordHeader + length;
  }
  if (pos != static_cast<uint64_t>(st.st_size) && ::ftruncate(fd, static_cast<off_t>(pos)) != 0) {
    return io_error("repairing job log", path);
  }
  log->size_ = pos;
  log->last_ns_ = last_ns;
  log->truncated_ = truncated;
  return log;
}

JobLog::~JobLog() { ::close(fd_); }

Status JobLog::write_record(exec::LogStream stream, int64_t unix_ns, std::string_view data) {
  std::string rec = encode_log_record(stream, unix_ns, data);
  uint64_t at = size_.load();
  size_t off = 0;
  while (off < rec.size()) {
    ssize_t n = ::pwrite(fd_, rec.data() + off, rec.size() - off, static_cast<off_t>(at + off));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return io_error("writing job log", path_);
    off += static_cast<size_t>(n);
  }
  size_ = at + rec.size();
  if (unix_ns > last_ns_.load()) last_ns_ = unix_ns;
  return ok_status();
}

Result<bool> JobLog::append(exec::LogStream stream, int64_t unix_ns, std::string_view data) {
  std::lock_guard lock(write_mutex_);
  if (truncated_.load()) return false;
  while (!data.empty()) {
    std::string_view part = data.substr(0, kMaxRecordPayload);
    if (size_.load() + kLogRecordHeader + part.size() > max_bytes_) {
      std::string notice = "[yonder] log truncated: the job wrote more than " + std::to_string(max_bytes_) +
                           " bytes of output (jobs.log_max_bytes); later output was dropped\n";
      YONDER_TRY(write_record(exec::LogStream::kSystem, unix_ns, notice));
      truncated_ = true;
      return false;
    }
    YONDER_TRY(write_record(stream, unix_ns, part));
    data.remove_prefix(part.size());
  }
  return true;
}

Result<LogSlice> JobLog::read(uint64_t offset, size_t max_bytes) const {
  LogSlice slice;
  uint64_t end = size_.load();
  if (offset > end) {
    return make_error(ErrorCode::kInvalidArgument, "log offset " + std::to_string(offset) + " is past the end (" +
                                                       std::to_string(end) + " bytes so far)");
  }
  slice.next_offset = offset;
  if (offset == end) return slice;
  size_t want = static_cast<size_t>(std::min<uint64_t>(end - offset, max_bytes + kLogRecordHeader + kMaxRecordPayload));
  std::string buf(want, '\0');
  size_t got = 0;
  while (got < want) {
    ssize_t n = ::pread(fd_, buf.data() + got, want - got, static_cast<off_t>(offset + got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  buf.resize(got);
  size_t consumed = 0;
  auto records = decode_log_records(buf, &consumed);
  if (!records) {
    return make_error(ErrorCode::kInvalidArgument, "log offset " + std::to_string(offset) +
                                                       " is not the start of a log record; use an offset this API returned");
  }
  size_t used = 0, payload = 0;
  for (auto& r : *records) {
    if (payload > 0 && payload + r.data.size() > max_bytes) break;
    payload += r.data.size();
    used += kLogRecordHeader + r.data.size();
    slice.records.push_back(std::move(r));
  }
  slice.next_offset = offset + used;
  return slice;
}

Result<std::string> JobLog::output_sha256(std::string_view files_digest) const {
  std::string files_hex = files_digest.empty() ? empty_outputs_digest() : std::string(files_digest);
  uint8_t files[crypto_hash_sha256_BYTES];
  size_t files_len = 0;
  if (files_hex.size() != 2 * sizeof files ||
      sodium_hex2bin(files, sizeof files, files_hex.data(), files_hex.size(), nullptr, &files_len, nullptr) != 0 ||
      files_len != sizeof files) {
    return make_error(ErrorCode::kInvalidArgument, "a workspace digest is 64 hex digits");
  }
  crypto_hash_sha256_state out, err;
  crypto_hash_sha256_init(&out);
  crypto_hash_sha256_init(&err);
  uint64_t end = size_.load();
  for (uint64_t offset = 0; offset < end;) {
    auto slice = read(offset, 1 << 20);
    if (!slice) return std::move(slice).error();
    if (slice->next_offset <= offset) break;  // a torn tail: nothing more to read
    for (const auto& r : slice->records) {
      if (r.stream != exec::LogStream::kStdout && r.stream != exec::LogStream::kStderr) continue;
      crypto_hash_sha256_update(r.stream == exec::LogStream::kStdout ? &out : &err,
                                reinterpret_cast<const uint8_t*>(r.data.data()), r.data.size());
    }
    offset = slice->next_offset;
  }
  static constexpr char kLabel[] = "yonder-output-v2\n";
  uint8_t parts[2 * crypto_hash_sha256_BYTES];
  crypto_hash_sha256_final(&out, parts);
  crypto_hash_sha256_final(&err, parts + crypto_hash_sha256_BYTES);
  crypto_hash_sha256_state all;
  crypto_hash_sha256_init(&all);
  crypto_hash_sha256_update(&all, reinterpret_cast<const uint8_t*>(kLabel), sizeof kLabel - 1);
  crypto_hash_sha256_update(&all, parts, sizeof parts);
  crypto_hash_sha256_update(&all, files, sizeof files);
  uint8_t digest[crypto_hash_sha256_BYTES];
  crypto_hash_sha256_final(&all, digest);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  for (uint8_t b : digest) {
    hex.push_back(kHex[b >> 4]);
    hex.push_back(kHex[b & 15]);
  }
  return hex;
}

}  // namespace yonder::jobs::provider
