"""Resampling: every interval of the book, a percentile bootstrap drawn here.

r(L) and its interval are computed from the per-segment losses of the last-token protocol
by :func:`paired_interval`: a paired bootstrap that resamples whole documents of the test
split where the result records the document of each segment (``segment_docs``), since the
segments of one document are not independent observations, and says how many documents it
rests on (``n_docs``; fewer than :data:`MIN_DOCS` are flagged, :func:`docs_note`). A
perplexity's own interval is :func:`bootstrap_ppl`; the interval of a mean over a few
paired rounds (the speed ratio of two schemes) is :func:`mean_interval`. Each draws its
replicates with :func:`draw_rows`, seeded as it was first drawn, so that the numbers the
book prints do not move.
"""

from __future__ import annotations

import contextlib
import functools
import contextvars

import numpy as np

from rflens.errors import UserError


# confidence intervals: percentile bootstrap, 1000 resamples, 95%
N_BOOTSTRAP = 1000
CI_LEVEL = 0.95
# A bootstrap over documents needs enough of them: with few clusters its percentile interval
# covers less often than it says (Cameron, Gelbach & Miller 2008, "Bootstrap-based
# improvements for inference with clustered errors"; Cameron & Miller 2015, "A
# practitioner's guide to cluster-robust inference": a few dozen clusters at least). An
# interval over fewer documents than this is shown with a warning, as a lower bound on the
# uncertainty, not as a 95% interval.
MIN_DOCS = 20
# What the paired intervals resample (:func:`bootstrap_over`): "documents" (whole documents
# of the test split, where a result records them) or "segments" (each segment on its own).
_OVER = contextvars.ContextVar("rflens_bootstrap_over", default="documents")


def draw_rows(seed: int, n: int, n_boot: int = N_BOOTSTRAP, *, by_n: bool = True) -> np.ndarray:
    """The (n_boot, n) units each replicate draws, with replacement.

    Two seedings, each kept because printed numbers rest on it: the paired intervals seed
    the generator with [seed, n] (``by_n``: n segments and n + 1 draw independently), a
    perplexity's interval (:func:`bootstrap_ppl`) and a speed ratio (:func:`mean_interval`)
    with ``seed`` alone."""
    return np.random.default_rng([seed, n] if by_n else seed).integers(0, n, size=(n_boot, n))


def bootstrap_indices(n: int, seed: int = 0, n_boot: int = N_BOOTSTRAP, clusters=None):
    """Resampled segment indices: one draw per replicate, the same for every length and
    every model evaluated on the same n segments with the same seed.

    Without ``clusters``: an (n_boot, n) array, each segment drawn independently. With
    ``clusters`` (n,), the cluster of each segment (its end position in the text, say, so
    that a segment drawn twice is one cluster): a replicate draws as many clusters as there
    are, with replacement, and takes every segment of each, so the interval rests on the
    distinct clusters and not on the repeated draws. Returns a list of n_boot index arrays
    (their lengths vary with the clusters drawn); clusters all distinct give the rows of the
    unclustered draw, in the same order.
    """
    if clusters is None:
        return draw_rows(seed, n, n_boot)
    label, rows = _cluster_draws(n, seed, n_boot, clusters)
    order = np.argsort(label, kind="stable")  # the segments grouped by cluster
    size = np.bincount(label)  # (k,) segments a cluster
    start = np.cumsum(size) - size  # where each cluster's segments begin in ``order``
    out = []
    for row in rows:
        sizes = size[row]
        ends = np.cumsum(sizes)
        out.append(order[np.repeat(start[row] - (ends - sizes), sizes) + np.arange(ends[-1])])
    return out


