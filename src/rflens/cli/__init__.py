"""Command line: ``python -m rflens COMMAND ...`` (``python -m rflens --help`` lists them).

This module parses the arguments; each command is carried out by ``run(args)`` of its own
module in this package (``rflens.cli.train``, ``rflens.cli.evaluate``, ...), which calls the
library and prints. A :class:`rflens.errors.UserError` becomes one line on stderr and exit
code 2. The commands' modules: ``bias``, ``data``, ``train``, ``runs``, ``evaluate``, ``erf``,
``reproduce``, ``explore``, ``emergence``, ``claims``, and ``common`` (what they share).

May import: everything.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from rflens.errors import UserError, missing_dependency
from rflens.paper import ERF_THRESHOLD
from rflens.publish.parallel import EXECUTORS
from rflens.setup.config import CORPORA, WIDE_CORPORA
from rflens.setup.presets import DEFAULT_SCALE, LONG_RUNS, SIZES

# command (and its module in this package) -> one-line help
COMMANDS = {
    "bias": "print each head's bias over distances 0..L-1 for a positional scheme",
    "data": "build the embedded corpora (or load the Pile / local files) and their tokenizers",
    "train": "train a model, or reuse the one already in the run store",
    "runs": "list the models stored in the run store",
    "evaluate": "perplexity at several evaluation lengths (last-token protocol by default)",
    "erf": "receptive-field analysis: normalised gradients, cumulative curve and ERF",
    "reproduce": "execute the book's chapters with papermill at a scale and build the book",
    "claims": "check the paper's claims and print the scoreboard (training and measuring first what the run "
              "store lacks)",
    "explore": "the bias and receptive-field explorers in a browser, with a live kernel (Voila)",
    "emergence": "the long run: train what the shipped bundle lacks, measured as it grows (reference/)",
}
SCALE_HELP = f"a size ({', '.join(SIZES)}) or a long run ({', '.join(LONG_RUNS)}) (default: {DEFAULT_SCALE})"


def _add_model_selectors(p: argparse.ArgumentParser) -> None:
    p.add_argument("--scale", default=DEFAULT_SCALE, help=SCALE_HELP)
    p.add_argument("--pos", default="alibi", help="positional scheme, e.g. alibi, window, sandwich, t5")
    p.add_argument("--corpus", default="prose", help=f"{', '.join(CORPORA + WIDE_CORPORA)} (default: %(default)s)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a setting, e.g. --set window=32 --set train.steps=100 (repeatable)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument("--quiet", action="store_true", help="no progress bars")


def _add_hf_selectors(p: argparse.ArgumentParser, lengths: str | None = None) -> None:
    p.add_argument("--hf", default=None, metavar="PATH_OR_NAME",
                   help="measure a Hugging Face causal LM instead: a folder written by save_pretrained, or a hub "
                        "name in the local cache (--corpus picks the text, --scale the evaluation settings)"
                        + (f"; default lengths {lengths}" if lengths else ""))
    p.add_argument("--text", default=None, metavar="FILE",
                   help="with --hf: a UTF-8 text file to measure on, instead of the --corpus test split")
    p.add_argument("--revision", default=None, help="with --hf and a hub name: the branch, tag or commit")


class _Parser(argparse.ArgumentParser):
    """argparse's own refusals (a wrong flag, a value of the wrong type) in one line, as every
    other error: its usage block runs to eight lines; --help prints it."""

    def error(self, message: str):
        self.exit(2, f"error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="python -m rflens",
        description="rflens: length extrapolation through receptive fields (Chi et al., ACL 2023).",
    )
    parser.add_argument("--schemes", action="append", default=[], metavar="FILE",
                        help="a Python file that registers positional schemes of your own (rflens.register_scheme); "
                             "repeat for several (also: the RFLENS_SCHEMES environment variable)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", title="commands")

    p = sub.add_parser("bias", help=COMMANDS["bias"], description=COMMANDS["bias"])
    p.add_argument("--pos", required=True, help="positional scheme")
    p.add_argument("--heads", type=int, default=12, help="number of heads H (default: %(default)s)")
    p.add_argument("--length", type=int, default=16, help="number of distances L (default: %(default)s)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="model setting, e.g. --set d_bar=256 --set window=8 (repeatable)")
    p.add_argument("--json", action="store_true", help="print {head: [bias at distance 0..L-1]} as JSON")

    p = sub.add_parser("data", help=COMMANDS["data"], description=COMMANDS["data"])
    p.add_argument("--corpus", default="all", help=f"{', '.join(CORPORA + WIDE_CORPORA)}, all (the first three) or wide "
                                                    "(the last three) (default: %(default)s)")
    p.add_argument("--source", default="embedded", help="embedded (default), hub or files")
    p.add_argument("--files", nargs="*", default=[], metavar="PATH", help="text, jsonl or parquet files (--source files)")
    p.add_argument("--vocab-size", type=int, default=8192, help="BPE vocabulary size (default: %(default)s)")
    p.add_argument("--max-bytes", type=int, default=None, help="use only this many bytes of the corpus (a prefix)")
    p.add_argument("--split-seed", type=int, default=0, help="seed of the train/validation/test split (default: %(default)s)")
    p.add_argument("--scale", default=None, help="prepare the data a preset needs (its vocabulary and slice)")
    p.add_argument("--json", action="store_true", help="print the manifest summary as JSON")
    p.add_argument("--quiet", action="store_true", help="no progress bars")

    p = sub.add_parser("train", help=COMMANDS["train"], description=COMMANDS["train"])
    _add_model_selectors(p)
    p.add_argument("--retrain", action="store_true", help="train again even if the run store has this model")

    p = sub.add_parser("runs", help=COMMANDS["runs"], description=COMMANDS["runs"])
    p.add_argument("--json", action="store_true", help="print the list as JSON")
    p.add_argument("--clean", action="store_true",
                   help="remove failed, damaged and stale runs (ones with nothing to resume), then list")
    p.add_argument("--export", default=None, metavar="DIR",
                   help="write every stored model and its cached results as CSV files into DIR")

    p = sub.add_parser("evaluate", help=COMMANDS["evaluate"], description=COMMANDS["evaluate"])
    _add_model_selectors(p)
    p.add_argument("--lengths", default=None, help="comma-separated L_ex values (default: L_tr x 1,2,4,8,16)")
    p.add_argument("--protocol", default=None,
                   help="last_token, non_overlapping or sliding (default: --set protocol=..., else last_token)")
    p.add_argument("--n", type=int, default=None, help="number of segments N (default: the preset's)")
    _add_hf_selectors(p, "L_tr x 1/4, 1/2, 1, 2, 4")

    p = sub.add_parser("erf", help=COMMANDS["erf"], description=COMMANDS["erf"])
    _add_model_selectors(p)
    p.add_argument("--length", type=int, default=None, help="segment length (default: 4 x L_tr; --hf: 2 x L_tr)")
    p.add_argument("--n", type=int, default=None, help="number of segments (default: the preset's)")
    p.add_argument("--threshold", type=float, default=None, help=f"cumulative share that defines the ERF (default {ERF_THRESHOLD})")
    _add_hf_selectors(p)

    p = sub.add_parser("reproduce", help=COMMANDS["reproduce"], description=COMMANDS["reproduce"])
    p.add_argument("--scale", default=DEFAULT_SCALE, help=SCALE_HELP)
    p.add_argument("--chapters", default=None, help="comma-separated chapter numbers, e.g. 03,04 (default: all)")
    p.add_argument("--corpus", default=None, help="restrict corpus-dependent chapters to one corpus")
    p.add_argument("-p", "--parameter", dest="parameters", action="append", default=[], metavar="NAME=VALUE",
                   help="extra notebook parameter (repeatable); unknown names are rejected")
    p.add_argument("--no-build", action="store_true", help="execute the chapters but do not build the HTML book")
    p.add_argument("--rerun", action="store_true",
                   help="execute every chosen chapter, also one whose executed notebook has today's inputs "
                        "(by default it is kept)")
    p.add_argument("--plan", action="store_true",
                   help="print the models the chosen chapters need, which are stored, and the time of the rest "
                        "(measured with a few timed steps); train nothing")
    p.add_argument("--workers", type=int, default=None,
                   help="train the book's missing models first, in this many one-thread processes "
                        "(default: one per core when every chapter runs; 0: train inside the chapters)")
    p.add_argument("--executor", default="processes", choices=EXECUTORS,
                   help="where the models train: processes on this machine (default), submitit jobs on "
                        "Slurm (one job a model, a job array; the run store must be on a shared filesystem), "
                        "or submitit's local executor")
    p.add_argument("--partition", default=None, help="Slurm partition (default: the cluster's)")
    p.add_argument("--gpus-per-job", type=int, default=0, help="GPUs a Slurm job (default: %(default)s)")
    p.add_argument("--time-limit", type=int, default=120, help="minutes a job may run (default: %(default)s)")
    p.add_argument("--max-jobs", type=int, default=None,
                   help="at most this many jobs at once (default: Slurm's limit; local: --workers)")
    p.add_argument("--jobs-dir", default=None,
                   help="folder for the jobs' pickles and logs, readable by every node (default: _build/SCALE/jobs)")
    p.add_argument("--quiet", action="store_true",
                   help="nothing on the terminal but the scoreboard (the log _build/SCALE/reproduce.log is still written)")

    p = sub.add_parser("explore", help=COMMANDS["explore"], description=COMMANDS["explore"])
    p.add_argument("--scale", default=DEFAULT_SCALE, help=SCALE_HELP + "; the receptive fields of its stored models")
    p.add_argument("--port", type=int, default=8866, help="port on 127.0.0.1 (default: %(default)s)")
    p.add_argument("--no-browser", action="store_true", help="do not open a browser")

    p = sub.add_parser("emergence", help=COMMANDS["emergence"], description=COMMANDS["emergence"])
    p.add_argument("--scale", default="long", help="a long-run preset (default: %(default)s)")
    p.add_argument("--only", nargs="+", default=None, metavar="NAME", help="these models of the plan (see --list)")
    p.add_argument("--minutes", type=float, default=None,
                   help="stop after this many minutes, keeping the state of an unfinished model (the next call resumes)")
    p.add_argument("--list", action="store_true", help="the plan: every model, shipped or not, and the cost of the rest")
    p.add_argument("--check", type=int, default=None, metavar="K",
                   help="retrain the first K shipped models from scratch and compare them with the bundle: bitwise "
                        "on a machine like the bundle's, else by the book's verdicts and the seeds' spread of the NLLs")
    p.add_argument("--keep", default=None, metavar="DIR",
                   help="with --check: keep the retrained models' bundles (with weights) in DIR/SCALE/NAME/ instead "
                        "of a temporary folder (not inside reference/)")
    p.add_argument("--adopt", default=None, metavar="DIR",
                   help="join the models a worker shipped to DIR/SCALE/ (its own RFLENS_REFERENCE) to the bundle, "
                        "each checked against its manifest: finished or not, each replacing the bundle's copy it "
                        "continues")
    p.add_argument("--predict", action="store_true",
                   help="a ladder (deep-d128, long-6m, long-3m, long-sotu): seal what each clock of failure "
                        "predicts for every model and size "
                        "into its bundle, before its models train (written once, never rewritten)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")

    p = sub.add_parser("claims", help=COMMANDS["claims"], description=COMMANDS["claims"])
    p.add_argument("--scale", default=DEFAULT_SCALE, help=SCALE_HELP)
    p.add_argument("--corpus", default="prose", help="corpus of the Table 1 experiments (default: %(default)s)")
    p.add_argument("--json", action="store_true", help="print the scoreboard as JSON")
    p.add_argument("--record-speed", action="store_true",
                   help="time the Table 3 schemes' training side by side once and keep it beside the models (claim 16)")
    return parser


def os_error_line(err: OSError) -> str:
    """One line for a fault of the file system, naming the path and the fix."""
    import errno

    if err.filename:
        path = err.filename
    else:
        from rflens.storage import data_dir, runs_dir

        path = f"in {runs_dir(check=False)} or {data_dir()}"
    what = err.strerror or type(err).__name__
    if err.errno == errno.ENOSPC:
        fix = "free some space, or point RFLENS_RUNS / RFLENS_DATA at a larger disk"
    elif err.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        fix = "make it writable, or point RFLENS_RUNS / RFLENS_DATA at a folder you can write"
    elif err.errno in (errno.ENOTDIR, errno.EEXIST, errno.EISDIR):
        fix = "a file stands where a folder is needed (or the reverse): move it, or point RFLENS_RUNS / RFLENS_DATA elsewhere"
    else:
        fix = "check the path"
    return f"{what}: {path}: {fix}"


def _robust_output() -> None:
    """stdout and stderr that write any text: a character the terminal's encoding lacks (a
    path with 雪 under LC_ALL=C) is written as a backslash escape, never a UnicodeEncodeError."""
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure"):
            try:
                stream.reconfigure(errors="backslashreplace")
            except (ValueError, OSError):  # a stream that cannot be reconfigured now: left as it is
                pass


def main(argv: list[str] | None = None) -> int:
    _robust_output()
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.command:
        parser.print_help()
        return 0
    try:
        if args.schemes:
            from rflens.setup.schemes import load_files

            load_files(args.schemes)
        check_reference_env(args)  # a mistyped RFLENS_REFERENCE: one line, before any work
        check_checkout(args)  # an installed package without a clone: where to point it, in one line
        module = importlib.import_module(f"rflens.cli.{args.command}")
        return int(module.run(args) or 0)
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except ModuleNotFoundError as err:  # an optional dependency not installed: the extra that has it
        line = missing_dependency(err)
        if line is None:
            raise
        print(f"error: {line}", file=sys.stderr)
        return 2
    except OSError as err:  # a disk or permission fault: the path and what to do, in one line
        print(f"error: {os_error_line(err)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


# commands that read files shipped only with the repository (not with the installed package)
NEEDS_CHECKOUT = {
    "reproduce": "the book (book/, _toc.yml, _config.yml)",
    "claims": "the book's scheme files (book/schemes/)",
}


def check_checkout(args) -> None:
    """UserError of one line when a command needs a clone of the repository and rflens runs
    from an installed package with none (neither RFLENS_ROOT nor a clone above the working
    directory); ``emergence`` needs the shipped bundles, which RFLENS_REFERENCE may name."""
    import os

    from rflens.storage import is_checkout, package_repo, require_checkout

    if args.command in NEEDS_CHECKOUT:
        require_checkout(NEEDS_CHECKOUT[args.command])
    elif args.command == "emergence" and not os.environ.get("RFLENS_REFERENCE") and not is_checkout(package_repo()):
        raise UserError("the long runs' bundles (reference/) ship with the rflens repository, not with the installed "
                        "package: set RFLENS_REFERENCE to the folder that holds them (reference/ of a clone), or run "
                        "inside a clone of the repository")


def check_reference_env(args) -> None:
    """UserError naming the path when ``$RFLENS_REFERENCE`` names a file (or a file stands
    above it), or a folder that does not exist: every command would read an empty bundle
    from it, and say that nothing is shipped. Only the commands that write a bundle there
    (``emergence`` training, as a worker's own folder, and ``emergence --adopt``) make it."""
    import os
    from pathlib import Path

    env = os.environ.get("RFLENS_REFERENCE")
    if not env:
        return
    path = Path(env).expanduser().absolute()
    for p in (path, *path.parents):
        if p.exists():
            if not p.is_dir():
                raise UserError(f"RFLENS_REFERENCE={env}: {p} is a file, not a folder: point RFLENS_REFERENCE at "
                                "the folder that holds the bundles (long/, long-repeated/), or unset it")
            break
    if path.is_dir():
        return
    writes = args.command == "emergence" and (getattr(args, "adopt", None) is not None or (
        not getattr(args, "list", False) and getattr(args, "check", None) is None))
    if not writes:
        raise UserError(f"RFLENS_REFERENCE={env}: {path} does not exist: point RFLENS_REFERENCE at the folder that "
                        "holds the bundles (long/, long-repeated/), or unset it to read the repository's reference/ "
                        "(a worker's own new folder is made by `emergence` when it trains)")
