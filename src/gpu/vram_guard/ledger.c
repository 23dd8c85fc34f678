#define _GNU_SOURCE
#include "gpu/vram_guard/ledger.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

int yonder_vram_ledger_create(const char* path, uint64_t budget) {
  struct yonder_vram_ledger fresh;
  memset(&fresh, 0, sizeof fresh);
  memcpy(fresh.magic, YONDER_VRAM_LEDGER_MAGIC, sizeof fresh.magic);
  fresh.budget = budget;
  char tmp[4096];
  if (snprintf(tmp, sizeof tmp, "%s.new", path) >= (int)sizeof tmp) return -ENAMETOOLONG;
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0) return -errno;
  const char* p = (const char*)&fresh;
  size_t left = sizeof fresh;
  while (left > 0) {
    ssize_t n = write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int e = errno ? errno : EIO;
      close(fd);
      unlink(tmp);
      return -e;
    }
    p += n;
    left -= (size_t)n;
  }
  if (fchmod(fd, 0666) != 0 || fsync(fd) != 0) {
    int e = errno;
    close(fd);
    unlink(tmp);
    return -e;
  }
  close(fd);
  if (rename(tmp, path) != 0) {
    int e = errno;
    unlink(tmp);
    return -e;
  }
  return 0;
}

int yonder_vram_ledger_open(const char* path, struct yonder_vram_open* out) {
  out->fd = -1;
  out->map = NULL;
  int fd = open(path, O_RDWR | O_CLOEXEC);
  if (fd < 0) return -errno;
  struct stat st;
  if (fstat(fd, &st) != 0 || (size_t)st.st_size != sizeof(struct yonder_vram_ledger)) {
    close(fd);
    return -EPROTO;
  }
  void* map = mmap(NULL, sizeof(struct yonder_vram_ledger), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (map == MAP_FAILED) {
    int e = errno;
    close(fd);
    return -e;
  }
  if (memcmp(((struct yonder_vram_ledger*)map)->magic, YONDER_VRAM_LEDGER_MAGIC, 8) != 0) {
    munmap(map, sizeof(struct yonder_vram_ledger));
    close(fd);
    return -EPROTO;
  }
  out->fd = fd;
  out->map = (struct yonder_vram_ledger*)map;
  return 0;
}

void yonder_vram_ledger_close(struct yonder_vram_open* ledger) {
  if (ledger->map != NULL) munmap(ledger->map, sizeof(struct yonder_vram_ledger));
  if (ledger->fd >= 0) close(ledger->fd);
  ledger->map = NULL;
  ledger->fd = -1;
}

static void lock(struct yonder_vram_open* l) {
  while (flock(l->fd, LOCK_EX) != 0 && errno == EINTR) {
  }
}

static void unlock(struct yonder_vram_open* l) { flock(l->fd, LOCK_UN); }

/* Under the lock: frees the slots of processes that are gone; the sum held. */
static uint64_t reclaim_and_sum(struct yonder_vram_ledger* m) {
  uint64_t sum = 0;
  for (int i = 0; i < YONDER_VRAM_LEDGER_SLOTS; ++i) {
    struct yonder_vram_slot* s = &m->slots[i];
    if (s->pid == 0) continue;
    if (kill(s->pid, 0) != 0 && errno == ESRCH) {
      s->pid = 0;
      s->bytes = 0;
      continue;
    }
    sum += s->bytes;
  }
  return sum;
}

static struct yonder_vram_slot* slot_of(struct yonder_vram_ledger* m, pid_t pid, int take_free) {
  struct yonder_vram_slot* free_slot = NULL;
  for (int i = 0; i < YONDER_VRAM_LEDGER_SLOTS; ++i) {
    if (m->slots[i].pid == pid) return &m->slots[i];
    if (free_slot == NULL && m->slots[i].pid == 0) free_slot = &m->slots[i];
  }
  if (!take_free || free_slot == NULL) return NULL;
  free_slot->pid = pid;
  free_slot->bytes = 0;
  return free_slot;
}

int yonder_vram_ledger_charge(struct yonder_vram_open* l, pid_t pid, uint64_t bytes) {
  lock(l);
  uint64_t used = reclaim_and_sum(l->map);
  int rc = 0;
  if (bytes > l->map->budget || used > l->map->budget - bytes) {
    rc = -ENOMEM;
  } else {
    struct yonder_vram_slot* s = slot_of(l->map, pid, 1);
    if (s == NULL) {
      rc = -ENOSPC;
    } else {
      s->bytes += bytes;
    }
  }
  unlock(l);
  return rc;
}

void yonder_vram_ledger_credit(struct yonder_vram_open* l, pid_t pid, uint64_t bytes) {
  lock(l);
  struct yonder_vram_slot* s = slot_of(l->map, pid, 0);
  if (s != NULL) s->bytes -= bytes < s->bytes ? bytes : s->bytes;
  unlock(l);
}

uint64_t yonder_vram_ledger_budget(const struct yonder_vram_open* l) { return l->map->budget; }

uint64_t yonder_vram_ledger_used(struct yonder_vram_open* l) {
  lock(l);
  uint64_t used = reclaim_and_sum(l->map);
  unlock(l);
  return used;
}
