// Whether a test may skip for want of network namespaces (the NAT lab, a
// daemon bound in a namespace of its own, a provider joining a job's
// namespace). They need root; a run that is not root skips them with the
// reason.
//
// With YONDER_REQUIRE_NETNS=1 such a skip fails instead: scripts/test.sh
// sets it, so in CI the namespace tests cannot pass by not running.
//
// No GoogleTest here (support/nat_lab.cpp, in a library without it,
// includes this): the macro's FAIL and GTEST_SKIP resolve in the test file.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <optional>
#include <string>

namespace yonder::testing {

inline bool netns_required() {
  const char* v = std::getenv("YONDER_REQUIRE_NETNS");
  return v != nullptr && std::string(v) == "1";
}

// Why this process cannot make or join network namespaces (it is not root),
// or nothing.
inline std::optional<std::string> netns_unavailable_reason() {
  if (::geteuid() != 0) return "network namespaces need root (CAP_SYS_ADMIN, CAP_NET_ADMIN): run the tests as root";
  return std::nullopt;
}

}  // namespace yonder::testing

// In a test body or SetUp: `reason` is a std::optional<std::string>, set
// when namespaces cannot be had here; then the test skips, saying why, or
// fails when YONDER_REQUIRE_NETNS=1.
#define YONDER_REQUIRE_NETNS_OR_SKIP(reason)                                                 \
  do {                                                                                       \
    if (auto yonder_netns_why_ = (reason)) {                                                 \
      if (::yonder::testing::netns_required()) {                                             \
        FAIL() << "YONDER_REQUIRE_NETNS=1 but " << *yonder_netns_why_;                       \
      }                                                                                      \
      GTEST_SKIP() << *yonder_netns_why_ << " (set YONDER_REQUIRE_NETNS=1 to fail instead)"; \
    }                                                                                        \
  } while (0)
