"""The teaching site (`vramlab teach --out DIR`, and the copy `vramlab run` writes into its output
folder), driven in headless Chromium: every page loads with no console error and no network
request, fits a laptop's screen, its controls answer the keyboard, and the figures it shows for a
point are the ones the command line gives for that point (`vramlab explain`, the records of
`vramlab run`, `vramlab replay --json`, and the committed GPU records).

Chromium is driven as in test_pages.py (its Browser, over the DevTools pipe). Without a Chromium
binary or a vramlab command the tests are skipped, saying why."""

import json
import re
import subprocess
from pathlib import Path

import pytest

from test_pages import MEASURE, ROOT, TRACE, WIDTH, Browser, chromium_binary, vramlab_command

TOPICS = ["banks", "coalescing", "constant", "occupancy", "latency", "transfers", "allocator"]

pytestmark = [
    pytest.mark.skipif(chromium_binary() is None, reason="needs Chromium (Debian package chromium)"),
    pytest.mark.skipif(vramlab_command() is None, reason="no vramlab command (pip install . or set VRAMLAB_BIN)"),
]


def vramlab(*args, cwd=None):
    done = subprocess.run([vramlab_command(), *map(str, args)], capture_output=True, text=True, timeout=600, cwd=cwd)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """The site `vramlab teach` writes, and the run whose output folder holds its own copy."""
    tmp = tmp_path_factory.mktemp("teach")
    vramlab("teach", "--out", tmp / "site")
    vramlab("run", "transfers", "latency", "--out", tmp / "run")
    return {"site": tmp / "site", "run": tmp / "run"}


@pytest.fixture(scope="module")
def browser():
    b = Browser(chromium_binary())
    b.call("Network.enable", session=True)
    yield b
    b.close()


def requests(b):
    """The URLs the page asked for since it was opened."""
    b.evaluate("0")  # drains events that arrived before now
    return [e["params"]["request"]["url"] for e in b.events if e.get("method") == "Network.requestWillBeSent"]


def open_page(b, page):
    b.open(page.as_uri())
    return page.as_uri()


def data(b):
    return b.evaluate("JSON.parse(document.getElementById('teach-data').textContent)")


def set_control(b, panel, name, index):
    b.evaluate(
        f"(() => {{ const e = document.getElementById('{panel}-{name}'); e.value = '{index}';"
        " e.dispatchEvent(new Event('input')); })()"
    )


def shown(b, panel):
    """What the panel shows now: its figures by key, the measurement lines, the command, the text."""
    return b.evaluate(
        f"""(() => ({{
        facts: Object.fromEntries([...document.querySelectorAll('#{panel}-facts tr')]
            .map(r => [r.dataset.fact, r.querySelector('td').textContent])),
        measured: document.getElementById('{panel}-measured').innerText,
        command: document.getElementById('{panel}-command').textContent,
        text: document.getElementById('{panel}-text').textContent,
        lanes: document.querySelectorAll('#{panel}-picture svg rect[rx]').length,
        svg: document.querySelectorAll('#{panel}-picture svg').length,
    }}))()"""
    )


def choose(b, panel, **values):
    """Sets each named control of `panel` to the value given (as the control's values name it)."""
    controls = {c["name"]: c for c in data(b)[panel]["controls"]}
    for name, value in values.items():
        set_control(b, panel, name, controls[name]["values"].index(str(value)))
    return shown(b, panel)


def explain(topic, **params):
    args = [f"{k}={v}" for k, v in params.items()]
    return vramlab("explain", topic, *args)


def number(pattern, text):
    found = re.search(pattern, text)
    assert found, f"{pattern!r} not in {text!r}"
    return found.groups()


@pytest.mark.parametrize("where", ["site", "run"])
def test_every_page_loads_with_no_error_no_request_and_fits_the_screen(made, browser, where):
    folder = made["site"] if where == "site" else made["run"] / "teach"
    pages = sorted(folder.glob("*.html"))
    assert [p.stem for p in pages] == sorted(TOPICS + ["index"])
    problems = []
    for page in pages:
        url = open_page(browser, page)
        found = browser.evaluate(MEASURE)
        errors = browser.console_errors()
        asked = requests(browser)
        if errors:
            problems.append(f"{page.name}: console errors {errors}")
        # The page itself, from disk, and nothing else: no CDN, font, script or image fetched.
        if asked != [url]:
            problems.append(f"{page.name}: requests {asked}")
        if found["scrollWidth"] > WIDTH or found["wide"]:
            problems.append(f"{page.name}: wider than {WIDTH} px: {found['wide'][:5]}")
        if page.stem != "index":
            panels = list(data(browser))
            for panel in panels:
                if shown(browser, panel)["svg"] < 1:
                    problems.append(f"{page.name}: {panel} drew no picture")
    assert not problems, "\n".join(problems)


