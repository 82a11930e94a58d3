"""``python -m rflens reproduce``: execute the book's chapters at a scale, then build the book.

The companion book to Chi et al. (ACL 2023) is a set of output-free notebooks. This
command runs them in batch with papermill, at the chosen preset, and builds the HTML book
from the executed copies with Jupyter Book, execution turned off, so what the reader sees
are exactly the outputs of this run:

1. check the request (scale, chapters, parameters) before running anything: a mistake is
   one line and exit code 2;
2. execute each chosen chapter with papermill, in ``book/`` (the kernel's working folder),
   with ``scale`` (and ``corpus``, ``-p NAME=VALUE``) injected after its ``parameters``
   cell; the executed notebook replaces ``_build/<scale>/notebooks/<chapter>.ipynb``
   atomically;
3. assemble the book's sources in ``_build/<scale>/src``: the configuration, the Markdown
   pages, the chapters executed now, and for the others their executed copy from an
   earlier run or else the unexecuted source;
4. build the HTML with Sphinx and warnings as errors, into ``_build/<scale>/html`` (the
   default ``tiny`` book goes to ``_build/html``), then print the claims scoreboard and
   the path of the index page.

Trained models live in the run store, so a rerun trains nothing, and a chapter whose
inputs are unchanged since it was executed is kept as it is (:mod:`rflens.publish.executed`;
``--rerun`` executes it again).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from urllib.parse import urlsplit

import yaml

from rflens.errors import UserError
from rflens.experiments import from_bundle
from rflens.longrun import plan
from rflens.terminal import LineStream
from rflens.publish.notebook import check_parameters
from rflens.setup import presets
from rflens.setup.config import CORPORA
from rflens.setup.presets import DEFAULT_SCALE  # its book goes to _build/html, the path the README names
from rflens.publish import executed
from rflens.publish.csv_files import CHAPTER_ENV, TABLES_ENV
from rflens.storage import package_repo

ROOT = package_repo()  # the repository the book and the package live in
BOOK = ROOT / "book"
BUILD = ROOT / "_build"
KERNEL = "python3"


CHAPTER_FILES = "[0-9][0-9]*_*.ipynb"  # a chapter's notebook: its key, "_", its name ("10b_paper_depth.ipynb")


def chapter_key(path: Path) -> str:
    """The key that names a chapter on the command line (``--chapters 03,10b``): what its
    file name holds before the first "_" ("01", ..., "10b" for a page that continues 10)."""
    return Path(path).stem.split("_", 1)[0]


def chapters(book: Path = BOOK) -> dict[str, Path]:
    """{"01": book/01_introduction.ipynb, ...}: every numbered chapter notebook, in the book's order."""
    return {chapter_key(path): path for path in sorted(book.glob(CHAPTER_FILES))}


def html_dir(scale: str) -> Path:
    return BUILD / "html" if scale == DEFAULT_SCALE else BUILD / scale / "html"


def log_path(scale: str) -> Path:
    """Where ``reproduce`` writes its progress lines, time-stamped (appended run after run)."""
    return BUILD / scale / "reproduce.log"


def notebooks_dir(scale: str) -> Path:
    return BUILD / scale / "notebooks"


def _select(spec: str | None, available: dict[str, Path]) -> list[str]:
    if not spec:
        return sorted(available)
    chosen = []
    for part in spec.replace(" ", "").split(","):
        if not part:
            continue
        key = part.zfill(2) if part.isdigit() else part
        if key not in available:
            raise UserError(f"unknown chapter {part!r}: choose from {', '.join(sorted(available))} (e.g. --chapters 03,04)")
        if key not in chosen:
            chosen.append(key)
    if not chosen:
        raise UserError("--chapters is empty: give chapter numbers, e.g. --chapters 03,04")
    return chosen


def _typed(text: str):
    """A ``-p`` value typed by papermill's rule for its own ``-p``: True, False and None by
    name, then an int, then a float, else the text itself."""
    named = {"True": True, "False": False, "None": None}
    if text in named:
        return named[text]
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _parse_parameters(pairs: list[str]) -> dict:
    """``["window=8", "corpus=code"]`` -> typed values (as papermill's ``-p``: 8 is an int)."""
    out = {}
    for pair in pairs or ():
        name, sep, text = pair.partition("=")
        name = name.strip()
        if not sep or not name.isidentifier():
            raise UserError(f"bad parameter {pair!r}: expected NAME=VALUE, e.g. -p corpus=code")
        if name == "scale":
            raise UserError("set the scale with --scale, not -p scale=...")
        out[name] = _typed(text)
    return out


