"""What a trained model's settings say of it: the mixin of the stores that hold one (a run of
the run store, :class:`rflens.store.runs.Run`; a shipped model of a bundle,
:class:`rflens.store.shipped.ShippedRun`)."""

from __future__ import annotations

from rflens.setup.config import ModelConfig, TrainConfig


class TrainedModel:
    """A store's trained model, read from its settings: the store sets ``model_cfg`` and
    ``train_cfg``."""

    model_cfg: ModelConfig
    train_cfg: TrainConfig

    @property
    def pos(self) -> str:
        return self.model_cfg.pos

    @property
    def l_tr(self) -> int:
        return self.train_cfg.l_tr

    def measurable(self, lengths, draw: str = "uniform") -> list[int]:
        """The lengths of ``lengths`` this model's last-token perplexity can be read at with
        segments drawn by ``draw`` (:data:`rflens.measure.perplexity.DRAWS`): a model with
        weights, all of them on the uniform draw; the documents draw is read only where a
        long run measured it (a shipped model's)."""
        return [int(L) for L in lengths] if draw == "uniform" else []

    def erf_segment(self, length: int) -> int:
        """The segment length this model's receptive field can be measured on when ``length``
        is asked for (a model with weights: ``length`` itself)."""
        return int(length)
