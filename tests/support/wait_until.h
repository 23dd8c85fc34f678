// The one way a test waits for a condition that has no event of its own to
// wait on (a file removed by a background sweep, a state read by polling
// an API): checks `ready` until it holds or `timeout` passes. Prefer a real
// event (a future, a log watch, a process's exit) wherever there is one.
//
// The pause between checks starts at `step` and doubles up to kMaxStep (or
// `step`, if larger): a condition that holds soon is seen soon, and a long
// wait does not spend the machine on checking. Many checks run a program
// (`yonder ps`, `docker inspect`); under ASan one costs about 0.15 s of CPU,
// so at a fixed 20 ms a long wait kept a core busy with checks alone, taking
// it from the daemons the test was waiting on.
#pragma once

#include <algorithm>
#include <chrono>
#include <thread>

namespace yonder::testing {

inline constexpr std::chrono::milliseconds kMaxWaitStep{250};

template <class Ready>
bool wait_until(Ready ready, std::chrono::milliseconds timeout = std::chrono::seconds(30),
                std::chrono::milliseconds step = std::chrono::milliseconds(20)) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  const auto most = std::max(step, kMaxWaitStep);
  while (!ready()) {
    auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return false;
    std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(step, deadline - now));
    step = std::min(step * 2, most);
  }
  return true;
}

}  // namespace yonder::testing
