"""A small client for yonderd's local API, standard library only.

It talks to the TCP API (api.listen, default 127.0.0.1:7860; https:// when
yonderd serves TLS, docs/api.md) with
the node's API token, the one line of $YONDER_HOME/api-token, exactly as the
`yonder` CLI does over the unix socket. Routes: docs/openapi.yaml.

    from yonder_client import YonderClient
    y = YonderClient()                       # finds the URL and the token
    print(y.status()["node_id"])
    job = y.run("studio", "pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime",
                ["python", "-c", "import torch; print(torch.cuda.is_available())"])
    print(job["exit_code"])

Python 3.8 or newer.
"""

import base64
import http.client
import json
import os
import ssl
import sys
import time
import urllib.parse

__all__ = ["YonderClient", "YonderError", "default_home"]



def default_home():
    """$YONDER_HOME, else ~/.local/share/yonder (as the CLI resolves it)."""
    home = os.environ.get("YONDER_HOME")
    if home:
        return home
    data = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return os.path.join(data, "yonder")


def _read_line(path):
    try:
        with open(path, encoding="utf-8") as f:
            return f.readline().strip()
    except OSError:
        return ""


class YonderError(Exception):
    """A refused or failed request: HTTP status, error code and yonderd's message."""

    def __init__(self, status, code, message):
        super().__init__("%s (HTTP %d, %s)" % (message, status, code))
        self.status = status
        self.code = code
        self.message = message


