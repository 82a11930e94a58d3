"""The built book in a real browser: headless Chromium, driven by Playwright, offline.

The smoke book is built once (``python -m rflens reproduce --scale smoke``) and served on
localhost; it keeps the chapters the notebook tests executed just before, in the same process
(conftest.py), and executes only those they did not. Every request to another host is blocked and recorded: the book must work with
no network. Each chapter must load without a page error and draw at least one plotly
figure; equations must be typeset; moving a slider must change its figure.

Skipped when Chromium is missing, unless RFLENS_REQUIRE_BROWSER=1 (as in CI), where a
missing browser is a failure.
"""

from __future__ import annotations

import functools
import http.server
import os
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from urllib.parse import urlparse

import pytest
from consistency import (csv_files, expected_fingerprints, finished_runs, header_of, pointer_contradictions,
                         provenance_contradictions, status_contradictions)
from plotly_overlaps import OVERLAPS_JS, TEXT_OVERLAPS_JS

from rflens.setup.presets import BOOK_LONG, NAMES as SCALE_NAMES
from rflens.publish import reproduce

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
CHAPTERS = [p.stem for p in reproduce.chapters().values()]
MAX_PAGE_HEIGHT = 15_000  # px at 1366 x 900, every fold closed


def _need_browser():
    if Path(CHROMIUM).exists():
        return
    if os.environ.get("RFLENS_REQUIRE_BROWSER") == "1":
        pytest.fail(f"Chromium not found at {CHROMIUM}: install Debian's chromium (make browser)")
    pytest.skip("Chromium not installed (make browser installs it)")


@pytest.fixture(scope="module")
def book(tmp_path_factory) -> Path:
    """The smoke book's html folder, built now from the chapters (or, while working on
    the test itself, an existing html folder named by RFLENS_BROWSER_BOOK)."""
    _need_browser()
    if os.environ.get("RFLENS_BROWSER_BOOK"):
        return Path(os.environ["RFLENS_BROWSER_BOOK"])
    proc = subprocess.run([sys.executable, "-m", "rflens", "reproduce", "--scale", "smoke", "--quiet"],
                          cwd=ROOT, capture_output=True, text=True, timeout=1500)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    html = ROOT / "_build" / "smoke" / "html"
    assert (html / "index.html").exists()
    return html


@pytest.fixture(scope="module")
def server(book):
    handler = functools.partial(_QuietHandler, directory=str(book))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def browser(server):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:  # Playwright starts Chromium with a fresh, empty profile
        b = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


class Visit:
    """One page, opened with the network cut off, recording page errors and blocked requests."""

    def __init__(self, browser, url: str):
        self.errors: list[str] = []
        self.external: list[str] = []
        self.page = browser.new_page()
        self.page.on("pageerror", lambda err: self.errors.append(str(err)))
        self.page.route("**/*", self._route)
        self.page.goto(url, wait_until="load")
        self.page.wait_for_timeout(500)

    def _route(self, route):
        host = urlparse(route.request.url).hostname
        if host in ("127.0.0.1", "localhost") or route.request.url.startswith(("data:", "blob:")):
            route.continue_()
        else:
            self.external.append(route.request.url)
            route.abort()

    def drawn_figures(self) -> int:
        return self.page.locator(".js-plotly-plot .main-svg").count()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.page.close()


class Pages:
    """The pages this module has opened, each loaded once and kept open for the tests after
    it (a page load draws every figure of a chapter: the slowest step of the module). A test
    that changes what a later test reads (a theme, a phone's width) opens its own Visit."""

    def __init__(self, browser, server: str):
        self.browser, self.server, self.open_pages = browser, server, {}

    def __call__(self, path: str) -> Visit:
        if path not in self.open_pages:
            self.open_pages[path] = Visit(self.browser, f"{self.server}/{path}")
        return self.open_pages[path]

    def close(self):
        for visit in self.open_pages.values():
            visit.page.close()


@pytest.fixture(scope="module")
def pages(browser, server):
    opened = Pages(browser, server)
    yield opened
    opened.close()


# Every text node of the article outside code, data tables, figures and widgets, once MathJax
# (on pages that load it) has typeset the page: those that still show a "$" or "_tr".
RAW_NOTATION_JS = """async () => {
    if (window.MathJax && MathJax.startup && MathJax.startup.promise) { await MathJax.startup.promise; }
    const skip = 'pre, code, table, svg, script, style, mjx-container, .js-plotly-plot, .jupyter-widgets, .widget-area';
    const root = document.querySelector('article.bd-article') || document.body;
    const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
    const found = [];
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
        const text = node.textContent;
        if ((text.includes('$') || text.includes('_tr')) && !node.parentElement.closest(skip)) {
            found.push(text.trim().slice(0, 80));
        }
    }
    return found; }"""


