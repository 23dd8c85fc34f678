// A job's output as the provider keeps it: one file per job, written by the
// log pump as the engine hands entries over, bounded in size, readable from
// any record offset while it grows, so a consumer that lost its connection
// re-reads from the last offset it saw.
//
// File format, a sequence of records (big-endian):
//   byte 0      stream (1 stdout, 2 stderr, 3 provider notice)
//   bytes 1-3   zero
//   bytes 4-7   payload length (at most kMaxRecordPayload)
//   bytes 8-15  entry time, unix nanoseconds (resumes the pump after a restart)
//   payload
// Offsets given out are record boundaries; the reader checks the header at
// an offset and refuses one that is not a record start. The file is the
// provider's own but is parsed as untrusted anyway (fuzz/job_log_fuzz.cpp):
// a torn tail after a crash is cut off at open.
//
// Threading: one writer thread (append); any number of readers (read) at
// the same time. Blocking file I/O: worker threads only.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "exec/executor.h"

namespace yonder::jobs::provider {

constexpr size_t kLogRecordHeader = 16;
constexpr size_t kMaxRecordPayload = 1 << 20;

struct LogRecord {
  exec::LogStream stream = exec::LogStream::kStdout;
  int64_t unix_ns = 0;
  std::string data;
};

struct LogSlice {
  std::vector<LogRecord> records;
  uint64_t next_offset = 0;
};

// Decodes records from `bytes` (a slice of the file starting at a record
// boundary): whole records only; stops at a torn tail. kDataLoss on a bad header.
Result<std::vector<LogRecord>> decode_log_records(std::string_view bytes, size_t* consumed);
std::string encode_log_record(exec::LogStream stream, int64_t unix_ns, std::string_view data);

class JobLog {
 public:
  // Opens (creating) the file; cuts a torn tail; `max_bytes` bounds the file.
  static Result<std::unique_ptr<JobLog>> open(const std::string& path, uint64_t max_bytes);
  ~JobLog();

  // Appends one entry (split into records of at most kMaxRecordPayload).
  // Past max_bytes, writes one notice record and drops the rest: returns
  // false from then on, so the pump can stop reading.
  Result<bool> append(exec::LogStream stream, int64_t unix_ns, std::string_view data);
  // Records from `offset` (a record boundary), at most about `max_bytes` of payload.
  Result<LogSlice> read(uint64_t offset, size_t max_bytes) const;

  // The job's output as one SHA-256 (64 lower-case hex): SHA-256 of
  // "yonder-output-v2\n" + SHA-256(all stdout bytes) + SHA-256(all stderr
  // bytes) + the 32 bytes of `files_digest` (the files the job created or
  // changed in its workspace, workspace_digest.h; empty: no files). Not the
  // times, the record boundaries, how the two streams interleave, or
  // provider notices: two runs that print the same and write the same files
  // hash the same. The metering receipt's output hash (mesh/core/receipt.h).
  Result<std::string> output_sha256(std::string_view files_digest = {}) const;

  uint64_t size() const { return size_.load(); }
  bool truncated() const { return truncated_.load(); }
  int64_t last_unix_ns() const { return last_ns_.load(); }

 private:
  JobLog(int fd, std::string path, uint64_t max_bytes) : fd_(fd), path_(std::move(path)), max_bytes_(max_bytes) {}
  Status write_record(exec::LogStream stream, int64_t unix_ns, std::string_view data);

  int fd_;
  std::string path_;
  uint64_t max_bytes_;
  std::mutex write_mutex_;
  std::atomic<uint64_t> size_{0};  // bytes of whole records; readers never look past it
  std::atomic<bool> truncated_{false};
  std::atomic<int64_t> last_ns_{0};
};

}  // namespace yonder::jobs::provider
