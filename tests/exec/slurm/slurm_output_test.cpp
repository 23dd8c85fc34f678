// The decoders of Slurm's output, on outputs recorded from Slurm 22.05.8
// (Debian 12, scripts/slurm.sh's one-node cluster).
#include "exec/slurm/slurm_output.h"

#include <gtest/gtest.h>

#include "exec/slurm/slurm_inventory.h"

namespace yonder::exec::slurm {
namespace {

constexpr std::string_view kRunning =
    "JobId=10 JobName=yonder-job1 UserId=root(0) GroupId=root(0) MCS_label=N/A Priority=4294901750 Nice=0 "
    "Account=(null) QOS=(null) JobState=RUNNING Reason=None Dependency=(null) Requeue=1 Restarts=0 BatchFlag=1 "
    "Reboot=0 ExitCode=0:0 RunTime=00:00:01 TimeLimit=UNLIMITED TimeMin=N/A SubmitTime=2026-11-30T07:15:06 "
    "EligibleTime=2026-11-30T07:15:06 AccrueTime=2026-11-30T07:15:06 StartTime=2026-11-30T07:15:06 EndTime=Unknown "
    "Deadline=N/A SuspendTime=None SecsPreSuspend=0 LastSchedEval=2026-11-30T07:15:06 Scheduler=Main Partition=debug "
    "AllocNode:Sid=localhost:13022 ReqNodeList=(null) ExcNodeList=(null) NodeList=localhost BatchHost=localhost "
    "NumNodes=1 NumCPUs=1 NumTasks=1 CPUs/Task=1 ReqB:S:C:T=0:0:*:* TRES=cpu=1,mem=256M,node=1,billing=1 "
    "Socks/Node=* NtasksPerN:B:S:C=0:0:*:* CoreSpec=* MinCPUsNode=1 MinMemoryCPU=256M MinTmpDiskNode=0 "
    "Features=(null) DelayBoot=00:00:00 OverSubscribe=OK Contiguous=0 Licenses=(null) Network=(null) Command=(null) "
    "WorkDir=/tmp Comment=yonder:node1:job1  StdErr=/dev/null StdIn=/dev/null StdOut=/dev/null Power= "
    "TresPerJob=gres:gpu:1 \n";

TEST(SlurmOutput, ScontrolRunningJob) {
  auto job = parse_scontrol_job(kRunning);
  ASSERT_TRUE(job.ok()) << job.error().to_string();
  EXPECT_EQ(job->job_id, "10");
  EXPECT_EQ(job->name, "yonder-job1");
  EXPECT_EQ(job->state, "RUNNING");
  EXPECT_EQ(job->reason, "None");
  EXPECT_EQ(job->comment, "yonder:node1:job1");
  EXPECT_EQ(job->std_out, "/dev/null");
  EXPECT_EQ(task_status(*job).state, TaskState::kRunning);
}

TEST(SlurmOutput, ScontrolPendingAndEnded) {
  std::string pending(kRunning);
  pending.replace(pending.find("JobState=RUNNING Reason=None"), 28, "JobState=PENDING Reason=Resources");
  auto p = parse_scontrol_job(pending);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->reason, "Resources");
  EXPECT_EQ(task_status(*p).state, TaskState::kCreated);

  auto failed = parse_scontrol_job("JobId=8 JobName=wrap JobState=FAILED Reason=NonZeroExitCode ExitCode=3:0 WorkDir=/a b\n");
  ASSERT_TRUE(failed.ok());
  auto st = task_status(*failed);
  EXPECT_EQ(st.state, TaskState::kExited);
  EXPECT_EQ(st.exit.exit_code, 3);
  EXPECT_EQ(st.exit.cause, "");

  auto killed = parse_scontrol_job("JobId=9 JobName=wrap JobState=FAILED Reason=JobLaunchFailure ExitCode=0:9\n");
  ASSERT_TRUE(killed.ok());
  EXPECT_EQ(task_status(*killed).exit.exit_code, 128 + 9);

  auto timeout = parse_scontrol_job("JobId=20 JobState=TIMEOUT Reason=TimeLimit ExitCode=0:15\n");
  ASSERT_TRUE(timeout.ok());
  EXPECT_EQ(task_status(*timeout).exit.cause, "time_limit");
  auto cancelled = parse_scontrol_job("JobId=4 JobState=CANCELLED Reason=None ExitCode=0:15\n");
  EXPECT_EQ(task_status(*cancelled).exit.cause, "cancelled_by_cluster");
  auto node = parse_scontrol_job("JobId=5 JobState=NODE_FAIL Reason=NodeDown ExitCode=0:0\n");
  EXPECT_EQ(task_status(*node).exit.cause, "node_failure");
  EXPECT_EQ(task_status(*node).exit.exit_code, -1);
  auto oom = parse_scontrol_job("JobId=6 JobState=OUT_OF_MEMORY Reason=OutOfMemory ExitCode=0:125\n");
  EXPECT_TRUE(task_status(*oom).exit.oom_killed);
}

TEST(SlurmOutput, ScontrolValuesWithSpaces) {
  auto job = parse_scontrol_job("JobId=7 JobName=my job JobState=COMPLETED Reason=None ExitCode=0:0 WorkDir=/x y\n");
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->name, "my job");
}

