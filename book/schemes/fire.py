"""FIRE (Li et al., 2023, "Functional Interpolation for Relative Positions Improves Long
Context Transformers"), written as a scheme of one's own: this file is all it takes.

The bias query i gives key j is a small learned function of their distance, after two
transformations that keep its input inside the range seen in training:

    b(i, j) = f( psi(i - j) / psi(max(L, i)) ),   psi(x) = log(c x + 1)

* psi, with a learnable c > 0, compresses long distances logarithmically;
* dividing by psi(max(L, i)) is the *progressive* normalisation: the input is always in
  [0, 1], whatever the length, so a query beyond the training length reads the curve at
  points it was trained on instead of extrapolating it. Below the threshold L (learnable)
  the normaliser is fixed and the bias depends on the distance alone;
* f is an MLP 1 -> 32 -> H with a ReLU, one output per head.

Initial values as in the FIRE paper: c = 0.1. The threshold L starts at the model's
``max_distance`` setting (the distance scale of a scheme; chapter 12 sets it to L_tr).
As every scheme in rflens, one FIRE module serves all layers.
"""

import torch
from torch import nn

import rflens


@rflens.register_scheme("fire", title="FIRE")
class FIRE(rflens.RelativeScheme):
    query_dependent = True  # the normaliser psi(max(L, i)) depends on the query i

    def __init__(self, cfg, width: int = 32, c: float = 0.1):
        super().__init__(cfg)
        self.mlp = nn.Sequential(nn.Linear(1, width), nn.ReLU(), nn.Linear(width, cfg.n_head))
        self.c = nn.Parameter(torch.tensor(float(c)))
        self.threshold = nn.Parameter(torch.tensor(float(cfg.max_distance)))

    def psi(self, x):
        return torch.log1p(self.c.abs() * x)

    def position_bias(self, length: int):
        pos = torch.arange(length, dtype=torch.float32, device=self.c.device)
        distance = (pos[:, None] - pos[None, :]).clamp(min=0)  # (L, L); keys after the query are masked anyway
        normaliser = self.psi(torch.maximum(pos, self.threshold.abs()))[:, None] + 1e-6  # (L, 1)
        x = self.psi(distance) / normaliser  # in [0, 1]
        return self.mlp(x.unsqueeze(-1)).permute(2, 0, 1)  # (H, L, L)
