#!/usr/bin/env python3
"""Drives the web dashboard of a live yonderd (YONDER_HOME, paired with
PROVIDER both ways: it uses PROVIDER and runs PROVIDER_JOB for it) in
headless Chromium over the WebDriver protocol (chromedriver, standard
library only). Through the page it: logs in with the one-time URL of
`yonder dashboard --json`; checks the GPU charts drawn from the stored
history, and that a full reload draws them with their points at once;
checks the link throughput chart and a provider job's use charts; follows a
running job's logs live (over the WebSocket) and stops the job; revokes a
share link and makes one from the form with a chosen scope (checked with
`yonder links --json`) and copies it; changes the provider's scope, denies
and allows it again (checked with `yonder peers --json`); opens Credits,
Mesh and Transfers; checks the audit chain, a refusal's marker and the
filters; and saves a screenshot of each page into OUT_DIR, also at phone
width. Exits 0 when everything held.

Called by dashboard_browser_test.cpp:
  dashboard_browser_check.py YONDER_BIN PROVIDER IMAGE OUT_DIR PROVIDER_JOB
Chromium only ever loads 127.0.0.1 URLs; host resolution outside the
machine is disabled, and so are its background services."""
import base64
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

yonder_bin, provider, image, out_dir, provider_job = sys.argv[1:6]
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
            "goog:loggingPrefs": {"browser": "ALL"},
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

    def type(self, css, text):
        """Replaces what the input at css holds with text, typed like a user."""
        el = self.s("POST", "/element", {"using": "css selector", "value": css})[ELEMENT]
        self.s("POST", "/element/%s/clear" % el, {})
        self.s("POST", "/element/%s/value" % el, {"text": text})

    def set_checked(self, css, want):
        """Clicks the checkbox at css if it is not already as wanted."""
        if self.js("return document.querySelector(arguments[0]).checked", css) != want:
            self.click(css)

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


def chart_points(wd, css):
    """Each chart box under css as (key, data-points, data-first-points, has a canvas)."""
    return wd.js("return [...document.querySelectorAll(arguments[0])].map((b) => [b.dataset.chart,"
                 " Number(b.dataset.points || 0), Number(b.dataset.firstPoints || 0),"
                 " b.querySelector('.uplot canvas') !== null]);", css)


