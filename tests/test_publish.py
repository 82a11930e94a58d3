"""Publishing the book: the repository URL is one setting (empty: no buttons pointing
anywhere), ``make publish`` pushes the built HTML to a ``gh-pages`` branch, and the
GitHub Actions workflow builds the tiny book as ``make book`` does and deploys it to Pages."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import uuid

import pytest
import yaml
from jupyter_book.config import get_final_config

from rflens.errors import UserError
from rflens.publish import reproduce

ROOT = reproduce.ROOT
WORKFLOW = ROOT / ".github" / "workflows" / "book.yml"
LAUNCH_URLS = ("binderhub_url", "jupyterhub_url", "colab_url", "deepnote_url", "jupyterlite_url")
BUTTONS = ("use_repository_button", "use_edit_page_button", "use_issues_button")


def _theme_options(config) -> dict:
    """What the book theme receives from a _config.yml (a dict or a path): Jupyter Book's
    own translation, with its defaults filled in."""
    sphinx, _ = get_final_config(user_yaml=config, cli_config={"latex_individualpages": False},
                                 use_external_toc=False, raise_on_invalid=True)
    return sphinx["html_theme_options"]


def _assert_no_buttons(options: dict) -> None:
    assert not options.get("repository_url")
    assert not any(options.get(b) for b in BUTTONS)
    launch = options.get("launch_buttons", {})
    assert not any(launch.get(k) for k in LAUNCH_URLS) and not launch.get("thebe")


# ----------------------------------------------------------------------------- the URL setting

def test_the_repository_config_renders_no_buttons_in_a_plain_jupyter_book_build():
    _assert_no_buttons(_theme_options(ROOT / "_config.yml"))


def test_without_a_url_the_book_has_no_repository_or_launch_buttons(monkeypatch):
    monkeypatch.delenv("RFLENS_REPOSITORY", raising=False)
    config = reproduce.book_config()
    assert config["repository"]["url"] == "" and "launch_buttons" not in config
    _assert_no_buttons(_theme_options(config))


def test_a_url_points_the_repository_and_launch_buttons_there(monkeypatch):
    monkeypatch.setenv("RFLENS_REPOSITORY", "https://github.com/someone/rflens-book.git/")
    options = _theme_options(reproduce.book_config())
    assert options["repository_url"] == "https://github.com/someone/rflens-book"
    assert options["use_repository_button"] is True
    launch = options["launch_buttons"]
    assert launch["binderhub_url"] == "https://mybinder.org"
    assert launch["colab_url"] == "https://colab.research.google.com"


def test_the_published_build_gets_the_repository_button_and_binder_and_colab(monkeypatch):
    """As the Pages workflow builds it: $RFLENS_REPOSITORY set to the repository's address."""
    env = yaml.safe_load(WORKFLOW.read_text())["jobs"]["build"]["env"]
    assert "RFLENS_REPOSITORY" in env
    monkeypatch.setenv("RFLENS_REPOSITORY", "https://github.com/someone/rflens-book")
    config = reproduce.book_config()
    assert config["repository"]["url"] == "https://github.com/someone/rflens-book"
    assert config["repository"]["branch"] and "path_to_book" in config["repository"]
    assert config["html"]["use_repository_button"] is True
    assert config["launch_buttons"]["binderhub_url"] == "https://mybinder.org"
    assert config["launch_buttons"]["colab_url"] == "https://colab.research.google.com"
    # the chapters are where the launch buttons look for them: path_to_book + the page's name
    assert all((ROOT / config["repository"]["path_to_book"] / entry).with_suffix(".ipynb").exists()
               for entry in _chapters_in_toc())


def _chapters_in_toc() -> list[str]:
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = []

    def walk(node):
        if isinstance(node, dict):
            if "file" in node and str(node["file"]).split("/")[-1][:2].isdigit():
                files.append(str(node["file"]))
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(toc)
    assert files
    return files