class YonderClient:
    def __init__(self, url=None, token=None, home=None, timeout=60.0, cafile=None):
        """url: the API's base URL (default: $YONDER_API_URL, then the URL
        yonderd wrote to $YONDER_HOME/api-url; never a guessed port).
        token: the API token (default: $YONDER_HOME/api-token).
        cafile: for an https:// URL whose certificate is not publicly
        trusted, the PEM file to trust (default: $YONDER_API_CAFILE)."""
        self.home = home or default_home()
        self.url = url or os.environ.get("YONDER_API_URL") or _read_line(os.path.join(self.home, "api-url"))
        if not self.url:
            # Never a guess at 127.0.0.1:7860: with this node's API elsewhere
            # (or off), that port may be another node's, and the request
            # would carry this node's token to it.
            raise YonderError(0, "unavailable",
                              "no API URL at %s: yonderd writes it when it listens on TCP; start yonderd (with "
                              "api.listen not off), or pass url= / set YONDER_API_URL"
                              % os.path.join(self.home, "api-url"))
        self.token = token or _read_line(os.path.join(self.home, "api-token"))
        if not self.token:
            raise YonderError(0, "unauthenticated",
                              "no API token at %s; run `yonder init` (or start yonderd once)"
                              % os.path.join(self.home, "api-token"))
        parts = urllib.parse.urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("the API URL must be http://HOST:PORT or https://HOST:PORT, not %r" % self.url)
        self._host = parts.hostname
        self._tls = None
        if parts.scheme == "https":
            self._tls = ssl.create_default_context(cafile=cafile or os.environ.get("YONDER_API_CAFILE") or None)
        self._port = parts.port or (443 if self._tls else 80)
        self.timeout = timeout

    # --- transport
    def request(self, method, path, body=None, query=None, timeout=None, raw=False):
        """One request; the decoded JSON reply (text when raw=True)."""
        if query:
            path += "?" + urllib.parse.urlencode(query)
        headers = {"Authorization": "Bearer " + self.token, "Accept": "application/json"}
        data = None
        if body is not None or method == "POST":
            data = json.dumps({} if body is None else body).encode()
            headers["Content-Type"] = "application/json"
        if self._tls:
            conn = http.client.HTTPSConnection(self._host, self._port, timeout=timeout or self.timeout,
                                               context=self._tls)
        else:
            conn = http.client.HTTPConnection(self._host, self._port, timeout=timeout or self.timeout)
        try:
            conn.request(method, path, body=data, headers=headers)
            res = conn.getresponse()
            text = res.read().decode("utf-8", "replace")
        except OSError as e:
            raise YonderError(0, "unavailable",
                              "cannot reach yonderd at %s (%s); is it running, and is api.listen on?" % (self.url, e))
        finally:
            conn.close()
        if res.status != 200:
            try:
                err = json.loads(text)["error"]
                raise YonderError(res.status, err.get("code", ""), err.get("message", text))
            except (ValueError, KeyError, TypeError):
                raise YonderError(res.status, "http_%d" % res.status, text.strip() or res.reason)
        return text if raw else json.loads(text)

    # --- node and peers
    def status(self):
        return self.request("GET", "/v1/status")

    def peers(self):
        return self.request("GET", "/v1/peers")["peers"]

    def gpus(self):
        return self.request("GET", "/v1/gpus")

    def metrics(self):
        return self.request("GET", "/metrics", raw=True)

    # --- jobs
    def submit(self, peer, image, command, upload_dir=None, **job):
        """Starts a job on `peer` (a node id or name); returns its id.
        job: more fields of the job request (env, gpus, vram_mib, memory_mib,
        cpus, wall_time_s, workdir, ...). upload_dir: a folder sent as the
        job's workspace."""
        job = dict(job, image=image, command=list(command))
        body = {"peer": peer, "job": job}
        if upload_dir:
            body["dir"] = os.path.abspath(upload_dir)
        return self.request("POST", "/v1/jobs", body, timeout=max(self.timeout, 1800))["job_id"]

    def ps(self, all=False):
        return self.request("GET", "/v1/jobs", query={"all": "1"} if all else None)["jobs"]

    def inspect(self, job_id):
        return self.request("GET", "/v1/jobs/inspect", query={"id": job_id})

    def stop(self, job_id):
        return self.request("POST", "/v1/jobs/stop", {"job_id": job_id})

    def logs(self, job_id, offset=0, wait_ms=0):
        """One read of the job's log from `offset`, waiting up to wait_ms for
        more: {"records": [...], "next_offset": N, "ended": bool}."""
        return self.request("GET", "/v1/jobs/logs", query={"id": job_id, "offset": offset, "wait_ms": wait_ms},
                            timeout=wait_ms / 1000.0 + 30)

    def follow(self, job_id, offset=0, wait_ms=15000):
        """Yields (stream, bytes) as the job writes, until it ends. stream is
        "stdout", "stderr" or "notice" (yonder's own remarks)."""
        while True:
            r = self.logs(job_id, offset, wait_ms)
            for rec in r.get("records", []):
                yield rec.get("stream", "stdout"), base64.b64decode(rec.get("data", ""))
            offset = r.get("next_offset", offset)
            if r.get("ended"):
                return

    def wait(self, job_id):
        """The job once it has ended (state and exit_code settled)."""
        for _ in self.follow(job_id):
            pass
        for _ in range(100):
            job = self.inspect(job_id)
            if job.get("state") in ("exited", "stopped", "failed"):
                return job
            time.sleep(0.2)  # the provider reports the end just after the log ends
        return job

    def run(self, peer, image, command, out=None, err=None, **kwargs):
        """Submits a job and streams its output to out/err (default: this
        process's stdout/stderr) until it ends; returns the finished job."""
        out = out or sys.stdout.buffer
        err = err or sys.stderr.buffer
        job_id = self.submit(peer, image, command, **kwargs)
        for stream, data in self.follow(job_id):
            target = out if stream == "stdout" else err
            target.write(data if stream != "notice" else b"yonder: " + data + b"\n")
            target.flush()
        return self.wait(job_id)

    def outputs(self, job_id, into, paths=None):
        """Copies the job's workspace files (what it wrote, or `paths`) into
        the local folder `into` (yonderd writes them)."""
        body = {"job_id": job_id, "dir": os.path.abspath(into)}
        if paths:
            body["paths"] = list(paths)
        return self.request("POST", "/v1/jobs/fetch", body, timeout=max(self.timeout, 1800))


def _main(argv):
    """python3 yonder_client.py status|peers|ps|stop JOB|logs JOB|metrics"""
    y = YonderClient()
    cmd = argv[1] if len(argv) > 1 else "status"
    if cmd == "logs":
        for stream, data in y.follow(argv[2]):
            (sys.stdout if stream == "stdout" else sys.stderr).buffer.write(data)
        return 0
    if cmd == "metrics":
        sys.stdout.write(y.metrics())
        return 0
    result = {"status": y.status, "peers": y.peers, "ps": lambda: y.ps(all=True)}.get(cmd)
    if cmd == "stop":
        result = lambda: y.stop(argv[2])
    if result is None:
        sys.stderr.write(_main.__doc__ + "\n")
        return 2
    print(json.dumps(result(), indent=2))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(_main(sys.argv))
    except YonderError as e:
        sys.stderr.write("yonder_client: %s\n" % e)
        sys.exit(1)
