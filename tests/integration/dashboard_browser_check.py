#!/usr/bin/env python3
"""Drives the web dashboard of a live consumer yonderd (YONDER_HOME, paired
with PROVIDER) in headless Chromium over the WebDriver protocol (chromedriver,
standard library only): logs in through the one-time URL of `yonder
dashboard --json`, watches a running job's logs arrive live (over the WebSocket), stops the job,
revokes a share link, checks the audit chain, and saves screenshots of the
main pages into OUT_DIR. Exits 0 when everything held.

Called by dashboard_browser_test.cpp:
  dashboard_browser_check.py YONDER_BIN PROVIDER IMAGE OUT_DIR
Chromium only ever loads 127.0.0.1 URLs; host resolution outside the
machine is disabled, and so are its background services."""
import base64
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

yonder_bin, provider, image, out_dir = sys.argv[1:5]
WAIT_S = 120  # a bound for each awaited condition (2 loaded cores, ASan)
ELEMENT = "element-6066-11e4-a52e-4f735466cecf"


def yonder(*args):
    r = subprocess.run([yonder_bin, *args], capture_output=True, text=True, timeout=WAIT_S)
    if r.returncode != 0:
        raise RuntimeError("yonder %s failed (%d): %s" % (" ".join(args), r.returncode, r.stderr))
    return r.stdout


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(what, fn, timeout=WAIT_S):
    """Polls fn until it returns a true value (returned); fails after timeout."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            v = fn()
            if v:
                return v
        except WebDriverError as e:
            last = e
        time.sleep(0.2)
    raise RuntimeError("timed out waiting for %s%s" % (what, " (last error: %s)" % last if last else ""))


class WebDriverError(Exception):
    pass


class WebDriver:
    def __init__(self, port):
        self.port = port
        self.session = None

    def call(self, method, path, body=None, timeout=WAIT_S):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            data = json.dumps(body).encode() if body is not None else None
            headers = {"Content-Type": "application/json"} if data is not None else {}
            conn.request(method, path, body=data, headers=headers)
            res = conn.getresponse()
            payload = json.loads(res.read() or b"{}")
        finally:
            conn.close()
        value = payload.get("value")
        if res.status >= 400 or (isinstance(value, dict) and "error" in value and res.status != 200):
            raise WebDriverError("%s %s: %s" % (method, path, value))
        return value

    def s(self, method, path, body=None):
        return self.call(method, "/session/%s%s" % (self.session, path), body)

    def start(self, args, binary):
        caps = {"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": binary, "args": args},
        }}}
        self.session = self.call("POST", "/session", caps)["sessionId"]

    def go(self, url):
        self.s("POST", "/url", {"url": url})

    def js(self, script, *args):
        return self.s("POST", "/execute/sync", {"script": script, "args": list(args)})

    def click(self, css):
        """Clicks the element at css like a user (retried if the page replaced it)."""
        def attempt():
            el = self.s("POST", "/element", {"using": "css selector", "value": css})
            self.s("POST", "/element/%s/click" % el[ELEMENT], {})
            return True
        wait_until("a clickable %s" % css, attempt)

    def screenshot(self, name):
        png = base64.b64decode(self.s("GET", "/screenshot"))
        with open(os.path.join(out_dir, name), "wb") as f:
            f.write(png)

    def text(self, css):
        return self.js("const e = document.querySelector(arguments[0]); return e ? e.textContent : null;", css)


failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAILED:", what, file=sys.stderr)


def find_chromium():
    for p in ("/usr/lib/chromium/chromium", "/usr/bin/chromium"):
        if os.access(p, os.X_OK):
            return p
    raise RuntimeError("no chromium; run scripts/setup.sh (Debian's chromium and chromium-driver)")


def main(wd):
    # What the page will act on, made with the CLI: a share link and a job
    # that prints a line a second until it is stopped.
    link_id = json.loads(yonder("share", "--json"))["id"]
    job_id = yonder("run", "-d", "--no-upload", "--on", provider, "--image", image, "--",
                    "sh", "-c", "i=0; while true; do i=$((i+1)); echo tick $i; sleep 1; done").strip()
    login_url = json.loads(yonder("dashboard", "--json"))["url"]
    base = login_url.split("/login")[0]
    check(base.startswith("http://127.0.0.1:"), "login URL on loopback: %s" % login_url)

    # Log in: the one-time URL sets the session cookie and lands on /.
    wd.go(login_url)
    wait_until("the node page", lambda: wd.js("return document.body.dataset.loaded") == "status"
               and wd.text("#node-name") == "laptop")
    check(wd.s("GET", "/url") == base + "/", "redirected to the dashboard: %s" % wd.s("GET", "/url"))
    wd.js("window.__sameDocument = true;")
    wd.screenshot("01-node.png")

    # The pages' security headers, with the browser's own session cookie.
    cookies = {c["name"]: c["value"] for c in wd.s("GET", "/cookie")}
    check("yonder_session" in cookies, "session cookie set: %r" % list(cookies))
    conn = http.client.HTTPConnection("127.0.0.1", int(base.rsplit(":", 1)[1]), timeout=WAIT_S)
    for path, ctype in (("/", "text/html"), ("/assets/app.js", "text/javascript"), ("/assets/style.css", "text/css")):
        conn.request("GET", path, headers={"Cookie": "yonder_session=" + cookies.get("yonder_session", "")})
        res = conn.getresponse()
        res.read()
        check(res.status == 200 and (res.getheader("Content-Type") or "").startswith(ctype),
              "%s served as %s: %d %s" % (path, ctype, res.status, res.getheader("Content-Type")))
        csp = res.getheader("Content-Security-Policy") or ""
        check("default-src 'self'" in csp and "unsafe-inline" not in csp, "%s CSP: %r" % (path, csp))
        check(res.getheader("X-Frame-Options") == "DENY", "%s X-Frame-Options DENY" % path)
    conn.request("GET", "/assets/app.js")
    res = conn.getresponse()
    res.read()
    check(res.status == 401, "assets need the session: %d" % res.status)
    conn.close()

    # GPUs: two fake devices, charts filling as samples arrive every 2 s.
    wd.click('#tabs a[data-tab="gpus"]')
    wait_until("two GPU cards", lambda: wd.js("return document.querySelectorAll('.card.gpu').length") == 2)
    wait_until("sparklines with history", lambda: wd.js(
        "const l = document.querySelector('.card.gpu polyline');"
        "return l && l.getAttribute('points').split(' ').length >= 3;"))
    wd.screenshot("02-gpus.png")

    wd.click('#tabs a[data-tab="peers"]')
    wait_until("the provider in the peer list", lambda: wd.text('tr[data-peer="%s"]' % provider))
    check("direct" in wd.text('tr[data-peer="%s"]' % provider), "peer path shown: %s"
          % wd.text('tr[data-peer="%s"]' % provider))
    wd.screenshot("03-peers.png")

    # Jobs: the running job's logs arrive in the page while it runs.
    row = 'tr[data-job-id="%s"]' % job_id
    wd.click('#tabs a[data-tab="jobs"]')
    wait_until("job %s running" % job_id, lambda: wd.text(row + " .state") == "running")
    wd.click(row + " button.logs")
    first = wait_until("the job's first log lines", lambda: wd.text("#log-output").count("tick"))
    wait_until("more log lines arriving live",
               lambda: wd.text("#log-output").count("tick") >= first + 2)
    check(wd.js("return window.__sameDocument === true"), "logs arrived without reloading the page")
    transport = wd.js("return document.getElementById('log-output').dataset.transport")
    check(transport == "websocket",
          "the live logs came over the WebSocket (/v1/jobs/logs/ws), not the long-poll fallback: %r" % transport)
    check(wd.js("return document.getElementById('log-output').dataset.ended") == "false",
          "the log is still open while the job runs")
    wd.screenshot("04-jobs-logs.png")

    # Stop it from the page: the state changes and the log ends.
    wd.click(row + " button.stop")
    wait_until("job %s stopped" % job_id, lambda: wd.text(row + " .state") == "stopped")
    wait_until("the log stream ending", lambda: wd.js(
        "return document.getElementById('log-output').dataset.ended") == "true")
    check(json.loads(yonder("ps", "--all", "--json")) is not None, "ps answers")
    wd.screenshot("05-jobs-stopped.png")

    # Share links: revoke one from the page.
    lrow = 'tr[data-link-id="%s"]' % link_id
    wd.click('#tabs a[data-tab="links"]')
    wait_until("link %s active" % link_id, lambda: wd.text(lrow + " .state") == "active")
    wd.click(lrow + " button.revoke")
    wait_until("link %s revoked" % link_id, lambda: wd.text(lrow + " .state") in (None, "revoked"))
    check(wd.js("return document.querySelector(arguments[0]) === null", lrow + " button.revoke"),
          "no revoke button on a revoked link")
    # A new link from the page: its text and its QR code (the daemon's SVG).
    wd.click("#link-new")
    wait_until("a new link with its QR code", lambda: wd.js(
        "return document.querySelector('#link-qr svg path') !== null"))
    check((wd.text("#link-text") or "").startswith("yonder://"), "the new link's text is shown")
    wd.screenshot("06-links.png")

    wd.click('#tabs a[data-tab="audit"]')
    wait_until("the audit chain verified", lambda: wd.js(
        "return document.getElementById('audit-verify').dataset.ok") == "true")
    wd.screenshot("07-audit.png")

    # A phone-sized window: the same pages, narrower.
    wd.s("POST", "/window/rect", {"width": 390, "height": 844})
    wd.click('#tabs a[data-tab="jobs"]')
    wait_until("jobs on a phone", lambda: wd.js("return document.body.dataset.loaded") == "jobs")
    wd.screenshot("08-phone-jobs.png")
    check(not wd.text("#banner") or wd.js("return document.getElementById('banner').hidden"),
          "no error banner: %s" % wd.text("#banner"))


def run():
    os.makedirs(out_dir, exist_ok=True)
    for old in os.listdir(out_dir):  # this run's artifacts only
        if old.endswith(".png") or old.endswith(".log"):
            os.remove(os.path.join(out_dir, old))
    binary = find_chromium()
    driver = shutil.which("chromedriver") or "/usr/bin/chromedriver"
    profile = tempfile.mkdtemp(prefix="yonder-chromium-")
    args = ["--headless=new", "--no-sandbox", "--user-data-dir=" + profile, "--disable-gpu",
            "--disable-dev-shm-usage", "--no-first-run", "--no-default-browser-check",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            "--disable-default-apps", "--disable-extensions", "--disable-features=Translate,MediaRouter,OptimizationHints",
            "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1", "--password-store=basic",
            "--window-size=1280,900"]
    proc = None
    wd = None
    try:
        port = free_port()
        proc = subprocess.Popen([driver, "--port=%d" % port, "--log-path=" + os.path.join(out_dir, "chromedriver.log")],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        wd = WebDriver(port)

        def driver_ready():
            if proc.poll() is not None:
                raise RuntimeError("chromedriver exited with %d; see chromedriver.log" % proc.returncode)
            try:
                return wd.call("GET", "/status", timeout=5).get("ready")
            except OSError:
                return False
        wait_until("chromedriver to answer", driver_ready)
        wd.start(args, binary)
        try:
            main(wd)
        except Exception:
            try:
                wd.screenshot("failure.png")
                print("page text at failure:\n" + (wd.text("body") or ""), file=sys.stderr)
            except Exception:  # noqa: BLE001 - best effort
                pass
            raise
    finally:
        if wd is not None and wd.session:
            try:
                wd.call("DELETE", "/session/" + wd.session, timeout=30)
            except Exception:  # noqa: BLE001 - the process group is killed below anyway
                pass
        if proc is not None:
            # chromedriver and the browser it started share its process group.
            try:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout=30)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait()
        shutil.rmtree(profile, ignore_errors=True)


try:
    run()
except Exception as e:  # noqa: BLE001 - reported as a failure
    failures.append("%s: %s" % (type(e).__name__, e))
    print("FAILED:", failures[-1], file=sys.stderr)
print("dashboard browser check: %d failure(s); screenshots in %s" % (len(failures), out_dir))
sys.exit(1 if failures else 0)
