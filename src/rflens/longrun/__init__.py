"""The long runs: models trained once to a large budget and measured as they grow.

- ``plan``: which models a long run trains, in which order, measured at which sizes.
- ``emergence``: training one model with its emergence points and shipping it.
- ``recheck``: a shipped model trained again from scratch and compared with the bundle.
- ``compare``: the long runs read side by side (new text against repeated text, seeds).
- ``forecast``: when a model that still rises reaches r = 2, sealed before it is tested.
- ``clock``: what each clock of failure (tokens, tokens per parameter) predicts for a ladder, sealed before it trains.

May import: ``store``, ``training``, ``measure``, ``model``, ``data``, ``setup`` and the root.
"""