def peer_json(name):
    for p in json.loads(yonder("peers", "--json"))["peers"]:
        if p["name"] == name:
            return p
    raise RuntimeError("no peer %s in `yonder peers --json`" % name)


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
    wd.screenshot("01-node.png")

    # The pages' security headers, with the browser's own session cookie;
    # the chart library is served by the daemon too.
    cookies = {c["name"]: c["value"] for c in wd.s("GET", "/cookie")}
    check("yonder_session" in cookies, "session cookie set: %r" % list(cookies))
    conn = http.client.HTTPConnection("127.0.0.1", int(base.rsplit(":", 1)[1]), timeout=WAIT_S)
    for path, ctype in (("/", "text/html"), ("/assets/app.js", "text/javascript"), ("/assets/charts.js", "text/javascript"),
                        ("/assets/style.css", "text/css"), ("/assets/uplot.js", "text/javascript"),
                        ("/assets/uplot.css", "text/css")):
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
    check(wd.js("return typeof uPlot") == "function", "the chart library loaded (global uPlot)")

    # GPUs: two fake devices, each with four charts from the stored history
    # (the laptop samples every second).
    wd.click('#tabs a[data-tab="gpus"]')
    wait_until("two GPU cards", lambda: wd.js("return document.querySelectorAll('.card.gpu').length") == 2)
    charts = wait_until("GPU charts with two points or more", lambda: (lambda c: len(c) == 8 and all(
        p >= 2 and canvas for _, p, _, canvas in c) and c)(chart_points(wd, ".card.gpu .chart")))
    check({k.split(".", 2)[2] for k, _, _, _ in charts} == {
        "utilization_percent", "memory_used_bytes", "temperature_c", "power_watts"}, "GPU charts: %r" % charts)
    for n in (0, 1):
        check(wd.js("return document.querySelectorAll(arguments[0]).length",
                    '.card.gpu[data-gpu="%d"] .uplot canvas' % n) >= 4, "four uPlot charts in GPU card %d" % n)
    wd.click('#range button[data-range="900"]')
    wait_until("the 15 min range chosen", lambda: wd.js(
        "return document.querySelector('#range button.active').dataset.range") == "900")
    check("sampled every 1 s" in (wd.text("#history-note") or ""), "history note: %r" % wd.text("#history-note"))
    wd.screenshot("02-gpus.png")

    # A full reload (going to the same /#gpus would only scroll): the charts'
    # first drawing already has the stored points.
    wd.js("window.__sameDocument = true;")
    wd.s("POST", "/refresh", {})
    wait_until("the GPU page after the reload", lambda: wd.js("return document.body.dataset.loaded") == "gpus")
    check(wd.js("return window.__sameDocument === undefined"), "the page was loaded anew")
    first = wait_until("GPU charts after the reload", lambda: (lambda c: len(c) == 8 and c)(
        chart_points(wd, ".card.gpu .chart")))
    check(all(f >= 2 for _, _, f, _ in first), "history survived the reload: first drawing's points %r" % first)
    check(wd.js("return document.querySelector('#range button.active').dataset.range") == "900",
          "the chosen range survived the reload")
    wd.js("window.__sameDocument = true;")

    wd.click('#tabs a[data-tab="peers"]')
    wait_until("the provider in the peer list", lambda: wd.text('tr[data-peer="%s"]' % provider))
    check("direct" in wd.text('tr[data-peer="%s"]' % provider), "peer path shown: %s"
          % wd.text('tr[data-peer="%s"]' % provider))
    digits = wd.text('tr[data-peer="%s"] .check-digits' % provider)
    check(re.fullmatch(r"check digits \d{3} \d{3} \d{3}", digits or ""), "the pairing's check digits shown: %r" % digits)
    wait_until("the link throughput chart of %s" % provider, lambda: (lambda c: c and c[0][1] >= 2 and c[0][3])(
        chart_points(wd, '#peer-charts .chart[data-peer="%s"]' % provider)))
    check(wd.js("return document.querySelector(arguments[0]).textContent.includes('received')",
                '#peer-charts .chart[data-peer="%s"]' % provider), "throughput chart has received and sent")
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

    # The job the laptop runs for the provider: its use, charted from history.
    prow = '#pjob-table tr[data-job-id="%s"]' % provider_job
    wait_until("the provider's job running here", lambda: wd.text(prow + " .state") == "running")
    check(wd.text(prow + " td:nth-child(2)") == provider, "the job's peer shown by name: %r"
          % wd.text(prow + " td:nth-child(2)"))
    wd.click(prow + " button.logs")
    usage = wait_until("the job's CPU and memory charts", lambda: (lambda c: len(c) >= 2 and all(
        p >= 2 and canvas for _, p, _, canvas in c) and c)(chart_points(wd, "#job-charts .chart")))
    check({k.rsplit(".", 1)[1] for k, _, _, _ in usage} >= {"cpu_percent", "memory_bytes"}, "job charts: %r" % usage)
    wd.screenshot("06-jobs-provider-use.png")

    # Share links: revoke one from the page.
    lrow = 'tr[data-link-id="%s"]' % link_id
    wd.click('#tabs a[data-tab="links"]')
    wait_until("link %s active" % link_id, lambda: wd.text(lrow + " .state") == "active")
    wd.click(lrow + " button.revoke")
    wait_until("link %s revoked" % link_id, lambda: wd.text(lrow + " .state") in (None, "revoked"))
    check(wd.js("return document.querySelector(arguments[0]) === null", lrow + " button.revoke"),
          "no revoke button on a revoked link")
    # A new link from the form, with a chosen scope: its text, QR code and Copy.
    wd.set_checked('#link-form input[name="cap-exec"]', True)
    wd.set_checked('#link-form input[name="cap-files"]', True)
    wd.type('#link-form input[name="gpus"]', "2")
    wd.type('#link-form input[name="max_jobs"]', "3")
    wd.type('#link-form input[name="uses"]', "2")
    wd.type('#link-form input[name="label"]', "from the form")
    wd.click('#link-form select[name="expires_s"] option[value="86400"]')
    wd.click("#link-new")
    wait_until("a new link with its QR code", lambda: wd.js(
        "return document.querySelector('#link-qr svg path') !== null"))
    check((wd.text("#link-text") or "").startswith("yonder://"), "the new link's text is shown")
    made = wd.js("return document.getElementById('link-made').dataset.linkId")
    links = {l["id"]: l for l in json.loads(yonder("links", "--json"))["links"]}
    got = links.get(made, {})
    scope = got.get("scope", {})
    check(scope.get("capabilities") == "run,exec,files" and scope.get("gpus") == 2 and scope.get("max_jobs") == 3
          and got.get("uses_total") == 2 and got.get("label") == "from the form"
          and 86000 < got.get("expires_at", 0) - got.get("created_at", 0) <= 86400,
          "the link made in the page has the chosen scope (yonder links --json): %r" % got)
    wd.click("#link-copy")
    wait_until("the Copy button to say so", lambda: wd.js(
        "return document.getElementById('link-copy').dataset.copied") in ("true", "false"))
    check(wd.js("return document.getElementById('link-copy').dataset.copied") == "true"
          and wd.text("#link-copy") == "Copied", "Copy copied: %r" % wd.text("#link-copy"))
    wd.screenshot("07-links.png")

    # Peers: change the provider's scope here, then deny and allow it again,
    # each checked with the CLI.
    prow = 'tr[data-peer="%s"]' % provider
    wd.click('#tabs a[data-tab="peers"]')
    wd.click(prow + " button.scope-edit")
    wait_until("the scope form", lambda: wd.js("return !document.getElementById('scope-form').hidden"))
    for cap, want in (("run", True), ("exec", False), ("forward", False), ("files", True), ("mesh", False)):
        wd.set_checked('#scope-form input[name="cap-%s"]' % cap, want)
    wd.type('#scope-form input[name="max_jobs"]', "3")
    wd.click('#scope-form button[type="submit"]')
    wait_until("the new scope in the table", lambda: (wd.text(prow + " td.scope") or "").startswith("run,files;"))
    grant = peer_json(provider)["grant"]
    check(grant.get("capabilities") == "run,files" and grant.get("max_jobs") == 3,
          "the scope set in the page (yonder peers --json): %r" % grant)
    wd.click(prow + " button.deny")
    wait_until("the deny's confirmation", lambda: wd.js("return document.querySelector(arguments[0]) !== null",
                                                      prow + " button.deny-confirm"))
    check(not peer_json(provider)["denied"], "not denied before the confirmation")
    wd.screenshot("08-peers-deny-confirm.png")
    wd.click(prow + " button.deny-confirm")
    wait_until("%s denied in the page" % provider, lambda: wd.js(
        "const r = document.querySelector(arguments[0]); return r && r.dataset.denied === 'true';", prow))
    check(peer_json(provider)["denied"] is True, "denied (yonder peers --json)")
    wd.click(prow + " button.allow")
    wait_until("%s allowed in the page" % provider, lambda: wd.js(
        "const r = document.querySelector(arguments[0]); return r && r.dataset.denied === 'false';", prow))
    check(peer_json(provider)["denied"] is False, "allowed again (yonder peers --json)")
    check(peer_json(provider)["grant"].get("capabilities") == "run,files", "the grant it had is back after allow")

    # Credits: the stopped job's receipt, named by peer.
    wd.click('#tabs a[data-tab="credits"]')
    wait_until("the credits page", lambda: wd.js("return document.body.dataset.loaded") == "credits")
    rrow = '#receipt-table tr[data-job-id="%s"]' % job_id
    try:
        wait_until("the stopped job's receipt", lambda: wd.text(rrow), timeout=20)
        check(provider in wd.text(rrow), "the receipt names the peer: %r" % wd.text(rrow))
    except RuntimeError:
        check(wd.js("return !document.getElementById('receipt-empty').hidden"),
              "no receipt row, and the empty state is shown")
    wd.screenshot("09-credits.png")

    wd.click('#tabs a[data-tab="mesh"]')
    wait_until("the provider in the mesh", lambda: wd.text('#mesh-table tr[data-provider="%s"]' % provider))
    wait_until("the trust table or its empty state", lambda: wd.js(
        "return document.querySelectorAll('#trust-table tbody tr').length > 0"
        " || !document.getElementById('trust-empty').hidden"))
    wd.screenshot("10-mesh.png")

    wd.click('#tabs a[data-tab="transfers"]')
    wait_until("the transfers page", lambda: wd.js("return document.body.dataset.loaded") == "transfers")
    check(wd.js("return !document.getElementById('transfer-empty').hidden") and "yonder" in wd.text("#transfer-empty"),
          "no transfers: the empty state names the CLI")
    wd.screenshot("11-transfers.png")

    # Audit: the chain, peers by name, details, the provider's refused call
    # (made before the laptop granted it anything), and the filters.
    wd.click('#tabs a[data-tab="audit"]')
    wait_until("the audit chain verified", lambda: wd.js(
        "return document.getElementById('audit-verify').dataset.ok") == "true")
    refused = '#audit-table tr.refused[data-action="run.list"]'
    wait_until("the provider's refused call marked", lambda: wd.text(refused))
    check(wd.text(refused + " td:nth-child(3)") == provider and "refused" in wd.text(refused + " .refused-mark"),
          "the refusal names the peer and is marked: %r" % wd.text(refused))
    check(wd.text(refused + " td.detail").startswith("Refused: "), "the refusal's detail: %r" % wd.text(refused + " td.detail"))
    scope_row = '#audit-table tr[data-action="trust.scope"] td.detail'
    check("from=" in (wd.text(scope_row) or "") and "to=run,files" in (wd.text(scope_row) or ""),
          "the detail column: %r" % wd.text(scope_row))
    wd.screenshot("12-audit.png")
    wd.click('#audit-action option[value="trust.deny"]')
    wait_until("only trust.deny rows", lambda: (lambda a: a and set(a) == {"trust.deny"})(wd.js(
        "return [...document.querySelectorAll('#audit-table tbody tr')].map((r) => r.dataset.action)")))
    wd.click('#audit-action option[value=""]')
    provider_id = peer_json(provider)["node_id"]
    wd.click('#audit-peer option[value="%s"]' % provider_id)
    wait_until("only the provider's rows", lambda: (lambda a: a and set(a) == {provider_id})(wd.js(
        "return [...document.querySelectorAll('#audit-table tbody tr')].map((r) => r.dataset.actor)")))
    wd.screenshot("13-audit-filtered.png")

    # A phone-sized window: the same pages, narrower; charts fit the screen.
    wd.s("POST", "/window/rect", {"width": 390, "height": 844})
    wd.click('#tabs a[data-tab="jobs"]')
    wait_until("jobs on a phone", lambda: wd.js("return document.body.dataset.loaded") == "jobs")
    wd.screenshot("14-phone-jobs.png")
    wd.click('#tabs a[data-tab="gpus"]')
    wait_until("GPU charts on a phone", lambda: wd.js(
        "const c = [...document.querySelectorAll('.card.gpu .uplot')];"
        "return c.length === 8 && c.every((u) => u.getBoundingClientRect().right <= window.innerWidth);"))
    check(wd.js("return document.documentElement.scrollWidth <= window.innerWidth"), "no sideways scrolling on a phone")
    wd.screenshot("15-phone-gpus.png")
    check(not wd.text("#banner") or wd.js("return document.getElementById('banner').hidden"),
          "no error banner: %s" % wd.text("#banner"))
    # No script errors or refused loads (CSP) in the console; the browser
    # asks for /favicon.ico, which the daemon does not have.
    console = wd.s("POST", "/se/log", {"type": "browser"})
    with open(os.path.join(out_dir, "browser-console.log"), "w") as f:
        f.writelines("%s %s\n" % (e.get("level"), e.get("message")) for e in console)
    errors = [e["message"] for e in console if e.get("level") == "SEVERE" and "favicon.ico" not in e.get("message", "")]
    check(not errors, "no errors in the browser console: %r" % errors)


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
