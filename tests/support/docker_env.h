// What integration tests need from a real Docker engine: whether one
// answers, the locally built test image (scripts/build-test-image.sh), and
// cleanup of what a test made.
//
// Without YONDER_REQUIRE_DOCKER a missing engine skips the test with the
// reason; scripts/test.sh sets it, so in CI a missing engine fails.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "os/unix_http.h"
#include "support/subprocess.h"

namespace yonder::testing {

inline const char* kTestImage = "yonder-test/busybox:1";

inline std::string docker_socket() {
  const char* s = std::getenv("YONDER_DOCKER_SOCKET");
  return s != nullptr && *s != '\0' ? s : "/var/run/docker.sock";
}

inline bool docker_answers() {
  os::HttpRequestOptions options;
  options.timeout = std::chrono::milliseconds(3000);
  auto r = os::unix_http_request(docker_socket(), "GET", "/_ping", {}, options);
  return r.ok() && r->status == 200;
}

inline bool docker_required() {
  const char* v = std::getenv("YONDER_REQUIRE_DOCKER");
  return v != nullptr && std::string(v) == "1";
}

// Builds the test image once per process (the script is idempotent).
inline std::string ensure_test_image() {
  static std::string error = [] {
    const char* src = std::getenv("YONDER_SOURCE_DIR");
    std::string script = std::string(src != nullptr ? src : ".") + "/scripts/build-test-image.sh";
    auto r = run({script});
    return r.exit_code == 0 ? std::string() : "scripts/build-test-image.sh failed: " + r.out + r.err;
  }();
  return error;
}

}  // namespace yonder::testing

// In a test body or SetUp: skips (or fails, when required) without Docker,
// and makes sure the test image exists.
#define YONDER_REQUIRE_DOCKER_OR_SKIP()                                                                    \
  do {                                                                                                     \
    if (!::yonder::testing::docker_answers()) {                                                            \
      if (::yonder::testing::docker_required()) {                                                          \
        FAIL() << "YONDER_REQUIRE_DOCKER=1 but no Docker engine answers at "                              \
               << ::yonder::testing::docker_socket() << "; run scripts/services.sh";                       \
      }                                                                                                    \
      GTEST_SKIP() << "no Docker engine answers at " << ::yonder::testing::docker_socket()                 \
                   << " (start one with scripts/services.sh, or set YONDER_REQUIRE_DOCKER=1 to fail)";     \
    }                                                                                                      \
    std::string yonder_image_error_ = ::yonder::testing::ensure_test_image();                              \
    ASSERT_TRUE(yonder_image_error_.empty()) << yonder_image_error_;                                       \
  } while (0)
