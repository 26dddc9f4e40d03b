#!/usr/bin/env python3
"""Screenshots of the HTML pages vramlab writes, as a laptop shows them (1366x900, headless
Chromium), for docs/screenshots/: report.html of the sim-only main job and of the H100
reference records re-rendered, tune.html and replay.html of the committed ResNet-18 snapshot.

    python3 scripts/screenshot_pages.py [--vramlab PATH] [--out docs/screenshots] [--full]

Needs Chromium (Debian: apt-get install chromium) and a vramlab command (VRAMLAB_BIN, PATH, or
--vramlab). The DevTools client is python/tests/test_pages.py's (standard library only; the
module imports pytest). --full takes whole pages instead of the first screen."""

import argparse
import importlib.util
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("test_pages", ROOT / "python" / "tests" / "test_pages.py")
pages_test = importlib.util.module_from_spec(spec)
spec.loader.exec_module(pages_test)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vramlab", default=pages_test.vramlab_command())
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots")
    parser.add_argument("--full", action="store_true", help="whole pages, not the first screen")
    args = parser.parse_args()
    chromium = pages_test.chromium_binary()
    if chromium is None or args.vramlab is None:
        sys.exit("needs Chromium (Debian package chromium) and a vramlab command")
    work = Path(tempfile.mkdtemp(prefix="vramlab-pages-"))

    def vramlab(*a):
        subprocess.run([args.vramlab, *map(str, a)], check=True, capture_output=True, timeout=600, cwd=ROOT)

    # Relative, as the pages name it.
    trace = "tests/traces/resnet18_default.pickle"
    # The commands the issue names.
    vramlab("run", "--out", work / "run")
    gpu = work / "gpu"
    for record in pages_test.GPU_RUN.glob("*/hw.json"):
        (gpu / record.parent.name).mkdir(parents=True)
        for name in ["sim.json", "hw.json"]:
            shutil.copy(record.parent / name, gpu / record.parent.name / name)
    vramlab("report", gpu)
    vramlab("tune", trace, "--capacity", "2 GiB", "--out", work / "tune")
    vramlab("tune", trace, "--capacity", "1600 MiB", "--out", work / "tune-postmortem")
    vramlab("replay", trace, "--alloc-conf", "", "--alloc-conf", "expandable_segments:True", "--out", work / "replay")
    vramlab("replay", trace, "--policy", "all", "--out", work / "replay-all")
    shots = {
        "report-sim.png": work / "run" / "report.html",
        "report-h100.png": gpu / "report.html",
        "tune.png": work / "tune" / "tune.html",
        "tune-postmortem.png": work / "tune-postmortem" / "tune.html",
        "replay.png": work / "replay" / "replay.html",
        "replay-all-policies.png": work / "replay-all" / "replay.html",
    }
    args.out.mkdir(parents=True, exist_ok=True)
    browser = pages_test.Browser(chromium)
    try:
        for name, page in shots.items():
            browser.open(page.as_uri())
            browser.screenshot(args.out / name, full_page=args.full)
            print(f"{args.out / name}: {(args.out / name).stat().st_size // 1024} KiB")
    finally:
        browser.close()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
