"""Next-token choice from logits: greedy, or temperature sampling after
repetition penalty, top-k, top-p and min-p filters, with a seeded
generator (the order llama.cpp's default sampler chain applies them:
penalties, top-k, top-p, min-p, temperature)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rlx.errors import InputError


class Sampler:
    def __init__(self, temperature: float = 0.0, top_k: int = 0, top_p: float = 1.0, min_p: float = 0.0,
                 repetition_penalty: float = 1.0, seed: int | None = None):
        for name, value, ok in (("temperature", temperature, temperature >= 0),
                                ("top_k", top_k, isinstance(top_k, int) and top_k >= 0),
                                ("top_p", top_p, 0 < top_p <= 1), ("min_p", min_p, 0 <= min_p < 1),
                                ("repetition_penalty", repetition_penalty, repetition_penalty > 0)):
            if not ok:
                raise InputError(f"{name}={value!r} is out of range")
        self.temperature, self.top_k, self.top_p, self.min_p = float(temperature), top_k, float(top_p), float(min_p)
        self.repetition_penalty = float(repetition_penalty)
        self.rng = np.random.default_rng(seed)

    @property
    def greedy(self) -> bool:
        """Greedy without a penalty: the device's argmax is the whole choice."""
        return self.temperature == 0.0 and self.repetition_penalty == 1.0

    def pick(self, logits: np.ndarray, history: Sequence[int] = ()) -> int:
        x = np.asarray(logits, np.float64).copy()
        if self.repetition_penalty != 1.0 and len(history):
            seen = np.unique(np.asarray(history, np.int64))
            vals = x[seen]
            x[seen] = np.where(vals > 0, vals / self.repetition_penalty, vals * self.repetition_penalty)
        if self.temperature == 0.0:
            return int(np.argmax(x))
        keep = np.arange(x.size)
        if self.top_k and self.top_k < x.size:
            keep = np.argpartition(-x, self.top_k - 1)[: self.top_k]
        order = keep[np.argsort(-x[keep], kind="stable")]
        probs = np.exp(x[order] - x[order[0]])
        probs /= probs.sum()
        if self.top_p < 1.0:
            cut = int(np.searchsorted(np.cumsum(probs), self.top_p)) + 1
            order, probs = order[:cut], probs[:cut]
        if self.min_p > 0.0:
            mask = probs >= self.min_p * probs[0]
            order, probs = order[mask], probs[mask]
        scaled = np.exp((x[order] - x[order[0]]) / self.temperature)
        scaled /= scaled.sum()
        return int(order[self.rng.choice(order.size, p=scaled)])
