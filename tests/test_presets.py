"""The scale presets: the numbers the whole project agrees on, and sweeps that straddle
each phenomenon of Chi et al. (ACL 2023)."""

import dataclasses
import math
from pathlib import Path

import pytest

from rflens.data import summary
from rflens.errors import UserError
from rflens.model import positional
from rflens.paper import L_TR as PAPER_L_TR, SAME_SLOPE as PAPER_SAME_SLOPE, SLOPE_SHIFT as PAPER_SLOPE_SHIFT, WINDOW as PAPER_WINDOW
from rflens.longrun import plan
from rflens.setup import presets, settings
from rflens.training import trainer
from rflens.setup.config import SCHEMES

SWEEP_KEYS = {"slope_shift", "same_slope", "window", "d_bar", "sinusoidal_l_tr", "table2", "table3_pos", "corpora"}
OPTIONAL = {"seeds": (), "same_tokens": True, "seeded": (), "beside_figure7": ("nope", "rotary"),
            "paper_embeddings_l_tr": ()}  # may stay at the default


def sweeps(s) -> dict:
    return {f.name: getattr(s.sweeps, f.name) for f in dataclasses.fields(s.sweeps)}


@pytest.mark.parametrize("name", presets.NAMES)
def test_every_preset_is_complete_and_consistent(name):
    s = presets.get(name)
    assert s.name == name
    assert s.model.vocab_size == s.data.vocab_size  # the model reads the data's tokens
    assert set(sweeps(s)) == SWEEP_KEYS | set(OPTIONAL)
    # a size preset runs every experiment; a long run may leave out what its plan does not decide
    assert all(isinstance(v, tuple) and (v or k == "table3_pos" or s.shipped) for k, v in sweeps(s).items()
               if k in SWEEP_KEYS)
    assert s.sweeps.table3_pos or s.shipped  # only a shipped run may leave Table 3 to another
    assert set(s.sweeps.table3_pos) <= set(SCHEMES)
    assert s.lengths == [s.train.l_tr * m for m in s.eval.length_mults]


@pytest.mark.parametrize("name", [n for n in presets.NAMES if n != "full"])
def test_every_cpu_preset_trains_in_fp32(name):
    # one precision whatever the CPU (dtype=auto would follow its instruction set), and the
    # fast one at these widths (bench/README.md, bf16_cpu.py)
    assert presets.get(name).train.dtype == "fp32"


