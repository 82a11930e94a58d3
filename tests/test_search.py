"""The built book's search page in a browser (the smoke book and the fixtures of test_browser):
one result a page, snippets from the article's prose, equations typeset."""

from __future__ import annotations

import pytest

from test_browser import book, browser, server, Visit  # noqa: F401 (fixtures)

pytestmark = pytest.mark.browser

# what no snippet may quote: the page's header buttons and printed table of contents, a code
# cell (the parameters cell's comment), a shell command, TeX source
NOT_PROSE = (".pdf", ".ipynb", "Contents", "papermill may inject it", "default_scale", "python -m rflens reproduce",
             "$", "\\(", "\\)")

RESULTS_JS = """items => items.map(li => {
    const a = li.querySelector('a'), p = li.querySelector('p.context');
    return {href: a.getAttribute('href'), title: a.textContent, snippet: p ? p.textContent : '',
            math: p ? p.querySelectorAll('mjx-container').length : 0}; })"""


def _results(browser, server, query: str) -> list[dict]:
    """Each result of ``query`` once its snippet is in and MathJax has typeset it."""
    with Visit(browser, f"{server}/search.html?q={query}") as visit:
        page = visit.page
        page.wait_for_selector("#search-results li", timeout=30_000)
        # every result's snippet fetched, and no equation left as TeX (if one is, the test says so)
        try:
            page.wait_for_function("""() => { const r = document.getElementById('search-results');
                const items = r.querySelectorAll('li'), snippets = r.querySelectorAll('li p.context');
                return Search._pulse_status < 0 && items.length === snippets.length &&
                    Array.from(snippets).every(p => !p.textContent.includes('\\\\(')); }""", timeout=30_000)
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
