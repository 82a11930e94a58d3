"""A throwaway scheme of one's own, as a user would write it: loaded by tests/test_own_scheme.py."""

import torch

import rflens


@rflens.register_scheme("quarter_slope", title="Quarter slope")
def quarter_slope(distance, n_head):
    """-k / 4 in every head: a fixed linear bias."""
    return (-0.25 * distance).expand(n_head, -1)


@rflens.register_scheme("learned_slope", title="Learned slope")
class LearnedSlope(rflens.RelativeScheme):
    """-s_h k with one learnable slope per head."""

    def __init__(self, cfg):
        super().__init__(cfg)
        self.slope = torch.nn.Parameter(torch.full((cfg.n_head,), 0.5))

    def _table(self, n):
        return -self.slope[:, None] * self._distances(n, self.slope.device)