def test_spec_numbers():
    smoke, tiny, small, full, long, repeated, extended, deep, wide = (presets.get(n) for n in presets.NAMES[:9])
    m, t = smoke.model, smoke.train
    assert (m.n_layer, m.n_head, m.d_model, m.vocab_size, t.l_tr, t.batch_size, t.steps) == (2, 2, 32, 512, 16, 8, 30)
    assert smoke.data.max_bytes == 1_500_000 and smoke.eval.n_segments == 16 and smoke.eval.erf_samples == 4
    m, t = tiny.model, tiny.train
    assert (m.n_layer, m.n_head, m.d_model, m.vocab_size, t.l_tr, t.batch_size, t.steps) == (4, 4, 64, 2048, 32, 32, 600)
    assert tiny.data.max_bytes is None and tiny.eval.n_segments == 512 and tiny.eval.erf_samples == 32
    assert tiny.lengths == [32, 64, 128, 256, 512]
    assert tiny.sweeps.slope_shift == (-7, -4, -1, 2, 4)  # the paper's -3 .. 8 at L_tr = 32
    assert tiny.sweeps.same_slope == (-4, -2, 0, 2, 4)  # the paper's 0 .. 8
    assert tiny.sweeps.window == (8, 15, 19, 22, 30)  # the paper's R * w / L_tr, 0.94 .. 3.75
    assert tiny.sweeps.d_bar == (32, 64, 128, 256)
    assert tiny.sweeps.sinusoidal_l_tr == (32, 64)
    assert repeated.model == tiny.model and repeated.data == tiny.data and repeated.train == long.train
    assert dataclasses.replace(repeated.sweeps, same_tokens=True) == tiny.sweeps and repeated.texts == ()
    assert long.model == tiny.model and long.data == tiny.data and long.sweeps.seeds == (1, 2)
    assert [long.text(c) for c in ("prose", "code", "math")] == ["prose-wide", "code-wide", "math-tex"]
    assert long.eval.n_segments == 1024 and repeated.eval.n_segments == 512
    # Table 2 as the paper designed it: its Delta = 6 (2 at L_tr = 32) at 4 L_tr, its w = 160 (30) at 2 L_tr
    assert [e.training(32) for e in long.sweeps.table2] == [{"l_tr": 128, "batch_size": 8}, {"l_tr": 64, "batch_size": 16}]
    assert [(e.family, e.value) for e in long.sweeps.table2] == [("slope_shift", 2), ("window", 30)]
    for run in (long, repeated):
        t = run.train
        assert (t.steps * t.batch_size * t.l_tr, t.schedule, t.warmup, t.cooldown_frac, t.dtype) == (2**25, "wsd", 30, 0.2, "fp32")
        assert run.eval.erf_length_mult * t.l_tr == max(run.lengths) == 512
    # Figure 7: both L_tr on the same tokens, but for the first long run, which kept the batch
    assert tiny.sinusoidal_runs() == [(32, {}), (64, {"l_tr": 64, "batch_size": 16})]
    assert repeated.sinusoidal_runs() == [(32, {}), (64, {"l_tr": 64})]
    # the extension trains the long run's models on, with everything but the budget the same
    assert dataclasses.replace(extended.train, steps=long.train.steps) == long.train
    assert (extended.model, extended.data, extended.eval, extended.sweeps) == (long.model, long.data, long.eval, long.sweeps)
    assert extended.points == (long.train.steps, extended.train.steps) and extended.extends == "long"
    m, t = small.model, small.train
    assert (m.n_layer, m.n_head, m.d_model, m.vocab_size, t.l_tr, t.batch_size, t.steps) == (4, 8, 256, 8192, 128, 32, 3000)
    m, t = full.model, full.train
    assert (m.n_layer, m.n_head, m.d_model, m.vocab_size, t.l_tr, t.batch_size, t.steps) == (12, 12, 768, 50257, 512, 32, 50_000)
    # the width ladder: the 12-layer run at twice its width, everything else the same
    assert wide.model == deep.model.replace(d_model=128) and (wide.data, wide.train, wide.eval) == (deep.data, deep.train, deep.eval)
    assert (wide.sweeps.window, wide.sweeps.slope_shift, wide.sweeps.same_slope) == ((10, 15, 40), (5,), (-3, 5))
    assert (t.lr, t.beta1, t.beta2, t.weight_decay, t.warmup_frac, t.grad_clip, t.dtype) == (6e-4, 0.9, 0.999, 0.0, 0.01, 1.0, "bf16")
    assert full.eval.n_segments == 1000


def test_full_sweeps_are_the_papers_grids():
    full = presets.get("full")
    assert full.sweeps.slope_shift == (-3, 0, 3, 6, 8)
    assert full.sweeps.window == (40, 80, 100, 120, 160, 320)
    assert presets.Retrain("window", 160, l_tr=1024) in full.sweeps.table2
    assert presets.Retrain("slope_shift", 6, l_tr=2048) in full.sweeps.table2


@pytest.mark.parametrize("name", ["smoke", "tiny", "small"])
def test_window_sweep_straddles_l_tr(name):
    """Section 4: a windowed model extrapolates when its receptive field R * w fits in L_tr."""
    s = presets.get(name)
    fields = [s.model.n_layer * w for w in s.sweeps.window]
    assert min(fields) <= s.train.l_tr < max(fields)


@pytest.mark.parametrize("name", ["tiny", "small", "full"])
def test_window_grids_keep_the_papers_field_to_l_tr_ratios(name):
    """R * w / L_tr of every mapped window is the paper's (12 * w / 512) to within the
    rounding of w to a whole token, and spans the paper's boundary (2.34 .. 2.81)."""
    s = presets.get(name)
    R, l_tr = s.model.n_layer, s.train.l_tr
    paper = [12 * w / 512 for w in PAPER_WINDOW if 12 * w / 512 <= R]
    ours = [R * w / l_tr for w in s.sweeps.window]
    assert len(ours) == len(paper)
    assert all(abs(a - b) <= 0.5 * R / l_tr for a, b in zip(ours, paper))
    assert min(ours) < 2.34 and max(ours) > 2.81


