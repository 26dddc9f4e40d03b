#!/usr/bin/env python3
"""Screenshots of the teaching site `vramlab teach` writes, as a laptop shows them (1366 px wide,
headless Chromium), for docs/teach/: the index and every topic's page, each at its first view.

    python3 scripts/teach_screenshots.py [--vramlab PATH] [--out docs/teach] [--full]

Needs Chromium (Debian: apt-get install chromium) and a vramlab command (VRAMLAB_BIN, PATH, or
--vramlab). The DevTools client is python/tests/test_pages.py's (standard library only; the
module imports pytest). --full (the default) takes whole pages; --screen only the first screen."""

import argparse
import importlib.util
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
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "teach")
    parser.add_argument("--screen", action="store_true", help="the first screen only, not whole pages")
    args = parser.parse_args()
    chromium = pages_test.chromium_binary()
    if chromium is None or args.vramlab is None:
        sys.exit("needs Chromium (Debian package chromium) and a vramlab command")
    site = Path(tempfile.mkdtemp(prefix="vramlab-teach-")) / "site"
    subprocess.run([args.vramlab, "teach", "--out", site], check=True, capture_output=True, timeout=600, cwd=ROOT)
    args.out.mkdir(parents=True, exist_ok=True)
    browser = pages_test.Browser(chromium)
    try:
        for page in sorted(site.glob("*.html")):
            browser.open(page.as_uri())
            errors = browser.console_errors()
            if errors:
                sys.exit(f"{page.name}: console errors {errors}")
            shot = args.out / f"{page.stem}.png"
            browser.screenshot(shot, full_page=not args.screen)
            print(shot.relative_to(ROOT) if shot.is_relative_to(ROOT) else shot)
    finally:
        browser.close()


if __name__ == "__main__":
    main()