def test_the_request_check_sees_a_fetch(tmp_path, browser):
    """The check itself: a page that loads a script from the network is caught."""
    page = tmp_path / "fetches.html"
    page.write_text("<!DOCTYPE html><html><body><script src='https://cdn.example.invalid/x.js'></script></body></html>")
    url = open_page(browser, page)
    asked = requests(browser)
    assert url in asked and any(a.startswith("https://cdn.example.invalid") for a in asked), asked


def test_controls_answer_the_keyboard(made, browser):
    for topic in TOPICS:
        open_page(browser, made["site"] / f"{topic}.html")
        panels = data(browser)
        panel = next(p for p in panels if any(c["kind"] == "range" for c in panels[p]["controls"]))
        controls = panels[panel]["controls"]
        slider = next(c for c in controls if c["kind"] == "range")
        element = f"{panel}-{slider['name']}"
        set_control(browser, panel, slider["name"], 0)
        before = shown(browser, panel)
        browser.evaluate(f"document.getElementById('{element}').focus()")
        for kind in ["keyDown", "keyUp"]:
            browser.call(
                "Input.dispatchKeyEvent",
                session=True,
                type=kind,
                key="ArrowRight",
                code="ArrowRight",
                windowsVirtualKeyCode=39,
            )
        label = browser.evaluate(f"document.getElementById('{element}-out').textContent")
        assert label == slider["labels"][1], f"{topic}: {label}"
        assert browser.evaluate("document.activeElement.id") == element
        # The panel shows the view of the value the keyboard moved to, as it showed the first.
        def facts_of(index):
            keys = [
                c["values"][index] if c is slider else c["values"][int(browser.evaluate(f"document.getElementById('{panel}-{c['name']}').value"))]
                for c in controls
            ]
            return {f["key"]: f["value"] for f in data(browser)[panel]["views"]["|".join(keys)]["facts"]}

        assert before["facts"] == facts_of(0), topic
        assert shown(browser, panel)["facts"] == facts_of(1), topic


def test_pages_print_as_handouts(made, browser):
    """In print, the navigation and the inputs go; the figures, picture and terminal text stay."""
    open_page(browser, made["site"] / "banks.html")
    browser.call("Emulation.setEmulatedMedia", session=True, media="print")
    try:
        shown_in_print = browser.evaluate(
            """(() => {
            const visible = s => [...document.querySelectorAll(s)].some(e => getComputedStyle(e).display !== 'none');
            return {nav: visible('nav'), inputs: visible('input, select'), facts: visible('.facts tr'),
                    picture: visible('.picture svg'), text: visible('pre'), values: visible('output')};
        })()"""
        )
    finally:
        browser.call("Emulation.setEmulatedMedia", session=True, media="")
    assert shown_in_print == {
        "nav": False, "inputs": False, "facts": True, "picture": True, "text": True, "values": True
    }, shown_in_print


def test_banks_page_is_vramlab_explain_banks(made, browser):
    open_page(browser, made["site"] / "banks.html")
    for width, stride in [(4, 0), (4, 2), (4, 32), (4, 33), (8, 2), (16, 1), (16, 7)]:
        view = choose(browser, "banks", width=width, stride=stride)
        text = explain("banks", width=width, stride=stride)
        assert view["text"] == text, (width, stride)
        assert view["command"] == f"vramlab explain banks width={width} stride={stride}"
        wavefronts, minimum = number(r"(\d+) wavefront\(s\) where (\d+) would do", text)
        (cycles,) = number(r"about (\d+) cycles", text)
        assert view["facts"]["wavefronts"] == wavefronts
        assert view["facts"]["min_wavefronts"] == minimum
        assert view["facts"]["cycles"] == cycles
        assert view["lanes"] == 32, "every lane drawn"
        # The padding fix is the model at one more element of stride.
        padded = explain("banks", width=width, stride=stride + 1)
        (padded_waves,) = number(r"(\d+) wavefront\(s\)", padded)
        assert view["facts"]["padded"].startswith(f"stride {stride + 1}: {padded_waves} wavefront"), view["facts"]
    # The H100's committed measurement of a point it measured, named.
    view = choose(browser, "banks", width=4, stride=32)
    record = json.loads((ROOT / "reports/reference/h100/all-suites/run/banks/hw.json").read_text())
    cycles = next(p["metrics"]["cycles"] for p in record["points"] if p["params"] == {"width": 4, "stride": 32})
    assert f"Measured on NVIDIA H100 80GB HBM3: cycles {cycles:.1f}" in view["measured"], view["measured"]