# each page's article text as a reader sees it, kept by the tests that open the page for the one
# that compares the pages (it opens only those no earlier test did)
ARTICLES: dict[str, str] = {}


TABLES: dict[str, list] = {}  # each page's tables as rows of cell texts, header row first

TABLES_JS = """() => [...document.querySelectorAll('article table')].map(t => [...t.querySelectorAll('tr')].map(
    tr => [...tr.querySelectorAll('th, td')].map(c => c.textContent.replace(/\\s+/g, ' ').trim())))"""


def article_text(visit, page: str) -> str:
    text = " ".join(visit.page.locator("article").first.inner_text().split()).replace("’", "'")
    ARTICLES[page] = text
    TABLES[page] = visit.page.evaluate(TABLES_JS)
    return text


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_every_chapter_loads_offline_and_draws_a_figure(pages, chapter):
    visit = pages(f"book/{chapter}.html")
    article_text(visit, chapter)
    assert visit.errors == [], f"page errors in {chapter}: {visit.errors}"
    assert visit.external == [], f"{chapter} asked the network for {visit.external}"
    if chapter != "09_claims":  # the scoreboard is one table
        assert visit.drawn_figures() >= 1, f"{chapter} draws no plotly figure"
    # progress bars and warnings went to the terminal and the log, not onto the page
    assert visit.page.locator(".output.stderr").count() == 0, f"{chapter} shows stderr output"
    bars = visit.page.locator(".cell_output").filter(has_text=re.compile(r"\d+%\|")).count()
    assert bars == 0, f"{chapter} shows {bars} progress bars"
    # printed results wrap and wide tables scroll in their own box: no output reaches past the column
    wider = visit.page.evaluate("""() => {
        const column = document.querySelector('article.bd-article, main').getBoundingClientRect();
        return [...document.querySelectorAll('.cell_output .output, .cell_output pre')]
            .filter(el => el.getBoundingClientRect().right > column.right + 1).length; }""")
    assert wider == 0, f"{chapter}: {wider} outputs run past the content column"
    # the book's notation is typeset: no raw $ or _tr left in the text outside code, tables and figures
    raw = visit.page.evaluate(RAW_NOTATION_JS)
    assert raw == [], f"{chapter}: untypeset notation in {raw[:5]}"
    assert visit.page.locator("mjx-container").count() > 0, f"{chapter} typesets no equation (offline MathJax)"
    # no menu covers a title, a label or a legend, and none sticks out of its figure
    covered = [(f["index"], o["element"], o["text"]) for f in visit.page.evaluate(OVERLAPS_JS) for o in f["overlaps"]]
    assert covered == [], f"{chapter}: menus cover {covered[:5]}"
    # nor does a figure's text run into its other text or out of the figure, or its legend hide entries
    for f in visit.page.evaluate(TEXT_OVERLAPS_JS):
        assert f["overlaps"] == [] and f["clipped"] == [], f"{chapter}, figure {f['index']}: {f}"
        assert f["legend"] is None or f["legend"]["shown"] == f["legend"]["entries"], f"{chapter}: {f}"
    # rendered tables read in words: no header a reader must decode, no NaN for "not measured"
    heads, cells = visit.page.evaluate("""() => {
        const tables = [...document.querySelectorAll('.cell_output table')];
        return [tables.flatMap(t => [...t.querySelectorAll('th')].map(th => th.textContent.trim())),
                tables.flatMap(t => [...t.querySelectorAll('td')].map(td => td.textContent.trim()))]; }""")
    coded = [h for h in heads if re.search(r"^[a-z]+(_[a-z]+)+$|@", h)]
    assert coded == [], f"{chapter}: code-name headers {coded[:5]}"
    assert not any(c.lower() == "nan" for c in cells), f"{chapter} shows NaN in a table"
    # one search box on the page, not one in the header and another in the sidebar
    boxes = visit.page.locator(".search-button-field").evaluate_all(
        "els => els.filter(e => e.getBoundingClientRect().width > 0).length")
    assert boxes == 1, f"{chapter} shows {boxes} search boxes"
    # no control that needs a kernel: on a static page it would move without redrawing anything
    assert visit.page.locator(".jupyter-widgets, .widget-slider").count() == 0, f"{chapter} shows a dead widget"
    # in every figure, the curves its legend lists (as first drawn) have one colour each
    shared = visit.page.evaluate("""() => [...document.querySelectorAll('.js-plotly-plot')].map(el => {
        const shown = (el.data || []).filter(t => t.visible !== false && t.showlegend !== false && t.name);
        const colours = shown.map(t => (t.line && t.line.color) || (t.marker && t.marker.color))
                             .filter(c => typeof c === 'string');
        return colours.length - new Set(colours).size; }).filter(n => n > 0).length""")
    assert shared == 0, f"{chapter}: {shared} figures give two legend entries one colour"
    # every figure's title fits its figure on a desktop (a phone's width is checked below)
    assert visit.page.evaluate(TITLES_PAST_EDGE_JS) == [], f"{chapter}: titles past their figures"
    # a page a reader finishes: at most 15,000 px on a desktop with its folds closed
    visit.page.set_viewport_size({"width": 1366, "height": 900})
    visit.page.wait_for_timeout(300)
    height = visit.page.evaluate("document.documentElement.scrollHeight")
    assert height <= MAX_PAGE_HEIGHT, f"{chapter} is {height:,} px tall on a desktop: fold a long table"