def test_colab_is_offered_for_github_only(monkeypatch):
    monkeypatch.setenv("RFLENS_REPOSITORY", "https://gitlab.com/someone/rflens-book")
    launch = reproduce.book_config()["launch_buttons"]
    assert launch["binderhub_url"] and "colab_url" not in launch


@pytest.mark.parametrize("url", ["rflens", "ftp://github.com/a/b", "https://github.com/only-owner",
                                 "https://example.org/a/b"])
def test_a_url_the_theme_cannot_link_is_one_line_naming_the_setting(monkeypatch, url):
    monkeypatch.setenv("RFLENS_REPOSITORY", url)
    with pytest.raises(UserError, match="RFLENS_REPOSITORY=") as err:
        reproduce.book_config()
    assert "\n" not in str(err.value)


@pytest.fixture
def scale():
    """A scale name of this test alone, so that its _build/<scale> never meets a real book."""
    name = f"test-publish-{uuid.uuid4().hex[:8]}"
    yield name
    shutil.rmtree(reproduce.BUILD / name, ignore_errors=True)


def test_the_assembled_book_gets_the_effective_config_and_one_notice(monkeypatch, capsys, scale):
    monkeypatch.delenv("RFLENS_REPOSITORY", raising=False)
    src = reproduce.assemble(scale)
    notice = [ln for ln in capsys.readouterr().err.splitlines() if ln]
    assert len(notice) == 1 and "repository URL not set" in notice[0] and "RFLENS_REPOSITORY=" in notice[0]
    _assert_no_buttons(_theme_options(src / "_config.yml"))
    # the chapters' note on live kernels names no launch button the page does not have
    assert "launch button" not in (src / "book" / "_snippets" / "live_kernel.md").read_text()

    monkeypatch.setenv("RFLENS_REPOSITORY", "https://github.com/someone/rflens-book")
    src = reproduce.assemble(scale)
    assert capsys.readouterr().err == ""
    written = yaml.safe_load((src / "_config.yml").read_text())
    assert written["repository"]["url"] == "https://github.com/someone/rflens-book"
    assert written["html"]["use_repository_button"] is True
    assert "launch button at the top" in (src / "book" / "_snippets" / "live_kernel.md").read_text()


# ----------------------------------------------------------------------------- make publish

