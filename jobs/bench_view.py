"""Benchmark and browser check of `graphrag-ray view`: writes the HTML of each index, opens it in headless Chromium
(Debian's package, driven by Playwright), and prints the file size, the time to write it, and the time from navigation
to the first drawn frame. Then it uses the page as a person would: searches an entity by name and presses Enter,
clicks a community, switches the level, and checks what the details panel shows. Screenshots (the graph with the
best-connected entity selected) go to `--shots`.

Indexes: `--project ROOT` (repeatable; a folder with a built index), or by default the coffee-shop example built
with the no-LLM `fast` method and a ~1M-token index built against the zero-latency simulator (as bench_index).
Issue 18's target: the 1M-token view draws in <= 3 s.

Needs: `apt-get install chromium` and `pip install playwright` (not project dependencies).

    python jobs/bench_view.py --shots docs/images
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_index import settings_for  # noqa: E402
from corpus import fresh_project  # noqa: E402

from graphrag_ray import api  # noqa: E402
from graphrag_ray.simulate.process import SimulatorProcess  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
# As the machine notes say: without these, Chromium's own background connections are refused on a closed network.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def coffee_shop(work: Path) -> Path:
    root = work / "coffee_shop"
    shutil.copytree(REPO / "examples" / "coffee_shop", root, ignore=shutil.ignore_patterns("output", "cache", "runs"))
    os.environ.pop("GRAPHRAG_API_KEY", None)  # the example's promise: no key, no network
    api.build_index(root=root, method="fast")
    return root


def million(work: Path, tokens: int) -> Path:
    root, _ = fresh_project(work / "million", tokens, "bench-view-")
    with SimulatorProcess(latency=0.0) as sim:
        (root / "settings.yaml").write_text(yaml.safe_dump(settings_for(sim.base_url, 2)))
        api.build_index(root=root)
    return root


def check_page(browser, html: Path, shot: Path | None) -> dict:
    page = browser.new_page(viewport={"width": 1500, "height": 950})
    outside = []
    page.on("request", lambda r: outside.append(r.url) if not r.url.startswith(("file:", "data:", "blob:")) else None)
    started = time.perf_counter()
    page.goto(html.as_uri())
    page.wait_for_function("document.body.dataset.drawnMs !== undefined", timeout=60_000)
    wall = time.perf_counter() - started
    drawn_ms = int(page.evaluate("document.body.dataset.drawnMs"))
    status = page.inner_text("#status")
    top = page.evaluate("DATA.entities[0].title")
    hidden = page.evaluate("DATA.entities.length > DATA.shown ? DATA.entities[DATA.entities.length - 1].title : null")
    page.fill("#search", top)
    page.press("#search", "Enter")
    found_top = page.inner_text("#details h2").startswith(top)
    if shot:  # the graph with its best-connected entity selected and described
        page.screenshot(path=str(shot))
    found_hidden = None
    if hidden:  # an entity outside the drawn top-N: found by search, described, marked as not drawn
        page.fill("#search", hidden)
        page.press("#search", "Enter")
        found_hidden = "not drawn" in page.inner_text("#details")
    page.click("#communities li[data-community]")
    community_report = page.inner_text("#details h3")
    levels = page.evaluate("DATA.levels")
    recoloured = None
    if len(levels) > 1:
        before = page.evaluate("nodes.get(0).color.background")
        page.select_option("#level", str(levels[-1]))
        recoloured = page.evaluate("nodes.get(0).color.background") != before or levels[-1] != levels[0]
    page.close()
    return {
        "size_mb": html.stat().st_size / 1e6,
        "drawn_ms": drawn_ms,
        "wall_s": wall,
        "status": status,
        "search_top": found_top,
        "search_hidden": found_hidden,
        "community": community_report,
        "level_switch": recoloured,
        "outside_requests": outside,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--project", type=Path, action="append", default=None)
    parser.add_argument("--tokens", type=int, default=1_000_000)
    parser.add_argument("--max-nodes", type=int, default=1500)
    parser.add_argument("--shots", type=Path, default=None, help="folder for screenshots (one PNG per index)")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    work = Path(tempfile.mkdtemp(prefix="bench-view-"))
    roots = (
        [(root.name, root) for root in args.project]
        if args.project
        else [("coffee_shop", coffee_shop(work)), (f"{args.tokens // 1000}k_tokens", million(work, args.tokens))]
    )
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        for name, root in roots:
            started = time.perf_counter()
            html = api.write_graph_view(root, work / f"{name}.html", max_nodes=args.max_nodes)
            written = time.perf_counter() - started
            shot = args.shots / f"graph_view_{name}.png" if args.shots else None
            if shot:
                shot.parent.mkdir(parents=True, exist_ok=True)
            r = check_page(browser, html, shot)
            print(f"{name}: {r['status']}")
            print(
                f"  html {r['size_mb']:.2f} MB written in {written:.2f} s; first frame {r['drawn_ms']} ms after "
                f"navigation (goto -> drawn {r['wall_s']:.2f} s)"
            )
            print(
                f"  search top entity -> details: {r['search_top']}; search an undrawn entity -> details: "
                f"{r['search_hidden']}; community click -> '{r['community']}'; level switch: {r['level_switch']}"
            )
            print(f"  requests outside the file: {len(r['outside_requests'])} {r['outside_requests'][:3]}")
            if shot:
                print(f"  screenshot: {shot}")
        browser.close()


if __name__ == "__main__":
    main()
