// Content-addressed uploads, the provider's half: one peer's store of the
// files it has uploaded here, by SHA-256, so that a file it sends again
// (the same script, the same 1 GiB of weights) is taken from the store
// instead of crossing the link, and an upload cut short resumes where it
// stopped.
//
//   <root>/objects/ab/abcdef...   a complete file, named by its digest
//   <root>/parts/abcdef...        a file being received (its length is how
//                                 much has arrived: the resume offset)
//   <root>/tmp/                   files received while another upload of
//                                 the same peer writes the same part
//
// One store per peer (the provider keeps them apart, so a peer cannot learn
// from timings or replies what another peer has uploaded).
//
// An upload is:
//   plan(manifest)            -> which files to send, and from which offset
//   receive(plan) + archive   -> each sent file is hashed as it is written
//                                and kept only if it matches its digest
//   materialize(manifest,dir) -> a fresh folder with every file of the
//                                manifest (hard links to the store where the
//                                mode allows, copies otherwise); the
//                                executor copies that folder into the job's
//                                own workspace, so the job never touches
//                                the store
//   trim(cap)                 -> least recently used objects go
//
// Blocking (file I/O): worker threads only. An UploadCache is shared by the
// uploads of its peer (thread-safe); a Plan and its Receiver belong to one.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "base/error.h"
#include "transfer/archive.h"
#include "transfer/manifest.h"

namespace yonder::transfer {

class UploadCache;

// What the consumer must send. Indices count the manifest's files only, in
// manifest order (the index the consumer also uses).
class UploadPlan {
 public:
  ~UploadPlan();
  UploadPlan(const UploadPlan&) = delete;
  UploadPlan& operator=(const UploadPlan&) = delete;

  const std::vector<bool>& need() const { return need_; }
  // File index -> bytes the store already has of it (send the rest).
  const std::map<size_t, uint64_t>& resume() const { return resume_; }
  uint64_t need_files() const { return need_files_; }
  uint64_t need_bytes() const { return need_bytes_; }
  // {"need": base64 bitmap (bit i of byte i/8, LSB first), "resume": [[i, offset]...],
  //  "need_files", "need_bytes", "files", "bytes"}
  nlohmann::json to_json() const;

 private:
  friend class UploadCache;
  friend class UploadReceiver;
  UploadPlan() = default;
  std::shared_ptr<UploadCache> cache_;
  const Manifest* manifest_ = nullptr;
  std::vector<bool> need_;
  std::map<size_t, uint64_t> resume_;
  std::set<std::string> claimed_;   // digests this upload writes into parts/
  std::vector<size_t> file_entry_;  // file index -> manifest entry index
  uint64_t need_files_ = 0, need_bytes_ = 0;
};

// The consumer's side of a plan: decodes the reply of plan().to_json().
// Untrusted (the provider's answer): sizes checked against the manifest.
struct PlanReply {
  std::vector<bool> need;
  std::map<size_t, uint64_t> resume;
};
Result<PlanReply> parse_plan_reply(const nlohmann::json& j, const Manifest& m);

// Writes the data archive of one plan into the store. Each entry must be a
// file the plan asked for, sized as the plan said; a file whose bytes do
// not hash to the manifest's digest is refused (and dropped).
class UploadReceiver final : public ArchiveVisitor {
 public:
  ~UploadReceiver() override;
  Status write(ByteView bytes) { return reader_.feed(bytes, *this); }
  // The archive's end has been read.
  bool complete() const { return reader_.complete(); }
  // The sender is done: the archive must be complete and every needed file
  // received. Returns {"received_files", "received_bytes"}.
  Result<nlohmann::json> finish();
  uint64_t received_bytes() const { return received_bytes_; }

  Status on_dir(const std::string& path, uint32_t mode) override;
  Status on_file_begin(const std::string& path, uint32_t mode, uint64_t size) override;
  Status on_file_data(ByteView data) override;
  Status on_file_end() override;

 private:
  friend class UploadCache;
  UploadReceiver(UploadPlan& plan, ArchiveLimits limits);
  UploadPlan& plan_;
  ArchiveReader reader_;
  std::map<std::string, size_t> index_of_;  // path -> file index
  std::vector<bool> got_;
  int fd_ = -1;
  std::string part_, path_;
  bool private_ = false;  // part_ is in tmp/ (another upload writes parts/ for this digest)
  size_t file_ = 0;
  Sha256 hash_;
  uint64_t received_files_ = 0, received_bytes_ = 0;
};

class UploadCache : public std::enable_shared_from_this<UploadCache> {
 public:
  static std::shared_ptr<UploadCache> open(std::string root);

  // What to send of `m` (which must outlive the plan).
  Result<std::unique_ptr<UploadPlan>> plan(const Manifest& m);
  Result<std::unique_ptr<UploadReceiver>> receive(UploadPlan& plan);
  // Fills `dir` (created here; it must not exist) with the manifest's
  // folders and files. Returns {"files", "bytes"}.
  Result<nlohmann::json> materialize(const Manifest& m, const std::string& dir);
  // Deletes the least recently used objects until at most `cap_bytes` are
  // kept, and parts untouched for `part_ttl`. Skipped while an upload is in
  // flight. Returns the bytes kept.
  Result<uint64_t> trim(uint64_t cap_bytes, std::chrono::seconds part_ttl);

  std::string object_path(const Digest& d) const;
  std::string part_path(const Digest& d) const;
  const std::string& root() const { return root_; }

 private:
  friend class UploadPlan;
  friend class UploadReceiver;
  explicit UploadCache(std::string root) : root_(std::move(root)) {}
  std::string root_;
  std::mutex mutex_;  // guards the two below
  std::set<std::string> claimed_;  // digests some upload is writing to parts/
  int in_flight_ = 0;
};

}  // namespace yonder::transfer