def _make(*args, env=None):
    clean = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    return subprocess.run(["make", "--no-print-directory", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, env={**clean, **(env or {})})


def _git(*args, **kw):
    return subprocess.run(["git", *args], check=True, capture_output=True, text=True, **kw).stdout


needs_tools = pytest.mark.skipif(not (shutil.which("make") and shutil.which("git")), reason="needs make and git")


@needs_tools
def test_make_publish_pushes_the_built_book_to_a_gh_pages_branch(tmp_path, scale):
    html = reproduce.html_dir(scale)
    for name, text in {"index.html": "<h1>rflens</h1>", "book/01_introduction.html": "<p>1</p>",
                       "_static/book.css": "p {}"}.items():
        (html / name).parent.mkdir(parents=True, exist_ok=True)
        (html / name).write_text(text)
    bare = tmp_path / "pages.git"
    _git("init", "-q", "--bare", str(bare))
    # ghp-import commits in the repository it runs in: GIT_DIR makes that a scratch one
    scratch = tmp_path / "scratch"
    _git("init", "-q", str(scratch))
    ours = _git("for-each-ref", cwd=ROOT)
    env = {"GIT_DIR": str(scratch / ".git"), "GIT_COMMITTER_NAME": "rflens test",
           "GIT_COMMITTER_EMAIL": "test@rflens.invalid"}

    proc = _make("publish", f"SCALE={scale}", f"REMOTE={bare}", env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    files = _git("--git-dir", str(bare), "ls-tree", "-r", "--name-only", "gh-pages").split()
    assert sorted(files) == [".nojekyll", "_static/book.css", "book/01_introduction.html", "index.html"]
    assert _git("--git-dir", str(bare), "show", "gh-pages:index.html") == "<h1>rflens</h1>"

    (html / "index.html").write_text("<h1>rflens, again</h1>")  # a second publish replaces the page
    assert _make("publish", f"SCALE={scale}", f"REMOTE={bare}", env=env).returncode == 0
    assert _git("--git-dir", str(bare), "show", "gh-pages:index.html") == "<h1>rflens, again</h1>"
    assert _git("for-each-ref", cwd=ROOT) == ours  # the checkout's own branches are untouched


@needs_tools
def test_make_publish_without_a_built_book_refuses_in_one_line(scale):
    proc = _make("publish", f"SCALE={scale}", "REMOTE=/nonexistent")
    assert proc.returncode != 0
    ours = [ln for ln in proc.stderr.splitlines() if not ln.startswith("make: ***")]
    assert len(ours) == 1 and f"make book SCALE={scale}" in ours[0], proc.stderr
    assert proc.stdout == ""


# ----------------------------------------------------------------------------- the workflow

def _workflow() -> dict:
    return yaml.safe_load(WORKFLOW.read_text())


def _steps(job: dict) -> list[dict]:
    return job["steps"]


def _uses(job: dict, action: str) -> list[dict]:
    return [s for s in _steps(job) if s.get("uses", "").split("@")[0] == action]


def test_the_workflow_runs_on_push_to_main_and_by_hand():
    triggers = _workflow()[True]  # YAML 1.1 reads the key `on` as true
    assert triggers["push"]["branches"] == ["main"] and "workflow_dispatch" in triggers


def test_the_workflow_builds_the_tiny_book_with_the_run_store_cached_on_the_code_version():
    build = _workflow()["jobs"]["build"]
    assert build["env"]["RFLENS_REPOSITORY"] == "${{ github.server_url }}/${{ github.repository }}"
    assert _uses(build, "actions/checkout")
    (python,) = _uses(build, "actions/setup-python")
    assert str(python["with"]["python-version"]) == "3.11"

    steps = _steps(build)
    (code,) = [s for s in steps if "code_version()" in s.get("run", "")]
    (store,) = [s for s in _uses(build, "actions/cache") if s["with"]["path"].split() == ["runs"]]
    assert f"steps.{code['id']}.outputs.version" in store["with"]["key"]
    (book,) = [s for s in steps if s.get("run") == "make book"]
    assert steps.index(code) < steps.index(store) < steps.index(book)

    (upload,) = _uses(build, "actions/upload-pages-artifact")
    assert (ROOT / upload["with"]["path"]).resolve() == reproduce.html_dir("tiny")


def test_the_workflow_deploys_to_github_pages():
    deploy = _workflow()["jobs"]["deploy"]
    assert deploy["needs"] == "build"
    assert deploy["permissions"] == {"pages": "write", "id-token": "write"}
    assert deploy["environment"]["name"] == "github-pages"
    assert _uses(deploy, "actions/deploy-pages")


def test_the_workflow_runs_only_make_targets_that_exist():
    targets = set(re.findall(r"^([A-Za-z][\w-]*):", (ROOT / "Makefile").read_text(), re.M))
    called = set()
    for job in _workflow()["jobs"].values():
        for step in _steps(job):
            called |= set(re.findall(r"\bmake\s+([A-Za-z][\w-]*)", step.get("run", "")))
    assert called and called <= targets, called - targets


# ----------------------------------------------------------------------------- the references

def test_every_reference_links_its_work():
    """Each entry of book/references.bib carries an address the references page links: a DOI,
    an arXiv id (eprint) or a URL."""
    entries = re.findall(r"@\w+\{([^,]+),(.*?)\n\}", (ROOT / "book" / "references.bib").read_text(), flags=re.S)
    assert len(entries) >= 10
    unlinked = [key for key, body in entries if not re.search(r"^\s*(doi|eprint|url)\s*=", body, flags=re.M)]
    assert unlinked == []
    for key, body in entries:
        eprint = re.search(r"^\s*eprint\s*=\s*\{([^}]*)\}", body, flags=re.M)
        assert eprint is None or re.fullmatch(r"\d{4}\.\d{4,5}", eprint[1]), key
