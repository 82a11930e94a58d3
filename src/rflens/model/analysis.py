"""Small numerical analyses of the positional biases (Chi et al., ACL 2023, Sections 6-7).

* :func:`fit_log_curve` -- least-squares fit of ``a * log(1 + k) + b`` to a bias curve.
* :func:`sandwich_log_fit` -- the paper's "smoothed Sandwich": that fit applied to the
  Sandwich bias (d_bar = 128, one head with compression ratio h_c = 8). Over the distances
  0..8191 it gives a ~ -0.83, b ~ -0.79, close to the paper's y = -0.825 log(1+k) - 0.8;
  over only the 50 nearest distances it gives about (-1.02, 0.0) instead.
* :func:`sandwich_by_d_bar` / :func:`larger_d_bar_is_more_negative` -- Figure 10: a larger
  d_bar makes the bias more negative at every distance, i.e. a stronger window.
"""

from __future__ import annotations

import numpy as np
import torch

from rflens.errors import UserError
from rflens.model.positional import sandwich_bias
from rflens.paper import D_BAR, LOG_FIT_LENGTH, SANDWICH_COMPRESSION, SANDWICH_D_BAR


def fit_log_curve(distances=None, bias=None) -> tuple[float, float]:
    """Least squares ``bias ~ a * log(1 + k) + b`` over the given distances k; returns (a, b).

    With no arguments: the paper's fit, the Sandwich bias with d_bar = 128 and h_c = 8 over
    the distances k = 0..8191.
    """
    if distances is None and bias is None:
        distances = np.arange(LOG_FIT_LENGTH)
        bias = sandwich_curve(SANDWICH_D_BAR, SANDWICH_COMPRESSION, LOG_FIT_LENGTH)
    k = np.asarray(distances, dtype=np.float64)
    y = np.asarray(bias, dtype=np.float64)
    if k.shape != y.shape or k.ndim != 1 or len(k) < 2:
        raise UserError("fit_log_curve needs two 1-D arrays of the same length (at least 2 points)")
    design = np.stack([np.log1p(k), np.ones_like(k)], axis=1)  # (n, 2)
    (a, b), *_ = np.linalg.lstsq(design, y, rcond=None)
    return float(a), float(b)


def sandwich_curve(d_bar: int = SANDWICH_D_BAR, compression: float = SANDWICH_COMPRESSION,
                   length: int = LOG_FIT_LENGTH) -> np.ndarray:
    """Sandwich bias of one head (compression ratio h_c) at distances 0..length-1, float64."""
    k = torch.arange(length, dtype=torch.float64)
    return sandwich_bias(k, d_bar, torch.tensor([float(compression)], dtype=torch.float64))[0].numpy()


def sandwich_log_fit(d_bar: int = SANDWICH_D_BAR, compression: float = SANDWICH_COMPRESSION,
                     max_distance: int = LOG_FIT_LENGTH - 1,
                     nearest: int | None = None) -> dict:
    """Fit the log curve to the Sandwich bias over distances 0..max_distance (or the
    ``nearest`` distances 0..nearest-1). Returns {"a", "b", "rmse", "distances", ...}."""
    n = (max_distance + 1) if nearest is None else nearest
    y = sandwich_curve(d_bar, compression, n)
    k = np.arange(n)
    a, b = fit_log_curve(k, y)
    rmse = float(np.sqrt(np.mean((a * np.log1p(k) + b - y) ** 2)))
    return {"a": a, "b": b, "rmse": rmse, "distances": n, "d_bar": d_bar, "compression": compression}


def sandwich_by_d_bar(d_bars=D_BAR, compression: float = SANDWICH_COMPRESSION, length: int = 512) -> dict[int, np.ndarray]:
    """{d_bar: Sandwich bias at distances 0..length-1} for one head."""
    return {int(d): sandwich_curve(int(d), compression, length) for d in d_bars}


def larger_d_bar_is_more_negative(d_bars=D_BAR, compression: float = SANDWICH_COMPRESSION, length: int = 512,
                                  tol: float = 1e-9) -> dict:
    """Check Figure 10's reading: for d_bar sorted ascending, each larger d_bar gives a
    bias at least as negative at every distance k > 0 (strictly lower somewhere).

    Returns {"holds": bool, "worst_margin": float, "pairs": [(d_small, d_large, max over k>0 of
    bias_large - bias_small)]}; a positive margin is a distance where the claim fails.
    """
    curves = sandwich_by_d_bar(sorted(d_bars), compression, length)
    keys = sorted(curves)
    pairs = []
    for small, large in zip(keys, keys[1:]):
        diff = curves[large][1:] - curves[small][1:]  # (length-1,): should be <= 0
        pairs.append((small, large, float(diff.max())))
    worst = max(p[2] for p in pairs) if pairs else 0.0
    return {"holds": bool(pairs) and worst <= tol, "worst_margin": worst, "pairs": pairs}
