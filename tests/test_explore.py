"""``python -m rflens explore`` in a real browser: Voilà serves the explorers on localhost
with a live kernel; moving a slider must redraw the figure through that kernel."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from urllib.parse import urlparse

import pytest

from test_browser import CHROMIUM, CHROMIUM_ARGS, _need_browser

pytestmark = pytest.mark.browser


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_up(url: str, proc, seconds: float = 90) -> None:
    deadline = time.time() + seconds
    while time.time() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"explore exited with {proc.returncode}: {proc.stdout.read()[-2000:]}")
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    raise AssertionError(f"explore did not answer at {url} within {seconds} s")


def test_a_slider_redraws_the_figure_through_the_live_kernel(tmp_path):
    _need_browser()
    from playwright.sync_api import sync_playwright

    port = _free_port()
    url = f"http://127.0.0.1:{port}/"
    env = {**os.environ, "RFLENS_RUNS": str(tmp_path / "runs")}  # an empty store: the bias explorer alone
    proc = subprocess.Popen([sys.executable, "-m", "rflens", "explore", "--scale", "smoke", "--port", str(port),
                             "--no-browser"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        _wait_up(url, proc)
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_page()
            errors = []
            page.on("pageerror", lambda err: errors.append(str(err)))
            # nothing leaves the machine (the page asks a CDN for icon fonts: refused, it draws without them)
            page.route("**/*", lambda route: route.continue_() if urlparse(route.request.url).hostname in (
                "127.0.0.1", "localhost") else route.abort())
            page.goto(url, wait_until="load", timeout=120_000)  # Voila runs the notebook before it answers
            page.wait_for_selector(".js-plotly-plot", timeout=90_000)
            # the figure's curves, title and its own steps (sliders, menus): none, so a change is the kernel's
            state = ("JSON.stringify([el.data.map(t => t.y), el.layout.title && el.layout.title.text,"
                     " (el.layout.sliders || []).length, (el.layout.updatemenus || []).length])")
            before = page.evaluate(f"() => {{ const el = document.querySelector('.js-plotly-plot'); return {state}; }}")
            assert before.endswith(",0,0]"), "the explorer's figure has its own steps: it would not need the kernel"
            handle = page.locator(".widget-slider .noUi-handle").first  # ALiBi's slope shift
            handle.focus()
            for _ in range(4):
                page.keyboard.press("ArrowLeft")
            page.wait_for_function(f"s => {{ const el = document.querySelector('.js-plotly-plot');"
                                   f" return !!(el && el.data) && {state} !== s; }}", arg=before, timeout=30_000)
            assert errors == []
            browser.close()
    finally:
        os.killpg(proc.pid, signal.SIGTERM)  # the server and its kernel
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
