// os::run_capture: output, exit codes, timeouts, and that the child gets
// none of the parent's descriptors beyond stdin/stdout/stderr (Asio opens
// sockets without close-on-exec; a child of yonderd must not hold its ports).
#include <gtest/gtest.h>

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "os/process.h"

namespace yonder::os {
namespace {

TEST(RunCapture, OutputAndExitCode) {
  auto r = run_capture({"sh", "-c", "echo out; echo err 1>&2; exit 3"}, std::chrono::seconds(30), 4096);
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->exit_code, 3);
  EXPECT_NE(r->output.find("out\n"), std::string::npos);
  EXPECT_NE(r->output.find("err\n"), std::string::npos);
  EXPECT_FALSE(run_capture({"/nonexistent/program"}, std::chrono::seconds(5), 64));
}

TEST(RunCapture, TheChildInheritsNoOtherDescriptor) {
  // A listening socket opened the way Asio does: no SOCK_CLOEXEC.
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 3);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(fd, 1), 0);
  // At a number no program opens by itself (ls's own directory handle takes
  // the lowest free one).
  int high = ::fcntl(fd, F_DUPFD, 100);
  ASSERT_GE(high, 100);
  ::close(fd);
  fd = high;
  auto r = run_capture({"ls", "/proc/self/fd"}, std::chrono::seconds(30), 4096);
  ::close(fd);
  ASSERT_TRUE(r) << r.error().message();
  // ls itself opens one descriptor for the directory it lists; none of ours.
  std::string fds = "\n" + r->output;
  EXPECT_EQ(fds.find("\n" + std::to_string(fd) + "\n"), std::string::npos) << r->output;
}

}  // namespace
}  // namespace yonder::os