def test_window_mapping():
    assert presets.mapped_windows(PAPER_WINDOW, 12, 512) == PAPER_WINDOW
    assert presets.mapped_windows((40, 160, 320), 4, 32) == (8, 30)  # 320 -> 60 > L_tr: left out
    assert presets.mapped_windows((1,), 4, 32) == (1,)


@pytest.mark.parametrize("name", ["tiny", "small", "full"])
def test_slope_sweeps_hold_both_sides(name):
    """Table 1: steep slopes act as a window, flat ones fail; d_bar on both sides of 128."""
    s = presets.get(name)
    assert min(s.sweeps.slope_shift) < 0 < max(s.sweeps.slope_shift)
    assert len(s.sweeps.same_slope) >= 4
    assert min(s.sweeps.d_bar) < 128 < max(s.sweeps.d_bar)


def _implicit_window(n_head: int, shift: float, l_tr: int, same: float | None = None) -> tuple[float, float]:
    """slope x L_tr of a model's flattest and steepest heads: the penalty ALiBi puts on the
    far end of the training window."""
    slopes = positional.alibi_slopes(n_head, "paper", slope_shift=shift, same_slope=same)
    return float(slopes.min()) * l_tr, float(slopes.max()) * l_tr


@pytest.mark.parametrize("name", presets.NAMES)
def test_mapped_alibi_grids_keep_the_papers_implicit_windows(name):
    """Every model of both ALiBi sweeps is one of the paper's, and puts the same penalty on its
    flattest head at L_tr as the paper's does at L_tr = 512 (12 heads); with one slope for
    every head, every head matches."""
    s = presets.get(name)
    for mine in s.sweeps.slope_shift:
        paper = presets.paper_value("slope_shift", mine, s.model.n_layer, s.train.l_tr)
        assert paper in PAPER_SLOPE_SHIFT
        ours = _implicit_window(s.model.n_head, mine, s.train.l_tr)[0]
        theirs = _implicit_window(12, paper, PAPER_L_TR)[0]
        assert ours == pytest.approx(theirs)
    for mine in s.sweeps.same_slope:
        paper = presets.paper_value("same_slope", mine, s.model.n_layer, s.train.l_tr)
        assert paper in PAPER_SAME_SLOPE
        assert _implicit_window(s.model.n_head, 0, s.train.l_tr, same=mine) == \
            pytest.approx(_implicit_window(12, 0, PAPER_L_TR, same=paper))


def test_the_mapping_is_a_shift_by_log2_of_the_length_ratio():
    assert presets.mapped_exponents((-3, 0, 8), 64) == (-6, -3, 5)
    assert presets.mapped_exponents((-3, 0, 8), 512) == (-3, 0, 8)
    assert presets.mapped_exponents((6,), 2048) == (8,)
    assert presets.mapped_exponents((0,), 96) == (pytest.approx(-math.log2(512 / 96)),)


@pytest.mark.parametrize("name", ["tiny", "small"])
@pytest.mark.parametrize("erf_mult", [1.2, 2.0, 3.5])
def test_table2_covers_the_erf_and_keeps_tokens_per_step(name, erf_mult):
    s = presets.get(name)
    for entry in s.sweeps.table2:
        erf = int(erf_mult * s.train.l_tr)
        over = entry.training(s.train.l_tr, s.train.batch_size, erf)
        assert over["l_tr"] >= erf and over["l_tr"] < 2 * max(erf, 2 * s.train.l_tr)  # the shortest power of two
        assert over["l_tr"] * over["batch_size"] == s.train.l_tr * s.train.batch_size


@pytest.mark.parametrize("name", presets.NAMES)
def test_every_sweep_point_is_a_valid_configuration(name):
    s = presets.get(name)
    corpus = s.sweeps.corpora[0]
    configs = [settings.resolve(presets.get(name), "alibi", corpus, {"slope_shift": v}) for v in s.sweeps.slope_shift]
    configs += [settings.resolve(presets.get(name), "alibi", corpus, {"same_slope": v}) for v in s.sweeps.same_slope]
    configs += [settings.resolve(presets.get(name), "window", corpus, {"window": v}) for v in s.sweeps.window]
    configs += [settings.resolve(presets.get(name), "sandwich", corpus, {"d_bar": v}) for v in s.sweeps.d_bar]
    configs += [settings.resolve(presets.get(name), "sinusoidal", corpus, {"l_tr": v}) for v in s.sweeps.sinusoidal_l_tr]
    for entry in s.sweeps.table2:
        over = {presets.FAMILIES[entry.family].setting: entry.value,
                **entry.training(s.train.l_tr, s.train.batch_size, s.eval.erf_length_mult * s.train.l_tr)}
        configs.append(settings.resolve(presets.get(name), entry.pos, corpus, over))
    configs += [settings.resolve(presets.get(name), p, c) for p in s.sweeps.table3_pos for c in s.sweeps.corpora]
    assert all(m.vocab_size == d.vocab_size for _, m, d, _ in configs)


