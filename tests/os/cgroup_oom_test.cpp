// Finding a process's OOM counter from /proc/<pid>/cgroup, and reading it
// (pure parts of os/cgroup_oom.h; the watch itself runs in
// tests/exec/docker/podman_executor_test against real cgroups).
#include "os/cgroup_oom.h"

#include <gtest/gtest.h>

namespace yonder::os {
namespace {

TEST(OomCounterFile, CgroupV1MemoryLineWinsOnHybridHosts) {
  auto f = oom_counter_file("9:name=systemd:/libpod_parent/libpod-abc\n"
                            "4:memory:/libpod_parent/libpod-abc\n"
                            "1:cpu,cpuacct:/libpod_parent/libpod-abc\n"
                            "0::/libpod_parent/libpod-abc\n",
                            "/sys/fs/cgroup");
  ASSERT_TRUE(f.ok()) << f.error().to_string();
  EXPECT_FALSE(f->v2);
  EXPECT_EQ(f->file, "/sys/fs/cgroup/memory/libpod_parent/libpod-abc/memory.oom_control");
  auto joined = oom_counter_file("5:cpu,memory:/x\n", "/r");
  ASSERT_TRUE(joined.ok());
  EXPECT_EQ(joined->dir, "/r/memory/x");
}

TEST(OomCounterFile, CgroupV2UsesMemoryEvents) {
  auto f = oom_counter_file("0::/machine.slice/libpod-abc.scope/container\n", "/sys/fs/cgroup");
  ASSERT_TRUE(f.ok());
  EXPECT_TRUE(f->v2);
  EXPECT_EQ(f->file, "/sys/fs/cgroup/machine.slice/libpod-abc.scope/container/memory.events");
}

TEST(OomCounterFile, RefusesWhatIsNotAPath) {
  EXPECT_FALSE(oom_counter_file("", "/r").ok());
  EXPECT_FALSE(oom_counter_file("garbage\n4:memory\n", "/r").ok());
  EXPECT_FALSE(oom_counter_file("0::/a/../../etc\n", "/r").ok());
  EXPECT_FALSE(oom_counter_file("4:memory:relative\n", "/r").ok());
}

TEST(OomKillCount, ReadsV1AndV2Files) {
  EXPECT_EQ(parse_oom_kill_count("oom_kill_disable 0\nunder_oom 0\noom_kill 2\n"), 2);
  EXPECT_EQ(parse_oom_kill_count("low 0\nhigh 0\nmax 31\noom 1\noom_kill 1\noom_group_kill 0\n"), 1);
  EXPECT_EQ(parse_oom_kill_count("oom_kill_disable 0\nunder_oom 0\n"), -1);  // kernels before 4.13
  EXPECT_EQ(parse_oom_kill_count("oom_kill x\n"), -1);
  EXPECT_EQ(parse_oom_kill_count("oom_kill 99999999999999999999\n"), -1);
}

}  // namespace
}  // namespace yonder::os