def request(scale: str, chapters_spec: str | None = None, parameters: list[str] | None = None,
            corpus: str | None = None) -> dict:
    """Check a request and return {"scale", "chapters": {key: (path, parameters)}, "skipped"}.

    ``chapters_spec``: "03,04" (None: every chapter); ``parameters``: ["NAME=VALUE", ...] for
    the chapters that declare them; ``corpus``: the chapters' corpus (None: their own).

    Raises UserError (one line) for an unknown scale, chapter, corpus or parameter name;
    nothing is executed before this passes.
    """
    presets.get(scale)  # UserError on an unknown scale
    available = chapters()
    if not available:
        raise UserError(f"no chapters found in {BOOK}")
    chosen = _select(chapters_spec, available)
    skipped = {}
    if presets.get(scale).shipped:
        chosen, skipped = shipped_chapters(scale, chosen, named=bool(chapters_spec))
    extra = _parse_parameters(parameters or [])
    if corpus is not None and corpus not in CORPORA:
        raise UserError(f"unknown corpus {corpus!r}: choose one of {', '.join(CORPORA)}")

    import papermill

    declared = {key: set(papermill.inspect_notebook(str(available[key]))) for key in chosen}
    everywhere = set().union(*declared.values())
    for name in extra:
        if name not in everywhere:
            hint = ", ".join(sorted(everywhere)) or "none"
            raise UserError(f"unknown parameter {name!r}: no chosen chapter declares it (their parameters: {hint})")
    if corpus is not None and "corpus" not in everywhere:
        raise UserError("--corpus: none of the chosen chapters takes a corpus parameter")
    out = {}
    for key in chosen:
        names = declared[key]
        params = {"scale": scale} if "scale" in names else {}
        if corpus is not None and "corpus" in names:
            params["corpus"] = corpus
        params.update({k: v for k, v in extra.items() if k in names})
        check_parameters(**{k: v for k, v in params.items() if k != "scale"})  # the chapter's own check
        out[key] = (available[key], params)
    return {"scale": scale, "chapters": out, "skipped": skipped}


def shipped_chapters(scale: str, chosen: list[str], *, named: bool) -> tuple[list[str], dict[str, list[str]]]:
    """At a preset whose models are shipped (nothing is trained): the chosen chapters whose
    models the bundle holds, and {chapter: the models it lacks} for the others. Chapter 9
    reads what is shipped and leaves the rest "not run". A chapter asked for by name that
    cannot be built is a UserError naming the command that trains its models."""
    from rflens.experiments.book_models import CHAPTER_EXPERIMENTS  # the experiments and their models: pandas and torch

    ready, skipped = [], {}
    for key in chosen:
        gaps = [] if key == "09" else from_bundle.missing(presets.get(scale), CHAPTER_EXPERIMENTS.get(key, ()))
        if gaps:
            skipped[key] = gaps
        else:
            ready.append(key)
    if named and skipped:
        key, gaps = next(iter(skipped.items()))
        raise UserError(f"chapter {key} at the {scale} preset needs {len(gaps)} model(s) its shipped bundle lacks "
                        f"({gaps[0]}{', ...' if len(gaps) > 1 else ''}): {shipped_fix(scale, [key])}, or leave out "
                        "--chapters to build the chapters it holds")
    return ready, skipped