def test_coalescing_page_is_vramlab_explain_coalescing(made, browser):
    open_page(browser, made["site"] / "coalescing.html")
    for width, stride, offset in [(4, 1, 0), (4, 2, 1), (1, 3, 2), (8, 32, 31), (16, 5, 4), (2, 16, 8)]:
        view = choose(browser, "coalescing", width=width, stride=stride, offset=offset)
        text = explain("coalescing", width=width, stride=stride, offset=offset)
        assert view["text"] == text
        sectors, lines = number(r"(\d+) sector\(s\) in (\d+) line\(s\)", text)
        (efficiency,) = number(r"(\d+)% efficiency", text)
        time, gbs = number(r"predicted ([\d.]+) us, (\d+) GB/s", text)
        facts = view["facts"]
        assert (facts["sectors"], facts["lines"]) == (sectors, lines)
        assert facts["efficiency"].startswith(f"{efficiency}%")
        assert facts["time_us"] == f"{time} us" and facts["gb_per_s"] == f"{gbs} GB/s"
        assert view["lanes"] == 32
    view = choose(browser, "coalescing", width=16, stride=12, offset=8)
    assert view["measured"].startswith("No committed GPU measurement"), view["measured"]


def test_constant_page_is_vramlab_explain_constant(made, browser):
    open_page(browser, made["site"] / "constant.html")
    for distinct, cache in [(1, "warm"), (5, "warm"), (32, "warm"), (3, "cold"), (17, "cold")]:
        view = choose(browser, "constant", distinct=distinct, cache=cache)
        text = explain("constant", distinct=distinct, cache=cache)
        assert view["text"] == text
        (cycles,) = number(r"about (\d+) cycles per dependent access", text)
        assert view["facts"]["cycles"] == cycles
        assert view["facts"]["passes"] == str(distinct)


def test_occupancy_page_is_vramlab_explain_occupancy(made, browser):
    open_page(browser, made["site"] / "occupancy.html")
    for threads, registers, shared in [(256, 64, 0), (1024, 32, 0), (128, 255, 16384), (64, 40, 167936), (512, 96, 49152)]:
        view = choose(browser, "occupancy", threads=threads, registers=registers, dynamic_shared=shared)
        text = explain("occupancy", threads=threads, registers=registers, dynamic_shared=shared)
        assert view["text"] == text
        blocks, warps, percent, limiter = number(
            r"(\d+) blocks per SM = (\d+) of \d+ warps = (\d+)% occupancy, limited by ([a-z ]+)\.", text
        )
        facts = view["facts"]
        assert (facts["blocks_per_sm"], facts["warps_per_sm"], facts["occupancy"]) == (blocks, warps, f"{percent}%")
        assert facts["limiter"] == limiter
        fewer = re.search(r"At (\d+) registers per thread or fewer, another block would fit", text)
        if fewer:
            assert f"{fewer.group(1)} registers per thread" in facts["next_step"], facts["next_step"]


def sim_record(run, experiment):
    return json.loads((run / experiment / "sim.json").read_text())["points"]


def test_latency_page_is_the_models_records_beside_the_gpus(made, browser):
    open_page(browser, made["site"] / "latency.html")
    controls = data(browser)["latency"]["controls"][0]["values"]
    points = [p for p in sim_record(made["run"], "latency") if str(p["params"]["bytes"]) in controls]
    assert len(points) >= 8, "the page's footprints cover the latency experiment's"
    measured = json.loads((ROOT / "reports/reference/h100/all-suites/run/latency/hw.json").read_text())["points"]
    for point in points[::2]:
        view = choose(browser, "latency", bytes=point["params"]["bytes"])
        assert view["facts"]["cycles"] == f"{point['metrics']['cycles']:.0f}"
        gpu = next(m for m in measured if m["params"] == point["params"])
        assert f"NVIDIA H100 80GB HBM3: cycles {gpu['metrics']['cycles']:.0f}" in view["measured"], view["measured"]


def test_transfers_page_is_the_models_records(made, browser):
    open_page(browser, made["site"] / "transfers.html")
    for direction in ["h2d", "d2h"]:
        pinned = {p["params"]["bytes"]: p["metrics"] for p in sim_record(made["run"], f"{direction}_pinned")}
        pageable = {p["params"]["bytes"]: p["metrics"] for p in sim_record(made["run"], f"{direction}_pageable")}
        for size in [1 << 10, 1 << 16, 1 << 20, 1 << 26, 1 << 30]:
            view = choose(browser, "transfers", direction=direction, bytes=size)
            assert view["facts"]["pinned_gb_per_s"] == f"{pinned[size]['gb_per_s']:.2f} GB/s"
            assert view["facts"]["pageable_gb_per_s"] == f"{pageable[size]['gb_per_s']:.2f} GB/s"
            assert view["facts"]["pinned_us"] == f"{pinned[size]['time_us']:.1f} us"
    for point in sim_record(made["run"], "overlap")[::4]:
        p = point["params"]
        view = choose(browser, "overlap", streams=p["streams"], chunks=p["chunks"], kernel_us=int(p["kernel_us"]))
        assert view["facts"]["time_us"] == f"{point['metrics']['time_us']:.0f} us"
        assert view["facts"]["speedup"] == f"{point['metrics']['speedup']:.2f} x"


