// A FIFO of bytes held as a list of chunks, so that bytes move in and out
// without shifting a large buffer: a stream's send and receive buffers.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <deque>

#include "base/bytes.h"

namespace yonder::link {

class ByteQueue {
 public:
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

  // Takes a whole buffer without copying it.
  void push(Bytes chunk) {
    if (chunk.empty()) return;
    size_ += chunk.size();
    chunks_.push_back(std::move(chunk));
  }

  // Copies `data` in; small writes share a chunk so a stream of tiny writes
  // does not become a list of tiny allocations.
  void append(ByteView data) {
    if (data.empty()) return;
    if (!chunks_.empty() && chunks_.back().size() + data.size() <= kCoalesceLimit) {
      chunks_.back().insert(chunks_.back().end(), data.begin(), data.end());
    } else {
      chunks_.emplace_back(data.begin(), data.end());
    }
    size_ += data.size();
  }

  // Removes up to `max` bytes from the front and returns them, handing over
  // the front chunk without a copy when it is exactly what is asked for.
  Bytes pop(size_t max) {
    size_t want = std::min(max, size_);
    Bytes out;
    if (want == 0) return out;
    if (front_pos_ == 0 && chunks_.front().size() == want) {
      out = std::move(chunks_.front());
      chunks_.pop_front();
      size_ -= want;
      return out;
    }
    out.reserve(want);
    pop_into(out, want);
    return out;
  }

  // Moves up to `max` bytes from the front onto the end of `out`.
  size_t pop_into(Bytes& out, size_t max) {
    size_t moved = 0;
    while (moved < max && !chunks_.empty()) {
      Bytes& front = chunks_.front();
      size_t n = std::min(max - moved, front.size() - front_pos_);
      out.insert(out.end(), front.begin() + static_cast<std::ptrdiff_t>(front_pos_),
                 front.begin() + static_cast<std::ptrdiff_t>(front_pos_ + n));
      front_pos_ += n;
      moved += n;
      if (front_pos_ == front.size()) {
        chunks_.pop_front();
        front_pos_ = 0;
      }
    }
    size_ -= moved;
    return moved;
  }

  void clear() {
    chunks_.clear();
    front_pos_ = 0;
    size_ = 0;
  }

 private:
  static constexpr size_t kCoalesceLimit = 4096;

  std::deque<Bytes> chunks_;
  size_t front_pos_ = 0;  // bytes of chunks_.front() already taken
  size_t size_ = 0;
};

}  // namespace yonder::link