def shipped_fix(scale: str, chapters) -> str:
    """What builds ``chapters`` that a shipped preset's bundle cannot: the long run
    (``emergence``) trains the models its plan lists; a chapter that measures weights the
    bundle does not ship is built at a preset that trains (:data:`rflens.setup.presets.DEFAULT_SCALE`)."""
    from rflens.experiments.book_models import CHAPTER_EXPERIMENTS
    from rflens.store import bundle

    weights = [c for c in chapters if any(e not in from_bundle.SERVED_EXPERIMENTS for e in CHAPTER_EXPERIMENTS.get(c, ()))]
    trained = [c for c in chapters if c not in weights]
    parts = []
    base = getattr(presets.get(scale), "extends", None)
    if trained and base:  # a run that extends another trains only its own models further: the chapters are the base's
        parts.append(f"{scale} trains models of the {base} run further and holds no others: "
                     f"`python -m rflens reproduce --scale {base} --chapters {','.join(trained)}` builds chapter(s) "
                     f"{', '.join(trained)} from the {base} bundle")
    elif trained and presets.get(scale).shipped and presets.get(scale).read_only:
        parts.append(f"chapter(s) {', '.join(trained)}: {bundle.restore_fix(scale)}")
    elif trained:
        parts.append(f"`python -m rflens emergence --scale {scale}` trains the models of chapter(s) {', '.join(trained)}")
    if weights:
        parts.append(f"chapter(s) {', '.join(weights)} measure weights the bundle does not ship: "
                     f"`python -m rflens reproduce --scale {presets.DEFAULT_SCALE} --chapters {','.join(weights)}` "
                     "builds them at a preset that trains its models")
    return "; ".join(parts)


def kernel_env() -> dict:
    """A ``python3`` kernelspec that runs this interpreter, first on JUPYTER_PATH, so the
    chapters run in this virtual environment whatever other kernels the user has, with
    their progress bars as text on stderr."""
    spec_root = BUILD / "jupyter"
    spec = spec_root / "kernels" / KERNEL
    spec.mkdir(parents=True, exist_ok=True)
    # first in the kernel: progress bars as text on stderr (rflens.terminal.plain_bars)
    argv = [sys.executable, "-m", "ipykernel_launcher", "--log-level=ERROR",
            "--IPKernelApp.exec_lines=['import rflens.terminal; rflens.terminal.plain_bars()']", "-f", "{connection_file}"]
    text = json.dumps({"argv": argv, "display_name": "Python 3 (rflens)", "language": "python"})
    target = spec / "kernel.json"
    if not target.exists() or target.read_text() != text:
        target.write_text(text)
    paths = [str(spec_root)] + [p for p in os.environ.get("JUPYTER_PATH", "").split(os.pathsep) if p]
    return {"JUPYTER_PATH": os.pathsep.join(paths)}


def execute(key: str, path: Path, params: dict, scale: str, log=None, rerun: bool = False) -> bool:
    """Run one chapter with papermill; the executed notebook replaces the stored one
    atomically. A failing cell raises UserError naming the cell and the saved notebook.
    Unless ``rerun``, a stored notebook executed with today's inputs is kept instead
    (:mod:`rflens.publish.executed`). Returns whether the chapter ran.

    What the chapter writes to stderr (its progress bars, warnings) goes to ``log`` as it
    comes (:class:`rflens.terminal.LineStream`), and is left out of the executed notebook:
    the built page shows results, not the bars that led to them."""
    import papermill
    from papermill.exceptions import PapermillExecutionError

    stream = LineStream(log, f"chapter {key}: ") if log is not None else None
    tables = notebooks_dir(scale) / "tables"
    out_dir = notebooks_dir(scale)
    final = out_dir / path.name
    if not rerun and executed.reusable(path, final, params, scale, tables):
        return False
    for old in tables.glob(f"{path.stem}-table*.csv"):  # this run writes the chapter's tables anew
        old.unlink()
    os.environ[TABLES_ENV], os.environ[CHAPTER_ENV] = str(tables), path.stem  # read by the chapter's kernel

    out_dir.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=out_dir, prefix=f".{path.stem}.tmp.", suffix=".ipynb")
    os.close(fd)
    try:
        papermill.execute_notebook(str(path), tmp, parameters=params, kernel_name=KERNEL, cwd=str(BOOK),
                                   progress_bar=False, log_output=False, request_save_on_cell_execute=False,
                                   stderr_file=stream)
    except PapermillExecutionError as err:
        failed = out_dir / f"{path.stem}.failed.ipynb"
        os.replace(tmp, failed)
        raise UserError(f"chapter {key} failed in cell {err.exec_count}: {err.ename}: {err.evalue.splitlines()[0] if err.evalue else ''}"
                        f" (executed notebook: {failed})") from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    drop_stderr(Path(tmp))
    executed.stamp(Path(tmp), executed.inputs(path, params, scale), executed.tables_of(tables, path.stem))
    os.replace(tmp, final)
    (out_dir / f"{path.stem}.failed.ipynb").unlink(missing_ok=True)
    return True