def test_a_chapters_tables_download_as_csv(pages, server):
    visit = pages("book/03_alibi_dissected.html")
    links = visit.page.locator("p.rflens-download a")
    assert links.count() >= 2, "chapter 3 links fewer than its two tables"
    href = links.first.get_attribute("href")
    response = visit.page.request.get(f"{server}/book/{href}")
    assert response.ok, f"{href} is not served"
    text = response.text()
    assert text.startswith("# scale: smoke\n# code_version: ") and "# data_prose: " in text


def test_moving_a_slider_changes_its_figure(pages):
    visit = pages("book/02_alibi_and_relative_biases.html")
    page = visit.page
    plot = page.locator(".js-plotly-plot").filter(has=page.locator(".slider-container")).first
    plot.scroll_into_view_if_needed()
    state = "el => JSON.stringify([el.data.map(t => t.visible !== false), el.layout.title && el.layout.title.text])"
    before = plot.evaluate(state)
    rail = plot.locator(".slider-rail-touch-rect").first
    box = rail.bounding_box()
    assert box is not None, "the slider has no rail on the page"
    page.mouse.click(box["x"] + box["width"] - 3, box["y"] + box["height"] / 2)  # the last step, as a reader would
    page.wait_for_timeout(800)
    after = plot.evaluate(state)
    assert after != before, "moving the slider left the figure unchanged"
    assert visit.errors == []


def test_the_erf_threshold_slider_moves_the_markers_without_a_kernel(pages):
    visit = pages("book/03_alibi_dissected.html")
    page = visit.page
    plot = page.locator(".js-plotly-plot").filter(has=page.locator(".slider-container")) \
               .filter(has_text="threshold = ").first
    plot.scroll_into_view_if_needed()
    state = "el => JSON.stringify([el.data.map(t => t.x), el.layout.title && el.layout.title.text])"
    before = plot.evaluate(state)
    box = plot.locator(".slider-rail-touch-rect").first.bounding_box()
    assert box is not None, "the threshold slider has no rail on the page"
    page.mouse.click(box["x"] + 3, box["y"] + box["height"] / 2)  # the lowest threshold
    page.wait_for_timeout(800)
    assert plot.evaluate(state) != before, "moving the threshold left the ERF markers where they were"
    assert visit.errors == [] and visit.external == []


def test_index_page_says_how_to_rerun_with_papermill(pages):
    visit = pages("book/index.html")
    article_text(visit, "index")
    assert "papermill" in visit.page.content()
    assert visit.errors == []


