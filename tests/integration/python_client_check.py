#!/usr/bin/env python3
"""Drives clients/python/yonder_client.py against a live consumer yonderd
(YONDER_HOME) paired with PROVIDER: status, peers, run with streamed logs,
ps, stop. Exits 0 when everything held; prints what did not otherwise.
Called by python_client_test.cpp: python_client_check.py CLIENT_DIR PROVIDER IMAGE"""
import io
import sys

sys.path.insert(0, sys.argv[1])
from yonder_client import YonderClient, YonderError  # noqa: E402

provider, image = sys.argv[2], sys.argv[3]
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAILED:", what, file=sys.stderr)


y = YonderClient()
check(y.socket_path is not None and y.socket_path.endswith("yonderd.sock"),
      "the unix socket by default: %r" % y.socket_path)
st = y.status()
check(st.get("api_port", 0) > 0, "status reports the TCP port: %r" % st)
# The TCP API still, given its URL.
import os  # noqa: E402
home = os.environ["YONDER_HOME"]
with open(os.path.join(home, "api-url")) as f:
    tcp = YonderClient(url=f.readline().strip())
check(tcp.socket_path is None and tcp.status()["node_id"] == st["node_id"], "the TCP API given its URL")
check(any(p["name"] == provider for p in y.peers()), "peers lists %s" % provider)

# A wrong token is refused with a 401 that names the token file.
try:
    YonderClient(token="wrong").status()
    check(False, "a wrong token was accepted")
except YonderError as e:
    check(e.status == 401 and "api-token" in e.message, "wrong token: %s" % e)

# A home whose yonderd runs nowhere (no socket, no api-url): refused,
# never a guess at the default port, which may be another node's.
import tempfile  # noqa: E402
os.environ.pop("YONDER_API_URL", None)
with tempfile.TemporaryDirectory() as bare:
    try:
        YonderClient(home=bare, token="t").status()
        check(False, "a home without api-url fell back to a guessed URL")
    except YonderError as e:
        check(e.code == "unavailable" and "api-url" in e.message, "no api-url: %s" % e)

# run: output streamed as it comes, exit code propagated.
out, err = io.BytesIO(), io.BytesIO()
job = y.run(provider, image, ["sh", "-c", "echo one; echo two >&2; echo three; exit 3"], out=out, err=err)
check(out.getvalue() == b"one\nthree\n", "stdout streamed: %r" % out.getvalue())
check(b"two\n" in err.getvalue(), "stderr streamed: %r" % err.getvalue())
check(job.get("exit_code") == 3, "exit code 3: %r" % job)
check(any(j["job_id"] == job["job_id"] for j in y.ps(all=True)), "ps --all lists the finished job")

# stop: a job that runs until stopped; its first line proves it runs.
long_id = y.submit(provider, image, ["sh", "-c", "echo started; while true; do sleep 1; done"])
check(any(j["job_id"] == long_id for j in y.ps()), "ps lists the running job")
lines = y.follow(long_id)
stream, data = next(lines)
check(data == b"started\n", "first output of the long job: %r" % data)
y.stop(long_id)
for _ in lines:  # drains to the end of the log
    pass
final = y.wait(long_id)
check(final.get("state") == "stopped", "stopped job's state: %r" % final.get("state"))
check("# TYPE yonder_consumer_jobs gauge" in y.metrics(), "metrics served")

# share: a signed link (this node shares nothing else; pairing is the CLI's tests').
link = y.share(scope="run", uses=1, expires_s=600, label="from python")
check(link.get("link", "").startswith("yonder://") and link.get("id"), "share gives a link: %r" % link)

# forward: a listener here to a port in a running job, listed, then stopped.
fwd_job = y.submit(provider, image, ["sh", "-c", "echo up; sleep 600"])
next(y.follow(fwd_job))
fwd = y.forward(fwd_job, 8888)
check(fwd.get("local_port", 0) > 0 and fwd.get("to") == "job", "forward into the job: %r" % fwd)
check(any(f["forward_id"] == fwd["forward_id"] for f in y.forwards()), "forwards lists it")
y.stop_forward(fwd["forward_id"])
check(not any(f["forward_id"] == fwd["forward_id"] for f in y.forwards()), "stop_forward ends it")
y.stop(fwd_job)
check(isinstance(y.mesh(), dict), "mesh answers")

# The README's example, as written but for its first line (this test's
# provider and image), in a folder of its own.
import contextlib  # noqa: E402
import re  # noqa: E402
with open(os.path.join(sys.argv[1], "README.md")) as f:
    example = re.search(r"```python\n(.*?)```", f.read(), re.S).group(1)
first = 'provider, image = "studio", "python:3.11"'
check(first in example, "the README example starts with the provider and image")
example = example.replace(first, "provider, image = %r, %r" % (provider, image))
printed = io.BytesIO()  # run() streams to sys.stdout.buffer: a text layer over bytes
cwd = os.getcwd()
with tempfile.TemporaryDirectory() as work:
    os.chdir(work)
    try:
        text = io.TextIOWrapper(printed, encoding="utf-8", write_through=True)
        with contextlib.redirect_stdout(text):
            exec(compile(example, "README.md", "exec"), {})
        check(open("results/out/result.txt").read() == "MADE HERE\n", "the example's result came home")
    except Exception as e:  # noqa: BLE001
        check(False, "the README example failed: %r" % e)
    finally:
        os.chdir(cwd)
out = printed.getvalue().decode("utf-8", "replace")
for expected in ["['in.txt']", "0 b'MADE HERE\\n'", "\nstopped\n", "['out/result.txt']", "404 not_found"]:
    check(expected in out, "the README example printed %r:\n%s" % (expected, out))

# pip install, as a user would (offline, into a folder): the module and the command.
import shutil  # noqa: E402
import subprocess  # noqa: E402
with tempfile.TemporaryDirectory() as work:
    src = os.path.join(work, "src")
    shutil.copytree(sys.argv[1], src)
    target = os.path.join(work, "site")
    # Debian's python3 with its pip and setuptools (scripts/packages.txt).
    py = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
    r = subprocess.run([py, "-m", "pip", "install", "--no-index", "--no-build-isolation", "--quiet", "--target",
                        target, src], capture_output=True, text=True)
    check(r.returncode == 0, "pip install clients/python: %s%s" % (r.stdout, r.stderr))
    if r.returncode == 0:
        env = dict(os.environ, PYTHONPATH=target)
        r = subprocess.run([os.path.join(target, "bin", "yonder-client"), "status"], capture_output=True, text=True,
                           env=env)
        check(r.returncode == 0 and st["node_id"] in r.stdout, "the installed yonder-client: %s%s" % (r.stdout, r.stderr))

print("python client: %d failure(s)" % len(failures))
sys.exit(1 if failures else 0)