TEST(SlurmOutput, ScontrolUnknownAndGarbage) {
  auto gone = parse_scontrol_job("slurm_load_jobs error: Invalid job id specified\n");
  ASSERT_FALSE(gone.ok());
  EXPECT_EQ(gone.error().code(), ErrorCode::kNotFound);
  EXPECT_FALSE(parse_scontrol_job("").ok());
  EXPECT_FALSE(parse_scontrol_job("JobId=x JobState=RUNNING").ok());
  EXPECT_FALSE(parse_scontrol_job("JobId=1 JobState=RUNNING ExitCode=abc").ok());
  EXPECT_FALSE(parse_scontrol_job(std::string(kMaxSlurmOutputBytes + 1, 'a')).ok());
}

TEST(SlurmOutput, Sbatch) {
  EXPECT_EQ(*parse_sbatch_reply("12\n"), "12");
  EXPECT_EQ(*parse_sbatch_reply("sbatch: warning: something\n13;cluster\n"), "13");
  EXPECT_FALSE(parse_sbatch_reply("").ok());
  EXPECT_FALSE(parse_sbatch_reply("sbatch: error: no\n").ok());
  constexpr std::string_view kRefused =
      "sbatch: error: Memory specification can not be satisfied\n"
      "sbatch: error: Batch job submission failed: Requested node configuration is not available\n";
  EXPECT_EQ(sbatch_error_text(kRefused),
            "Memory specification can not be satisfied; Batch job submission failed: Requested node configuration is "
            "not available");
  EXPECT_EQ(sbatch_error_text("weird\n"), "weird");
}

TEST(SlurmOutput, Squeue) {
  constexpr std::string_view kList =
      "4|CANCELLED|yonder-j1|yonder:abc:j1|None\n"
      "1|COMPLETED|wrap|(null)|None\n"
      "12|PENDING|yonder-job3|yonder:node1:job3|Resources\n"
      "10|RUNNING|yonder-job1|yonder:node1:job1|None\n";
  auto jobs = parse_squeue(kList);
  ASSERT_TRUE(jobs.ok());
  ASSERT_EQ(jobs->size(), 4u);
  EXPECT_EQ((*jobs)[1].comment, "");
  EXPECT_EQ((*jobs)[2].reason, "Resources");
  EXPECT_EQ((*jobs)[3].state, "RUNNING");
  EXPECT_TRUE(parse_squeue("")->empty());
  EXPECT_FALSE(parse_squeue("x|RUNNING|a|b|c\n").ok());
  EXPECT_FALSE(parse_squeue("1|RUNNING\n").ok());
}

TEST(SlurmOutput, Sacct) {
  constexpr std::string_view kRows = "8|FAILED|3:0\n8.batch|FAILED|3:0\n9|FAILED|0:9\n12|CANCELLED by 0|0:0\n";
  auto eight = parse_sacct(kRows, "8");
  ASSERT_TRUE(eight.ok() && eight->has_value());
  EXPECT_EQ((*eight)->exit_code, 3);
  auto twelve = parse_sacct(kRows, "12");
  ASSERT_TRUE(twelve.ok() && twelve->has_value());
  EXPECT_EQ((*twelve)->state, "CANCELLED");
  EXPECT_FALSE(parse_sacct(kRows, "99")->has_value());
  EXPECT_FALSE(parse_sacct("8|FAILED|x\n", "8").ok());
  EXPECT_FALSE(parse_sacct("8\n", "8").ok());
}

TEST(SlurmOutput, SinfoGpus) {
  auto nodes = parse_sinfo_gpus(
      "localhost|mixed|gpu:2|gpu:1(IDX:0)|\n"
      "localhost|mixed|gpu:2|gpu:1(IDX:0)|\n"
      "n2|idle|gpu:a100:4(S:0-1)|gpu:a100:0(IDX:N/A)|\n"
      "n3|down*|gpu:2|gpu:0|\n"
      "cpu1|idle|(null)|(null)|\n");
  ASSERT_TRUE(nodes.ok()) << nodes.error().to_string();
  ASSERT_EQ(nodes->size(), 3u);
  EXPECT_EQ((*nodes)[0].total, 2);
  EXPECT_EQ((*nodes)[0].used, 1);
  EXPECT_EQ((*nodes)[1].type, "a100");
  EXPECT_EQ((*nodes)[1].total, 4);
  EXPECT_FALSE((*nodes)[2].available());
  auto report = SlurmGpuInventory::report(*nodes);
  EXPECT_EQ(report.source, "slurm");
  EXPECT_EQ(report.devices.size(), 6u);  // n3 is down
  EXPECT_EQ(report.devices[2].name, "Slurm a100 on n2");
  EXPECT_FALSE(parse_sinfo_gpus("n1|idle|gpu:2|gpu:3|\n").ok());
  EXPECT_FALSE(parse_sinfo_gpus("garbage\n").ok());
  EXPECT_EQ(SlurmGpuInventory::report({}).state, gpu::InventoryState::kNoDevices);
}

}  // namespace
}  // namespace yonder::exec::slurm
