#include <algorithm>
#include <array>

#include "base/suggest.h"
#include "config/config.h"

namespace yonder::config {
namespace {

using T = SettingType;

// Adding a setting: add it here (the docs and `yonder config show` follow).
constexpr std::array kSettings = {
    SettingSpec{"node.name", T::kString, "", "the host name", "YONDER_NAME", "",
                "Name shown to peers and in `yonder status`."},
    SettingSpec{"log.level", T::kString, "info", "info", "YONDER_LOG_LEVEL", "trace,debug,info,warn,error",
                "Daemon log verbosity."},
    SettingSpec{"log.format", T::kString, "auto", "auto", "YONDER_LOG_FORMAT", "auto,text,json",
                "Daemon log format: human text, JSON lines, or auto (text on a terminal, JSON otherwise)."},
    SettingSpec{"api.socket", T::kString, "", "$YONDER_HOME/yonderd.sock", "YONDER_API_SOCKET", "",
                "Unix socket of the local API (created mode 0600)."},
    SettingSpec{"executor.backend", T::kString, "docker", "docker", "YONDER_EXECUTOR", "docker,slurm,none",
                "Where jobs run: the local Docker engine, a Slurm cluster, or nowhere (consumer only)."},
    SettingSpec{"docker.socket", T::kString, "/var/run/docker.sock", "/var/run/docker.sock", "YONDER_DOCKER_SOCKET",
                "", "Docker Engine API socket (Podman's compatible socket works too)."},
    // Slurm backend: a provider in front of a lab's cluster.
    SettingSpec{"slurm.workdir_root", T::kString, "", "$YONDER_HOME/slurm", "YONDER_SLURM_WORKDIR_ROOT", "",
                "Folder for Slurm jobs' workspaces, scripts and output; every cluster node must see it at the same path."},
    SettingSpec{"slurm.partition", T::kString, "", "the cluster's default", "YONDER_SLURM_PARTITION", "",
                "Slurm partition jobs are submitted to (sbatch -p)."},
    SettingSpec{"slurm.account", T::kString, "", "the submitting user's default", "YONDER_SLURM_ACCOUNT", "",
                "Slurm account jobs are charged to (sbatch -A)."},
    SettingSpec{"slurm.bin_dir", T::kString, "", "PATH", "YONDER_SLURM_BIN_DIR", "",
                "Folder holding sbatch, squeue, scontrol, scancel, sacct and sinfo."},
    SettingSpec{"slurm.conf", T::kString, "", "Slurm's default", "YONDER_SLURM_CONF", "",
                "slurm.conf the commands use (SLURM_CONF)."},
    SettingSpec{"slurm.run_as", T::kString, "nobody", "nobody", "YONDER_SLURM_RUN_AS", "",
                "User jobs run as when yonderd submits as root (sbatch --uid/--gid); empty: yonderd's own user."},
    SettingSpec{"gpu.inventory", T::kString, "nvml", "nvml", "YONDER_GPU_INVENTORY", "",
                "GPU inventory: `nvml`, `nvml:/path/to/libnvidia-ml.so.1`, or `fake:N` (tests only: N fake GPUs, "
                "clearly labelled FAKE)."},
    // Provider executor and jobs.
    SettingSpec{"executor.image_allowlist", T::kString,
                "docker.io/library/python,docker.io/library/debian,docker.io/library/ubuntu,docker.io/pytorch/pytorch,"
                "nvcr.io/nvidia/*",
                "python, debian, ubuntu, pytorch/pytorch, nvcr.io/nvidia/*", "YONDER_IMAGE_ALLOWLIST", "",
                "Images jobs may use: comma-separated repositories (exact), `registry/path/*` (anything below) or "
                "`repo@sha256:...` (pinned digest)."},
    SettingSpec{"executor.pull_policy", T::kString, "missing", "missing", "YONDER_PULL_POLICY", "never,missing,always",
                "When the engine may pull an allowed image: never, when missing, or always."},
    SettingSpec{"executor.gvisor_runtime", T::kString, "runsc", "runsc", "", "",
                "Docker runtime name of gVisor, used for jobs asking for `isolation: gvisor`."},
    SettingSpec{"executor.allow_gvisor", T::kBool, "true", "true", "", "",
                "Whether jobs may ask for gVisor isolation (needs the runtime registered with Docker)."},
    SettingSpec{"executor.allow_egress", T::kBool, "false", "false", "", "",
                "Whether jobs may ask for network egress (through `executor.egress_network`); off: no network at all."},
    SettingSpec{"executor.egress_network", T::kString, "yonder-egress", "yonder-egress", "", "",
                "Docker network for jobs allowed egress."},
    SettingSpec{"jobs.max_concurrent", T::kInt, "4", "4", "YONDER_JOBS_MAX_CONCURRENT", "",
                "Jobs starting or running at once, all peers together; more wait in the queue."},
    SettingSpec{"jobs.max_per_peer", T::kInt, "2", "2", "", "", "Jobs one peer may have running at once."},
    SettingSpec{"jobs.max_queued", T::kInt, "100", "100", "", "", "Jobs waiting in the queue before submits are refused."},
    SettingSpec{"jobs.max_queued_per_peer", T::kInt, "20", "20", "", "",
                "Jobs one peer may have waiting in the queue before its submits are refused (a peer over its "
                "scope's jobs at once waits here)."},
    SettingSpec{"jobs.default_cpus", T::kInt, "1", "1", "", "", "CPUs a job gets when it does not ask."},
    SettingSpec{"jobs.max_cpus", T::kInt, "0", "0 (all cores)", "", "", "Most CPUs one job may ask for; 0: all cores."},
    SettingSpec{"jobs.default_memory_mib", T::kInt, "2048", "2048", "", "", "Memory (MiB, no swap) a job gets when it does not ask."},
    SettingSpec{"jobs.max_memory_mib", T::kInt, "16384", "16384", "", "", "Most memory (MiB) one job may ask for."},
    SettingSpec{"jobs.default_disk_mib", T::kInt, "10240", "10240", "", "", "Workspace size (MiB) a job gets when it does not ask."},
    SettingSpec{"jobs.max_disk_mib", T::kInt, "102400", "102400", "", "", "Largest workspace (MiB) one job may ask for."},
    SettingSpec{"jobs.disk_reserve_mib", T::kInt, "2048", "2048", "", "",
                "Free space (MiB) on the jobs' volume that job workspaces may never take: the node's own state "
                "(database, audit log, job logs) keeps it. The smaller of this and jobs.disk_reserve_percent."},
    SettingSpec{"jobs.disk_reserve_percent", T::kInt, "5", "5", "", "",
                "The same reserve as a share (percent) of the jobs' volume; the smaller of the two applies."},
    SettingSpec{"jobs.workspace_retention_s", T::kInt, "86400", "86400", "", "",
                "Seconds an ended job's workspace is kept for its outputs to be fetched before it is removed."},
    SettingSpec{"jobs.workspaces_max_mib", T::kInt, "20480", "20480", "", "",
                "Most space (MiB) ended jobs' workspaces may hold together; past it, the oldest whose outputs were "
                "fetched are removed first. 0: no cap (only the retention)."},
    SettingSpec{"jobs.logs_max_mib", T::kInt, "4096", "4096", "", "",
                "Most space (MiB) ended jobs' output logs may hold together; past it, the logs of the oldest ended "
                "jobs are removed (their records stay, and `yonder logs` says the output was removed). 0: no cap."},
    SettingSpec{"jobs.upload_cache_mib", T::kInt, "20480", "20480", "", "",
                "Uploaded files kept per peer (MiB, by content) so an unchanged file is not sent again; least recently used go first."},
    SettingSpec{"jobs.default_wall_time_s", T::kInt, "3600", "3600", "", "", "Wall-time limit (s) when a job does not ask."},
    SettingSpec{"jobs.max_wall_time_s", T::kInt, "86400", "86400", "", "", "Longest wall-time limit (s) a job may ask for."},
    SettingSpec{"jobs.pids_limit", T::kInt, "512", "512", "", "", "Processes and threads one job may have at once."},
    SettingSpec{"jobs.shm_mib", T::kInt, "0", "0", "", "", "Size of a job's /dev/shm by default (MiB; 0: half its memory, the most it may have; a job asks for its own with `run --shm-size`)."},
    SettingSpec{"jobs.stop_grace_s", T::kInt, "10", "10", "", "", "Seconds between SIGTERM and SIGKILL when a job is stopped."},
    SettingSpec{"jobs.log_max_bytes", T::kInt, "16777216", "16777216", "YONDER_JOBS_LOG_MAX_BYTES", "",
                "Bytes of output kept per job on the provider; later output is dropped with a notice."},
    // Consumer side: what a job's outputs may bring home without asking.
    SettingSpec{"outputs.max_files", T::kInt, "10000", "10000", "", "",
                "Most files one fetch of a job's outputs brings home without asking: past it `yonder run` asks on a "
                "terminal and refuses otherwise (`--no-outputs-limit`, `--out` or `yonder cp` lift it)."},
    SettingSpec{"outputs.max_mib", T::kInt, "4096", "4096", "", "",
                "Most data (MiB; holes in sparse files do not count) one fetch of a job's outputs brings home without "
                "asking, as for outputs.max_files. The target folder's free space is checked whatever this says."},
    // Metering and credits: receipts of finished jobs feed them (`yonder credits`).
    SettingSpec{"run.default_on", T::kString, "", "none", "YONDER_ON", "",
                "The provider `yonder run` uses when neither --on nor the job file names one (a peer name or node id)."},
    SettingSpec{"credits.starting_allowance", T::kInt, "3600", "3600", "", "",
                "Credit (reference GPU-seconds) a peer starts with, so newcomers are served before they could "
                "contribute; a peer's balance is this plus what it gave minus what it took."},
    SettingSpec{"credits.idle_after_s", T::kInt, "604800", "604800 (7 days)", "", "",
                "Seconds without a receipt with a peer after which its credit or debt starts to decay."},
    SettingSpec{"credits.half_life_s", T::kInt, "2592000", "2592000 (30 days)", "", "",
                "Once decaying, a peer's credit or debt halves every this many seconds (0: no decay)."},
    SettingSpec{"credits.model_factors", T::kString,
                "NVIDIA A100-SXM4-80GB=2.0,NVIDIA H100 80GB HBM3=3.0,NVIDIA GeForce RTX 4090=1.0,"
                "NVIDIA GeForce RTX 3090=0.6,Tesla T4=0.25",
                "A100 80GB 2.0, H100 80GB 3.0, RTX 4090 1.0, RTX 3090 0.6, T4 0.25", "", "",
                "Published per-model factors: a GPU-second on MODEL counts FACTOR reference GPU-seconds; "
                "comma-separated MODEL=FACTOR with MODEL as the GPU inventory names it."},
    SettingSpec{"credits.default_factor", T::kString, "0.5", "0.5", "", "",
                "Factor of a GPU model not in `credits.model_factors`, and of receipts naming several models."},
    SettingSpec{"credits.fetch_interval_s", T::kInt, "300", "300", "", "",
                "How often (seconds) a consumer asks providers for job receipts it is still missing (also once soon "
                "after yonderd starts); 0: only when a job's end is seen and on `yonder credits` / `yonder receipts`."},
    SettingSpec{"credits.queue_order", T::kBool, "true", "true", "", "",
                "Serve waiting jobs tit-for-tat: peers that gave more than they took first, then peers within their "
                "allowance, then debtors (each by arrival); false: first come, first served."},
    SettingSpec{"history.interval_s", T::kInt, "10", "10", "", "",
                "How often (seconds, at least 1) yonderd records its GPUs' use, each peer's link throughput and its "
                "running jobs' use, for the dashboard's charts."},
    SettingSpec{"history.keep_h", T::kInt, "24", "24", "", "",
                "How long (hours, at least 1) those records are kept; older ones are pruned (and the oldest past "
                "two million rows, whatever their age)."},
    SettingSpec{"mesh.labels", T::kString, "", "(none)", "YONDER_MESH_LABELS", "",
                "Labels this provider advertises to its peers, as KEY=VALUE,KEY=VALUE (e.g. site=lab2,gpu=rtx4090); "
                "`yonder run --mesh --label KEY=VALUE` places only on providers that have them."},
    SettingSpec{"mesh.lease_term_s", T::kInt, "60", "60", "", "",
                "How long (s) a mesh lease holds a provider's devices without a renewal; a consumer renews every "
                "third of it until its job is submitted, then the lease lasts as long as the job. A restarted "
                "provider grants nothing until the leases of its previous run have run out."},
    SettingSpec{"mesh.offer_timeout_ms", T::kInt, "5000", "5000", "", "",
                "How long `yonder run --mesh` waits for a provider to answer a lease offer before it falls through "
                "to the next provider in the plan."},
    SettingSpec{"mesh.advertisement_ttl_s", T::kInt, "120", "120", "", "",
                "How long (s) the capacity this provider advertises counts as fresh for its peers."},
    SettingSpec{"mesh.advertisement_push_s", T::kInt, "30", "30", "", "",
                "How often (s) this provider pushes its signed capacity to the peers it grants `mesh`, besides a push "
                "about a second after it changes (a job submitted or ended, a lease granted or released); 0 turns "
                "pushes off (peers then ask when they look)."},
    SettingSpec{"mesh.provider_timeout_s", T::kInt, "60", "60", "", "",
                "How long (s) a provider running one of this node's mesh jobs may go without answering before the "
                "attempt counts as lost and the job is requeued on another provider (from its last checkpoint)."},
    SettingSpec{"mesh.max_requeues", T::kInt, "3", "3", "", "",
                "How many times a mesh job is requeued after a provider lost it or could not start it before it "
                "fails (`--retries N` counts the job's own failures separately)."},
    SettingSpec{"mesh.checkpoint_interval_s", T::kInt, "30", "30", "", "",
                "How often (s) the `checkpoint/` folder of a running mesh job's workspace is copied to this node, "
                "to restart the job from it elsewhere if its provider is lost."},
    SettingSpec{"mesh.benchmark_image", T::kString, "docker.io/library/debian:12", "docker.io/library/debian:12",
                "YONDER_MESH_BENCHMARK_IMAGE", "",
                "Image of the CPU known-answer benchmark (`yonder mesh verify`): any image with sh and awk that the "
                "providers allow. It checks a correct answer and measures a rate on the CPU; it says nothing about "
                "the GPU model a provider advertises (see mesh.gpu_benchmark_image)."},
    SettingSpec{"mesh.gpu_benchmark_image", T::kString, "", "", "YONDER_MESH_GPU_BENCHMARK_IMAGE", "",
                "Image of the GPU known-answer check (`yonder mesh verify --gpu`): an image with Python, PyTorch and "
                "CUDA that the providers allow (e.g. a pytorch/pytorch tag you trust). Until this check has passed "
                "on a provider's GPU model, `yonder mesh` shows its GPUs as unverified and placement weighs it down. "
                "Empty: no GPU checks (the automatic benchmarks then run the CPU check)."},
    SettingSpec{"mesh.benchmark_size", T::kInt, "64", "64", "", "",
                "n of the benchmark's n x n matrix product mod a prime (1..512); the work grows as n^3."},
    SettingSpec{"mesh.benchmark_interval_s", T::kInt, "86400", "86400", "YONDER_MESH_BENCHMARK_INTERVAL_S", "",
                "Automatic known-answer benchmarks: about every this many seconds (each wait drawn from 0.5x..1.5x) "
                "one paired provider drawn at random, and each provider that joins a group this node owns or "
                "administers; 0: only `yonder mesh verify`."},
    SettingSpec{"mesh.benchmark_timeout_s", T::kInt, "600", "600", "", "",
                "A benchmark job still running after this many seconds is stopped and counts as a failed check."},
    SettingSpec{"gpu.vram_check_interval_ms", T::kInt, "2000", "2000", "", "",
                "How often running jobs' GPU memory is sampled (NVML per-process accounting) against their VRAM limit."},
    SettingSpec{"gpu.share", T::kString, "", "none", "YONDER_GPU_SHARE", "",
                "GPUs lent as shares to jobs that ask for `--vram SIZE` or `--gpus 0.N` instead of whole GPUs: "
                "comma-separated DEVICE:JOBS[:RESERVE], DEVICE `all`, an index or a GPU-... uuid, JOBS the shares "
                "at once (0 to 64), RESERVE the VRAM kept back from shares (e.g. `all:4:2G`; a later entry wins). "
                "Each share's VRAM is held by the VRAM guard and the VRAM watch."},
    SettingSpec{"gpu.vram_guard", T::kString, "", "lib/yonder/libyonder-vram-guard.so beside yonderd's folder",
                "YONDER_GPU_VRAM_GUARD", "",
                "The VRAM guard library preloaded into shares of a GPU; without it, shares are refused."},
    SettingSpec{"gpu.cuda_driver", T::kString, "libcuda.so.1", "libcuda.so.1", "YONDER_GPU_CUDA_DRIVER", "",
                "The CUDA driver library that remote CUDA sessions' workers load (peers with `cuda` in their scope; "
                "src/gpu/remote). Tests name the driver's test double here."},
    SettingSpec{"gpu.fake_without_runtime", T::kBool, "false", "false", "YONDER_GPU_FAKE_WITHOUT_RUNTIME", "",
                "Tests only, with a `fake:N` inventory or an NVML test double (`nvml:PATH`): run GPU jobs on those GPUs "
                "without asking Docker for devices; never with the system's NVML."},
    SettingSpec{"link.listen", T::kString, "0.0.0.0:7850", "0.0.0.0:7850", "YONDER_LINK_LISTEN", "",
                "Address and port for peer links (TLS 1.3, pinned keys); port 0 picks a free one; empty: do not "
                "listen (a consumer-only node)."},
    SettingSpec{"link.advertise", T::kString, "", "the listening address, or this host's addresses",
                "YONDER_LINK_ADVERTISE", "", "Comma-separated host:port list that share links tell peers to dial."},
    SettingSpec{"link.relays", T::kString, "", "none", "YONDER_LINK_RELAYS", "",
                "Relays (yonder-relay) this node keeps a connection to, comma-separated HOST:PORT, each optionally "
                "with @NODE_ID to pin the relay's key: peers that cannot reach each other directly meet there "
                "(the relay sees only ciphertext), and share links name them so a provider needs no inbound port. "
                "A share link names each relay with its key (the pinned one, or the one the relay proved when this "
                "node registered; a relay with neither is left out) and the holder pins it; a relay named here with "
                "@NODE_ID also pins an old (v1) link's relay at that address."},
    SettingSpec{"link.lan_discovery", T::kBool, "true", "true", "YONDER_LINK_LAN_DISCOVERY", "",
                "Find paired peers on the local network (multicast 239.255.77.77:47777, announcements only paired "
                "peers can recognise) and move their links to the LAN path."},
    SettingSpec{"link.port_mapping", T::kBool, "true", "true", "YONDER_LINK_PORT_MAPPING", "",
                "Ask the router (NAT-PMP, then UPnP-IGD) to forward the link port while yonderd runs, so peers "
                "outside the LAN can reach this node directly; the mapping is removed when yonderd stops."},
    SettingSpec{"link.dead_after_s", T::kInt, "45", "45", "YONDER_LINK_DEAD_AFTER_S", "",
                "Seconds without a byte from a peer after which its link counts as dead and is redialled (over "
                "the next best path: a dead punched path falls back to the relay); a keepalive goes out after a "
                "third of it. 3 to 3600."},
    SettingSpec{"link.hole_punching", T::kBool, "true", "true", "YONDER_LINK_HOLE_PUNCHING", "",
                "When a paired peer is reached only through a relay, punch a direct UDP path through both NATs "
                "(coordinated through the relay) and move the link onto QUIC over it; the link stays on the relay "
                "when both NATs are symmetric (or one is, without link.punch_birthday) or the punch fails."},
    SettingSpec{"link.punch_birthday", T::kBool, "true", "true", "YONDER_LINK_PUNCH_BIRTHDAY", "",
                "When this node's NAT or the peer's is symmetric (a new public port per destination) and the other "
                "keeps one port, punch by birthday probing if the peer agrees: the symmetric side opens 256 UDP "
                "ports towards the other's public address (TTL 2: they open its own NAT only), the other probes "
                "random ports of its address, at most 1,024 per attempt at 640 a second; about 98 % of attempts "
                "find a path. false: such links stay on the relay."},
    SettingSpec{"discovery.dht", T::kString, "", "off", "YONDER_DISCOVERY_DHT", "",
                "HOST:PORT,... of DHT nodes (OpenDHT, in Yonder's own DHT network) to join, for finding paired "
                "peers whose addresses changed: this node publishes where it is now for each paired peer (sealed "
                "for that peer alone, under a location only the two can compute, changing daily) and looks a peer "
                "up when its known addresses fail. Empty: no DHT, nothing is sent."},
    SettingSpec{"discovery.dht_listen", T::kString, "", "0.0.0.0:0 when discovery.dht is set", "YONDER_DISCOVERY_DHT_LISTEN", "",
                "IP:PORT of this node's DHT socket (UDP). Set alone (discovery.dht empty), the node serves as a "
                "bootstrap node that others name in discovery.dht."},
    SettingSpec{"link.udp_listen", T::kString, "", "the link port's number on 0.0.0.0 if free, else any", "YONDER_LINK_UDP_LISTEN", "",
                "IP:PORT of the UDP socket that asks relays (STUN) for this node's public UDP address and carries "
                "punched paths (QUIC)."},
    SettingSpec{"link.punch_keepalive_s", T::kInt, "5", "5", "YONDER_LINK_PUNCH_KEEPALIVE_S", "",
                "Seconds without sending after which a punched path sends a keepalive (a QUIC PING and its "
                "acknowledgement, about 30 bytes a second), so that both NATs keep its UDP mapping: RFC 4787 asks "
                "routers to keep one 2 minutes, but some drop an idle mapping within 10 s, and Linux gives a flow "
                "its longer two-way timeout only for a packet more than 2 s after it began. A punched path that hears "
                "nothing for four of them is taken for gone, and the link goes back to the relay. 1 to 60."},
    SettingSpec{"relay.listen", T::kString, "", "off", "YONDER_RELAY_LISTEN", "",
                "IP:PORT where this yonderd also serves as a relay (the yonder-relay protocol) for its own paired "
                "peers, e.g. a provider with a public address relaying for peers behind NATs; empty: off, unless "
                "relay.offer starts one (then on the link's host, the link's port + 1)."},
    SettingSpec{"relay.offer", T::kString, "auto", "auto", "YONDER_RELAY_OFFER", "auto,off",
                "auto: once paired peers confirm (by dialling it back) that this node is reachable, it runs a relay "
                "for them and offers it (reached only through the router's mapping of the link port, it has the "
                "router map the relay's port too: link.port_mapping), and peers that are not reachable register "
                "there and name it in their share links, so the peers of a node behind NAT reach it through a "
                "friend's box; its limits are the relay.* rates, pipes and monthly cap; off: never offer "
                "(relay.listen still relays for peers that configure it)."},
    SettingSpec{"relay.peer_rate_mb", T::kInt, "10", "10", "YONDER_RELAY_PEER_RATE_MB", "",
                "With a relay (relay.listen or offered): megabytes a second each peer may send through this node's relay (charged to "
                "the sender, so one peer's bulk transfer slows only its own pipes); 0: no limit."},
    SettingSpec{"relay.total_rate_mb", T::kInt, "25", "25", "YONDER_RELAY_TOTAL_RATE_MB", "",
                "With a relay (relay.listen or offered): megabytes a second all peers together may send through this node's relay, so "
                "relaying leaves the owner the rest of the uplink; each peer stays under relay.peer_rate_mb within "
                "it; 0: no limit."},
    SettingSpec{"relay.peer_pipes", T::kInt, "16", "16", "YONDER_RELAY_PEER_PIPES", "",
                "With a relay (relay.listen or offered): pipes (one per link between two peers) each peer may have "
                "through this node's relay at once, so one peer cannot take them all."},
    SettingSpec{"relay.monthly_gb", T::kInt, "100", "100", "YONDER_RELAY_MONTHLY_GB", "",
                "With a relay (relay.listen or offered): gigabytes (10^9 bytes) this node's relay may carry for its peers in a calendar "
                "month (UTC), both directions, kept across restarts in relay-usage.json in the state folder; at the "
                "cap its pipes close and new ones are refused with the reason until the month turns; 0: no cap."},
    SettingSpec{"link.rate_burst", T::kInt, "200", "200", "", "",
                "Requests a peer may send in a burst before the rate limit applies."},
    SettingSpec{"link.rate_per_second", T::kInt, "100", "100", "", "",
                "Sustained requests per second allowed from each peer; more are refused with a clear error."},
    SettingSpec{"forward.host_ports", T::kString, "", "none", "YONDER_FORWARD_HOST_PORTS", "",
                "Ports of this provider's own loopback (127.0.0.1) that paired peers whose scope includes `forward` "
                "may reach with `yonder forward PEER LOCAL:PORT`, comma-separated (e.g. `11434` for an Ollama); "
                "empty: none. Read when yonderd starts."},
    SettingSpec{"forward.direct", T::kBool, "true", "true", "YONDER_FORWARD_DIRECT", "",
                "Forward into a job through a socket made in the job's own network namespace (kernel TCP; needs "
                "yonderd as root, not for gVisor jobs). false, or where that is not possible: relay each connection "
                "through `nc` exec'd in the job. Read when yonderd starts."},
    SettingSpec{"api.request_timeout_s", T::kInt, "30", "30", "", "",
                "Seconds the local API waits for a request before closing the connection."},
    SettingSpec{"api.listen", T::kString, "127.0.0.1:7860", "127.0.0.1:7860", "YONDER_API_LISTEN", "",
                "HOST:PORT where the local API (and the dashboard, `yonder dashboard`) also listens over TCP; "
                "port 0 picks a free one; `off`: unix socket only. Left at its default and taken (another node on "
                "this host), a free port is used instead, logged and written to $YONDER_HOME/api-url; a port you "
                "set that is taken stops yonderd with the reason. Every request needs the API token "
                "($YONDER_HOME/api-token). A non-loopback address (0.0.0.0, a LAN address) is refused unless "
                "api.tls_cert and api.tls_key are set: beyond loopback the API speaks only HTTPS."},
    SettingSpec{"api.tls_cert", T::kString, "", "none", "YONDER_API_TLS_CERT", "",
                "PEM certificate chain the API's TCP listener serves HTTPS with (with api.tls_key); needed for a "
                "non-loopback api.listen, optional on loopback. Its subjectAltNames are the host names browsers "
                "may use. Read when yonderd starts."},
    SettingSpec{"api.tls_key", T::kString, "", "none", "YONDER_API_TLS_KEY", "",
                "PEM private key of api.tls_cert (unencrypted; keep it mode 0600). Read when yonderd starts."},
    SettingSpec{"api.login_code_ttl_s", T::kInt, "60", "60", "YONDER_API_LOGIN_CODE_TTL_S", "",
                "Seconds a one-time dashboard login URL from `yonder dashboard` stays valid."},
    // Packaging: the .deb's yonderd.service sets it, so members of the group yonder control the daemon.
    SettingSpec{"api.group_access", T::kBool, "false", "false", "YONDER_API_GROUP_ACCESS", "",
                "Let members of yonderd's group use the local API: the socket is made mode 0660 and the API token "
                "0640 (the state folder must let the group in, e.g. mode 0710). Anyone who can use the API "
                "controls the node. Read when yonderd starts."},
};

}  // namespace

std::span<const SettingSpec> all_settings() { return kSettings; }

Error unknown_setting(std::string_view key) {
  std::vector<std::string> keys;
  for (const auto& s : kSettings) keys.emplace_back(s.key);
  std::string k(key.substr(0, 80));
  return make_error(ErrorCode::kInvalidArgument,
                    "unknown setting `" + k + "`" + did_you_mean(k, keys) + "; `yonder config show` lists the settings");
}

const SettingSpec* find_setting(std::string_view key) {
  for (const auto& s : kSettings) {
    if (s.key == key) return &s;
  }
  return nullptr;
}

namespace {
// What a running yonderd takes at once (`yonder config set` asks it to
// reload); every other setting applies at its next start.
constexpr std::string_view kLiveSettings[] = {"log.level", "history.interval_s", "jobs.max_per_peer",
                                              "jobs.max_queued", "jobs.max_queued_per_peer", "credits.queue_order"};
}  // namespace

bool applies_live(std::string_view key) {
  return std::find(std::begin(kLiveSettings), std::end(kLiveSettings), key) != std::end(kLiveSettings);
}

std::string settings_markdown() {
  std::string out =
      "# Configuration reference\n\n"
      "Generated from `src/config/settings.cpp`; `yonder config show` prints the effective values.\n\n"
      "The file is TOML: `log.level` is the key `level` in the table `[log]`. Precedence, lowest first: default, "
      "config file, environment variable.\n\n"
      "`yonder config set` and `unset` write the file and ask a running yonderd to take it: settings marked "
      "*(live)* apply at once, the others at yonderd's next start (`yonder config show` marks those that wait).\n\n"
      "| setting | type | default | environment | allowed | meaning |\n"
      "| --- | --- | --- | --- | --- | --- |\n";
  for (const auto& s : kSettings) {
    const char* type = s.type == T::kString ? "string" : s.type == T::kInt ? "integer" : "boolean";
    out += "| `" + std::string(s.key) + "` | " + type + " | " + std::string(s.default_doc) + " | " +
           (s.env.empty() ? "" : "`" + std::string(s.env) + "`") + " | " + std::string(s.allowed) + " | " +
           std::string(s.doc) + (applies_live(s.key) ? " *(live)*" : "") + " |\n";
  }
  return out;
}

}  // namespace yonder::config
