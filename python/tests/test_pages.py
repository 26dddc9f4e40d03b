"""The HTML pages vramlab writes (report.html, tune.html, replay.html), loaded in headless
Chromium at a laptop's width: no console error, every image loads, and nothing is wider than the
screen (tables may scroll inside their own box; the page itself must not).

Chromium is driven through the DevTools protocol over a pipe (--remote-debugging-pipe), with the
standard library only. Without a Chromium binary the test is skipped."""

import base64
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TRACE = ROOT / "tests" / "traces" / "resnet18_default.pickle"
GPU_RUN = ROOT / "reports" / "reference" / "h100" / "all-suites" / "run"
WIDTH, HEIGHT = 1366, 900


def vramlab_command():
    """VRAMLAB_BIN, else `vramlab` on PATH, the running Python's bin folder first."""
    given = os.environ.get("VRAMLAB_BIN")
    if given and Path(given).exists():
        return given
    path = os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")])
    return shutil.which("vramlab", path=path)


def chromium_binary():
    for name in ["chromium", "chromium-browser", "google-chrome", "google-chrome-stable"]:
        found = shutil.which(name)
        if found:
            return found
    return None


class Browser:
    """Headless Chromium, one page, spoken to in DevTools protocol messages over a pipe."""

    def __init__(self, binary, width=WIDTH, height=HEIGHT):
        self.profile = tempfile.mkdtemp(prefix="vramlab-chromium-")
        to_chrome_r, self.to_chrome = os.pipe()
        self.from_chrome, from_chrome_w = os.pipe()

        def pipes_as_3_and_4():
            # Chromium reads commands on fd 3 and writes replies on fd 4.
            a, b = os.dup(to_chrome_r), os.dup(from_chrome_w)
            os.dup2(a, 3)
            os.dup2(b, 4)

        self.process = subprocess.Popen(
            [
                binary,
                "--headless",
                "--remote-debugging-pipe",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--no-default-browser-check",
                "--hide-scrollbars",
                f"--user-data-dir={self.profile}",
                f"--window-size={width},{height}",
                "about:blank",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            close_fds=False,
            preexec_fn=pipes_as_3_and_4,
        )
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self.buffer = b""
        self.next_id = 0
        self.events = []
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        for domain in ["Page", "Runtime", "Log"]:
            self.call(f"{domain}.enable", session=True)
        # A page in the background may put off loading images and drawing frames.
        self.call("Page.bringToFront", session=True)
        self.call("Emulation.setFocusEmulationEnabled", session=True, enabled=True)
        self.call(
            "Emulation.setDeviceMetricsOverride",
            session=True,
            width=width,
            height=height,
            deviceScaleFactor=1,
            mobile=False,
        )

    def _read_message(self, deadline):
        while b"\0" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.from_chrome], [], [], left)[0]:
                raise TimeoutError("Chromium did not answer")
            chunk = os.read(self.from_chrome, 1 << 20)
            if not chunk:
                raise RuntimeError("Chromium closed its pipe")
            self.buffer += chunk
        message, self.buffer = self.buffer.split(b"\0", 1)
        return json.loads(message)

    def call(self, method, session=False, timeout=30, **params):
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params}
        if session:
            message["sessionId"] = self.session
        os.write(self.to_chrome, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            reply = self._read_message(deadline)
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def open(self, url, timeout=30):
        """Loads `url` and returns once it has loaded, every image included."""
        self.events.clear()
        self.call("Page.navigate", session=True, url=url)
        # A load event may be the previous page's: wait until this document says it is done.
        deadline = time.monotonic() + timeout
        while self.evaluate("document.URL + ' ' + document.readyState") != f"{url} complete":
            if time.monotonic() > deadline:
                raise TimeoutError(f"{url} did not load")
            time.sleep(0.05)
        # Chromium may put off images below the screen; ask for every one.
        self.evaluate("Promise.all([...document.images].map(i => i.decode().catch(() => null)))")

    def evaluate(self, expression):
        result = self.call(
            "Runtime.evaluate", session=True, expression=expression, returnByValue=True, awaitPromise=True
        )
        if "exceptionDetails" in result:
            raise RuntimeError(json.dumps(result["exceptionDetails"]))
        return result["result"].get("value")

    def console_errors(self):
        """Errors the page logged: console.error calls, uncaught exceptions, failed loads."""
        self.evaluate("0")  # drains events that arrived before now
        errors = []
        for event in self.events:
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                errors.append(" ".join(str(a.get("value", a.get("description", ""))) for a in params["args"]))
            elif method == "Runtime.exceptionThrown":
                errors.append(params["exceptionDetails"].get("text", "exception"))
            elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
                errors.append(f"{params['entry'].get('text')} {params['entry'].get('url', '')}".strip())
        return errors

    def screenshot(self, path, full_page=False):
        params = {"format": "png"}
        if full_page:
            size = self.evaluate("[document.documentElement.scrollWidth, document.documentElement.scrollHeight]")
            params.update(clip={"x": 0, "y": 0, "width": size[0], "height": size[1], "scale": 1}, captureBeyondViewport=True)
        Path(path).write_bytes(base64.b64decode(self.call("Page.captureScreenshot", session=True, **params)["data"]))

    def close(self):
        try:
            self.call("Browser.close", timeout=5)
        except (RuntimeError, TimeoutError, OSError):
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        os.close(self.to_chrome)
        os.close(self.from_chrome)
        shutil.rmtree(self.profile, ignore_errors=True)


# Opens every folded part, then lists what is wider than the screen: the page itself, and any
# element (a table inside its scrolling box counts: it must fit too), and images that failed.
MEASURE = r"""
(async () => {
  document.querySelectorAll('details').forEach(d => d.open = true);
  await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
  await Promise.all([...document.images].map(i => i.decode().catch(() => null)));
  const width = window.innerWidth;
  const name = e => e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') +
      (e.className && typeof e.className === 'string' ? '.' + e.className : '') +
      ': ' + (e.textContent || e.getAttribute('src') || '').trim().slice(0, 60);
  // Inside a box that scrolls or clips, an element may reach past the screen's edge; nowhere
  // may it be wider than the screen.
  const clipped = e => {
    for (let a = e.parentElement; a && a !== document.body; a = a.parentElement) {
      if (['auto', 'scroll', 'hidden'].includes(getComputedStyle(a).overflowX)) return true;
    }
    return false;
  };
  const wide = [...document.querySelectorAll('body *')]
      .filter(e => {
        const r = e.getBoundingClientRect();
        return r.width > width || (r.right > width + 0.5 && !clipped(e));
      })
      .map(e => name(e) + ' (' + Math.round(e.getBoundingClientRect().right) + ' px)');
  // Cells of figures keep to one line: a number never breaks in two.
  const wrapping = [...document.querySelectorAll('td:not(.wrap), th:not(.wrap)')]
      .filter(c => /\d/.test(c.textContent) && c.tagName === 'TD' && getComputedStyle(c).whiteSpace !== 'nowrap')
      .map(name);
  const broken = [...document.images].filter(i => !i.complete || i.naturalWidth === 0).map(i => i.src);
  return {width, scrollWidth: document.documentElement.scrollWidth, wide, broken, wrapping,
          title: document.title, images: document.images.length};
})()
"""


def make_pages(command, out):
    """Writes the pages the issue names into `out`; returns their paths."""

    def vramlab(*args):
        done = subprocess.run([command, *map(str, args)], capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr

    pages = {}
    vramlab("run", "--out", out / "run")
    pages["report, sim-only run"] = out / "run" / "report.html"
    gpu = out / "gpu"
    for record in GPU_RUN.glob("*/hw.json"):
        (gpu / record.parent.name).mkdir(parents=True)
        for name in ["sim.json", "hw.json"]:
            shutil.copy(record.parent / name, gpu / record.parent.name / name)
    vramlab("report", gpu)
    pages["report, H100 records re-rendered"] = gpu / "report.html"
    # A cap that PyTorch's defaults do not fit under (so the page has a post-mortem), and the
    # longest settings of the default grid (the widest table).
    grid = [
        "",
        "expandable_segments:True",
        "roundup_power2_divisions:[64:8,256:4,1024:2,>:1]",
        "max_split_size_mb:256,roundup_power2_divisions:4,garbage_collection_threshold:0.8",
    ]
    vramlab("tune", TRACE, "--capacity", "1600 MiB", *[a for g in grid for a in ("--grid", g)], "--out", out / "tune")
    pages["tune"] = out / "tune" / "tune.html"
    vramlab("replay", TRACE, "--alloc-conf", "", "--alloc-conf", "expandable_segments:True", "--out", out / "replay")
    pages["replay, two settings"] = out / "replay" / "replay.html"
    vramlab("replay", TRACE, "--policy", "all", "--out", out / "replay-all")
    pages["replay, every policy"] = out / "replay-all" / "replay.html"
    return pages


@pytest.mark.skipif(chromium_binary() is None, reason="needs Chromium (Debian package chromium)")
@pytest.mark.skipif(vramlab_command() is None, reason="no vramlab command (pip install . or set VRAMLAB_BIN)")
def test_pages_load_cleanly_and_fit_a_laptop_screen(tmp_path):
    pages = make_pages(vramlab_command(), tmp_path)
    browser = Browser(chromium_binary())
    try:
        problems = []
        for what, page in pages.items():
            browser.open(page.as_uri())
            found = browser.evaluate(MEASURE)
            errors = browser.console_errors()
            assert found["images"] > 0, f"{what}: no plots"
            if errors:
                problems.append(f"{what}: console errors {errors}")
            if found["wrapping"]:
                problems.append(f"{what}: cells of figures that may wrap {found['wrapping'][:5]}")
            if found["broken"]:
                problems.append(f"{what}: images that did not load {found['broken']}")
            if found["scrollWidth"] > WIDTH or found["wide"]:
                problems.append(
                    f"{what}: wider than {WIDTH} px (page {found['scrollWidth']} px): {found['wide'][:5]}"
                )
        assert not problems, "\n".join(problems)
    finally:
        browser.close()


@pytest.mark.skipif(chromium_binary() is None, reason="needs Chromium (Debian package chromium)")
def test_the_measurement_sees_an_overflowing_page_and_a_console_error(tmp_path):
    """The check itself: a page too wide, a missing image and a console error are all caught."""
    page = tmp_path / "bad.html"
    page.write_text(
        "<!DOCTYPE html><html><body><div style='width:2000px'>wide</div>"
        "<img src='missing.svg'><script>console.error('boom')</script></body></html>"
    )
    browser = Browser(chromium_binary())
    try:
        browser.open(page.as_uri())
        found = browser.evaluate(MEASURE)
        errors = browser.console_errors()
    finally:
        browser.close()
    assert found["scrollWidth"] > WIDTH and found["wide"], found
    assert found["broken"], found
    assert any("boom" in e for e in errors), errors
    assert any("missing.svg" in e or "ERR_FILE_NOT_FOUND" in e for e in errors), errors


# tune.html's answer box in each of its three cases (issue 38 item 5): its colour (border) and
# heading. VRAMLAB_SCREENSHOTS=DIR also saves each page's first screen there (docs/tune/).
TUNE_CASES = {
    "already-fit": ("2 GiB", "Your current settings already fit", "rgb(47, 138, 74)"),
    "fits": ("1600 MiB", "Recommended setting", "rgb(47, 138, 74)"),
    "nothing-fits": ("1000 MiB", "Nothing fits under the cap of 1,000 MiB", "rgb(179, 38, 30)"),
}


@pytest.mark.skipif(chromium_binary() is None, reason="needs Chromium (Debian package chromium)")
@pytest.mark.skipif(vramlab_command() is None, reason="no vramlab command (pip install . or set VRAMLAB_BIN)")
def test_tune_pages_answer_in_the_colour_of_the_answer(tmp_path):
    grid = ["", "expandable_segments:True", "roundup_power2_divisions:[64:8,256:4,1024:2,>:1]", "garbage_collection_threshold:0.8"]
    shots = os.environ.get("VRAMLAB_SCREENSHOTS")
    browser = Browser(chromium_binary())
    try:
        for case, (cap, heading, colour) in TUNE_CASES.items():
            out = tmp_path / case
            trace = str(TRACE.relative_to(ROOT))
            subprocess.run([vramlab_command(), "tune", trace, "--capacity", cap, *[a for g in grid for a in ("--grid", g)], "--out", str(out)], check=True, capture_output=True, cwd=ROOT)
            browser.open((out / "tune.html").as_uri())
            found = browser.evaluate(
                "(() => { const box = document.querySelector('section.answer');"
                " return {border: getComputedStyle(box).borderTopColor, heading: box.querySelector('h2').textContent, text: box.textContent}; })()"
            )
            assert found["border"] == colour, (case, found)
            assert found["heading"] == heading, (case, found)
            if case == "nothing-fits":
                assert "Set it in the job" not in found["text"], found
            if shots:
                Path(shots).mkdir(parents=True, exist_ok=True)
                browser.screenshot(Path(shots) / f"tune-{case}.png")
    finally:
        browser.close()
