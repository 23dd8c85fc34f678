"""A small client for yonderd's local API, standard library only.

By default it talks to the daemon over its unix socket
($YONDER_HOME/yonderd.sock, or api.socket / $YONDER_API_SOCKET), exactly as
the `yonder` CLI does, with the node's API token (the one line of
$YONDER_HOME/api-token). Given a URL (url=, or $YONDER_API_URL) it uses the
TCP API instead (api.listen; https:// when yonderd serves TLS, docs/api.md),
and with no socket it reads the URL yonderd wrote to $YONDER_HOME/api-url.
Routes: docs/openapi.yaml.

    from yonder_client import YonderClient
    y = YonderClient()                       # finds the socket (or URL) and the token
    print(y.status()["node_id"])
    job = y.run("studio", "pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime",
                ["python", "-c", "import torch; print(torch.cuda.is_available())"])
    print(job["exit_code"])

Return types: calls that create something return what identifies it
(submit: the job id; share: the link's dict with "link" and "id"); calls that
read return the daemon's JSON (a dict, or a list for listings: peers, ps,
forwards, arrays); exec returns (exit_code, stdout_bytes, stderr_bytes).
Failures raise YonderError. Python 3.8 or newer.
"""

import base64
import http.client
import json
import os
import socket
import ssl
import struct
import sys
import time
import urllib.parse

__all__ = ["YonderClient", "YonderError", "default_home"]


