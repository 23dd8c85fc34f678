// Reaching a port inside another process's network namespace, for port
// forwarding into jobs that have no network (NetworkMode none): a thread
// joins the job's namespace (setns), makes a TCP socket and connects to
// 127.0.0.1:PORT there, and the socket keeps working in the daemon's own
// threads afterwards (a socket belongs to the namespace it was made in).
// That is the kernel's TCP both ways, instead of a process exec'd into the
// job relaying bytes through the engine's attach stream.
//
// Needs CAP_SYS_ADMIN (yonderd as root); callers fall back to the exec path
// when it fails with kPermissionDenied. Not for gVisor jobs (their network
// stack lives inside the sandbox, not in a kernel namespace).
#pragma once

#include <cstdint>
#include <functional>

#include "base/error.h"

namespace yonder::os {

// Opens the network namespace of process `pid` and checks, after opening,
// that `still_ours()` (e.g. "this pid is still the job's") holds and that
// the process has not exited meanwhile (a pidfd taken first pins it, so a
// reused pid cannot slip in). Returns the namespace fd (O_CLOEXEC).
Result<int> open_netns_of(int pid, const std::function<bool()>& still_ours);

// A TCP socket connected to 127.0.0.1:`port` inside namespace `netns_fd`
// (blocking connect; loopback answers at once). kUnavailable when nothing
// listens there; kPermissionDenied without the privilege to join.
Result<int> connect_loopback_in_netns(int netns_fd, uint16_t port);

}  // namespace yonder::os