def test_index_page_says_what_the_book_finds_with_the_key_figure_on_the_first_screen(pages):
    """The first screen: the paper's thesis as the long run and the run at the paper's depth
    decide it and what the key figure
    shows, the figure right under them; then the claims at each scale (the counts of the board
    that chapter 9 of this build wrote to the run store, and the long runs'), how to read the
    numbers with the models, and the "this build" box."""
    from rflens.claims import scoreboard

    counts = scoreboard.summary(scoreboard.load_scoreboard("smoke"))

    def box(title):
        head = visit.page.locator(".admonition-title").filter(has_text=re.compile(f"^{title}$"))
        found = visit.page.locator(".admonition").filter(has=head).first
        return found, " ".join(found.inner_text().split()).replace("’", "'")  # typographic apostrophes

    visit = pages("book/index.html")
    assert visit.errors == [] and visit.external == []
    first, text = box("What this book finds")
    assert "paper's thesis" in text and "(claim 6)" in text, text
    # the paper's depth first, the 4-layer run after it, with why they differ, in defined words
    assert text.index("At the paper's depth") < text.index("At 4 layers") and "Why the depths differ" in text, text
    assert "effective receptive field (ERF:" in text, text
    _, under = box("Reading the key figure")  # under the figure: what it shows, terms defined, both depths
    assert "slope sweep" in under and "Δ = 8" in under and "the perplexity at 16 times" in under, under
    assert "12 layers against 4" in under, under
    assert first.bounding_box()["y"] < 300  # under the title
    figure = visit.page.locator(".js-plotly-plot .main-svg").first
    assert figure.bounding_box()["y"] < 900  # the key figure, drawn, starts on a desktop's first screen
    _, text = box("The claims at each scale")
    assert (f"{counts['pass']} pass, {counts['fail']} fail, {counts['not decided']} not decided, "
            f"{counts['not run']} not run at this build's scale (smoke" in text), text
    assert f"in the long run ({BOOK_LONG}" in text and "windows up to w = 100 extrapolate" in text, text
    _, text = box("Reading the numbers")
    assert "parameters" in text and "2^8 times flatter" in text, text
    _, text = box("This build")
    assert "Scale smoke" in text


def test_every_csv_is_headed_with_the_preset_its_rows_come_from(book):
    files = csv_files(book)
    assert len(files) >= 20, files  # the reader still finds them
    wrong = {f.name: provenance_contradictions(f.read_text(), expected_fingerprints) for f in files}
    assert {name: found for name, found in wrong.items() if found} == {}
    # the long runs' tables are headed with their run, not the book's scale
    assert any(header_of(f.read_text()).get("scale") == BOOK_LONG for f in files)


def test_citations_link_to_the_references_page(pages):
    links = pages("book/03_alibi_dissected.html").page.locator("a[href*='references.html#']")
    assert links.count() >= 1, "chapter 3 cites nothing that links to the references page"
    href = links.first.get_attribute("href")
    visit = pages(f"book/{href.split('#')[0]}")
    article_text(visit, "references")
    text = visit.page.content().lower()  # the bibliography style sets titles in sentence case
    assert "dissecting transformer length extrapolation" in text and "train short, test long" in text
    assert visit.errors == []


def test_search_snippets_show_equations_typeset_not_as_tex(browser, server):
    """Chapter 2's heading on the window of \\bar d is found by "bar": its snippet shows the
    typeset equation, with no TeX source or half equation left in any snippet."""
    found = _results(browser, server, "bar")
    raw = [r["snippet"][:120] for r in found if "\\(" in r["snippet"] or "\\)" in r["snippet"]]
    assert raw == [], f"search snippets show TeX: {raw}"
    assert any(r["math"] for r in found), "no search snippet shows a typeset equation"


# Facts that more than one page states for the same build, each as (key, value) read from a
# page's rendered text: the board's counts at a scale, the tokens a model at a scale, and how
# many models each long run holds. A page may leave a fact out; no two pages may disagree.
_COUNTS = r"(\d+) pass, (\d+) fail, (\d+) not decided, (\d+) not run"
FACTS = [
    (re.compile(_COUNTS + r" at this build's scale \(([\w-]+)"), lambda m: (("counts", m[5]), m.groups()[:4])),
    (re.compile(_COUNTS + r" in the long run \(([\w-]+)"), lambda m: (("counts", m[5]), m.groups()[:4])),
    (re.compile(r"(?<![\w-])([a-z]+(?:-[a-z]+)?): " + _COUNTS), lambda m: (("counts", m[1]), m.groups()[1:5])),
    (re.compile(r"At the ([\w-]+) scale, of \d+ claims: (\d+) pass[^;]*; (\d+) fail[^;]*; (\d+) not decided[^;]*; "
                r"(\d+) were not run"), lambda m: (("counts", m[1]), m.groups()[1:5])),
    (re.compile(r"\(([\w-]+), ([\d.]+[kMB]?) (?:training )?tokens a model"), lambda m: (("tokens a model", m[1]), m[2])),
    (re.compile(r"Scale ([\w-]+): .*?; ([\d.]+[kMB]?) training tokens a model"), lambda m: (("tokens a model", m[1]), m[2])),
    (re.compile(r"The long run \(chapter 10\): \d+ of its (\d+) models"), lambda m: (("planned", "first"), m[1])),
    (re.compile(r"the long run's (\d+) models:"), lambda m: (("planned", "first"), m[1])),
    (re.compile(r"The second long run[^:]*?: (\d+) of its (\d+) models shipped"), lambda m: (("second", "holds"), m.groups())),
    (re.compile(r"The second long run holds (\d+) of its (\d+) models"), lambda m: (("second", "holds"), m.groups())),
]


