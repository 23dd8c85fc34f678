// The Cancel token handed out by the Docker backend's blocking calls: it
// wakes the HTTP stream the call is blocked on. Thread-safe.
#pragma once

#include <mutex>

#include "exec/executor.h"
#include "os/http_stream.h"

namespace yonder::exec::docker {

class StreamCancel final : public Cancel {
 public:
  void cancel() override {
    std::lock_guard lock(mutex_);
    cancelled_ = true;
    if (stream_ != nullptr) stream_->cancel();
  }
  // False when cancel() came first (the caller then gives up at once).
  bool attach(os::HttpStream* stream) {
    std::lock_guard lock(mutex_);
    if (cancelled_) return false;
    stream_ = stream;
    return true;
  }
  // Must be called before the attached stream is destroyed.
  void detach() {
    std::lock_guard lock(mutex_);
    stream_ = nullptr;
  }
  bool cancelled() {
    std::lock_guard lock(mutex_);
    return cancelled_;
  }

 private:
  std::mutex mutex_;
  os::HttpStream* stream_ = nullptr;
  bool cancelled_ = false;
};

}  // namespace yonder::exec::docker