class _UnixConnection(http.client.HTTPConnection):
    """HTTP over the daemon's unix socket."""

    def __init__(self, path, timeout):
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        try:
            s.connect(self._path)
        except OSError:
            s.close()
            raise
        self.sock = s



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
    def __init__(self, url=None, token=None, home=None, timeout=60.0, cafile=None, socket_path=None):
        """url: the TCP API's base URL (default: $YONDER_API_URL; without
        one, the daemon's unix socket, then the URL yonderd wrote to
        $YONDER_HOME/api-url; never a guessed port).
        socket_path: the daemon's unix socket (default: $YONDER_API_SOCKET,
        then $YONDER_HOME/yonderd.sock).
        token: the API token (default: $YONDER_HOME/api-token).
        cafile: for an https:// URL whose certificate is not publicly
        trusted, the PEM file to trust (default: $YONDER_API_CAFILE)."""
        self.home = home or default_home()
        self.timeout = timeout
        self.socket_path = None
        self.url = url or os.environ.get("YONDER_API_URL")
        if not self.url:
            sock = socket_path or os.environ.get("YONDER_API_SOCKET") or os.path.join(self.home, "yonderd.sock")
            if os.path.exists(sock):
                self.socket_path = sock
                self.url = "unix:" + sock
            else:
                self.url = _read_line(os.path.join(self.home, "api-url"))
        if not self.url:
            # Never a guess at 127.0.0.1:7860: with this node's API elsewhere
            # (or off), that port may be another node's, and the request
            # would carry this node's token to it.
            raise YonderError(0, "unavailable",
                              "yonderd does not seem to run for %s: no socket at %s and no API URL at %s; start "
                              "yonderd, or pass url= / socket_path= (or set YONDER_API_URL)"
                              % (self.home, os.path.join(self.home, "yonderd.sock"),
                                 os.path.join(self.home, "api-url")))
        self.token = token or _read_line(os.path.join(self.home, "api-token"))
        if not self.token:
            raise YonderError(0, "unauthenticated",
                              "no API token at %s; run `yonder init` (or start yonderd once)"
                              % os.path.join(self.home, "api-token"))
        self._tls = None
        if self.socket_path:
            return
        parts = urllib.parse.urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("the API URL must be http://HOST:PORT or https://HOST:PORT, not %r" % self.url)
        self._host = parts.hostname
        if parts.scheme == "https":
            self._tls = ssl.create_default_context(cafile=cafile or os.environ.get("YONDER_API_CAFILE") or None)
        self._port = parts.port or (443 if self._tls else 80)

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
        if self.socket_path:
            conn = _UnixConnection(self.socket_path, timeout or self.timeout)
        elif self._tls:
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
                              "cannot reach yonderd at %s (%s); is it running%s?"
                              % (self.url, e, "" if self.socket_path else ", and is api.listen on"))
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

    def copy_out(self, job_id, path, into):
        """`yonder cp JOB:PATH INTO`: a file or folder of the job's workspace
        (relative to it) into the local folder `into`, keeping its path;
        returns the list of files written."""
        return self.outputs(job_id, into, [path])["files"]

    def copy_in(self, job_id, local_path, dir="."):
        """`yonder cp LOCAL JOB:DIR`: a local file or folder into the running
        job's workspace folder `dir`, under its own name (needs `files`);
        returns the workspace paths written."""
        body = {"job_id": job_id, "src": os.path.realpath(local_path), "dir": dir}
        return self.request("POST", "/v1/jobs/put", body, timeout=max(self.timeout, 1800))["paths"]

    def stats(self, job_id):
        """A running job's use now: CPU time, memory, processes, each GPU's
        utilisation and VRAM (`yonder stats`)."""
        return self.request("GET", "/v1/jobs/stats", query={"id": job_id})

    def exec(self, job_id, command, stdin=b""):
        """Runs `command` (a list) in the running job, without a terminal;
        `stdin` (bytes) is its input. Returns (exit_code, stdout, stderr)
        once it ended (needs `exec`)."""
        session = self.request("POST", "/v1/jobs/exec", {"job_id": job_id, "command": list(command), "tty": False})
        out, err, code = bytearray(), bytearray(), None
        with socket.create_connection(("127.0.0.1", session["port"]), timeout=max(self.timeout, 600)) as s:
            frames = session["token"].encode()
            if stdin:
                for at in range(0, len(stdin), 1 << 16):
                    chunk = stdin[at:at + (1 << 16)]
                    frames += struct.pack(">BI", 0, len(chunk)) + chunk
            frames += struct.pack(">BI", 4, 0)  # end of stdin
            s.sendall(frames)
            buf = b""
            while True:
                data = s.recv(1 << 16)
                if not data:
                    break
                buf += data
                while len(buf) >= 5:
                    kind, size = struct.unpack(">BI", buf[:5])
                    if size > (1 << 20):
                        raise YonderError(0, "data_loss", "an exec frame of %d bytes: the stream is broken" % size)
                    if len(buf) < 5 + size:
                        break
                    payload, buf = buf[5:5 + size], buf[5 + size:]
                    if kind == 0:
                        out += payload
                    elif kind == 1:
                        err += payload
                    elif kind == 3 and size == 4:
                        code = struct.unpack(">i", payload)[0]
        if code is None:
            raise YonderError(0, "unavailable", "the exec session ended without an exit code: %s"
                              % bytes(err).decode("utf-8", "replace").strip())
        return code, bytes(out), bytes(err)

    def forward(self, target, remote_port, local_port=0):
        """`yonder forward`: listens on 127.0.0.1:local_port (0 picks one)
        and carries each connection to remote_port in the job `target` (or
        on the provider `target`'s host, if it opened that port). Returns
        the forward's dict: "forward_id", "local_port", ...; stop_forward(forward_id) ends it."""
        return self.request("POST", "/v1/forwards",
                            {"target": target, "remote_port": remote_port, "local_port": local_port})

    def forwards(self):
        return self.request("GET", "/v1/forwards")["forwards"]

    def stop_forward(self, forward_id):
        return self.request("POST", "/v1/forwards/stop", {"forward_id": forward_id})

    # --- pairing
    def share(self, scope="run", uses=1, expires_s=3600, **limits):
        """`yonder share`: a signed link to pair with this node. scope: the
        capabilities ("run,exec,forward,files"); limits: gpus, max_jobs,
        vram_bytes, max_time_s, memory_bytes, disk_bytes, cpus_milli,
        egress, label. Returns {"link", "id", "summary", ...}."""
        body = dict(limits, capabilities=scope, uses=uses, expires_s=expires_s)
        return self.request("POST", "/v1/share", body)

    def pair(self, link):
        """`yonder pair`: pins the provider the link names; returns {"peer",
        "name", "summary", "short_auth_string" (the check digits), ...}."""
        return self.request("POST", "/v1/pair", {"link": link})

    # --- the mesh
    def mesh(self):
        """Every paired provider that shares its capacity (`yonder mesh`)."""
        return self.request("GET", "/v1/mesh")

    def array(self, image, command, out, array=None, params=None, limit=None, retries=None, **job):
        """`yonder run --mesh --array`: a task per index of `array`
        ("0-N[%LIMIT]") or per line of `params`, spread over the mesh, each
        task's outputs in out/<index>/; returns the array's id."""
        body = {"job": dict(job, image=image, command=list(command)), "out": os.path.abspath(out)}
        for key, value in (("array", array), ("params", params), ("limit", limit), ("retries", retries)):
            if value is not None:
                body[key] = value
        return self.request("POST", "/v1/mesh/arrays", body)["array_id"]

    def arrays(self, all=False):
        return self.request("GET", "/v1/mesh/arrays", query={"all": "1"} if all else None)["arrays"]

    def array_status(self, array_id):
        return self.request("GET", "/v1/mesh/arrays/inspect", query={"id": array_id})


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


def _cli():
    """The `yonder-client` command that `pip install` puts on PATH."""
    try:
        sys.exit(_main(sys.argv))
    except YonderError as e:
        sys.stderr.write("yonder_client: %s\n" % e)
        sys.exit(1)


if __name__ == "__main__":
    _cli()