def test_unknown_preset_names_the_choices():
    with pytest.raises(UserError, match=r"a size \(smoke, tiny, small, full\) or a long run \(long, long-repeated, "
                                        r"long-extended, deep, deep-d128, long-6m, long-3m, long-sotu\)"):
        presets.get("huge")
    with pytest.raises(UserError, match="tiny is a size preset, not a long run"):
        presets.long_run("tiny")


def test_the_diversity_ladder_is_the_long_run_on_less_text_at_the_long_runs_sizes():
    long = presets.get("long")
    for name, corpus, steps in (("long-6m", "prose-wide-6m", 2**14), ("long-3m", "prose-wide-3m", 2**13),
                                ("long-sotu", "prose-wide-sotu", 2**13)):
        run = presets.get(name)
        assert run.text("prose") == corpus and run.model == long.model and run.eval == long.eval
        assert run.train == long.train.replace(steps=steps)  # the same schedule, stopped earlier
        assert run.points == tuple(p for p in presets.LONG_POINTS if p <= steps) and run.points[-1] == steps
        assert [s.name for s in plan.models(run)] == [
            "alibi_slope_shift=4", "window_window=30", "nope", "window_window=8",
            "alibi_slope_shift=4_seed=1", "alibi_slope_shift=4_seed=2", "nope_seed=1", "nope_seed=2",
            "window_window=30_seed=1", "window_window=30_seed=2"]
    assert presets.LONG_POINTS == tuple(trainer.point_steps(long.train))


def test_the_books_table_of_presets_states_the_presets():
    """book/index.md lists every preset's model, vocabulary, L_tr, training and N: those
    numbers are the presets' own."""
    text = (Path(__file__).resolve().parents[1] / "book" / "index.md").read_text()
    rows = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 7 and cells[0].strip("`") in presets.NAMES:
            rows[cells[0].strip("`")] = cells
    assert set(rows) == set(presets.NAMES)
    for name, (_, model, vocab, l_tr, training, n, _) in rows.items():
        s = presets.get(name)
        assert model == f"{s.model.n_layer}, {s.model.n_head}, {s.model.d_model}"
        assert vocab.split()[0] == str(s.model.vocab_size)
        assert l_tr == str(s.train.l_tr)
        assert training.startswith(f"{s.train.steps:,} steps of batch {s.train.batch_size}")
        assert n == str(s.eval.n_segments)


def test_the_corpora_table_reads_what_each_corpus_of_a_preset_holds(own_data):
    from rflens import data

    assert list(summary.corpora_table("smoke")["documents (train / validation / test)"]) == ["not built"]
    cfg = settings.resolve(presets.get("smoke"), "alibi", "prose")[2]
    m = data.prepare(cfg, progress=False).manifest
    row = summary.corpora_table("smoke").loc["prose"]
    assert row["stands in for"] == "OpenWebText2" and "State of the Union" in row["text"]
    assert row["train tokens"] == f"{m['tokens']['train']:,}"
    budget = presets.get("smoke").train
    assert float(row["passes at the budget"]) == pytest.approx(
        budget.steps * budget.batch_size * budget.l_tr / m["tokens"]["train"], abs=0.05)
    # the long preset trains on the wide corpora, each described
    assert list(summary.corpora_table("long").index) == ["prose-wide", "code-wide", "math-tex"]


def test_only_the_diversity_ladder_stays_off_the_claims_boards(monkeypatch):
    from rflens.claims import scoreboard

    off = [name for name in presets.LONG_RUNS if not presets.get(name).boards]
    assert off == ["long-6m", "long-3m", "long-sotu"]
    monkeypatch.setattr(scoreboard, "shipped_board", lambda scale, corpus="prose": [])
    assert list(scoreboard.shipped_boards()) == ["long", "long-repeated", "deep", "deep-d128"]  # an extension: with its run