def facts_of(text: str) -> dict:
    """{(key, what): {value, ...}} of one page's text."""
    found: dict = {}
    for pattern, read in FACTS:
        for m in pattern.finditer(text):
            key, value = read(m)
            found.setdefault(key, set()).add(tuple(value) if isinstance(value, (tuple, list)) else value)
    return found


def test_the_fact_reader_finds_a_contradiction_between_two_pages():
    index = "Of the paper's 16 claims, 3 pass, 9 fail, 3 not decided, 1 not run at this build's scale (smoke, 4k "
    board = "smoke: 3 pass, 9 fail, 3 not decided, 1 not run; long-repeated: 5 pass, 7 fail, 3 not decided, 1 not run"
    assert facts_of(index)[("counts", "smoke")] == facts_of(board)[("counts", "smoke")] == {("3", "9", "3", "1")}
    other = board.replace("smoke: 3 pass", "smoke: 4 pass")
    assert facts_of(index)[("counts", "smoke")] != facts_of(other)[("counts", "smoke")]
    assert facts_of("The long run (chapter 10): 40 of its 40 models shipped")[("planned", "first")] == {"40"}


# A claim's verdict at a scale, as the pages state it: the tables with a column per scale and a
# row per claim (the chapters' opening tables, chapter 9's board), the summaries' "At the `tiny`
# scale, held: claims 1 and 7; ...", the first screen's "... at this build's scale (smoke, ...):
# hold 1, 7; fail 2", the chapters' "Claim 1: held at `tiny`, not held in `long`", and any
# "Claim 12 holds by construction" (a pass at every scale).
RESULT_WORDS = {"pass": "pass", "fail": "fail", "not decided": "not decided", "not run": "not run",
                "held": "pass", "hold": "pass", "did not hold": "fail", "not checked": "not run"}


def _ids(text: str) -> list[int]:
    """The claim numbers of "claims 1, 2 and 5" or "1 (a few words), 7 (...)"."""
    return [int(n) for n in re.findall(r"(?<![\w.])(\d{1,2})(?![\w.])", re.sub(r"\([^)]*\)", "", text))]


def verdicts_of(text: str, tables: list) -> set[tuple]:
    """{(scale, claim, result)} of one page (its text and its tables)."""
    found = set()
    for rows in tables:
        if len(rows) < 2:
            continue
        scales_at = {i: h.split()[0] for i, h in enumerate(rows[0]) if h and h.split()[0] in SCALE_NAMES}
        for row in rows[1:]:
            m = re.match(r"^(\d{1,2})\b", row[0] if row else "")
            if not m or not scales_at:
                continue
            cells = row if len(row) == len(rows[0]) else row  # an index column is a th like the others
            for i, scale in scales_at.items():
                if i < len(cells) and cells[i] in RESULT_WORDS:
                    found.add((scale, int(m[1]), RESULT_WORDS[cells[i]]))
    for m in re.finditer(r"At the ([\w-]+) scale, ([^.]*)\.", text):
        for part in m[2].split("; "):
            word, _, ids = part.partition(": ")
            if word in RESULT_WORDS:
                found |= {(m[1], i, RESULT_WORDS[word]) for i in _ids(ids)}
    for m in re.finditer(r"(?:at this build's scale|in the long run) \(([\w-]+), [^)]*\): ([^.]*?)(?:;(?= \d+ pass)|\.\s|$)",
                         text):
        for part in m[2].split("; "):
            word, _, ids = part.partition(" ")
            word = "not decided" if part.startswith("not decided") else "not run" if part.startswith("not run") else word
            ids = part[len(word):]
            if word in RESULT_WORDS:
                found |= {(m[1], i, RESULT_WORDS[word]) for i in _ids(ids)}
    held = {"held": "pass", "not held": "fail", "not decided": "not decided"}
    for m in re.finditer(r"Claims? ([\d, and]+): (held|not held|not decided) at ([\w-]+)(?:,| and still) "
                         r"(held|not held|not decided) in ([\w-]+)", text):
        for i in _ids(m[1]):
            found |= {(m[3], i, held[m[2]]), (m[5], i, held[m[4]])}
    for m in re.finditer(r"Claims? ([\d, and]+) (?:holds?|held) by construction", text):
        found |= {("*", i, "pass") for i in _ids(m[1])}
    return found