def changes(scale: str, chapters: dict) -> dict[str, list[str]]:
    """For each chapter of a request (``{key: (path, parameters)}``), what changed since its
    executed notebook was executed (:func:`rflens.publish.executed.changed`); an empty list:
    it has today's inputs and tables, and is kept."""
    out_dir = notebooks_dir(scale)
    return {key: executed.changed(path, out_dir / path.name, params, scale, out_dir / "tables")
            for key, (path, params) in chapters.items()}


def drop_stderr(path: Path) -> int:
    """Remove the stderr outputs (progress bars, warnings) of an executed notebook, and the
    state of its widgets, in place (:func:`rflens.publish.executed.for_the_page`). Returns how many outputs were removed."""
    import nbformat

    nb = nbformat.read(str(path), as_version=4)
    had_widgets = "widgets" in nb.metadata
    removed = executed.for_the_page(nb)
    if removed or had_widgets:
        nbformat.write(nb, str(path))
    return removed


def assemble(scale: str) -> Path:
    """The book's sources for this scale in _build/<scale>/src (rebuilt each time; file
    times are kept, so Sphinx re-reads only what changed). Its _config.yml is
    :func:`book_config`; without a repository URL one line on stderr says so."""
    src = BUILD / scale / "src"
    staging = BUILD / scale / ".src.tmp"
    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir(parents=True)
    config = book_config()
    if not config["repository"]["url"]:
        print("repository URL not set: the book is built without repository and launch buttons "
              "(set RFLENS_REPOSITORY=https://github.com/OWNER/REPO)", file=sys.stderr)
    (staging / "_config.yml").write_text(yaml.safe_dump(config, sort_keys=False, allow_unicode=True))
    shutil.copy2(ROOT / "_toc.yml", staging / "_toc.yml")
    shutil.copytree(BOOK, staging / "book", copy_function=shutil.copy2,
                    ignore=shutil.ignore_patterns("*.ipynb", ".ipynb_checkpoints", "__pycache__"))
    if config["repository"]["url"]:  # the book has launch buttons: the chapters' note on live kernels names them
        shutil.copy2(BOOK / "_snippets" / "live_kernel_launch.md", staging / "book" / "_snippets" / "live_kernel.md")
    write_this_build(staging / "book" / "index.md", scale, downloads=bundle_downloads(staging / "book"))
    executed = notebooks_dir(scale)
    for key, path in chapters().items():
        done = executed / path.name
        _copy_for_book(done if done.exists() else path, staging / "book" / path.name)
    if src.exists():
        shutil.rmtree(src)
    os.replace(staging, src)
    return src


DOWNLOADS = "downloads"  # the book's folder of the shipped bundles as zip files


def bundle_downloads(book: Path) -> dict[str, Path]:
    """Each shipped bundle that holds a model, zipped into ``book/downloads`` for the index's
    download links: {preset: zip file}."""
    from rflens.store import bundle

    out = {}
    for name in presets.NAMES:
        if presets.get(name).shipped and bundle.entries(name):
            folder = book / DOWNLOADS
            folder.mkdir(parents=True, exist_ok=True)
            out[name] = Path(shutil.make_archive(str(folder / f"rflens-{name}"), "zip", bundle.bundle_dir(name).parent,
                                                 name))
    return out


