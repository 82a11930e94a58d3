"""Size presets and long runs: the same experiments at four sizes, and far past them.

Chi et al. (ACL 2023) train R = 12 layers, H = 12 heads, d = 768 at L_tr = 512 for 50k steps
(Section 2, with the recipe of the KERPLE code base they build on). That is the ``full``
preset. The smaller presets shrink the model and the training length but keep what the
paper's arguments depend on:

* evaluation lengths are multiples of L_tr (L_ex = L_tr x 1, 2, 4, 8, 16);
* the receptive-field analysis looks at segments of 4 x L_tr;
* every sweep puts points on both sides of the phenomenon it shows: a window w whose
  theoretical receptive field R * w fits inside L_tr and one that does not (Section 3 and
  4), ALiBi slopes steep enough to act as a window and ones so flat that they do not,
  a Sandwich d_bar below and above the paper's 128 (Figure 10);
* ALiBi's exponents are the paper's, mapped to the preset's L_tr (:func:`mapped_exponents`):
  what a slope does is set by slope x distance, so an exponent keeps its meaning only with
  the training window it was chosen for.

A :class:`LongRun` is a preset's models trained far past the book's budget and shipped in a
bundle (``long``, ``deep``, ...): the fields only a long run has are on it alone.
``get(name)`` resolves a name once; ``rflens.store.runs.get_run`` starts from the preset and applies
the overrides of one experiment (``window=16``, ``slope_shift=-3``, ...). The sweeps are
the only place the experiments read their grids from.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass
from typing import ClassVar

from rflens import paper
from rflens.errors import UserError
from rflens.setup.config import CORPORA, DataConfig, EvalConfig, ModelConfig, TrainConfig
from rflens.setup.schemes import TABLE3

SIZES = ("smoke", "tiny", "small", "full")  # size presets: the book trains its models at one of them
LONG_RUNS = ("long", "long-repeated", "long-extended", "deep", "deep-d128", "long-6m", "long-3m",
             "long-sotu")  # shipped in reference/NAME
NAMES = SIZES + LONG_RUNS
DEFAULT_SCALE = "tiny"  # what the book, the command line and the library use unless told otherwise
# The long run the chapters read beside their own scale: the second run, on text it repeats at
# most 4 times; chapter 10 sets the first (``long-repeated``, on text it repeats) beside it.
BOOK_LONG = "long"


def mapped_exponents(values, l_tr: int) -> tuple[float, ...]:
    """The paper's ALiBi exponents (a Delta or a shared h) at a shorter L_tr.

    What a slope 1/2^h does to a model is set by slope x distance: over L_tr tokens the
    penalty is L_tr / 2^h. The exponent h at L_tr = 512 therefore acts as h - log2(512 / L_tr)
    at L_tr: the same penalty across the training window, the same implicit window as a
    share of L_tr. (Over 64 tokens the paper's Delta = 9 is no bias at all, as is its h = 11.)
    """
    shift = math.log2(paper.L_TR / l_tr)
    return tuple(_int_if_whole(v - shift) for v in values)


def mapped_windows(values, n_layer: int, l_tr: int) -> tuple[int, ...]:
    """The paper's window sizes w for a model of ``n_layer`` layers trained at ``l_tr``.

    What decides whether a windowed model can fail is how far its theoretical receptive
    field R * w reaches beyond the training window: the ratio R * w / L_tr (Section 4; the
    paper's sweep runs from 0.94 at w = 40 to 7.5 at w = 320, with the boundary between 2.34
    and 2.81). The mapped w keeps that ratio (rounded to a whole token). A window wider than
    L_tr does not constrain training at all, so the points whose ratio exceeds R are left out.
    """
    out = []
    for w in values:
        mapped = max(1, round(w * paper.N_LAYER * l_tr / (n_layer * paper.L_TR)))
        if mapped <= l_tr and mapped not in out:
            out.append(mapped)
    return tuple(out)


def paper_value(setting: str, value, n_layer: int, l_tr: int):
    """The paper's value of a Table 1 setting that a preset of ``n_layer`` layers at ``l_tr``
    trains as ``value``: the map of :func:`mapped_exponents` or :func:`mapped_windows` undone
    (None for a window no paper's w maps to)."""
    if setting in ("slope_shift", "same_slope"):
        return _int_if_whole(value + math.log2(paper.L_TR / l_tr))
    if setting == "window":
        return next((w for w in paper.WINDOW if mapped_windows((w,), n_layer, l_tr) == (value,)), None)
    raise UserError(f"{setting!r} is not a Table 1 setting: choose one of {', '.join(FAMILIES)}")


def _int_if_whole(v: float):
    return int(v) if float(v).is_integer() else float(v)


@dataclass(frozen=True)
class Family:
    """One sweep of Table 1 (Section 3): a positional scheme and the setting it varies."""

    pos: str
    setting: str
    symbol: str  # the paper's symbol for the setting, in labels such as "w=32"
    title: str


FAMILIES = {
    "slope_shift": Family("alibi", "slope_shift", "Δ", "ALiBi, slope exponents shifted by Δ"),
    "same_slope": Family("alibi", "same_slope", "h", "ALiBi, one slope 1/2^h for every head"),
    "window": Family("window", "window", "w", "windowed attention of size w"),
}


@dataclass(frozen=True)
class Retrain:
    """A Table 2 model (Section 4): the Table 1 model ``family = value`` trained again with
    a longer training length: ``l_tr``, or ``l_tr_mult`` x the scale's, or (neither given)
    the shortest power-of-two multiple of the scale's L_tr that covers the model's measured
    ERF, as the paper chooses L_tr = 1024 for w = 160 and 2048 for Delta = 6. ``batch_size``
    (default: the scale's batch x old L_tr / new L_tr) keeps the tokens of a step."""

    family: str  # a key of FAMILIES
    value: int | float  # the swept setting's value (an int for windows)
    l_tr: int | None = None
    l_tr_mult: int | None = None
    batch_size: int | None = None
    # trained only once the Table 1 model is shipped and fails, as the paper retrained its
    # failures (an entry with a fixed l_tr or l_tr_mult is otherwise trained whatever it does)
    if_fails: bool = False

    def __post_init__(self):
        if self.family not in FAMILIES:
            raise UserError(f"a Table 2 model names a Table 1 family ({', '.join(FAMILIES)}), not {self.family!r}")
        if self.l_tr is not None and self.l_tr_mult is not None:
            raise UserError(f"a Table 2 model gives at most one of l_tr and l_tr_mult: {self}")

    @property
    def pos(self) -> str:
        return FAMILIES[self.family].pos

    def training(self, l_tr: int, batch_size: int | None = None, erf: int | None = None) -> dict:
        """The training settings of the retrained model, for a Table 1 trained at ``l_tr``
        with ``batch_size``; ``erf``: the Table 1 model's ERF (needed when neither l_tr nor
        l_tr_mult is given)."""
        if self.l_tr is not None:
            new = self.l_tr
        elif self.l_tr_mult is not None:
            new = l_tr * self.l_tr_mult
        else:
            if erf is None:
                raise UserError(f"the Table 2 model {self.family}={self.value} covers the ERF: it needs one")
            new = l_tr * 2 ** max(1, math.ceil(math.log2(max(erf, 1) / l_tr)))
        out = {"l_tr": int(new)}
        if self.batch_size is not None:
            out["batch_size"] = self.batch_size
        elif batch_size is not None and self.l_tr is None and self.l_tr_mult is None:
            out["batch_size"] = max(1, batch_size * l_tr // new)
        return out


@dataclass(frozen=True)
class Sweeps:
    """The grids the book sweeps at one scale; every experiment reads them from here."""

    slope_shift: tuple[float, ...]  # Table 1(a): h -> h + Delta
    same_slope: tuple[float, ...]  # Table 1(b): one h for every head
    window: tuple[int, ...]  # Table 1(c), Eq. (3)
    d_bar: tuple[int, ...]  # Figure 10
    sinusoidal_l_tr: tuple[int, ...]  # Figure 7: Sinusoidal at these training lengths
    table2: tuple[Retrain, ...]  # Table 2: the failures retrained with a longer L_tr
    table3_pos: tuple[str, ...] = TABLE3  # Table 3 (Section 6)
    corpora: tuple[str, ...] = CORPORA  # OpenWebText2, GitHub and ArXiv in the paper
    # further training seeds of the models whose verdicts decide claims (the long run's
    # rflens.longrun.plan.seeded): a verdict holds when every seed agrees
    seeds: tuple[int, ...] = ()
    # which models get them, each with the reason ((name, why), ...); empty: the ends of each
    # Table 1 sweep, Table 2's models, Sinusoidal at each L_tr and Rotary
    seeded: tuple[tuple[str, str], ...] = ()
    # the schemes trained beside Figure 7's Sinusoidal: NoPE (no positional signal) and Rotary
    beside_figure7: tuple[str, ...] = ("nope", "rotary")
    # Figure 7's Sinusoidal at another L_tr keeps the tokens of a step (so both L_tr see the
    # same training tokens); False: the batch is kept instead (the first long run's choice)
    same_tokens: bool = True
    # Figure 7's Sinusoidal also trained as the paper's code trains it, at these L_tr: token
    # embeddings added to the sinusoids unscaled (the book's Sinusoidal scales them by sqrt(d):
    # rflens.setup.deviations); claim 8 reads these where a preset has them
    paper_embeddings_l_tr: tuple[int, ...] = ()

    def __post_init__(self):
        for name in ("slope_shift", "same_slope", "window", "d_bar", "sinusoidal_l_tr", "table2",
                     "table3_pos", "corpora", "seeds", "seeded", "beside_figure7", "paper_embeddings_l_tr"):
            object.__setattr__(self, name, tuple(getattr(self, name)))


@dataclass(frozen=True)
class Preset:
    """A size one trains the book at (``smoke``, ``tiny``, ``small``, ``full``): the four
    settings and the sweeps the book runs. Its models are trained into the run store."""

    name: str
    model: ModelConfig
    data: DataConfig
    train: TrainConfig
    eval: EvalConfig
    sweeps: Sweeps
    about: str = ""
    title: str = ""  # the preset in a few words, where a figure or a table names a run

    # its models are read from a shipped bundle (rflens.experiments.from_bundle): the book never trains them
    shipped: ClassVar[bool] = False

    def text(self, corpus: str) -> str:
        """The data corpus that stands for the book's ``corpus`` at this preset: the corpus itself."""
        return corpus

    def sinusoidal_runs(self) -> list[tuple[int, dict]]:
        """Figure 7's Sinusoidal models: (L_tr, settings beside the preset's) for each L_tr of
        the sweep. The preset's own L_tr gets none (it is Table 3's model); another keeps the
        tokens of a step when ``sweeps.same_tokens`` (both see the same training tokens)."""
        return [(l_tr, self._at_l_tr(l_tr)) for l_tr in map(int, self.sweeps.sinusoidal_l_tr)]

    def paper_embedding_runs(self) -> list[tuple[int, dict]]:
        """Figure 7's Sinusoidal with the paper's embeddings (token embeddings not scaled by
        sqrt(d)): (L_tr, settings beside the preset's) for each L_tr of
        ``sweeps.paper_embeddings_l_tr``, at the tokens of a step as :meth:`sinusoidal_runs`."""
        return [(l_tr, {**self._at_l_tr(l_tr), "scale_embeddings": False})
                for l_tr in map(int, self.sweeps.paper_embeddings_l_tr)]

    def _at_l_tr(self, l_tr: int) -> dict:
        base = self.train.l_tr
        over = {} if l_tr == base else {"l_tr": l_tr}
        if over and self.sweeps.same_tokens:
            over["batch_size"] = max(1, self.train.batch_size * base // l_tr)
        return over

    def measured_points(self, train: TrainConfig) -> tuple[int, ...] | None:
        """The steps at which a model trained with ``train`` is measured as it grows: None
        for a size preset, whose models are measured once trained."""
        return None

    @property
    def lengths(self) -> list[int]:
        """The evaluation lengths L_ex = L_tr x length_mults."""
        return [self.train.l_tr * m for m in self.eval.length_mults]


@dataclass(frozen=True)
class LongRun(Preset):
    """A long run (``long``, ``long-repeated``, ``long-extended``, ``deep``, ``deep-d128``):
    a preset's models trained far past the book's budget, measured at sizes as they grow,
    and shipped in a bundle (``reference/NAME``) that the book reads (rflens.longrun)."""

    shipped: ClassVar[bool] = True
    # the corpus each of the book's corpora (prose, code, math: the paper's OpenWebText2,
    # GitHub and ArXiv) is in this run; a corpus not named is itself
    texts: tuple[tuple[str, str], ...] = ()
    read_only: bool = False  # a shipped control: its bundle is read, never trained into
    # measured at these steps (empty: the budget / 2^k, rflens.training.trainer.point_steps)
    points: tuple[int, ...] = ()
    # models at another L_tr than the run's (Table 2's retrainings, Figure 7's
    # second L_tr) measured at their last size alone: what their claims read
    other_l_tr_at_end: bool = False
    # a run that trains models of another run further (its name), and which of them, in order
    extends: str = ""
    models: tuple[str, ...] = ()
    # the claims the run's plan is made to decide (empty: every claim its models allow)
    decides: tuple[int, ...] = ()
    # models shipped with their weights, which the drift test re-measures
    drift_models: tuple[str, ...] = ()
    # its claims board stands beside the other runs' (chapters 9 and 10, the index); False: a
    # ladder read by rflens.longrun.clock alone, whose few models check no claim as a run
    boards: bool = True

    @classmethod
    def of(cls, preset: Preset, **fields) -> LongRun:
        """``preset``'s models as a long run, with ``fields`` changed (a schedule for growing
        models, the run's own fields)."""
        base = {f.name: getattr(preset, f.name) for f in dataclasses.fields(Preset)}
        return cls(**(base | fields))

    def text(self, corpus: str) -> str:
        """The data corpus that stands for the book's ``corpus`` in this run."""
        return dict(self.texts).get(corpus, corpus)

    def measured_points(self, train: TrainConfig) -> tuple[int, ...] | None:
        """The steps at which a model of this run trained with ``train`` is measured, where
        the run fixes them (:attr:`points`, or the last step alone under
        :attr:`other_l_tr_at_end`); None: the budget / 2^k (:func:`rflens.training.trainer.point_steps`)."""
        if self.points:
            return tuple(p for p in self.points if p <= train.steps)
        if self.other_l_tr_at_end and train.l_tr != self.train.l_tr:
            return (train.steps,)
        return None


def _smoke() -> Preset:
    vocab = 512  # smallest BPE vocabulary that still merges common words on 1.5 MB of text
    return Preset(
        name="smoke",
        about="for tests: every model trains in about a second",
        model=ModelConfig(n_layer=2, n_head=2, d_model=32, vocab_size=vocab),
        # 1.5 MB prefix: enough text for 30 steps of 8 x 16 tokens (and its own tokenizer) in < 1 s
        data=DataConfig(vocab_size=vocab, max_bytes=1_500_000),
        train=TrainConfig(
            l_tr=16,  # L_tr: short, so the evaluation lengths stay <= 256 tokens
            batch_size=8,
            steps=30,  # a few dozen steps: the tests check plumbing, not language modelling
            lr=2e-3,  # small models and short runs take a larger learning rate than 6e-4
            warmup_frac=0.1,  # 3 steps of warm-up
            eval_interval=10,
            eval_batches=2,
            ckpt_interval=10,
        ),
        eval=EvalConfig(n_segments=16, erf_samples=4, batch_size=8),
        # one point on each side of every phenomenon, so the book's code paths all run
        sweeps=Sweeps(
            # the ends of the paper's grids, mapped to L_tr = 16 (mapped_exponents), and its Δ = 0:
            # ALiBi as the paper trains it, which claim 3 reads from Table 1
            slope_shift=mapped_exponents((-3, 0, 8), 16),
            same_slope=mapped_exponents((0, 8), 16),
            window=[4, 16],  # R * w = 8 < L_tr = 16 and R * w = 32 > L_tr
            d_bar=[32, 128],
            sinusoidal_l_tr=[8, 16],
            table2=[Retrain("window", 16, l_tr=64, batch_size=2)],
            table3_pos=("alibi", "sandwich", "t5"),
            corpora=("prose",),
        ),
    )


def _tiny() -> Preset:
    vocab = 2048  # the embedding (2048 x d) stays smaller than the layers
    n_layer, l_tr = 4, 32
    return Preset(
        name="tiny",
        about="CPU default: the whole book trains, evaluates and builds on 2 cores (reproduce --plan counts its models)",
        # R = 4: the window sweep needs R * w / L_tr well above 2 (the paper's boundary lies
        # between 2.34 and 2.81) with w <= L_tr, which two layers cannot reach. d = 64 trains
        # twice the tokens a second of d = 128 at this depth (bench/README.md, the pilot).
        model=ModelConfig(n_layer=n_layer, n_head=4, d_model=64, vocab_size=vocab),
        data=DataConfig(vocab_size=vocab),  # the full embedded corpora
        train=TrainConfig(
            l_tr=l_tr,  # L_tr = 32: 16 x L_tr = 512 is the longest evaluation
            batch_size=32,  # 32 x 32 = 1024 tokens a step
            # 0.6M tokens a model: what the book's budget on 2 cores allows (`reproduce --plan`
            # times it); the long preset and the pilot (bench/README.md) measure what more
            # tokens show
            steps=600,
            lr=2e-3,
            warmup_frac=0.05,  # 30 steps
            # one precision on every machine; at d = 64 bf16 autocast halves a CPU's speed even
            # where the CPU computes bf16 natively (bench/README.md, bf16_cpu.py)
            dtype="fp32",
            eval_interval=200,
            eval_batches=4,
            ckpt_interval=200,
        ),
        # N = 512 segments: r(L) is a mean of per-segment differences, and 512 of them resolve a
        # rise of a few percent (its paired interval); evaluation is cheap next to training
        eval=EvalConfig(n_segments=512, erf_samples=32, length_mults=(1, 2, 4, 8, 16)),
        sweeps=Sweeps(
            # Table 1(a) and (b): the paper's exponents mapped to L_tr = 32 (h -> h - 4, so that
            # slope x L_tr is the paper's): Delta = -7 .. 4 is the paper's -3 .. 8, and one h for
            # every head from -4 (slope 16: a window of a token) to 4 (the paper's h = 8)
            slope_shift=mapped_exponents(paper.SLOPE_SHIFT, l_tr),
            same_slope=mapped_exponents(paper.SAME_SLOPE, l_tr),
            # Table 1(c): the paper's w = 40 .. 160 at R * w / L_tr = 0.94 .. 3.75 -> w = 8, 15, 19,
            # 22, 30 (ratios 1.0 .. 3.75); its w = 320 (7.5) would need w > L_tr
            window=mapped_windows(paper.WINDOW, n_layer, l_tr),
            # Figure 10: a larger d_bar windows more strongly; 128 is the paper's value.
            d_bar=list(paper.D_BAR),
            # Figure 7: Sinusoidal's gradient spikes at absolute position L_tr, for two L_tr.
            sinusoidal_l_tr=[32, 64],
            # Table 2: the widest window and the flattest slopes, if they fail in Table 1, are
            # retrained with an L_tr that covers their measured ERF (and the same tokens a step)
            table2=[Retrain("window", mapped_windows(paper.WINDOW, n_layer, l_tr)[-1]),
                    Retrain("slope_shift", mapped_exponents((8,), l_tr)[0])],
        ),
    )


# The long reference runs (rflens.longrun.plan): the tiny model at 2^15 steps of 1024 tokens,
# 2^25 = 33.6M tokens, past the size at which the flattest ALiBi slopes (the paper's Delta = 8)
# reach r(16 L_tr) = 2 on the lower end of their interval (Chapter 10 reads it from the
# shipped curves). A power of two, so that each measured size, budget / 2^k, is whole steps.
LONG_STEPS = 2**15
# its measured sizes, budget / 2^k (rflens.training.trainer.point_steps of its schedule): 512 .. 32768 steps
LONG_POINTS = tuple(LONG_STEPS >> k for k in range(6, -1, -1))


def _long_train(tiny: Preset) -> TrainConfig:
    return tiny.train.replace(
        steps=LONG_STEPS,
        # warmup-stable-decay with a fixed warm-up: a snapshot cooled down over its last 20%
        # is a finished shorter run, so one run gives every point of the emergence curves
        schedule="wsd", warmup=30, cooldown_frac=0.2,
        dtype="fp32",  # one precision on every machine: the shipped numbers are fp32
        eval_interval=4096, ckpt_interval=1024)


# shipped with weights (1.8 MB each) and re-measured by the drift test: the paper's Δ = 8 and NoPE at four layers
DRIFT_MODELS = ("alibi_slope_shift=4", "nope")


def _long() -> LongRun:
    tiny = _tiny()
    l_tr, batch = tiny.train.l_tr, tiny.train.batch_size
    return LongRun(
        name="long",
        title="second long run (new text)",
        about="the tiny model trained on 33.6M tokens (55x the book's) of corpora it repeats at most 4 times, "
              "measured at 7 points from 0.5M, the models that decide claims from 3 seeds: shipped in "
              "reference/long (python -m rflens emergence --list: the plan and its cost)",
        model=tiny.model,
        data=tiny.data,
        train=_long_train(tiny),
        # the receptive field on segments of 16 L_tr (512 tokens), the longest evaluation; 1024
        # segments, so that the scored tokens fall in more of the test documents the intervals
        # resample (512 reach 114, 145 and 78 of prose-wide's, code-wide's and math-tex's 308,
        # 277 and 100; 1024 reach 172, 176 and 87)
        eval=tiny.eval.replace(erf_length_mult=16, n_segments=1024),
        sweeps=Sweeps(
            slope_shift=tiny.sweeps.slope_shift, same_slope=tiny.sweeps.same_slope, window=tiny.sweeps.window,
            d_bar=tiny.sweeps.d_bar, sinusoidal_l_tr=tiny.sweeps.sinusoidal_l_tr,
            # Table 2 as the paper designed it, mapped to L_tr = 32: its Delta = 6 retrained at
            # 4 L_tr and its w = 160 at 2 L_tr, each with the tokens of a step kept, whether or
            # not the Table 1 model fails (the retrained models are measured to 16 times their
            # own L_tr, and at Table 1's lengths from theirs up)
            table2=[Retrain("slope_shift", mapped_exponents((6,), l_tr)[0], l_tr_mult=4, batch_size=batch // 4),
                    Retrain("window", mapped_windows((160,), n_layer=tiny.model.n_layer, l_tr=l_tr)[0], l_tr_mult=2,
                            batch_size=batch // 2)],
            seeds=(1, 2),
            # claim 8 as the paper's code trains Sinusoidal, at both L_tr of the sweep (3 seeds)
            paper_embeddings_l_tr=tiny.sweeps.sinusoidal_l_tr),
        drift_models=DRIFT_MODELS,
        # corpora of 9.5M to 28M training tokens (data/README.md): 33.6M tokens repeat each at
        # most 3.5 times (rflens.data.capped_budget would shorten a run on a smaller one)
        texts=(("prose", "prose-wide"), ("code", "code-wide"), ("math", "math-tex")),
    )


# The long run's rising models trained further (the test of reference/long/forecast.json,
# sealed before any of them trained): the most steps that keep prose-wide (12,301,027 training
# tokens) at <= 4 epochs, 48,000 x 1024 = 49.15M tokens (3.996 epochs). The same batches, rates
# and warm-up as the long run, so its 33.6M-token point is the long run's last point again.
EXTENDED_STEPS = 48_000
EXTENDED = ("alibi_slope_shift=4", "alibi_slope_shift=4_seed=1", "alibi_slope_shift=4_seed=2", "alibi_slope_shift=2",
            "nope", "window_window=30", "window_window=30_seed=1", "window_window=30_seed=2", "window_window=15",
            "window_window=22", "window_window=19")


def _long_extended() -> LongRun:
    long = _long()
    return dataclasses.replace(
        long, name="long-extended", title="the long run, trained further",
        about="the long run's models still rising at 33.6M tokens trained on to 49.15M (prose-wide at 4 epochs), "
              "measured again at 33.6M and at 49.15M: the test of the forecast sealed in reference/long",
        train=long.train.replace(steps=EXTENDED_STEPS), points=(LONG_STEPS, EXTENDED_STEPS), extends="long",
        models=EXTENDED)


# The paper's depth (R = 12) at the long run's width, tokens and corpora. At 4 layers the
# windows had to be mapped through depth (R w / L_tr kept), as if the receptive field grew in
# proportion to R; at 12 layers no depth is mapped: the paper's windows and exponents map by
# L_tr alone (w x 64 / 512: 5, 10, 12, 15, 20, 40; h - 3).
DEEP_LAYERS, DEEP_L_TR = paper.N_LAYER, 64


def _deep() -> LongRun:
    long = _long()
    l_tr = DEEP_L_TR
    batch = long.train.batch_size * long.train.l_tr // l_tr  # 1024 tokens a step, as the long run
    w160, d6 = mapped_windows((160,), DEEP_LAYERS, l_tr)[0], mapped_exponents((6,), l_tr)[0]  # Table 2's models
    return dataclasses.replace(
        long, name="deep", title="the paper's depth (12 layers)", decides=(1, 2, 4, 5, 6, 7, 8),
        about="the paper's depth: 12 layers at the long run's width, tokens and corpora, L_tr = 64, so that the "
              "paper's windows and slopes map by L_tr alone; shipped in reference/deep (python -m rflens "
              "emergence --scale deep --list: the plan, why each model is there, and its cost)",
        model=long.model.replace(n_layer=DEEP_LAYERS),
        train=long.train.replace(l_tr=l_tr, batch_size=batch),
        # the models at 2 and 4 L_tr are read at their last size; measuring every size would
        # cost them 3.2 one-core hours more (lengths up to 16 x 256 through 12 layers)
        other_l_tr_at_end=True,
        # no weights in the repository (3.3 MB a model): `emergence --scale deep --check 1`
        # retrains a shipped model from scratch instead
        drift_models=(),
        # The plan (python -m rflens emergence --scale deep --list) fits about 30 one-core hours
        # at the cost its first models measured (about 77 one-core minutes a model at L_tr = 64,
        # measuring included): every window (the thesis), the Δ sweep's ends and its
        # Table 2 model, the shared slope's ends, Sinusoidal at two L_tr; further seeds only where
        # a claim is decided, Sinusoidal's at L_tr alone (the budget).
        sweeps=Sweeps(
            # claim 4's ends (the paper's -3 and 8) and its Δ = 6, Table 2's
            slope_shift=mapped_exponents((-3, 6, 8), l_tr),
            # claim 5's ends (the paper's h = 0 and 8)
            same_slope=mapped_exponents((0, 8), l_tr),
            # the paper's w = 40 .. 320: claim 1 (w <= 100), the boundary (100 | 120), claim 2 (320)
            window=mapped_windows(paper.WINDOW, DEEP_LAYERS, l_tr),
            d_bar=long.sweeps.d_bar,
            sinusoidal_l_tr=[l_tr, 2 * l_tr],  # claim 8, at two L_tr on the same tokens
            # Table 2 as the paper's rule states it, for a Table 1 model that fails: retrained at
            # an L_tr that covers its measured ERF, and at the paper's ratio beside it. ALiBi's
            # Δ = 6 at the paper's ratio alone: a failing ALiBi's ERF reaches its segment's end
            # (16 L_tr), and an L_tr of 1024 is past a CPU's budget (its measuring alone, days)
            table2=[Retrain("window", w160, if_fails=True),
                    Retrain("window", w160, l_tr_mult=2, batch_size=batch // 2, if_fails=True),
                    Retrain("slope_shift", d6, l_tr_mult=4, batch_size=batch // 4, if_fails=True)],
            table3_pos=(), corpora=("prose",),  # Table 3 does not depend on depth: the long run has it
            beside_figure7=(),  # NoPE and Rotary: no claim turns on them at this depth
            seeds=(1, 2),
            seeded=((f"window_window={mapped_windows((paper.WINDOW_STABLE,), DEEP_LAYERS, l_tr)[0]}",
                     "claim 1: the widest window the paper counts as stable"),
                    (f"window_window={mapped_windows((max(paper.WINDOW),), DEEP_LAYERS, l_tr)[0]}",
                     "claim 2: the widest window"),
                    (f"alibi_slope_shift={mapped_exponents((8,), l_tr)[0]}", "claim 4: the flattest slopes"),
                    ("sinusoidal", "claim 8 at L_tr"),
                    ("sinusoidal_scale_embeddings=False", "claim 8 with the paper's embeddings")),
            # claim 8 as the paper's code trains Sinusoidal, at L_tr (the second L_tr's measuring,
            # at 16 x 128 through 12 layers, is past this run's budget)
            paper_embeddings_l_tr=[l_tr]),
    )


# The width ladder (what sets the clock of failure): `deep` at twice its width. At the same
# tokens a wider model has seen fewer tokens per parameter; whether its windows and flat slopes
# start to fail at the tokens of the d = 64 models or at their tokens per parameter is the
# question. The models that decide the thesis at its ends, nothing else: the paper's w = 80,
# 120 and 320, its Δ = 8, and one shared slope at h = 0 and 8.
WIDTH_LADDER_D = 128


def _deep_d128() -> LongRun:
    deep = _deep()
    l_tr = DEEP_L_TR
    w80, w120, w320 = mapped_windows((80, 120, 320), DEEP_LAYERS, l_tr)
    d8 = mapped_exponents((8,), l_tr)[0]
    return dataclasses.replace(
        deep, name="deep-d128", title="the paper's depth at twice the width (d = 128)", decides=(2, 5, 6),
        about="the width ladder: the 12-layer run at d = 128, the models that decide the thesis at its ends, "
              "on the same corpus, tokens, schedule and sizes; its outcome is read against predictions "
              "sealed before it trained (python -m rflens emergence --scale deep-d128 --list)",
        model=deep.model.replace(d_model=WIDTH_LADDER_D),
        sweeps=Sweeps(
            slope_shift=(d8,),  # claim 4's flattest slopes, the paper's Δ = 8
            same_slope=mapped_exponents((0, 8), l_tr),  # claim 5's two ends
            window=(w80, w120, w320),  # stable, the boundary, claim 2's widest
            d_bar=deep.sweeps.d_bar, sinusoidal_l_tr=(), table2=(), table3_pos=(), corpora=("prose",),
            beside_figure7=(), seeds=(1,),
            # fixed before any of them trained: the two rises the clock question is about
            seeded=((f"window_window={w320}", "claim 2: the widest window"),
                    (f"alibi_slope_shift={d8}", "claim 4: the flattest slopes"))),
    )


# The diversity ladder (what sets the clock of failure, in text): the long run's models that
# rise, on less of the same corpus and on one source of it, with prose-wide's tokenizer and
# test split (rflens.data.subsets). Whether failure follows tokens or passes over the text,
# and whether one source at the same size changes it, is read against predictions sealed
# before the ladder trained (rflens.longrun.clock). Each run stops at the last of the long
# run's sizes that keeps its text at <= 4 passes (the 6m corpus at 16.8M tokens, 2.7
# passes; the 3m ones at 8.4M, 2.8): the long run's last size is 2.7 passes of prose-wide.
DIVERSITY = {"long-6m": ("prose-wide-6m", 2**14), "long-3m": ("prose-wide-3m", 2**13),
             "long-sotu": ("prose-wide-sotu", 2**13)}


def _diversity(name: str) -> LongRun:
    long = _long()
    corpus, steps = DIVERSITY[name]
    d8 = mapped_exponents((8,), long.train.l_tr)[0]  # the paper's Δ = 8
    w_flat, w_wide = long.sweeps.window[0], long.sweeps.window[-1]
    train = long.train.replace(steps=steps)
    return dataclasses.replace(
        long, name=name, title=f"the long run on {corpus}", decides=(2, 4),
        about=f"the diversity ladder: the long run's rising models and a flat window on {corpus} "
              f"({'one source' if name.endswith('sotu') else 'every source in proportion'}), prose-wide's "
              f"tokenizer and test split, to <= 4 passes over the text; read against predictions sealed before it "
              f"trained (python -m rflens emergence --scale {name} --list)",
        texts=(("prose", corpus),), train=train,
        points=tuple(p for p in LONG_POINTS if p <= steps),
        drift_models=(),  # no weights shipped: `emergence --check 1` retrains one instead
        boards=False,
        sweeps=Sweeps(
            slope_shift=(d8,), same_slope=(), window=(w_flat, w_wide), d_bar=long.sweeps.d_bar,
            sinusoidal_l_tr=(), table2=(), table3_pos=(), corpora=("prose",), beside_figure7=("nope",),
            seeds=(1, 2),
            seeded=((f"alibi_slope_shift={d8}", "claim 4: the flattest slopes"),
                    ("nope", "claim 4: no bias at all, the limit of flatter slopes"),
                    (f"window_window={w_wide}", "claim 2: the widest window"))),
    )


def _long_repeated() -> LongRun:
    tiny = _tiny()
    return LongRun(
        name="long-repeated",
        title="first long run (repeated text)",
        about="the first long run, kept as a control: the embedded corpora, which 33.6M tokens repeat "
              "(prose 11 times, math 95, code 3.9); one seed a model; read-only, in reference/long-repeated",
        model=tiny.model,
        data=tiny.data,
        train=_long_train(tiny),
        eval=tiny.eval.replace(erf_length_mult=16),
        # its Sinusoidal at L_tr = 64 kept the batch of 32 sequences: twice the tokens of 32's
        sweeps=dataclasses.replace(tiny.sweeps, same_tokens=False),
        read_only=True,
        drift_models=DRIFT_MODELS,
    )


def _small() -> Preset:
    vocab = 8192
    l_tr = 128
    return Preset(
        name="small",
        about="closer to the paper; days of training on 2 CPU cores (reproduce --scale small --plan estimates "
              "them): a GPU preset",
        model=ModelConfig(n_layer=4, n_head=8, d_model=256, vocab_size=vocab),
        data=DataConfig(vocab_size=vocab),
        train=TrainConfig(
            l_tr=l_tr,  # L_tr = 128: the paper's Sinusoidal example of Figure 7 uses 128 too
            batch_size=32,
            steps=3000,  # ~12M tokens
            lr=1e-3,
            warmup_frac=0.02,
            eval_interval=500,
            eval_batches=8,
            ckpt_interval=500,
        ),
        eval=EvalConfig(n_segments=500, erf_samples=64, length_mults=(1, 2, 4, 8, 16)),
        sweeps=Sweeps(
            # the paper's full grids of Table 1, the exponents mapped to L_tr = 128 (h -> h - 2)
            slope_shift=mapped_exponents(paper.SLOPE_SHIFT, l_tr),
            same_slope=mapped_exponents(paper.SAME_SLOPE, l_tr),
            # the paper's w = 40 .. 160 at its R * w / L_tr (0.94 .. 3.75): w = 30 .. 120
            window=mapped_windows(paper.WINDOW, 4, l_tr),
            d_bar=list(paper.D_BAR),
            sinusoidal_l_tr=[64, 128],
            table2=[Retrain("window", mapped_windows(paper.WINDOW, 4, l_tr)[-1]),
                    Retrain("slope_shift", mapped_exponents((8,), l_tr)[0])],
        ),
    )


def _full() -> Preset:
    # The paper: GPT-2 BPE on the Pile. The Pile needs the Hugging Face hub; on a machine
    # without it, `--set source=embedded --set vocab_size=8192` trains on the embedded corpora.
    vocab = 50257
    return Preset(
        name="full",
        about="the paper: R=12, H=12, d=768, L_tr=512, 50k steps, bf16 on GPUs",
        model=ModelConfig(n_layer=12, n_head=12, d_model=768, vocab_size=vocab),
        data=DataConfig(source="hub", vocab_size=vocab),
        train=TrainConfig(
            l_tr=512,
            batch_size=32,  # global batch; the paper's 32 per GPU on N GPUs is batch_size=32*N
            steps=50_000,
            lr=6e-4,
            beta1=0.9,
            beta2=0.999,
            weight_decay=0.0,
            warmup_frac=0.01,  # cosine decay with 1% warm-up (KERPLE / GPT-NeoX)
            min_lr_frac=0.0,
            grad_clip=1.0,
            eval_interval=1000,
            eval_batches=20,
            ckpt_interval=1000,
            dtype="bf16",
            compile=True,  # used on GPUs only (no speed-up on CPU: bench/README.md)
        ),
        eval=EvalConfig(n_segments=1000, erf_samples=64, length_mults=(1, 2, 4, 8, 16)),
        sweeps=Sweeps(
            # exactly the paper's grids (Table 1, Table 2, Figure 7, Figure 10, Table 3)
            slope_shift=paper.SLOPE_SHIFT,
            same_slope=paper.SAME_SLOPE,
            window=paper.WINDOW,
            d_bar=[64, 128, 256, 512],
            sinusoidal_l_tr=[128, 512],
            table2=[
                Retrain("window", 160, l_tr=1024),
                Retrain("slope_shift", 6, l_tr=2048),
            ],
        ),
    )


_BUILDERS = {"smoke": _smoke, "tiny": _tiny, "small": _small, "full": _full, "long": _long,
             "long-repeated": _long_repeated, "long-extended": _long_extended, "deep": _deep, "deep-d128": _deep_d128,
             **{name: functools.partial(_diversity, name) for name in DIVERSITY}}
assert tuple(_BUILDERS) == SIZES + LONG_RUNS


def get(name: str) -> Preset:
    """The size preset or long run called ``name`` (one of :data:`NAMES`), built once a
    process: the command line and the chapters resolve a name here once and pass the object on."""
    if name not in _BUILDERS:
        raise UserError(f"unknown scale {name!r}: choose a size ({', '.join(SIZES)}) or a long run "
                        f"({', '.join(LONG_RUNS)})")
    return _built(_BUILDERS[name])


def long_run(name: str) -> LongRun:
    """The long run called ``name``; a one-line error naming the long runs for a size preset."""
    run = get(name)
    if not isinstance(run, LongRun):
        raise UserError(f"{name} is a size preset, not a long run: choose one of {', '.join(LONG_RUNS)}")
    return run


@functools.cache
def _built(build) -> Preset:
    """A preset, built once a process (presets are frozen: every caller may share one)."""
    return build()
