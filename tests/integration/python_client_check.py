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
st = y.status()
check(st.get("api_port", 0) > 0, "status reports the TCP port: %r" % st)
check(any(p["name"] == provider for p in y.peers()), "peers lists %s" % provider)

# A wrong token is refused with a 401 that names the token file.
try:
    YonderClient(token="wrong").status()
    check(False, "a wrong token was accepted")
except YonderError as e:
    check(e.status == 401 and "api-token" in e.message, "wrong token: %s" % e)

# A home whose yonderd serves no TCP API (no api-url): refused, never a
# guess at the default port, which may be another node's.
import os  # noqa: E402
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

print("python client: %d failure(s)" % len(failures))
sys.exit(1 if failures else 0)
