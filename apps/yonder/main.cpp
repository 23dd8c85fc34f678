// yonder: the command-line interface. Parses arguments and calls src/cli.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "cli/array_commands.h"
#include "cli/audit_command.h"
#include "cli/commands.h"
#include "cli/credits_commands.h"
#include "cli/dashboard_command.h"
#include "cli/doctor.h"
#include "cli/exec_command.h"
#include "cli/exit_codes.h"
#include "cli/cuda_command.h"
#include "cli/forward_commands.h"
#include "cli/group_commands.h"
#include "cli/job_commands.h"
#include "cli/job_status_commands.h"
#include "cli/mesh_commands.h"
#include "cli/mesh_job_commands.h"
#include "cli/peer_commands.h"
#include "cli/progress.h"
#include "cli/usage_error.h"
#include "release/app_flags.h"
#include "release/completion.h"

int main(int argc, char** argv) {
  using namespace yonder::cli;
  CLI::App app{"yonder: share NVIDIA GPUs with people you trust, peer to peer.\n"
               "State folder: $YONDER_HOME (default ~/.local/share/yonder). Exit codes: docs/cli.md."};
  app.require_subcommand(1);
  bool json = false;

  InitArgs init_args;
  std::string name;
  auto* init = app.add_subcommand("init", "Create this node's identity (never replaces an existing one)");
  init->add_option("--name", name, "Name shown to peers (default: the host name)");
  init->add_flag("--passphrase", init_args.passphrase,
                 "Encrypt the key at rest (asks, or reads YONDER_PASSPHRASE); yonderd then needs it to start");
  init->add_flag("--json", json, "Machine-readable output");

  auto* status = app.add_subcommand("status", "Node id, name, daemon version and uptime, backends, peers");
  status->add_flag("--json", json, "Machine-readable output");
  auto* gpu = app.add_subcommand("gpu", "GPUs this node can offer (exit 10-14 when there are none; docs/cli.md), "
                                        "or with PEER what that provider has and lets you do");
  gpu->alias("gpus");
  std::string gpu_peer;
  gpu->add_option("peer", gpu_peer, "A paired provider (name or id): its GPUs, VRAM, driver, limits, images, queue");
  gpu->add_flag("--json", json, "Machine-readable output");
  auto* doctor = app.add_subcommand("doctor", "Check Docker, the NVIDIA runtime and driver, runsc, the daemon, the key");
  doctor->add_flag("--json", json, "Machine-readable output");
  auto* shutdown = app.add_subcommand("shutdown", "Stop the running yonderd");
  auto* dashboard = app.add_subcommand("dashboard", "Print a one-time login URL for the web dashboard (works once, 60 s)");
  dashboard->add_flag("--json", json, "Machine-readable output");

  auto* cfg = app.add_subcommand("config", "Read and change settings (docs/config.md)");
  cfg->require_subcommand(1);
  std::string key, value;
  auto* cfg_get = cfg->add_subcommand("get", "Print a setting's effective value");
  cfg_get->add_option("key", key, "Setting, e.g. log.level")->required();
  cfg_get->add_flag("--json", json, "Machine-readable output");
  auto* cfg_set = cfg->add_subcommand("set", "Write a setting to the config file");
  cfg_set->add_option("key", key, "Setting, e.g. log.level")->required();
  cfg_set->add_option("value", value, "New value")->required();
  auto* cfg_unset = cfg->add_subcommand("unset", "Remove a setting from the config file (back to its default)");
  cfg_unset->add_option("key", key, "Setting")->required();
  auto* cfg_show = cfg->add_subcommand("show", "Every setting with its value, source and meaning");
  cfg_show->add_flag("--json", json, "Machine-readable output");
  auto* cfg_docs = cfg->add_subcommand("docs", "Print the settings reference as Markdown");

  // --- sharing, pairing, peers
  ShareArgs share_args;
  auto* share = app.add_subcommand("share", "Print a signed share link (and QR code) that lets someone pair with this node");
  share->add_option("--expires", share_args.expires, "How long the link works (default 1h; e.g. 30m, 2h, 1d)");
  share->add_option("--uses", share_args.uses, "How many pairings it allows (default 1)");
  share->add_flag("--wait", share_args.wait,
                  "Wait until the link is used, then print who paired and the pairing's check digits (to compare "
                  "with the ones `yonder pair` printed on their side)");
  share->add_option("--scope", share_args.scope, "What the holder may do: run,exec,forward,files (also mesh, cuda; default run)");
  share->add_option("--gpus", share_args.gpus, "GPUs per job (default 1)");
  share->add_option("--vram", share_args.vram, "VRAM limit per job, e.g. 20G");
  share->add_option("--max-time", share_args.max_time, "Wall time limit per job, e.g. 2h (default 2h)");
  share->add_option("--max-jobs", share_args.max_jobs, "Jobs running at once (default 1); more wait in the queue");
  share->add_option("--cpus", share_args.cpus, "CPUs per job, e.g. 4 or 0.5");
  share->add_option("--memory", share_args.memory, "Memory per job, e.g. 16G");
  share->add_option("--disk", share_args.disk, "Workspace disk per job, e.g. 50G");
  share->add_flag("--egress", share_args.egress, "Let jobs reach the network (default: no network)");
  share->add_option("--label", share_args.label, "A note for `yonder links`");
  share->add_flag("--no-qr", share_args.no_qr, "Do not print the QR code");
  share->add_flag("--replace-scope", share_args.replace_scope,
                  "A peer paired already that redeems this link gets exactly this scope, wider or not (without it, "
                  "it keeps the narrower of its scope and the link's)");
  share->add_flag("--json", json, "Machine-readable output");
  auto* links = app.add_subcommand("links", "Share links with uses left and expiry");
  links->add_flag("--json", json, "Machine-readable output");
  std::string link_id;
  auto* links_revoke = links->add_subcommand("revoke", "Kill a share link");
  links_revoke->add_option("id", link_id, "Link id from `yonder links`")->required();
  std::string link_text;
  auto* pair = app.add_subcommand("pair", "Pair with a provider using its share link");
  pair->add_option("link", link_text, "The yonder://... link")->required();
  pair->add_flag("--json", json, "Machine-readable output");
  auto* peers = app.add_subcommand("peers", "Paired peers: name, id, scope, last seen, path; with PEER, that one in "
                                            "full (check digits of the pairing, addresses, what each side may do)");
  std::string peers_which;
  peers->add_option("peer", peers_which, "A peer's name or the start of its node id");
  peers->add_flag("--json", json, "Machine-readable output");
  auto* netcheck = app.add_subcommand("netcheck", "This node's reachability: addresses, relays, public address, NAT");
  netcheck->add_flag("--json", json, "Machine-readable output");
  std::string peer;
  auto* deny = app.add_subcommand("deny", "Remove a peer's pin and close its live sessions now");
  deny->add_option("peer", peer, "Peer name or node id")->required();
  bool deny_stop_jobs = false;
  deny->add_flag("--stop-jobs", deny_stop_jobs, "Also stop the peer's queued and running jobs here");
  deny->add_flag("--json", json, "Machine-readable output");
  ScopeArgs scope_args;
  std::string allow_caps;
  auto* allow = app.add_subcommand("allow", "Lift a deny, or let a peer do more: yonder allow PEER [exec,files]");
  allow->add_option("peer", peer, "Peer name or node id")->required();
  allow->add_option("capabilities", allow_caps, "run,exec,forward,files,mesh,cuda (added to its grant)");
  auto* scope = app.add_subcommand("scope", "Change what a peer may do here (from its next request)");
  scope->add_option("peer", peer, "Peer name or node id")->required();
  scope->add_option("--capabilities", scope_args.capabilities, "Replace capabilities: run,exec,forward,files,mesh,cuda");
  scope->add_option("--add", scope_args.add, "Add capabilities");
  scope->add_option("--remove", scope_args.remove, "Remove capabilities");
  scope->add_option("--gpus", scope_args.gpus, "GPUs per job");
  scope->add_option("--vram", scope_args.vram, "VRAM limit per job");
  scope->add_option("--max-time", scope_args.max_time, "Wall time per job");
  scope->add_option("--max-jobs", scope_args.max_jobs, "Jobs running at once; more wait in the queue");
  scope->add_option("--cpus", scope_args.cpus, "CPUs per job");
  scope->add_option("--memory", scope_args.memory, "Memory per job");
  scope->add_option("--disk", scope_args.disk, "Disk per job");
  scope->add_option("--egress", scope_args.egress, "true or false");
  scope->add_flag("--json", json, "Machine-readable output");
  int ping_count = 4;
  double ping_interval = 0.2;
  auto* ping = app.add_subcommand("ping", "Round trips to a peer over the link");
  ping->add_option("peer", peer, "Peer name or node id")->required();
  ping->add_option("-c,--count", ping_count, "How many (default 4)");
  ping->add_option("-i,--interval", ping_interval, "Seconds between them (default 0.2)");
  ping->add_flag("--json", json, "Machine-readable output");
  std::string speed_bytes = "256M";
  int speed_streams = 1;
  auto* speedtest = app.add_subcommand("speedtest", "Throughput of the link to a peer (like iperf)");
  speedtest->add_option("peer", peer, "Peer name or node id")->required();
  speedtest->add_option("--bytes", speed_bytes, "How much to send (default 256M)");
  speedtest->add_option("--streams", speed_streams, "Parallel streams (default 1)");
  speedtest->add_flag("--json", json, "Machine-readable output");
  std::string call_method, call_params;
  auto* call = app.add_subcommand("call", "Send one request to a peer (for debugging scopes)");
  call->add_option("peer", peer, "Peer name or node id")->required();
  call->add_option("method", call_method, "e.g. node.info, run.submit")->required();
  call->add_option("params", call_params, "JSON object");
  call->group("Debugging");

  // Remote jobs.
  RunArgs run_args;
  auto* run = app.add_subcommand("run", "Run a command on a provider: yonder run --on PEER --image IMG -- CMD ...");
  run->add_option("-f,--file", run_args.job_file, "Job file (TOML) with these options; flags given here win (docs/cli.md)");
  run->add_option("--on", run_args.peer, "Provider: peer name or node id");
  run->add_flag("--mesh", run_args.mesh, "No --on: place the job on the best paired provider that has the GPUs "
                                         "(`yonder mesh` shows them)");
  run->add_option("--cuda", run_args.cuda, "With --mesh: least CUDA compute capability, e.g. 8.0");
  run->add_option("--label", run_args.labels, "With --mesh: KEY=VALUE the provider must advertise (repeatable)")
      ->allow_extra_args(false);
  run->add_option("--retries", run_args.retries,
                  "With --mesh: rerun a failed job up to N times on other providers; also requeues it (from its "
                  "checkpoint/ folder) when its provider stops answering");
  run->add_option("--replicas", run_args.replicas,
                  "With --mesh: run it on K distinct providers and accept the output a majority agrees on");
  run->add_option("--validator", run_args.validator,
                  "With --replicas: a shell command run here in each replica's outputs folder; exit 0 accepts it");
  run->add_option("--array", run_args.array,
                  "With --mesh: run an array of tasks 0-N, at most LIMIT at once (0-4999%8); each gets "
                  "YONDER_ARRAY_INDEX; outputs come home into out/<index>/");
  run->add_option("--array-file", run_args.array_file,
                  "With --mesh: one task per line of FILE (given to it as YONDER_ARRAY_PARAM)");
  run->add_option("--per-task-gpus", run_args.per_task_gpus, "With --array: whole GPUs for each task (default 1)");
  run->add_option("--group", run_args.group, "With --mesh: only providers that are members of this group "
                                            "(`yonder group list`)");
  run->add_option("--image", run_args.image, "Image to run (one the provider allows)");
  run->add_option("--gpus", run_args.gpus, "Whole GPUs (1, 2), or below 1 a share of one GPU: 0.5 is half its memory");
  run->add_option("--vram", run_args.vram,
                  "VRAM, e.g. 20G: alone, a share of one GPU with this much; with --gpus N, the least each GPU has "
                  "(and the job's limit); with --gpus 0.N, the most the share may be");
  run->add_option("--cpus", run_args.cpus, "CPUs, e.g. 2 or 0.5");
  run->add_option("--memory", run_args.memory, "Memory, e.g. 16G");
  run->add_option("--disk", run_args.disk, "Workspace size, e.g. 50G");
  run->add_option("--shm-size", run_args.shm,
                  "Size of the job's /dev/shm, e.g. 2G (default: the provider's, half the job's memory unless it "
                  "set jobs.shm_mib; at most half the job's memory)");
  run->add_option("--name", run_args.name,
                  "Name the job, to use wherever its id goes (logs, stop, wait, cp...); unique among this node's "
                  "jobs that have not ended");
  run->add_option("--time", run_args.time, "Wall-time limit, e.g. 2h");
  run->add_option("-e,--env", run_args.env, "KEY=VALUE (repeatable; wins over --env-file)")->allow_extra_args(false);
  run->add_option("--env-file", run_args.env_files, "KEY=VALUE lines, as docker's --env-file (repeatable)")
      ->allow_extra_args(false);
  run->add_option("-w,--workdir", run_args.workdir, "Working directory in the job: relative to /workspace, or under it");
  run->add_flag("-t,--tty", run_args.tty, "Give the job a terminal (its output is then one stream, on stdout)");
  run->add_option("--after", run_args.after, "Start only once this job (on the same provider) has ended (repeatable)")
      ->allow_extra_args(false);
  run->add_option("--after-ok", run_args.after_ok,
                  "Start only once this job (on the same provider) exited 0; if it did not, this one never starts "
                  "(repeatable)")
      ->allow_extra_args(false);
  run->add_flag("--hold", run_args.hold, "Queue the job held: it starts once `yonder release JOB`");
  run->add_option("-p,--forward", run_args.ports, "LOCAL:REMOTE: forward 127.0.0.1:LOCAL to port REMOTE of the job "
                                                  "while attached (repeatable; LOCAL 0 picks a port)")
      ->allow_extra_args(false);
  run->add_flag("-d,--detach", run_args.detach, "Print the job id and return at once");
  run->add_flag("--raw", run_args.raw,
                "Pass the job's terminal control sequences through as they came (by default only colours and "
                "progress-bar cursor moves do: no clipboard writes, title changes or screen clears)");
  run->add_flag("--no-upload", run_args.no_upload, "Do not upload the working directory");
  run->add_option("--upload", run_args.upload_dir, "Upload this folder instead of the working directory");
  run->add_option("--out", run_args.out, "Bring this path of the workspace home when the job ends (repeatable; "
                                         "default: the files that changed)")
      ->allow_extra_args(false);
  run->add_flag("--no-outputs-limit", run_args.no_outputs_limit,
                "Bring the job's outputs home even when they are more than the settings outputs.max_files and "
                "outputs.max_mib allow (without it: asked on a terminal, refused otherwise)");
  run->add_flag("--json", json, "With -d: print the job as JSON");
  run->add_option("command", run_args.command, "The command and its arguments, after -- (optional with a job file "
                                               "that has one)");
  PsArgs ps_args;
  auto* ps =
      app.add_subcommand("ps", "Jobs this node runs on providers, newest first (unfinished; --all for every one)");
  ps->add_flag("-a,--all", ps_args.all, "Finished jobs too");
  ps->add_flag("-q,--quiet", ps_args.quiet, "Only the job ids, one a line");
  ps->add_option("--format", ps_args.format, "table (default) or json (one job a line)");
  ps->add_option("--filter", ps_args.filters,
                 "KEY=VALUE: state (pending, starting, running, exited, stopped, failed), provider or image "
                 "(repeatable; one key's values are alternatives)")
      ->allow_extra_args(false);
  ps->add_option("--since", ps_args.since,
                 "Jobs submitted since then, ended ones too, with a line of their run and GPU time: a duration "
                 "back (24h, 7d), an RFC 3339 time or Unix seconds");
  ps->add_flag("--json", json, "Machine-readable output");
  auto* transfers = app.add_subcommand("transfers", "Uploads this node's daemon is sending now, with their progress");
  transfers->add_flag("--json", json, "Machine-readable output");
  std::string job_id;
  LogsArgs logs_args;
  auto* logs = app.add_subcommand("logs", "A job's output (from its provider's persisted log)");
  logs->add_option("job", job_id, "Job id, name (run --name) or a unique id prefix")->required();
  logs->add_flag("-f,--follow", logs_args.follow, "Keep printing until the job ends, then exit with its exit code");
  logs->add_flag("--raw", logs_args.raw, "Pass the job's terminal control sequences through as they came");
  logs->add_option("--since", logs_args.since,
                   "Only output written since: a duration (10m, 2h), an RFC 3339 UTC time, or Unix seconds");
  logs->add_option("-n,--tail", logs_args.tail, "Only the last N lines (all: every line)");
  logs->add_flag("-t,--timestamps", logs_args.timestamps, "Put each line's time (RFC 3339, UTC) before it");
  std::vector<std::string> wait_jobs;
  auto* wait_cmd =
      app.add_subcommand("wait", "Block until jobs end; print each one's exit code and exit with the last one's");
  wait_cmd->add_option("jobs", wait_jobs, "Job ids, names or unique id prefixes")->required();
  auto* inspect = app.add_subcommand("inspect", "Everything known about a job, as JSON");
  inspect->add_option("job", job_id, "Job id, name (run --name) or a unique id prefix")->required();
  std::vector<std::string> stats_jobs;
  bool stats_no_stream = false;
  std::string stats_format;
  auto* stats = app.add_subcommand(
      "stats", "Running jobs' CPU, memory, processes, GPU utilisation and VRAM, live (docker stats)");
  stats->add_option("jobs", stats_jobs, "Job ids, names or unique id prefixes")->required();
  stats->add_flag("--no-stream", stats_no_stream, "Print one table (from two samples a second apart) and exit");
  stats->add_option("--format", stats_format, "table (default) or json (one object a job a sample, a line each)");
  auto* stop = app.add_subcommand("stop", "Stop a job (SIGTERM, then SIGKILL after the provider's grace)");
  stop->add_option("job", job_id, "Job id, name (run --name) or a unique id prefix")->required();
  std::vector<std::string> hold_jobs;
  auto* hold = app.add_subcommand("hold", "Keep queued jobs from starting (they keep their place; scontrol hold)");
  hold->add_option("job", hold_jobs, "Job ids (or unique prefixes) still waiting in their provider's queue")->required();
  hold->add_flag("--json", json, "Machine-readable output");
  auto* release = app.add_subcommand("release", "Let held jobs start again (scontrol release)");
  release->add_option("job", hold_jobs, "Held job ids (or unique prefixes)")->required();
  release->add_flag("--json", json, "Machine-readable output");
  stop->add_flag("--json", json, "Machine-readable output");
  ExecArgs exec_args;
  auto* exec = app.add_subcommand("exec", "Run a command inside a running job: yonder exec -it JOB [CMD ...]");
  exec->add_flag("-i,--interactive", exec_args.interactive, "Send our stdin to the command");
  exec->add_flag("-t,--tty", exec_args.tty, "Give the command a terminal (a PTY; resizes follow ours)");
  exec->add_option("job", exec_args.job, "Job id, name (run --name) or a unique id prefix")->required();
  exec->add_option("command", exec_args.command, "The command and its arguments (default sh)");
  CudaArgs cuda_args;
  auto* cuda = app.add_subcommand("cuda", "Run a program here on a provider's GPU (remote CUDA): yonder cuda --on PEER "
                                          "-- PROGRAM [ARGS...]");
  cuda->add_option("--on", cuda_args.on, "The provider (peer name or id); its scope for you needs `cuda`")->required();
  cuda->add_option("command", cuda_args.command, "The program and its arguments, after --")->required();
  std::string forward_ports, forward_stop;
  bool forward_list = false;
  auto* forward = app.add_subcommand("forward", "Forward a local TCP port to a port inside a running job, or on a "
                                              "provider that opened it (like ssh -L)");
  forward->add_option("job", job_id, "Job id (or a unique prefix), or a provider (peer name or id) for a port of its "
                                     "own host");
  forward->add_option("ports", forward_ports, "LOCAL:REMOTE (LOCAL 0 picks a free port), or REMOTE");
  forward->add_flag("--list", forward_list, "The forwards this node's daemon serves");
  forward->add_option("--stop", forward_stop, "Stop a forward (its id, from --list)");
  forward->add_flag("--json", json, "Machine-readable output");
  std::string cp_from, cp_to;
  bool cp_dry_run = false;
  auto* cp = app.add_subcommand("cp", "Copy files out of a job (yonder cp JOB:PATH [DIR|FILE|-]) or into a running one "
                                      "(yonder cp LOCAL JOB:DIR, or cp - JOB:FILE from standard input)");
  cp->add_option("from", cp_from,
                 "JOB:PATH (relative to the workspace, or under /workspace; a file or folder), a local file or "
                 "folder, or - (standard input, one file)")
      ->required();
  cp->add_option("to", cp_to,
                 "A local folder (default: the working directory), a file name (PATH is one file), - (standard "
                 "output), or JOB:PATH (a workspace folder; with - as the source, the file to write)");
  cp->add_flag("--json", json, "Machine-readable output");
  cp->add_flag("--dry-run", cp_dry_run,
               "Out of a job: list what would come home (new or replacing a file here) and what would be left out; "
               "write nothing");
  bool audit_verify = false;
  int64_t audit_limit = 100;
  auto* audit = app.add_subcommand("audit", "What peers asked this node to do, and what it refused (hash-chained)");
  audit->add_flag("--verify", audit_verify, "Check the hash chain; exit 6 if an entry was changed or deleted");
  audit->add_option("-n,--limit", audit_limit, "Newest N entries (default 100)");
  audit->add_flag("--json", json, "Machine-readable output");
  auto* credits = app.add_subcommand("credits", "Per-peer credits from signed job receipts: GPU-seconds given, taken, balance");
  credits->add_flag("--json", json, "Machine-readable output");
  bool receipts_verify = false;
  auto* receipts = app.add_subcommand("receipts", "Receipts of finished jobs on both sides (provider-signed, countersigned)");
  receipts->add_flag("--verify", receipts_verify, "Check both signatures of every receipt; exit 7 if one does not verify");
  receipts->add_flag("--json", json, "Machine-readable output");
  auto* mesh = app.add_subcommand("mesh", "Capacity of the providers this node is paired with: GPUs, free, queue, RTT, path");
  mesh->add_flag("--json", json, "Machine-readable output");
  std::string mesh_group;
  mesh->add_option("--group", mesh_group, "Only the providers that are members of this group");
  bool mesh_cached = false;
  mesh->add_flag("--cached", mesh_cached, "What this node holds now (pulled earlier or pushed by the providers); "
                                          "ask no one");
  bool mesh_jobs_all = false;
  auto* mesh_jobs = mesh->add_subcommand("jobs", "Mesh jobs submitted from here (`run --mesh --retries N`) and their attempts");
  mesh_jobs->add_flag("-a,--all", mesh_jobs_all, "Also the finished ones");
  mesh_jobs->add_flag("--json", json, "Machine-readable output");
  std::string mesh_verify_peer;
  uint32_t mesh_verify_size = 0;
  auto* mesh_verify = mesh->add_subcommand("verify", "Run the known-answer benchmark on a provider (a checked matrix "
                                                     "product through the normal job path); exit 8 if it fails");
  mesh_verify->add_option("peer", mesh_verify_peer, "Provider name or node id")->required();
  mesh_verify->add_option("--size", mesh_verify_size, "n of the n x n product (default: mesh.benchmark_size)");
  std::string mesh_verify_check = "auto";
  mesh_verify->add_flag("--gpu{gpu}", mesh_verify_check,
                        "The GPU check: the product on one of its GPUs (mesh.gpu_benchmark_image), which confirms "
                        "or refutes the GPU model it advertises");
  mesh_verify->add_flag("--cpu{cpu}", mesh_verify_check, "The CPU check only (mesh.benchmark_image)");
  mesh_verify->add_flag("--json", json, "Machine-readable output");
  // --- array jobs
  std::string array_id;
  bool array_all = false, array_failed = false;
  auto* array = app.add_subcommand("array", "Array jobs started with `yonder run --mesh --array`");
  array->require_subcommand(1);
  auto* array_status = array->add_subcommand("status", "Counts by state, throughput, share per provider, time left");
  array_status->add_option("id", array_id, "Array id (or its start)")->required();
  array_status->add_flag("--json", json, "Machine-readable output");
  auto* array_list = array->add_subcommand("list", "The arrays started here");
  array_list->add_flag("-a,--all", array_all, "Also the finished ones");
  array_list->add_flag("--json", json, "Machine-readable output");
  auto* array_retry = array->add_subcommand("retry", "Run an array's failed tasks again");
  array_retry->add_option("id", array_id, "Array id (or its start)")->required();
  array_retry->add_flag("--failed", array_failed, "The failed tasks (the only kind there is; for Slurm users' hands)");
  array_retry->add_flag("--json", json, "Machine-readable output");
  auto* array_cancel = array->add_subcommand("cancel", "Start nothing more and stop the running tasks");
  array_cancel->add_option("id", array_id, "Array id (or its start)")->required();
  array_cancel->add_flag("--json", json, "Machine-readable output");
  // --- groups
  GroupArgs group_args;
  auto* group = app.add_subcommand("group", "Groups of nodes with a signed membership list gossiped among them");
  group->require_subcommand(1);
  auto* group_create = group->add_subcommand("create", "Create a group; this node owns it and signs its member list");
  group_create->add_option("name", group_args.group, "Group name (A-Z a-z 0-9 . _ -)")->required();
  group_create->add_option("--label", group_args.labels, "This node's label in the group, k=v (repeatable)");
  auto* group_invite = group->add_subcommand("invite", "Print a share link that pairs the holder with this node and "
                                                       "adds it to the group");
  group_invite->add_option("name", group_args.group, "Group name or id")->required();
  group_invite->add_option("--expires", group_args.expires, "How long the link works (default 1h)");
  group_invite->add_option("--uses", group_args.uses, "How many nodes it may add (default 1)");
  group_invite->add_option("--scope", group_args.scope, "What holders may do here: run,exec,forward,files (also mesh, cuda; default run)");
  auto* group_join = group->add_subcommand("join", "Redeem a group invite link: pair with the inviter and join");
  group_join->add_option("link", group_args.link, "The yonder://... invite")->required();
  auto* group_members = group->add_subcommand("members", "Members of a group: id, name, role, labels, online");
  group_members->add_option("name", group_args.group, "Group name or id")->required();
  auto* group_leave = group->add_subcommand("leave", "Leave a group (its owner signs a list without this node)");
  group_leave->add_option("name", group_args.group, "Group name or id")->required();
  auto* group_remove = group->add_subcommand("remove", "Remove a member (owner or admin only)");
  group_remove->add_option("name", group_args.group, "Group name or id")->required();
  group_remove->add_option("member", group_args.member, "Node id, peer name or id prefix")->required();
  auto* group_label = group->add_subcommand("label", "Set a member's label, k=v (k= removes it; owner or admin only)");
  group_label->add_option("name", group_args.group, "Group name or id")->required();
  group_label->add_option("member", group_args.member, "Node id, peer name or id prefix")->required();
  group_label->add_option("label", group_args.labels, "k=v")->required()->expected(1);
  auto* group_admin = group->add_subcommand("admin", "Make a member an admin, who may invite, remove and label "
                                                     "(--remove: a plain member again; owner only)");
  group_admin->add_option("name", group_args.group, "Group name or id")->required();
  group_admin->add_option("member", group_args.member, "Node id, peer name or id prefix")->required();
  group_admin->add_flag("--remove", group_args.remove, "Demote: the member is no longer an admin");
  auto* group_relay = group->add_subcommand("relay", "Name a relay in the group's list: every member registers there "
                                                     "and reaches the others through it (owner or admin only)");
  group_relay->add_option("name", group_args.group, "Group name or id")->required();
  group_relay->add_option("relay", group_args.relay, "HOST:PORT@NODE_ID (yonder-relay prints its node id)")->required();
  group_relay->add_flag("--remove", group_args.remove, "Take the relay out of the list");
  auto* group_list = group->add_subcommand("list", "The groups this node is in");
  for (auto* c : {group_create, group_invite, group_join, group_members, group_leave, group_remove, group_label,
                  group_admin, group_relay, group_list}) {
    c->add_flag("--json", json, "Machine-readable output");
  }

  // --- release: completions and the man page, from this very definition
  std::string completion_shell;
  auto* completion = app.add_subcommand("completion", "Print a shell completion script: bash, zsh or fish (docs/cli.md)");
  completion->add_option("shell", completion_shell, "bash, zsh or fish")
      ->required()
      ->check(CLI::IsMember({"bash", "zsh", "fish"}));
  yonder::release::ManPageInfo man;
  man.summary = "share NVIDIA GPUs with people you trust, peer to peer";
  man.extra = {
      {"Files", "$YONDER_HOME (default ~/.local/share/yonder) holds the node: identity.key, state.db, config.toml, "
                "the daemon's socket yonderd.sock and the API token api-token.\n\nWhen YONDER_HOME is unset and "
                "that folder holds no node but /var/lib/yonder does (the system service of the Debian package), "
                "yonder uses /var/lib/yonder: root and members of the group yonder control the system daemon."},
      {"Environment", "YONDER_HOME picks the node; YONDER_CONFIG the config file. Every setting's variable is "
                      "listed by `yonder config show` and in docs/config.md."},
      {"Exit status", "0 on success, 2 for a usage error, 3 when yonderd is not running; the full list is in "
                      "docs/cli.md."}};
  man.see_also = {"yonderd(8)", "yonder-relay(8)"};
  yonder::release::add_release_flags(app, "yonder", man);

  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return yonder::cli::report_usage_error(app, e, argc, argv);
  }

  if (*completion) {
    auto shell = yonder::release::parse_shell(completion_shell);
    if (!shell) return kExitUsage;  // IsMember above: not reached
    std::fputs(yonder::release::completion_script(yonder::release::describe(app, "yonder"), *shell).c_str(), stdout);
    return kExitOk;
  }
  if (*cfg_docs) return cmd_config_docs();
  auto ctx = make_context();
  if (!ctx) return print_error(ctx.error(), kExitError);
  ctx->json = json;
  if (*init) {
    if (!name.empty()) init_args.name = name;
    return cmd_init(*ctx, init_args);
  }
  if (*status) return cmd_status(*ctx);
  if (*gpu) return cmd_gpu(*ctx, gpu_peer);
  if (*doctor) return cmd_doctor(*ctx);
  if (*shutdown) return cmd_shutdown(*ctx);
  if (*dashboard) return cmd_dashboard(*ctx);
  if (*share) return cmd_share(*ctx, share_args);
  if (*links_revoke) return cmd_links_revoke(*ctx, link_id);
  if (*links) return cmd_links(*ctx);
  if (*pair) return cmd_pair(*ctx, link_text);
  if (*peers) return cmd_peers(*ctx, peers_which);
  if (*netcheck) return cmd_netcheck(*ctx);
  if (*deny) return cmd_deny(*ctx, peer, deny_stop_jobs);
  if (*allow) return cmd_allow(*ctx, peer, allow_caps, scope_args);
  if (*scope) return cmd_scope(*ctx, peer, scope_args);
  if (*ping) return cmd_ping(*ctx, peer, ping_count, ping_interval);
  if (*speedtest) return cmd_speedtest(*ctx, peer, speed_bytes, speed_streams);
  if (*call) return cmd_call(*ctx, peer, call_method, call_params);
  if (*run) return cmd_run(*ctx, run_args);
  if (*ps) return cmd_ps(*ctx, ps_args);
  if (*transfers) return cmd_transfers(*ctx);
  if (*logs) return cmd_logs(*ctx, job_id, logs_args);
  if (*wait_cmd) return cmd_wait(*ctx, wait_jobs);
  if (*inspect) return cmd_inspect(*ctx, job_id);
  if (*stats) return cmd_stats(*ctx, stats_jobs, stats_no_stream, stats_format);
  if (*stop) return cmd_stop(*ctx, job_id);
  if (*hold) return cmd_hold(*ctx, hold_jobs, true);
  if (*release) return cmd_hold(*ctx, hold_jobs, false);
  if (*exec) return cmd_exec(*ctx, exec_args);
  if (*cuda) return cmd_cuda(*ctx, cuda_args);
  if (*forward) {
    if (forward_list) return cmd_forward_list(*ctx);
    if (!forward_stop.empty()) return cmd_forward_stop(*ctx, forward_stop);
    if (job_id.empty() || forward_ports.empty()) {
      std::fprintf(stderr, "yonder: forward needs JOB and LOCAL:REMOTE (or --list, --stop ID)\n");
      return kExitUsage;
    }
    return cmd_forward(*ctx, job_id, forward_ports);
  }
  if (*audit) return cmd_audit(*ctx, audit_verify, audit_limit);
  if (*credits) return cmd_credits(*ctx);
  if (*mesh_jobs) return cmd_mesh_jobs(*ctx, mesh_jobs_all);
  if (*array_status) return cmd_array_status(*ctx, array_id);
  if (*array_list) return cmd_array_list(*ctx, array_all);
  if (*array_retry) return cmd_array_retry(*ctx, array_id);
  if (*array_cancel) return cmd_array_cancel(*ctx, array_id);
  if (*mesh_verify) return cmd_mesh_verify(*ctx, mesh_verify_peer, mesh_verify_size, mesh_verify_check);
  if (*mesh) return cmd_mesh(*ctx, mesh_group, mesh_cached);
  if (*receipts) return cmd_receipts(*ctx, receipts_verify);
  if (*group_create) return cmd_group_create(*ctx, group_args);
  if (*group_invite) return cmd_group_invite(*ctx, group_args);
  if (*group_join) return cmd_group_join(*ctx, group_args);
  if (*group_members) return cmd_group_members(*ctx, group_args);
  if (*group_leave) return cmd_group_leave(*ctx, group_args);
  if (*group_remove) return cmd_group_remove(*ctx, group_args);
  if (*group_label) return cmd_group_label(*ctx, group_args);
  if (*group_admin) return cmd_group_admin(*ctx, group_args);
  if (*group_relay) return cmd_group_relay(*ctx, group_args);
  if (*group_list) return cmd_group_list(*ctx);
  if (*cp) return cmd_cp(*ctx, cp_from, cp_to, cp_dry_run);
  if (*cfg_get) return cmd_config_get(*ctx, key);
  if (*cfg_set) return cmd_config_set(*ctx, key, value);
  if (*cfg_unset) return cmd_config_unset(*ctx, key);
  if (*cfg_show) return cmd_config_show(*ctx);
  return kExitUsage;
}