def verdict_contradictions(pages: dict[str, set]) -> dict:
    """{(scale, claim): {result: [pages]}} for every verdict two pages state differently (a
    construction claim's "*" scale stands for every scale)."""
    by: dict = {}
    scales_seen = {s for found in pages.values() for s, _, _ in found if s != "*"}
    for page, found in pages.items():
        for scale, claim, result in found:
            for s in (scales_seen if scale == "*" else (scale,)):
                by.setdefault((s, claim), {}).setdefault(result, []).append(page)
    return {key: results for key, results in by.items() if len(results) > 1}


# A stated number of shipped models against the rows of the table that lists them (chapter 10's
# table of every shipped model at its largest size: one row a model).
def model_count_contradictions(text: str, tables: list) -> list[tuple]:
    stated = [int(m[1]) for m in re.finditer(r"The long run \(chapter 10\): (\d+) of its \d+ models shipped", text)]
    stated += [int(m[1]) for m in re.finditer(r"The second long run holds (\d+) of its \d+ models", text)]
    listed = [len(rows) - 2 for rows in tables if len(rows) > 2 and rows[1][:2] == ["family", "label"]]
    return [(n, rows) for n in stated for rows in listed if n != rows]


def test_the_fact_reader_finds_each_kind_of_contradiction_planted_in_a_page():
    board = [["#", "claim", "tiny", "long", "long-repeated", "the paper"],
             ["1", "windows up to w = 100 extrapolate", "pass", "fail", "fail", "w <= 100 extrapolate"],
             ["12", "Sandwich is a log curve", "fail", "fail", "fail", "..."]]
    clean = {"09": verdicts_of("", [board]),
             "03": verdicts_of("Claim 1: held at tiny, not held in long. At the tiny scale, held: claim 1.", [])}
    assert verdict_contradictions(clean) == {}
    # "still fail" for a claim that held at the build's scale
    still = {**clean, "03": verdicts_of("Claims 1 and 3: not held at tiny and still not held in long.", [])}
    assert ("tiny", 1) in verdict_contradictions(still)
    # a claim not decided at the build's scale is read as not decided, never as failed
    undecided = {**clean, "03": verdicts_of("Claim 1: not decided at tiny, not held in long.", [])}
    assert verdicts_of("Claim 1: not decided at tiny, not held in long.", []) == {("tiny", 1, "not decided"),
                                                                                  ("long", 1, "fail")}
    assert ("tiny", 1) in verdict_contradictions(undecided)  # the board says pass
    # "by construction" for a claim the board fails
    built = {**clean, "07": verdicts_of("Claim 12 holds by construction, at any scale.", [])}
    assert {("tiny", 12), ("long", 12)} <= set(verdict_contradictions(built))
    # a summary or the first screen at odds with the board
    summary = {**clean, "05": verdicts_of("At the long scale, held: claims 1 and 9; did not hold: claim 2.", [])}
    assert ("long", 1) in verdict_contradictions(summary)
    first = {**clean, "index": verdicts_of("1 pass, 1 fail, 0 not decided, 0 not run at this build's scale (tiny, 0.6M "
                                           "training tokens a model): hold 12; fail 1. Next.", [])}
    assert {("tiny", 1), ("tiny", 12)} <= set(verdict_contradictions(first))
    # a count of models against the rows of the table that lists them
    table = [["", "", "l_tr"], ["family", "label", ""]] + [["Table 1", f"w={w}", "32"] for w in range(3)]
    assert model_count_contradictions("The long run (chapter 10): 3 of its 3 models shipped.", [table]) == []
    assert model_count_contradictions("The long run (chapter 10): 3 of its 3 models shipped.",
                                      [table + [["Figure 7", "Sinusoidal", "32"]]]) == [(3, 4)]


def test_no_page_states_a_count_or_scale_another_page_contradicts(pages):
    pages = ["index", *CHAPTERS]
    seen: dict = {}
    verdicts: dict = {}
    for page in pages:
        if page not in ARTICLES:
            article_text(pages(f"book/{page}.html"), page)
        for key, values in facts_of(ARTICLES[page]).items():
            for value in values:
                seen.setdefault(key, {}).setdefault(value, []).append(page)
        verdicts[page] = verdicts_of(ARTICLES[page], TABLES[page])
        assert model_count_contradictions(ARTICLES[page], TABLES[page]) == [], page
    assert ("counts", "smoke") in seen and ("planned", "first") in seen, sorted(seen)  # the reader still finds them
    contradicted = {key: by_value for key, by_value in seen.items() if len(by_value) > 1}
    assert contradicted == {}, contradicted
    # no run said to be training whose bundle is finished, no pointer to a page that does not show it
    finished = finished_runs()
    assert {page: status_contradictions(ARTICLES[page], finished) for page in pages
            if status_contradictions(ARTICLES[page], finished)} == {}
    if "references" not in ARTICLES:
        article_text(pages("book/references.html"), "references")
    assert pointer_contradictions({page: ARTICLES[page] for page in [*pages, "references"]}) == []
    # the verdicts: read from the board, the chapters' tables and their sentences, never at odds
    assert {s for found in verdicts.values() for s, _, _ in found} >= {"smoke", BOOK_LONG}, verdicts
    assert verdict_contradictions(verdicts) == {}


