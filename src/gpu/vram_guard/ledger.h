/* The VRAM ledger: what one job's processes hold on its GPU, shared by them
 * through a small file the provider creates and mounts into the job's
 * container (YONDER_VRAM_LEDGER names it), so that a budget holds across
 * every process of the job, not per process. The VRAM guard (vram_guard.c)
 * charges each allocation here before the driver makes it and credits each
 * free; the provider reads it.
 *
 * Layout (little-endian, 64-bit Linux): a magic, the budget in bytes, and
 * one slot per process (its pid and the bytes it holds). Every change is
 * made under flock(2) on the file, so the processes of a job never race. A
 * slot whose process is gone (kill(pid, 0) says ESRCH; the pids are the
 * container's, which all the job's processes share) is freed at the next
 * change, so a process killed while holding memory does not leave its bytes
 * charged: the driver freed them with its context.
 *
 * What it bounds, and what not: a job whose programs go through the CUDA
 * driver's allocation entry points stays within its budget. The file is
 * writable by the job (its processes must charge it), so a job that means
 * to get around the guard can; the layers outside the container catch that
 * (docs/architecture.md, "GPU shares").
 *
 * Plain C and libc only: the guard is preloaded into any container. */
#ifndef YONDER_GPU_VRAM_GUARD_LEDGER_H
#define YONDER_GPU_VRAM_GUARD_LEDGER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

#define YONDER_VRAM_LEDGER_MAGIC "YVRAM01"
#define YONDER_VRAM_LEDGER_SLOTS 128

struct yonder_vram_slot {
  int32_t pid; /* 0: free */
  int32_t reserved;
  uint64_t bytes;
};

struct yonder_vram_ledger {
  char magic[8];
  uint64_t budget;
  struct yonder_vram_slot slots[YONDER_VRAM_LEDGER_SLOTS];
};

/* Creates (or replaces) the ledger at `path` with `budget` bytes and no
 * holdings, mode 0666 so that the job's user can charge it. 0, or -errno. */
int yonder_vram_ledger_create(const char* path, uint64_t budget);

/* An open ledger. */
struct yonder_vram_open {
  int fd;
  struct yonder_vram_ledger* map;
};

/* Opens and maps the ledger at `path`. 0, or -errno (-EPROTO: not a ledger). */
int yonder_vram_ledger_open(const char* path, struct yonder_vram_open* out);
void yonder_vram_ledger_close(struct yonder_vram_open* ledger);

/* Charges `bytes` to process `pid` if the job's holdings stay within the
 * budget: 0; -ENOMEM when they would not (nothing charged); -ENOSPC when
 * every slot is taken by a live process. */
int yonder_vram_ledger_charge(struct yonder_vram_open* ledger, pid_t pid, uint64_t bytes);
/* Credits `bytes` back to process `pid` (never below zero). */
void yonder_vram_ledger_credit(struct yonder_vram_open* ledger, pid_t pid, uint64_t bytes);
/* The budget, and what the job's live processes hold now. */
uint64_t yonder_vram_ledger_budget(const struct yonder_vram_open* ledger);
uint64_t yonder_vram_ledger_used(struct yonder_vram_open* ledger);

#ifdef __cplusplus
}
#endif

#endif /* YONDER_GPU_VRAM_GUARD_LEDGER_H */
