#!/usr/bin/env python3
"""Courier's web view in a real browser.

Starts the real `courier sandbox` (a management and two worker kubesim clusters plus the controller,
web view on a free loopback port), drives Debian's Chromium through chromedriver with Selenium, and
checks what a person would see:

  1. the clusters page lists both workers Ready;
  2. a Job submitted with `courier submit` appears on the Jobs page and moves to Complete without a
     reload (the page is live), next to a failed and a pending Job;
  3. its page names the worker it ran on (the one `courier jobs -o json` names), with its conditions
     and Courier's events;
  4. keyboard focus reaches the Job links (skip link first), and a phone-width window renders
     without horizontal scrolling;
  5. a worker made unreachable (kubesim admin `PUT /faults {"refuse": true}`) shows not Ready with
     its reason on the clusters page, again without a reload.

Usage: e2e/browser/test_ui.py [--screenshots DIR]   (or COURIER_UI_SCREENSHOTS=DIR)
The courier binary is $COURIER_BIN, else target/debug/courier (build it first: `cargo build -p courier`).
Chromium, chromedriver and Selenium must be installed (.ci/run installs them); when one is missing
the test fails, it never skips. Prints `browser: N passed, N failed`.
"""

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

try:
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
except ImportError as e:  # fail loudly: never skip
    print(f"browser: Selenium is missing ({e}); install it with `python3 -m pip install selenium` "
          "(.ci/run does)\nbrowser: 0 passed, 1 failed", file=sys.stderr)
    sys.exit(1)

CHROMIUM = ["chromium", "chromium-browser"]
DRIVER = ["chromedriver", "chromium-driver"]


def find(names, what):
    for n in names:
        p = shutil.which(n)
        if p:
            return p
    raise SystemExit(f"browser: {what} not found (looked for {', '.join(names)}); install Debian's "
                     "`chromium` and `chromium-driver` packages (.ci/run does)\n"
                     "browser: 0 passed, 1 failed")


def courier_bin():
    if os.environ.get("COURIER_BIN"):
        return Path(os.environ["COURIER_BIN"])
    target = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
    return target / "debug" / "courier"


def wait_for(what, fn, timeout=30.0, every=0.2):
    """Polls fn until it returns something truthy; fails naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    last_error = None
    while time.monotonic() < deadline:
        try:
            v = fn()
            if v:
                return v
        except Exception as e:  # the page may be mid-update
            last_error = e
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}"
                         + (f" (last error: {last_error})" if last_error else ""))


JOB = """apiVersion: batch/v1
kind: Job
metadata:
  name: {name}
  namespace: {namespace}
{annotations}spec:
  completions: {completions}
  parallelism: {completions}
  backoffLimit: 0
  template:
    metadata:
      annotations:
        sim/run-seconds: "{seconds}"
        sim/outcome: {outcome}
    spec:
      restartPolicy: Never
      containers:
      - name: main
        image: busybox:1.36
        command: ["sh", "-c", "sleep {seconds}"]