# ----------------------------------------------------------------------------- search
# (in this module: the smoke book is built once for every test that opens it)
# what no snippet may quote: the page's header buttons and printed table of contents, a code
# cell (the parameters cell's comment), a shell command, TeX source
NOT_PROSE = (".pdf", ".ipynb", "Contents", "papermill may inject it", "default_scale", "python -m rflens reproduce",
             "$", "\\(", "\\)")

RESULTS_JS = """items => items.map(li => {
    const a = li.querySelector('a'), p = li.querySelector('p.context');
    return {href: a.getAttribute('href'), title: a.textContent, snippet: p ? p.textContent : '',
            math: p ? p.querySelectorAll('mjx-container').length : 0}; })"""


SEARCHED: dict[str, list[dict]] = {}  # each query's results, searched once for the tests that read them


def _results(browser, server, query: str) -> list[dict]:
    """Each result of ``query`` once its snippet is in and MathJax has typeset it."""
    if query not in SEARCHED:
        SEARCHED[query] = _search(browser, server, query)
    return SEARCHED[query]


def _search(browser, server, query: str) -> list[dict]:
    with Visit(browser, f"{server}/search.html?q={query}") as visit:
        page = visit.page
        page.wait_for_selector("#search-results li", timeout=30_000)
        # every result's snippet fetched, and no equation left as TeX (if one is, the test says so):
        # the list unchanged for 0.7 s (Sphinx's own "finished" state is not reached here: its title
        # stays "Searching" and its pulse keeps running after the last result)
        try:
            page.wait_for_function("""() => { const r = document.getElementById('search-results');
                const items = r.querySelectorAll('li'), snippets = r.querySelectorAll('li p.context');
                const ready = items.length > 0 && items.length === snippets.length &&
                    Array.from(snippets).every(p => !p.textContent.includes('\\\\('));
                const now = Date.now();
                if (!ready || window.__rflensShown !== items.length) {
                    window.__rflensShown = ready ? items.length : -1; window.__rflensSince = now; return false; }
                return now - window.__rflensSince > 700; }""", timeout=30_000)
        except Exception:  # noqa: BLE001 - the assertions below name what is left
            pass
        found = page.locator("#search-results li").evaluate_all(RESULTS_JS)
        assert visit.errors == [] and visit.external == []
        return found


@pytest.mark.parametrize("query", ["Sandwich", "scale", "window", "bar"])
def test_search_lists_each_page_once_with_a_snippet_of_its_prose(browser, server, query):
    found = _results(browser, server, query)
    assert found, f"no result for {query}"
    pages = [r["href"].split("#")[0] for r in found]
    assert len(pages) == len(set(pages)), f"a page listed twice for {query}: {pages}"
    quoted = [(r["title"], r["snippet"][:120]) for r in found if any(bit in r["snippet"] for bit in NOT_PROSE)]
    assert quoted == [], f"snippets that are not the article's prose: {quoted[:3]}"


@pytest.mark.parametrize("query, page", [("Table 2", "04_receptive_fields"), ("Figure 7", "05_sinusoidal_and_rotary"),
                                         ("Table 3", "06_sandwich")])
def test_a_tables_or_figures_name_finds_the_page_that_holds_it_first(browser, server, query, page):
    found = _results(browser, server, query)
    pages = [r["href"].split("#")[0] for r in found]
    assert pages and pages[0].endswith(f"{page}.html"), pages[:3]
    assert len(pages) == len(set(pages)), pages


def test_the_sandwich_chapter_is_found_once_and_quoted_from_its_text(browser, server):
    found = _results(browser, server, "Sandwich")
    chapter = [r for r in found if r["href"].split("#")[0].endswith("06_sandwich.html")]
    assert len(chapter) == 1 and "Sandwich" in chapter[0]["snippet"]