def _cluster_draws(n: int, seed: int, n_boot: int, clusters) -> tuple[np.ndarray, np.ndarray]:
    """(label, rows): the cluster number of each of the n segments (clusters numbered in the
    order of their first segment, so that distinct clusters keep the plain draw) and the
    (n_boot, k) clusters each replicate draws."""
    clusters = np.asarray(clusters)
    if clusters.shape != (n,):
        raise UserError(f"clusters must give one cluster per segment, shape ({n},), got {clusters.shape}")
    _, first, label = np.unique(clusters, return_index=True, return_inverse=True)
    rank = np.empty(first.size, dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(first.size)
    k = first.size
    rows = _kept_rows(seed, k, n_boot, True) if k * n_boot <= KEEP_DRAWS else draw_rows(seed, k, n_boot)
    return rank[label.reshape(-1)], rows


KEEP_DRAWS = 1 << 22  # elements (32 MB) of a bootstrap draw worth keeping for the process's next call


def draw_counts(rows: np.ndarray, k: int) -> np.ndarray:
    """How often each replicate (row) of ``rows`` draws each of the k units, (len(rows), k), as
    floats: a replicate's sum is then one product with the units' values, not a gather."""
    counts = np.bincount((np.arange(len(rows))[:, None] * k + rows).ravel(), minlength=len(rows) * k)
    return counts.reshape(len(rows), k).astype(np.float64)


@functools.lru_cache(maxsize=8)
def _kept_rows(seed: int, k: int, n_boot: int, by_n: bool) -> np.ndarray:
    """:func:`draw_rows`, drawn once a process for each (seed, k, n_boot, by_n)."""
    rows = draw_rows(seed, k, n_boot, by_n=by_n)
    rows.flags.writeable = False  # shared by every caller
    return rows


@functools.lru_cache(maxsize=8)
def _kept_counts(seed: int, k: int, n_boot: int, by_n: bool) -> np.ndarray:
    counts = draw_counts(_kept_rows(seed, k, n_boot, by_n), k)
    counts.flags.writeable = False
    return counts


def cluster_bootstrap_sums(values: np.ndarray, clusters, seed: int = 0, n_boot: int = N_BOOTSTRAP) -> np.ndarray:
    """The sums over each replicate of :func:`bootstrap_indices` with ``clusters``, without
    gathering its index arrays: ``values`` (..., n) summed over the segments a replicate
    draws, as (..., n_boot). A replicate takes each cluster as often as it draws it, so its
    sum is the per-cluster sums weighted by those counts (equal to the gathered sums up to
    the order of the additions)."""
    values = np.asarray(values, dtype=np.float64)
    n = values.shape[-1]
    label, rows = _cluster_draws(n, seed, n_boot, clusters)
    k = rows.shape[1]
    kept = k * n_boot <= KEEP_DRAWS  # a book's evaluation: the counts are kept with the draw
    counts = _kept_counts(seed, k, n_boot, True) if kept else None
    flat = values.reshape(-1, n)
    per_cluster = np.stack([np.bincount(label, weights=v, minlength=k) for v in flat])  # (m, k)
    out = np.empty((flat.shape[0], n_boot))
    for start in range(0, n_boot, _BLOCK):  # a block of replicates at a time: a large draw's counts stay O(n)
        block = counts[start:start + _BLOCK] if kept else draw_counts(rows[start:start + _BLOCK], k)
        out[:, start:start + len(block)] = per_cluster @ block.T
    return out.reshape(*values.shape[:-1], n_boot)


_BLOCK = 64


def bootstrap_ppl(nll_sum, count=None, seed: int = 0, n_boot: int = N_BOOTSTRAP,
                  level: float = CI_LEVEL, clusters=None) -> tuple[float, float, float]:
    """exp(sum NLL / tokens) and its percentile-bootstrap interval over the units given.

    ``nll_sum``: (U,) summed NLL of each unit (segment, chunk, window); ``count``: its number
    of scored tokens (1 per unit if None). ``clusters`` (U,): units of one cluster (a
    segment drawn twice: the same end position) are resampled together
    (:func:`bootstrap_indices`); all distinct, or None, is the plain bootstrap, drawn with
    ``seed`` alone (:func:`draw_rows`). Returns (ppl, ci_low, ci_high).
    """
    nll_sum = np.asarray(nll_sum, dtype=np.float64)
    count = np.ones_like(nll_sum) if count is None else np.asarray(count, dtype=np.float64)
    ppl = float(np.exp(nll_sum.sum() / count.sum()))
    if clusters is not None and np.unique(clusters).size < nll_sum.size:
        sums = cluster_bootstrap_sums(np.stack([nll_sum, count]), clusters, seed, n_boot)
        boot = np.exp(sums[0] / sums[1])
    else:  # a book's evaluation: the draw is kept; a large one is drawn now and not held after
        n = nll_sum.size
        drawn = (_kept_counts(seed, n, n_boot, False) if n * n_boot <= KEEP_DRAWS
                 else draw_counts(draw_rows(seed, n, n_boot, by_n=False), n))  # (n_boot, U)
        boot = np.exp((drawn @ nll_sum) / (drawn @ count))
    lo, hi = np.quantile(boot, [(1 - level) / 2, (1 + level) / 2])
    return ppl, float(lo), float(hi)


def mean_interval(values, seed: int = 0, n_boot: int = N_BOOTSTRAP,
                  level: float = CI_LEVEL) -> tuple[float, float, float]:
    """The mean of ``values`` (n,) and its percentile-bootstrap interval, each replicate the
    mean of n values drawn with replacement (:func:`draw_rows`, seeded with ``seed`` alone).
    Returns (mean, low, high)."""
    values = np.asarray(values, dtype=np.float64)
    rows = draw_rows(seed, values.size, n_boot, by_n=False)
    lo, hi = np.quantile(values[rows].mean(1), [(1 - level) / 2, (1 + level) / 2])
    return float(values.mean()), float(lo), float(hi)


@contextlib.contextmanager
def bootstrap_over(unit: str):
    """Within the block, the paired intervals (:func:`add_ppl_columns`, the claims' ratios
    between schemes) resample ``unit``: "documents" (the default: whole documents of the
    test split, all segments of a drawn document together, wherever a result records the
    document of each segment) or "segments" (each segment on its own, as if independent)."""
    if unit not in ("documents", "segments"):
        raise UserError(f"bootstrap over {unit!r}: choose documents or segments")
    token = _OVER.set(unit)
    try:
        yield
    finally:
        _OVER.reset(token)


def clusters_of(docs) -> np.ndarray | None:
    """The clusters a paired interval resamples: the documents ``docs`` of the segments
    (None when not known), or None inside ``bootstrap_over("segments")``."""
    if docs is None or _OVER.get() == "segments":
        return None
    return np.asarray(docs, dtype=np.int64)


def n_docs(docs) -> int | None:
    """How many distinct documents hold the scored tokens (None when not known)."""
    return None if docs is None else int(np.unique(np.asarray(docs)).size)


def docs_note(k: int | None) -> str:
    """A warning for an interval over ``k`` documents: empty when there are at least
    :data:`MIN_DOCS` (or the documents are not known)."""
    if k is None or k >= MIN_DOCS:
        return ""
    return (f"the scored tokens come from {k} document{'s' * (k != 1)} of the test split, fewer than {MIN_DOCS}: "
            f"a bootstrap over so few documents is unreliable, so each interval is the wider of the document and "
            f"segment intervals; read it as a lower bound on the uncertainty, not as a 95% interval")


def paired_interval(nll: np.ndarray, base: int = 0, seed: int = 0, docs=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(r, low, high) of :func:`paired_ratio` as the book reports it: over whole documents
    when ``docs`` (the document of each segment) is known and :func:`bootstrap_over` does not
    say segments, else over segments (then bitwise :func:`paired_ratio` without clusters).

    The rule for few documents: from :data:`MIN_DOCS` documents on, the document interval;
    below, the bootstrap over so few clusters is unreliable and often too narrow itself, so
    the interval is the union of the document and the segment intervals (never narrower than
    either), and :func:`docs_note` says it is a lower bound on the uncertainty."""
    clusters = clusters_of(docs)
    if clusters is None:
        return paired_ratio(nll, base=base, seed=seed)
    r, dlo, dhi = paired_ratio(nll, base=base, seed=seed, clusters=clusters)
    if n_docs(clusters) >= MIN_DOCS:
        return r, dlo, dhi
    _, lo, hi = paired_ratio(nll, base=base, seed=seed)  # the segment interval, for the union
    return r, np.minimum(lo, dlo), np.maximum(hi, dhi)


def paired_ratio(nll: np.ndarray, base: int = 0, seed: int = 0, n_boot: int = N_BOOTSTRAP,
                 level: float = CI_LEVEL, clusters=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """r(L) = ppl(L) / ppl(L_base) and its paired percentile-bootstrap interval.

    ``nll``: (lengths, N) per-segment NLLs of the last-token protocol, the same N tokens at
    every length. r(L) = exp(mean_i [NLL_i(L) - NLL_i(L_base)]): a mean of per-segment
    differences, so the interval reflects how consistently the extra context helps or
    hurts on the same tokens, not how hard the tokens are (which the interval of ppl
    itself mostly measures). Each replicate resamples the segments once
    (:func:`bootstrap_indices`) and uses that draw at every length. ``clusters`` (N,): the
    document of each segment; a replicate then draws whole documents (as many as there are,
    with replacement) with all their segments, so segments of one text, which tend to move
    together, count as one observation. Without it each segment is drawn on its own.
    Returns (r, low, high), each of shape (lengths,).
    """
    nll = np.asarray(nll, dtype=np.float64)
    if nll.ndim != 2 or nll.shape[1] == 0:
        raise UserError(f"per-segment NLLs must be a (lengths, N) array, got shape {nll.shape}")
    diff = nll - nll[base]  # (lengths, N)
    r = np.exp(diff.mean(1))
    if clusters is None:
        boot = np.exp(diff[:, bootstrap_indices(nll.shape[1], seed, n_boot)].mean(-1))  # (lengths, n_boot)
    else:
        sums = cluster_bootstrap_sums(np.concatenate([diff, np.ones((1, diff.shape[1]))]), clusters, seed, n_boot)
        boot = np.exp(sums[:-1] / sums[-1])  # (lengths, n_boot): each replicate's mean difference
    lo, hi = np.quantile(boot, [(1 - level) / 2, (1 + level) / 2], axis=1)
    return r, lo, hi