"""


class Sandbox:
    def __init__(self, binary, workdir):
        self.dir = workdir / "sandbox"
        self.log = open(workdir / "sandbox.log", "w")
        self.proc = subprocess.Popen(
            [str(binary), "sandbox", "--dir", str(self.dir)],
            stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        info = self.dir / "sandbox.json"

        def ready():
            if self.proc.poll() is not None:
                raise SystemExit(f"courier sandbox exited with {self.proc.returncode}:\n{self.logs()}")
            return info.is_file() and json.loads(info.read_text())
        self.info = wait_for("courier sandbox to start", ready, timeout=90)
        self.ui = self.info["ui"].rstrip("/")
        self.env = dict(os.environ, KUBECONFIG=self.info["management"]["kubeconfig"])
        self.binary = binary

    def logs(self):
        self.log.flush()
        return Path(self.log.name).read_text()[-4000:]

    def courier(self, *args, stdin=None):
        out = subprocess.run([str(self.binary), *args], env=self.env, input=stdin,
                             capture_output=True, text=True, timeout=60)
        if out.returncode != 0:
            raise AssertionError(f"courier {' '.join(args)} failed: {out.stderr}")
        return out.stdout

    def submit(self, name, seconds=3, outcome="succeed", completions=1, selector=None,
               namespace="default"):
        annotations = ""
        if selector:
            annotations = f"  annotations:\n    courier.dev/cluster-selector: \"{selector}\"\n"
        manifest = JOB.format(name=name, namespace=namespace, annotations=annotations,
                              completions=completions, seconds=seconds, outcome=outcome)
        self.courier("submit", "-", stdin=manifest)

    def fault(self, worker, faults):
        admin = next(w["admin"] for w in self.info["workers"] if w["name"] == worker)
        req = urllib.request.Request(admin + "/faults", data=json.dumps(faults).encode(),
                                     method="PUT", headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as r:
            assert r.status == 200, r.status

    def stop(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGINT)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.log.close()


def browser(workdir):
    opts = Options()
    opts.binary_location = find(CHROMIUM, "chromium")
    for flag in ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage", "--hide-scrollbars", "--force-device-scale-factor=1",
                 f"--user-data-dir={workdir / 'chromium-profile'}"]:
        opts.add_argument(flag)
    service = Service(executable_path=find(DRIVER, "chromedriver"),
                      log_output=str(workdir / "chromedriver.log"))
    d = webdriver.Chrome(options=opts, service=service)
    d.set_window_size(1280, 900)
    d.set_page_load_timeout(30)
    return d


class Checks:
    def __init__(self, sandbox, driver, shots):
        self.s = sandbox
        self.d = driver
        self.shots = shots
        self.passed = 0
        self.job_cluster = None

    # -- helpers ---------------------------------------------------------------------------------
    def open(self, path):
        self.d.get(self.s.ui + path)
        # A marker that a reload would wipe: proves later changes came without one.
        self.d.execute_script("window.__courierNoReload = true;")

    def not_reloaded(self):
        assert self.d.execute_script("return window.__courierNoReload === true;"), \
            "the page was reloaded; it must update live"

    def attr(self, css, name):
        els = self.d.find_elements(By.CSS_SELECTOR, css)
        return els[0].get_attribute(name) if els else None

    def text(self, css):
        els = self.d.find_elements(By.CSS_SELECTOR, css)
        return els[0].text if els else ""

    def screenshot(self, name, width=1280):
        if not self.shots:
            return
        height = self.d.execute_script(
            "return Math.max(document.body.scrollHeight, document.documentElement.scrollHeight);")
        self.d.set_window_size(width, max(600, min(int(height) + 160, 2400)))
        time.sleep(0.3)
        path = self.shots / name
        self.d.save_screenshot(str(path))
        print(f"  screenshot {path.relative_to(REPO) if path.is_relative_to(REPO) else path}")
        self.d.set_window_size(1280, 900)

    # -- checks ----------------------------------------------------------------------------------
    def clusters_ready(self):
        self.open("/clusters")
        assert "Clusters" in self.d.title, self.d.title
        for w in ("worker-1", "worker-2"):
            wait_for(f"{w} Ready on the clusters page",
                     lambda w=w: self.attr(f'tr[data-cluster="{w}"]', "data-ready") == "true")
            row = self.text(f'tr[data-cluster="{w}"]')
            assert "Ready" in row and "Connected" in row and "v1.36" in row, row

    def job_goes_live_to_complete(self):
        self.open("/jobs")
        self.s.submit("pending-gpu", selector="gpu=h100")
        self.s.submit("nightly-report", seconds=1, outcome="fail")
        self.s.submit("train-model", seconds=6, completions=2)
        row = 'tr[data-job="default/train-model"]'
        wait_for("train-model listed", lambda: self.d.find_elements(By.CSS_SELECTOR, row), 20)
        seen = set()

        def complete():
            phase = self.attr(row, "data-phase")
            seen.add(phase)
            return phase == "Complete"
        wait_for("train-model Complete on the Jobs page", complete, 40)
        self.not_reloaded()
        assert seen & {"Pending", "Dispatched", "Running"}, \
            f"train-model was Complete at once ({seen}): nothing proves the page updated live"
        wait_for("nightly-report Failed", lambda: self.attr(
            'tr[data-job="default/nightly-report"]', "data-phase") == "Failed", 30)
        pending = self.text('tr[data-job="default/pending-gpu"]')
        assert "Pending" in pending and "no" in pending.lower(), \
            f"the pending Job says why: {pending!r}"
        self.not_reloaded()
        self.screenshot("ui-jobs.png")

    def job_page_names_its_worker(self):
        listing = json.loads(self.s.courier("jobs", "-o", "json"))
        assert listing.get("kind") == "List", f"`courier jobs -o json` is a List: {listing!r:.200}"
        cli = next(j for j in listing["items"] if j["metadata"]["name"] == "train-model")
        cli_cluster = cli["metadata"]["labels"]["courier.dev/cluster"]
        self.open("/jobs")
        self.d.find_element(By.CSS_SELECTOR, 'a[href="/jobs/default/train-model"]').click()
        wait_for("the Job page", lambda: "default/train-model" in self.d.title)
        cluster = wait_for("the Job's cluster", lambda: self.text("#job-cluster"))
        assert cluster in ("worker-1", "worker-2"), cluster
        assert cluster == cli_cluster, f"the page says {cluster}, `courier jobs` {cli_cluster}"
        body = self.text("main")
        for want in ("Complete", "Conditions", "Mirrors", "Events", "Dispatched", "current"):
            assert want in body, f"{want!r} missing from the Job page:\n{body}"
        self.job_cluster = cluster
        self.screenshot("ui-job.png")

    def keyboard_reaches_job_links(self):
        self.open("/jobs")
        tab = lambda: ActionChains(self.d).send_keys(Keys.TAB).perform()  # noqa: E731
        active = lambda: self.d.switch_to.active_element  # noqa: E731
        tab()
        assert active().get_attribute("class") == "skip", "the skip link comes first"
        for _ in range(40):
            tab()
            href = active().get_attribute("href") or ""
            if "/jobs/default/" in href:
                # Visible focus: the focus style draws an outline.
                outline = self.d.execute_script(
                    "return getComputedStyle(document.activeElement).outlineStyle;")
                assert outline not in ("none", ""), f"no visible focus on {href}"
                # Enter follows the link.
                ActionChains(self.d).send_keys(Keys.ENTER).perform()
                wait_for("the Job page after Enter", lambda: "/jobs/default/" in self.d.current_url)
                return
        raise AssertionError("40 tabs did not reach a Job link")

    def phone_width(self):
        self.d.set_window_size(390, 844)
        self.open("/jobs")
        overflow = self.d.execute_script(
            "return document.documentElement.scrollWidth - window.innerWidth;")
        assert overflow <= 1, f"{overflow}px of horizontal scrolling at phone width"
        link = self.d.find_element(By.CSS_SELECTOR, 'a[href="/jobs/default/train-model"]')
        assert link.is_displayed()
        assert link.size["width"] <= 390, link.size
        self.screenshot("ui-jobs-phone.png", width=390)
        self.d.set_window_size(1280, 900)

    def unreachable_worker_shows_why(self):
        down = "worker-2" if self.job_cluster != "worker-2" else "worker-1"
        self.open("/clusters")
        wait_for(f"{down} Ready", lambda: self.attr(f'tr[data-cluster="{down}"]', "data-ready") == "true")
        self.s.fault(down, {"refuse": True})
        wait_for(f"{down} not Ready on the clusters page", lambda: self.attr(
            f'tr[data-cluster="{down}"]', "data-ready") == "false", 40)
        row = self.text(f'tr[data-cluster="{down}"]')
        assert "Not Ready" in row and "Unreachable" in row, row
        self.not_reloaded()
        other = "worker-1" if down == "worker-2" else "worker-2"
        assert self.attr(f'tr[data-cluster="{other}"]', "data-ready") == "true", \
            "the other worker stays Ready"
        self.screenshot("ui-clusters.png")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--screenshots", help="save PNGs of each page into this directory")
    a = ap.parse_args()
    shots = a.screenshots or os.environ.get("COURIER_UI_SCREENSHOTS")
    shots = Path(shots).resolve() if shots else None
    if shots:
        shots.mkdir(parents=True, exist_ok=True)
    binary = courier_bin()
    if not binary.is_file():
        print(f"browser: {binary} not found; build it with `cargo build -p courier`\n"
              "browser: 0 passed, 1 failed", file=sys.stderr)
        return 1
    find(CHROMIUM, "chromium")
    find(DRIVER, "chromedriver")
    started = time.monotonic()
    workdir = Path(tempfile.mkdtemp(prefix="courier-browser-"))
    sandbox = Sandbox(binary, workdir)
    driver = None
    checks = [
        "clusters_ready", "job_goes_live_to_complete", "job_page_names_its_worker",
        "keyboard_reaches_job_links", "phone_width", "unreachable_worker_shows_why",
    ]
    failed = 0
    passed = 0
    try:
        driver = browser(workdir)
        c = Checks(sandbox, driver, shots)
        failed = len(checks)
        for name in checks:
            t0 = time.monotonic()
            try:
                getattr(c, name)()
                c.passed += 1
                failed -= 1
                print(f"ok   {name} ({time.monotonic() - t0:.1f}s)")
            except Exception:
                print(f"FAIL {name} ({time.monotonic() - t0:.1f}s)")
                traceback.print_exc()
                try:
                    driver.save_screenshot(str(workdir / f"failed-{name}.png"))
                    print(f"     page: {driver.current_url}; screenshot {workdir}/failed-{name}.png")
                    print("     text:", driver.find_element(By.TAG_NAME, "body").text[:1500])
                except Exception:
                    pass
                print("     sandbox log (tail):\n" + sandbox.logs())
                break
        passed = c.passed
    finally:
        if driver is not None:
            driver.quit()
        sandbox.stop()
    if not failed:
        shutil.rmtree(workdir, ignore_errors=True)
    print(f"browser test took {time.monotonic() - started:.0f}s")
    print(f"browser: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
