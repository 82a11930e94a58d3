"""``python -m rflens emergence``: train the long run's models the bundle lacks, in order."""

from __future__ import annotations

import math
import time

from rflens.errors import UserError
from rflens.longrun import emergence, plan, recheck
from rflens.setup import presets
from rflens.setup.presets import LongRun
from rflens.store import bundle
from rflens.store.shipped import kept, one_core_cost, one_core_minutes, one_core_speed
from rflens.training.trainer import OutOfTime


def _deadline(minutes: float | None) -> float | None:
    """The wall-clock end of a sitting of ``minutes`` (None: no limit); a positive finite
    number or a one-line error."""
    if minutes is None:
        return None
    if not math.isfinite(minutes) or minutes <= 0:
        raise UserError(f"--minutes must be a positive finite number of minutes, not {minutes}")
    return time.time() + 60 * minutes


def _adopt(args, run: LongRun) -> int:
    """Join every model of ``args.adopt``/RUN/ (the selection of --only, if given) that the
    bundle lacks or holds at fewer sizes, finished or not, to the bundle."""
    from pathlib import Path

    if args.list or args.check is not None or args.minutes is not None:
        raise UserError("--adopt joins models another folder holds: give it without --list, --check or --minutes")
    if run.read_only:
        raise UserError(f"the {run.name} bundle is a read-only control: nothing joins it")
    top = Path(args.adopt).expanduser() / run.name
    if not top.is_dir():
        raise UserError(f"{top} does not exist: give the folder a worker had as RFLENS_REFERENCE (it holds {run.name}/)")
    wanted = set(dict.fromkeys(args.only)) if args.only else None
    have = bundle.entries(run.name)
    joined = 0
    # a hidden folder is a writer's (.NAME.adopting, .NAME.replaced), never a model the worker shipped
    for folder in sorted(p for p in top.iterdir()
                         if not p.name.startswith(".") and p.is_dir() and (p / bundle.MANIFEST).is_file()):
        if wanted is not None and folder.name not in wanted:
            continue
        result = bundle.read_result(folder)
        elsewhere = False  # a retraining on another machine that the check's rule accepts, with more kept
        if folder.name in have and not (bundle.further(bundle.read_result(have[folder.name]), result)
                                        or bundle.reproduces(have[folder.name], folder)):
            elsewhere = recheck.reproduced_elsewhere(have[folder.name], folder, run)
            if not elsewhere:
                continue  # joined already, or no further along than the bundle's (nor a retraining with more kept)
        if result.get("name") != folder.name:
            raise UserError(f"{folder} holds a model named {result.get('name')!r}: a model joins under its own name")
        plan.check_planned(result, run, folder)
        again = folder.name in have and bundle.read_result(have[folder.name])["complete"]  # then it reproduces it
        state = ("retrained on another machine and reproduced by the check's rule (the verdicts, the NLL differences "
                 "within the seeds' spread), with more kept: its numbers replace the shipped ones" if elsewhere
                 else "retrained to the bit, with more kept" if again
                 else "finished" if result["complete"] else f"unfinished, {len(result['points'])} sizes measured")
        print(f"{folder.name} ({state}): joined the bundle in {bundle.adopt(run.name, folder, reproduced=elsewhere)}")
        joined += 1
    print(f"{joined} model(s) joined the {run.name} bundle")
    return 0


def _predict(args, run: LongRun) -> int:
    """Seal the ladder's predictions (:mod:`rflens.longrun.clock`) into its bundle."""
    from rflens.longrun import clock

    if args.list or args.check is not None or args.minutes is not None or args.only or args.adopt is not None:
        raise UserError("--predict seals a ladder's predictions: give it with --scale alone")
    clock.base_of(run)  # a run that is no ladder: one line
    trained = [name for name, path in bundle.entries(run.name).items() if bundle.read_result(path)["points"]]
    if trained:
        raise UserError(f"{run.name} has measured models ({', '.join(trained)}): predictions are sealed before "
                        "any model of the ladder is joined to its bundle")
    out = clock.seal(run)
    print(f"sealed {len(out['models'])} models' predictions at {len(plan.sizes(run))} sizes into "
          f"{bundle.bundle_dir(run.name) / clock.PREDICTIONS}; commit it before the ladder's models are joined")
    return 0


