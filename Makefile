# rflens: two commands do everything on a fresh machine with Python 3.11.
#   make book     set-up, data, the tiny-scale reproduction and the built book
#   make test     set-up, every test and the linter (ruff)
#   make publish  push the built book to the gh-pages branch of REMOTE (default origin)
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
SCALE  ?= tiny

.PHONY: setup browser data book test test-fast lint publish clean

# Python writes a module's bytecode the first time a process imports it, and every later
# process reads it: where the environment sets PYTHONDONTWRITEBYTECODE, each of the many
# processes the book and the tests start would compile every module it imports again.
export PYTHONDONTWRITEBYTECODE :=

# (Re)create the virtual environment when it is missing or older than the requirements.
$(STAMP): requirements.txt pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	@# not compiled here: a module is compiled when first imported (only those a command uses)
	$(PY) -m pip install -q --no-compile -r requirements.txt
	@touch $@

setup: $(STAMP)

# Headless Chromium for the browser test of the built book (Debian packages; needs root).
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null; \
	  else echo "chromium not found: the browser test will be skipped (install Debian's chromium)"; fi; }

data: setup
	$(PY) -m rflens data --corpus all --scale $(SCALE)

book: setup
	$(PY) -m rflens reproduce --scale $(SCALE)

# every core: the tests of one file stay in one process (they share module fixtures)
TEST_WORKERS ?= auto
# the linter runs after the tests, whatever they gave; either failing fails the target
test: setup browser
	@status=0; $(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile || status=$$?; \
	$(PY) -m ruff check . || status=1; exit $$status

lint: setup
	$(PY) -m ruff check .

test-fast: setup
	$(PY) -m pytest -m "not slow and not notebook and not browser"

# The built book of SCALE becomes the files of the gh-pages branch, committed here and pushed
# to REMOTE (a remote's name or a URL) by ghp-import, with a .nojekyll for GitHub Pages.
REMOTE ?= origin
publish:
	@html=$$($(PY) -c "from rflens.publish.reproduce import html_dir; print(html_dir('$(SCALE)'))" 2>/dev/null); \
	test -f "$$html/index.html" || { echo "no built book for SCALE=$(SCALE): run \`make book SCALE=$(SCALE)\` first" >&2; exit 1; }; \
	test -x $(VENV)/bin/ghp-import || { echo "ghp-import is not installed: run \`make setup\`" >&2; exit 1; }; \
	$(VENV)/bin/ghp-import -n -p -f -r "$(REMOTE)" -m "Publish the $(SCALE) book" "$$html"

clean:
	rm -rf _build runs