def test_allocator_page_steps_through_resnet18_with_replays_peaks(made, browser, tmp_path):
    out = vramlab("replay", TRACE, "--alloc-conf", "", "--alloc-conf", "expandable_segments:True", "--json",
                  "--out", tmp_path / "replay")
    results = json.loads(out)["results"]
    open_page(browser, made["site"] / "allocator.html")
    steps = len(data(browser)["allocator"]["controls"][0]["values"])
    assert 100 <= steps <= 130
    seen = set()
    for step in [0, steps // 4, steps // 2, steps - 1]:
        set_control(browser, "allocator", "step", step)
        view = shown(browser, "allocator")
        facts = view["facts"]
        seen.add(facts["event"])
        for key, result in zip(["defaults", "expandable"], results):
            assert facts[f"{key}_peak_reserved"].endswith(f"({result['peak_reserved_bytes']} bytes)")
            assert facts[f"{key}_peak_allocated"].endswith(f"({result['peak_allocated_bytes']} bytes)")
        assert view["svg"] == 2, "the two settings side by side"
    assert len(seen) == 4, "each step is another event"
    assert results[1]["peak_reserved_bytes"] < results[0]["peak_reserved_bytes"]


# Issue 38 item 15: the red of a headline means a bad value; the page's "in the terminal" line is
# the command of what the controls show first; the terminal boxes fit their width (long lines
# wrap, as a terminal wraps them, instead of running out of the box).
HEADLINES = """(() => [...document.querySelectorAll('.facts tr')].filter(r => r.classList.contains('strong') || r.classList.contains('bad'))
    .map(r => ({key: r.dataset.fact, bad: r.classList.contains('bad'), colour: getComputedStyle(r.querySelector('td')).color})))()"""
RED = "rgb(198, 40, 40)"


def test_headlines_are_red_only_when_bad(made, browser):
    open_page(browser, made["site"] / "banks.html")
    for stride, bad in [(1, False), (2, True), (33, False), (32, True)]:
        choose(browser, "banks", width=4, stride=stride)
        (headline,) = browser.evaluate(HEADLINES)
        assert headline["bad"] == bad and (headline["colour"] == RED) == bad, (stride, headline)
    open_page(browser, made["site"] / "coalescing.html")
    for stride, bad in [(1, False), (2, True)]:
        choose(browser, "coalescing", width=4, stride=stride, offset=0)
        (headline,) = browser.evaluate(HEADLINES)
        assert (headline["colour"] == RED) == bad, (stride, headline)
    # The allocator: the defaults hold far more than their blocks need; expandable segments do not.
    open_page(browser, made["site"] / "allocator.html")
    colours = {h["key"]: h["colour"] for h in browser.evaluate(HEADLINES)}
    assert colours["defaults_peak_reserved"] == RED and colours["expandable_peak_reserved"] != RED, colours
    # Where nothing is bad, nothing is red: latency has no bad value.
    open_page(browser, made["site"] / "latency.html")
    assert all(h["colour"] != RED for h in browser.evaluate(HEADLINES))


def test_the_terminal_line_is_what_the_controls_show_first(made, browser):
    for topic in ["banks", "coalescing", "constant", "occupancy", "latency", "allocator"]:
        open_page(browser, made["site"] / f"{topic}.html")
        top = browser.evaluate("document.querySelector('p.terminal code').textContent")
        panel = next(iter(data(browser)))
        assert top == shown(browser, panel)["command"], topic


BOXES = """(() => [...document.querySelectorAll('pre')].filter(p => !p.hidden)
    .map(p => ({scroll: p.scrollWidth, client: p.clientWidth, text: p.textContent.slice(0, 60)})))()"""


def test_terminal_boxes_do_not_overflow(made, browser):
    problems = []
    for topic in TOPICS:
        open_page(browser, made["site"] / f"{topic}.html")
        for box in browser.evaluate(BOXES):
            if box["scroll"] > box["client"] + 1:
                problems.append(f"{topic}: {box}")
    open_page(browser, made["site"] / "allocator.html")
    steps = len(data(browser)["allocator"]["controls"][0]["values"])
    for step in [0, steps // 2, steps - 1]:
        set_control(browser, "allocator", "step", step)
        for box in browser.evaluate(BOXES):
            if box["scroll"] > box["client"] + 1:
                problems.append(f"allocator step {step}: {box}")
    assert not problems, "\n".join(problems)