def write_this_build(index: Path, scale: str, downloads: dict[str, Path] | None = None) -> None:
    """Put the first screen (:func:`rflens.readings.first_screen`, then the key figure) and the
    "this build" box (:func:`rflens.readings.this_build`) under the index page's title: what
    the book finds at each scale, the model, ALiBi's Δ sweep in the long run, the scoreboard
    this build computed and the long run's state."""
    import torch

    from rflens.store import bundle
    from rflens.claims import scoreboard, statements  # pandas and torch: only when a book is built
    from rflens.figures.render import figure_html
    from rflens.model.transformer import TransformerLM
    from rflens.readings import claims_at_each_scale, first_screen, reading_notes, this_build, under_the_figure

    if scale not in presets.NAMES:
        return  # a build folder that is not a preset's has no scale to describe
    try:
        board = scoreboard.load_scoreboard(scale)
        counts, trained = scoreboard.summary(board), scoreboard.summary(board, statements.TRAINED)
    except (UserError, OSError, ValueError, KeyError):
        board = counts = trained = None  # chapter 9 was not executed in this build
    long = presets.BOOK_LONG
    long_run = presets.long_run(long)
    try:  # read from the bundles, nothing trained
        boards = scoreboard.shipped_boards(exclude=scale)
    except (UserError, OSError, ValueError, KeyError):
        boards = {}
    second = None
    if long != "long":  # the second run, while the chapters read the first
        planned = [s.name for s in plan.models(presets.get("long"))]
        second = (len(bundle.complete("long") & set(planned)), len(planned))
    params = {}
    for preset in dict.fromkeys((scale, long)):
        if preset == long and presets.get(long).model == presets.get(scale).model:
            continue  # the long run trains this build's model: said once
        with torch.device("meta"):  # the parameters counted, none allocated
            model = TransformerLM(presets.get(preset).model)
        params[preset] = (model.num_params(non_embedding=False), model.num_params())
    table = bundle.table(long)
    from rflens.longrun import forecast
    from rflens.longrun.compare import DEEP, depths, sweep_ends

    runs = (long, DEEP) if DEEP in presets.LONG_RUNS and long != DEEP else (long,)
    ends = sweep_ends(runs)
    first = first_screen(boards, depths(long, DEEP) if len(runs) > 1 else None)
    figure = "" if ends.empty else f"```{{raw}} html\n{figure_html(key_figure(ends))}\n```\n\n"
    figure += under_the_figure(boards, ends, forecast.outcome(long)) + "\n"
    box = this_build(scale, counts, table, len(plan.models(long_run)), trained, second,
                     {name: (path.relative_to(index.parent).as_posix(), path.stat().st_size)
                      for name, path in (downloads or {}).items()})
    title, _, rest = index.read_text().partition("\n")
    claims, notes = claims_at_each_scale(scale, board, boards), reading_notes(scale, params)
    index.write_text(f"{title}\n\n{first}\n{figure}{claims}\n{notes}\n{box}{rest}")


def key_figure(ends):
    """The index page's key figure: the two ends of ALiBi's Δ sweep at both depths as they grow
    (rows of :func:`rflens.longrun.compare.sweep_ends`), each curve named by the paper's Δ and
    the depth."""
    from rflens.figures import results as fr

    return fr.emergence_figure(ends, title="The paper's steepest and flattest ALiBi slopes at 4 and 12 layers")


def book_config() -> dict:
    """The book's ``_config.yml`` with its repository filled in from ``$RFLENS_REPOSITORY``,
    else from the file's ``repository.url``.

    With a URL the book gets the repository button and the Binder launch button (and Colab's,
    which opens GitHub only). Without one it gets no repository or launch button at all:
    each would link to an address that does not exist. Raises UserError (one line) for a URL
    the book theme cannot turn into links.
    """
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    repo, html = config.setdefault("repository", {}), config.setdefault("html", {})
    url = (os.environ.get("RFLENS_REPOSITORY") or repo.get("url") or "").strip().rstrip("/").removesuffix(".git")
    repo["url"] = url
    if not url:
        config.pop("launch_buttons", None)
        for button in ("use_repository_button", "use_edit_page_button", "use_issues_button"):
            html[button] = False
        return config
    parts = urlsplit(url)
    host = parts.netloc.lower()
    if parts.scheme not in ("https", "http") or not any(p in host for p in ("github", "gitlab", "bitbucket")) \
            or len(parts.path.strip("/").split("/")) < 2:
        raise UserError(f"repository URL {url!r} is not a GitHub, GitLab or Bitbucket repository: "
                        "set RFLENS_REPOSITORY=https://github.com/OWNER/REPO (or leave it empty)")
    html["use_repository_button"] = True
    config["launch_buttons"] = {"notebook_interface": "jupyterlab", "binderhub_url": "https://mybinder.org"}
    if "github" in host:
        config["launch_buttons"]["colab_url"] = "https://colab.research.google.com"
    return config


