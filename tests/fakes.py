"""Stand-ins shared by the tests of the measuring instruments (evaluate, receptive)."""

from __future__ import annotations


class FakeRun:
    """The part of rflens.store.runs.Run that evaluate and receptive use: a model, a corpus, a
    training length of 8, and a results cache in memory that counts its computations."""

    scale = None

    def __init__(self, model, corpus):
        self.model, self.model_cfg = model, model.cfg
        self.train_cfg = type("T", (), {"l_tr": 8})()
        self._corpus = corpus
        self.store, self.computed = {}, 0

    def load_model(self):
        return self.model

    def corpus(self):
        return self._corpus

    def cached(self, name, params, compute):
        key = (name, repr(sorted(params.items())))
        if key not in self.store:
            self.computed += 1
            self.store[key] = compute()
        return self.store[key]