PAGE = """<html><body><main role="main">
<div class="bd-header-article"><span>.ipynb</span> <span>.pdf</span></div>
<div id="jb-print-docs-body" class="onlyprint"><h1>Sandwich</h1><h2> Contents </h2><nav><ul><li>6.1. Figures</li></ul></nav></div>
<article class="bd-article"><section id="sandwich"><h1>6. Sandwich<a class="headerlink" href="#sandwich">#</a></h1>
<div class="cell docutils container"><div class="cell_input"><pre>scale = default_scale()  # papermill may inject it</pre></div></div>
<p>Sandwich  puts about 60% of its gradient on the last
   $L_{tr}=512$ tokens, beyond <span class="math notranslate nohighlight">\\(L_{tr}\\)</span> too; it costs $ 5 or $6.</p>
<div class="highlight-bash notranslate"><div class="highlight"><pre>python -m rflens reproduce --scale full</pre></div></div>
</section></article></main></body></html>"""


def test_a_snippet_is_the_articles_prose_with_its_tex_as_equations(browser, server):
    """The page text a snippet is cut from (searchtools' ``Search.htmlToText`` as this book sets
    it): the article alone, without header buttons, printed contents or code, its white space
    collapsed, and $...$ turned into an equation MathJax typesets."""
    with Visit(browser, f"{server}/search.html?q=sandwich") as visit:
        text = visit.page.evaluate("html => Search.htmlToText(html, '')", PAGE)
        assert text == ("6. Sandwich Sandwich puts about 60% of its gradient on the last \\(L_{tr}=512\\) tokens, "
                        "beyond \\(L_{tr}\\) too; it costs $ 5 or $6.")
        assert visit.page.evaluate("html => Search.htmlToText(html, '#sandwich')", PAGE) == text


def test_figures_darken_with_the_page_and_leave_a_phones_toolbar_off(browser, server):
    """In dark mode a figure is not a white panel (the book's CSS inverts it with its hues kept),
    and on a phone's width the plotly toolbar, which would cover titles and legends, is hidden."""
    with Visit(browser, f"{server}/book/index.html") as visit:
        figure = visit.page.locator(".js-plotly-plot").first
        assert figure.evaluate("e => getComputedStyle(e).filter") == "none"
        visit.page.evaluate("document.documentElement.dataset.theme = 'dark'")
        assert "invert" in figure.evaluate("e => getComputedStyle(e).filter")
        assert visit.page.locator(".js-plotly-plot .modebar-container").first.evaluate(
            "e => getComputedStyle(e).display") != "none"
        visit.page.set_viewport_size({"width": 390, "height": 800})
        assert visit.page.locator(".js-plotly-plot .modebar-container").first.evaluate(
            "e => getComputedStyle(e).display") == "none"


TITLES_PAST_EDGE_JS = """() => [...document.querySelectorAll('.js-plotly-plot')].flatMap(plot => {
    const box = plot.getBoundingClientRect(), title = plot.querySelector('.gtitle');
    const column = document.querySelector('article.bd-article, main').getBoundingClientRect();
    if (!title || box.width === 0 || !plot.checkVisibility()) return [];  // a closed fold's: not shown
    if (box.right > column.right + 1) return ['figure wider than the column: ' + title.textContent.slice(0, 40)];
    const t = title.getBoundingClientRect();
    return t.left < box.left - 1 || t.right > box.right + 1 ? [title.textContent.slice(0, 60)] : []; })"""


@pytest.mark.parametrize("chapter", ["03_alibi_dissected", "10_long_runs"])
def test_on_a_phone_every_figure_title_fits_its_figure(browser, server, chapter):
    """At 390 px a plotly title is wider than its figure; the book breaks it into lines that
    fit (figure_titles.js); the desktop's titles, as they are, fit too (checked with every chapter above)."""
    page = browser.new_page(viewport={"width": 390, "height": 800})
    try:
        page.route("**/*", lambda route: route.continue_() if urlparse(route.request.url).hostname in (
            "127.0.0.1", "localhost") else route.abort())
        page.goto(f"{server}/book/{chapter}.html", wait_until="load")
        page.wait_for_timeout(1500)
        assert page.evaluate(TITLES_PAST_EDGE_JS) == []
        page.evaluate("() => document.querySelectorAll('details').forEach(d => { d.open = true; })")  # every fold
        page.wait_for_timeout(2500)
        assert page.evaluate(TITLES_PAST_EDGE_JS) == []
        wrapped = page.evaluate("() => [...document.querySelectorAll('.js-plotly-plot .gtitle')]"
                                ".filter(t => t.querySelectorAll('tspan.line').length > 1).length")
        assert wrapped >= 1  # the long titles were broken, not dropped
    finally:
        page.close()
