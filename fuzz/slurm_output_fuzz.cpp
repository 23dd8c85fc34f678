// Fuzzes every decoder of Slurm's command output
// (src/exec/slurm/slurm_output.h). The first byte picks the decoder.
#include <cstdint>
#include <string_view>

#include "exec/slurm/slurm_output.h"

using namespace yonder::exec::slurm;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0 || size > 256 * 1024) return 0;
  std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 6) {
    case 0: (void)parse_sbatch_reply(text); break;
    case 1: (void)sbatch_error_text(text); break;
    case 2: {
      auto job = parse_scontrol_job(text);
      if (job) {
        if (job->comment.size() > kMaxSlurmFieldBytes) __builtin_trap();
        (void)task_status(*job);
      }
      break;
    }
    case 3: (void)parse_squeue(text); break;
    case 4: (void)parse_sacct(text, "12"); break;
    default: {
      auto nodes = parse_sinfo_gpus(text);
      if (nodes) {
        for (const auto& n : *nodes) {
          if (n.used > n.total) __builtin_trap();
        }
      }
      break;
    }
  }
  return 0;
}