def run(args) -> int:
    run = presets.long_run(args.scale)  # resolved once: every step below is handed the run itself
    if getattr(args, "predict", False):
        return _predict(args, run)
    specs = plan.models(run)
    if args.only:
        specs = [plan.named(name, run) for name in dict.fromkeys(args.only)]  # a name given twice: once
    have, started = bundle.complete(run.name), set(bundle.entries(run.name))
    # the plan's order, a model already measured at some sizes first: a sitting finishes what one began
    todo = sorted((spec for spec in specs if spec.name not in have), key=lambda spec: spec.name not in started)
    if getattr(args, "adopt", None) is not None:
        return _adopt(args, run)
    if args.list:
        _deadline(args.minutes)  # refused here too, not ignored
        if args.check is not None:
            raise UserError("--list shows the plan and --check retrains shipped models: give one of them")
        at = one_core_speed(run.name)
        need = dict(zip([s.name for s in todo], one_core_minutes(todo, run, at, resumed=True) or []))
        if todo and run.read_only:  # nothing trains into a control: its models are missing
            for spec in specs:
                print(f"{'shipped' if spec.name in have else 'missing':9s} {spec.name}")
            print(f"{len(todo)} missing: {bundle.restore_fix(run.name)}")
            return 0
        why = plan.reasons(run)
        for spec in specs:
            state = "shipped" if spec.name in have else "to train"
            when = f"  about {need[spec.name]:.0f} min" if spec.name in need else ""
            step, measured = kept(run.name, spec.name) if spec.name not in have else (0, ())
            if step or measured:  # a sitting stopped it: the next one resumes it
                when += f"  resumes at step {step:,}, {len(measured)} size(s) measured"
            print(f"{state:9s} {spec.name}{when}" + (f"  ({why[spec.name]})" if spec.name in why else ""))
        print(f"{len(todo)} to train: {one_core_cost(todo, run, at, resumed=True)}" if todo
              else f"nothing to train: the bundle holds every model of the plan ({len(specs)})")
        return 0
    deadline = _deadline(args.minutes)
    keep = getattr(args, "keep", None)
    if keep is not None and args.check is None:
        raise UserError("--keep keeps the models a check retrains: give --check K as well")
    if args.check is not None:
        shipped = [spec for spec in specs if spec.name in have]
        if not shipped:
            raise UserError(f"no complete model is shipped in {bundle.bundle_dir(run.name)} to check")
        if args.check <= 0 or args.check > len(shipped):
            raise UserError(f"--check needs a number of models from 1 to {len(shipped)} (the shipped models of the "
                            f"selection; --only chooses them, --list shows them), not {args.check}")
        chosen = shipped[:args.check]
        if keep is not None:
            keep = recheck.keep_folder(keep, run.name)  # a folder inside reference/ is refused before any training
        recheck.check_data([spec.name for spec in chosen], run, progress=not args.quiet)  # other data: refused now
        print(f"retraining {len(chosen)} shipped model(s) to check them: {one_core_cost(chosen, run)}"
              + ("" if deadline is None else f"; this sitting stops after {args.minutes:g} minutes")
              + ("" if keep is None else f"; kept in {keep}"), flush=True)
        try:
            rows = recheck.check([spec.name for spec in chosen], run, progress=not args.quiet,
                                      deadline=deadline, keep=keep)
        except OutOfTime as stop:  # not checked: 0 would say every model was reproduced
            print(f"out of time at step {stop.args[0]} of a check, which is not finished (exit 3); its state is kept, "
                  "run the same command to resume")
            return 3
        for r in rows:
            print(recheck.render(r))
        return 0 if all(r["reproduced"] for r in rows) else 1
    if not todo:
        print(f"every model asked for is shipped in {bundle.bundle_dir(run.name)}")
        return 0
    if run.read_only:
        raise UserError(f"{len(todo)} model(s) asked for are not shipped ({todo[0].name}"
                        f"{', ...' if len(todo) > 1 else ''}): {bundle.restore_fix(run.name)}")
    print(f"training {len(todo)} model(s): {one_core_cost(todo, run, resumed=True)}"
          + ("" if deadline is None else f"; this sitting stops after {args.minutes:g} minutes"), flush=True)
    for spec in todo:
        try:
            with recheck.progressing(bundle.emergence_state(run.name, spec.name), spec.name, deadline):
                out = emergence.run(spec, run, deadline=deadline, progress=not args.quiet)
        except OutOfTime as stop:
            print(f"{spec.name}: out of time at step {stop.args[0]}; its state is kept, run the same command to resume")
            return 0
        print(f"{spec.name}: shipped in {out}")
        if deadline is not None and time.time() > deadline:
            return 0
    return 0
