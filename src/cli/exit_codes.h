// The CLI's exit codes; docs/cli.md lists them for scripts.
#pragma once

namespace yonder::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitError = 1;         // the command failed; the message says why
inline constexpr int kExitUsage = 2;         // bad arguments
inline constexpr int kExitNoDaemon = 3;      // yonderd is not running (or not reachable)
inline constexpr int kExitExists = 4;        // refused to replace something (e.g. `init` twice)
inline constexpr int kExitDenied = 5;        // the peer refused: not permitted by our scope there
inline constexpr int kExitAuditBroken = 6;   // `audit --verify`: the hash chain is broken
inline constexpr int kExitReceiptUnverified = 7;  // `receipts --verify`: a receipt does not verify
inline constexpr int kExitVerificationFailed = 8;  // `mesh verify`: the provider failed the benchmark
// `yonder run`: the job never ran (refused by the provider, upload failed,
// could not start). Otherwise `run` exits with the job's own exit code, as
// `docker run` does (and like it, 125 is the "could not run" code).
inline constexpr int kExitCouldNotRun = 125;
// `yonder gpu`: 10 no NVML library, 11 driver not loaded, 12 no GPU,
// 13 blocked by the OS (WSL), 14 other NVML error (gpu::state_exit_code).

}  // namespace yonder::cli