def _fold_setup(cells) -> None:
    """Fold a chapter's set-up away on its page: the parameters cell and the set-up cell after
    it (imports, ``setup(...)``; nothing to show) are hidden behind a toggle, and the cell
    papermill injects, which repeats the parameters with the values of this build, is left
    out (the page says its scale elsewhere)."""
    code = [c for c in cells if c.cell_type == "code"]
    for i, cell in enumerate(code):
        tags = cell.metadata.setdefault("tags", [])
        if "injected-parameters" in tags:
            tags.append("remove-cell")
        elif "parameters" in tags:
            tags.append("hide-input")
            after = code[i + 1] if i + 1 < len(code) else None
            if after is not None and "injected-parameters" in after.metadata.get("tags", []):
                after = code[i + 2] if i + 2 < len(code) else None
            shown = [o for o in (after.get("outputs", []) if after is not None else [])
                     if not (o.get("output_type") == "stream" and o.get("name") == "stderr")]
            if after is not None and not shown:
                after.metadata.setdefault("tags", []).append("hide-input")


def _copy_for_book(source: Path, target: Path) -> None:
    """Copy a notebook into the book's sources, keeping one figure format per output, with
    its set-up folded away (:func:`_fold_setup`).

    A plotly output holds the figure twice: as ``text/html`` (what the static book shows)
    and as plotly's JSON mime type (what a live Jupyter draws). The book builder has no
    renderer for the second and would warn about every figure, so the copy drops it where
    ``text/html`` is present; an output with only the JSON still reaches the builder (and
    fails the build, since a page without its figure is an error). The file time is kept.
    """
    import nbformat

    from rflens.figures.render import PLOTLY_MIME

    nb = nbformat.read(source, as_version=4)
    _fold_setup(nb.cells)
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            if PLOTLY_MIME in data and "text/html" in data:
                del data[PLOTLY_MIME]
    nbformat.write(nb, target)
    shutil.copystat(source, target)


def build(scale: str, *, quiet: bool = False) -> Path:
    """Build the HTML book of this scale with warnings as errors; returns the html folder."""
    src = assemble(scale)
    out = html_dir(scale)
    doctrees = BUILD / scale / "doctrees"
    bindir = Path(sys.executable).parent
    jb = shutil.which("jupyter-book", path=str(bindir)) or shutil.which("jupyter-book")
    if jb is None:
        raise UserError("jupyter-book is not installed: run `make setup` (or pip install -r requirements.txt)")
    # conf.py from _config.yml / _toc.yml, then Sphinx itself: the same as `jupyter-book
    # build`, with the output folders where this command wants them
    subprocess.run([jb, "config", "sphinx", str(src)], check=True, capture_output=True, text=True)
    cmd = [sys.executable, "-m", "sphinx", "-b", "html", "-W", "--keep-going", "-d", str(doctrees), str(src), str(out)]
    if quiet:
        cmd.insert(3, "-q")
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        log = BUILD / scale / "sphinx.log"
        log.write_text(proc.stdout + proc.stderr)
        problems = [ln for ln in (proc.stdout + proc.stderr).splitlines() if "WARNING" in ln or "ERROR" in ln]
        first = problems[0] if problems else (proc.stderr.strip().splitlines() or ["(no message)"])[-1]
        raise UserError(f"the book did not build ({len(problems)} warnings/errors; first: {first}); full log: {log}")
    tables = notebooks_dir(scale) / "tables"  # the chapters' CSV files, where their pages link them
    if tables.is_dir():
        shutil.copytree(tables, out / "book" / "tables", dirs_exist_ok=True)
    return out


def scoreboard_text(scale: str, corpus: str | None) -> str:
    try:
        from rflens.claims import scoreboard
    except ImportError:
        return "(no scoreboard module: skipped)"
    try:
        return scoreboard.render_scoreboard(scale, corpus or "prose")
    except UserError as err:
        return f"(no scoreboard: {err})"
