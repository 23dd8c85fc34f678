/* probe: a tiny static multi-call program baked into Yonder's test image
 * (scripts/build-test-image.sh). Each subcommand tries one thing a hostile
 * job might try and prints what happened in one line, so the abuse tests can
 * assert on exact outcomes instead of guessing from shell error wording.
 *
 *   probe ids                   uid, euid, gid, groups
 *   probe setuid                setuid(0), then prints uid/euid
 *   probe mem MIB               allocates and touches MIB MiB, 1 MiB at a time
 *   probe fill PATH             writes PATH until a write fails; prints errno name and bytes
 *   probe connect IP PORT       TCP connect; prints "connected" or the errno name
 *   probe flood BYTES           writes BYTES bytes of 'x' lines to stdout
 *   probe trapterm              ignores SIGTERM, prints "ready", then sleeps
 */
#include <errno.h>
#include <fcntl.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static const char* errname(int e) {
  switch (e) {
    case ENOSPC: return "ENOSPC";
    case EDQUOT: return "EDQUOT";
    case EPERM: return "EPERM";
    case EACCES: return "EACCES";
    case EROFS: return "EROFS";
    case ENETUNREACH: return "ENETUNREACH";
    case EHOSTUNREACH: return "EHOSTUNREACH";
    case ECONNREFUSED: return "ECONNREFUSED";
    case ETIMEDOUT: return "ETIMEDOUT";
    case ENOMEM: return "ENOMEM";
    case EAGAIN: return "EAGAIN";
    default: return "OTHER";
  }
}

int main(int argc, char** argv) {
  if (argc < 2) { fprintf(stderr, "usage: probe ids|setuid|mem|fill|connect|flood|trapterm\n"); return 2; }
  const char* cmd = argv[1];
  if (!strcmp(cmd, "ids")) {
    printf("uid=%d euid=%d gid=%d egid=%d\n", (int)getuid(), (int)geteuid(), (int)getgid(), (int)getegid());
    return 0;
  }
  if (!strcmp(cmd, "setuid")) {
    int rc = setuid(0);
    int e = errno;
    printf("setuid0=%s uid=%d euid=%d\n", rc == 0 ? "OK" : errname(e), (int)getuid(), (int)geteuid());
    return rc == 0 ? 0 : 1;
  }
  if (!strcmp(cmd, "mem") && argc > 2) {
    long mib = atol(argv[2]);
    for (long i = 0; i < mib; ++i) {
      char* p = malloc(1 << 20);
      if (!p) { printf("malloc failed after %ld MiB\n", i); return 1; }
      memset(p, 1, 1 << 20);
    }
    printf("allocated %ld MiB\n", mib);
    return 0;
  }
  if (!strcmp(cmd, "fill") && argc > 2) {
    int fd = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) { printf("open=%s\n", errname(errno)); return 1; }
    static char buf[65536];
    memset(buf, 'f', sizeof buf);
    long long total = 0;
    for (;;) {
      ssize_t n = write(fd, buf, sizeof buf);
      if (n < 0) { printf("write=%s bytes=%lld\n", errname(errno), total); return 1; }
      total += n;
    }
  }
  if (!strcmp(cmd, "connect") && argc > 3) {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    if (s < 0) { printf("socket=%s\n", errname(errno)); return 1; }
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((unsigned short)atoi(argv[3]));
    if (inet_pton(AF_INET, argv[2], &a.sin_addr) != 1) { printf("bad address\n"); return 2; }
    if (connect(s, (struct sockaddr*)&a, sizeof a) == 0) { printf("connected\n"); return 0; }
    printf("connect=%s\n", errname(errno));
    return 1;
  }
  if (!strcmp(cmd, "flood") && argc > 2) {
    long long left = atoll(argv[2]);
    static char line[1024];
    memset(line, 'x', sizeof line - 1);
    line[sizeof line - 1] = '\n';
    while (left > 0) {
      size_t n = left < (long long)sizeof line ? (size_t)left : sizeof line;
      if (fwrite(line, 1, n, stdout) != n) return 1;
      left -= (long long)n;
    }
    return 0;
  }
  if (!strcmp(cmd, "trapterm")) {
    signal(SIGTERM, SIG_IGN);
    printf("ready\n");
    fflush(stdout);
    for (;;) pause();
  }
  fprintf(stderr, "probe: unknown command %s\n", cmd);
  return 2;
}
