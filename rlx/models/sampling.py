"""Next-token choice: greedy, or temperature sampling after repetition
penalty, top-k, top-p and min-p filters, with a seeded generator (the
order llama.cpp's default sampler chain applies them: penalties, top-k,
top-p, min-p, temperature).

Two ways in, one result. ``pick`` takes the full logits row and does it
all on the host. ``pick_top`` takes what the device computed instead
(rlx.models.llm's "topk:<k>" output: the penalty applied, then the k best
values and their ids, descending, ties to the lower id) and does only the
filters and the draw over those k. The penalty is applied in f32 as the
kernel does and candidates are ordered the same way, so for one seed and
settings both give the same tokens."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rlx.arg_types import is_integer, is_real
from rlx.errors import InputError, RlxError
from rlx.ir.ops.topk import MAX_K
from rlx.reference.penalty import apply_repetition_penalty


def top_order(x: np.ndarray, k: int) -> np.ndarray:
    """Ids of the k largest of a 1-D x (all of them for k = 0 or k >= size),
    by descending value, ties to the lower id (the topk op's order; NaN
    aside)."""
    if not k or k >= x.size:
        return np.argsort(-x, kind="stable")
    kth = np.partition(x, x.size - k)[x.size - k]   # the k-th largest value
    above = np.flatnonzero(x > kth)
    keep = np.sort(np.concatenate([above, np.flatnonzero(x == kth)[: k - above.size]]))
    return keep[np.argsort(-x[keep], kind="stable")]


def positive_in_f32(value: float) -> bool:
    """Whether ``value`` rounds to a positive finite f32: the repetition
    penalty divides in f32, where 1e-300 is 0 and 1e300 is infinite."""
    with np.errstate(over="ignore", under="ignore"):
        return bool(0 < np.float32(value) < np.inf)


def _real(name: str, value: object, ok, expected: str) -> float:
    """``value`` as a float if it is a real number (numpy's included, bool not) that ``ok`` accepts."""
    if not is_real(value) or not ok(float(value)):
        raise InputError(f"{name}={value!r} is out of range: expected {expected}")
    return float(value)


def _integer(name: str, value: object, expected: str) -> int:
    """``value`` as an int if it is an integer >= 0 (numpy's included, bool not)."""
    if not is_integer(value) or value < 0:
        raise InputError(f"{name}={value!r} is out of range: expected {expected}")
    return int(value)


class Sampler:
    """The sampling settings and the seeded generator of one generation."""

    def __init__(self, temperature: float = 0.0, top_k: int = 0, top_p: float = 1.0, min_p: float = 0.0,
                 repetition_penalty: float = 1.0, seed: int | None = None):
        self.temperature = _real("temperature", temperature, lambda v: 0 <= v < np.inf, "a finite number >= 0")
        self.top_k = _integer("top_k", top_k, "an integer >= 0 (0: no top-k)")
        self.top_p = _real("top_p", top_p, lambda v: 0 < v <= 1, "in (0, 1]")
        self.min_p = _real("min_p", min_p, lambda v: 0 <= v < 1, "in [0, 1)")
        # in f32, as the penalty is applied: 1e-300 would be a division by 0
        self.repetition_penalty = _real("repetition_penalty", repetition_penalty, positive_in_f32,
                                        "> 0 and finite in f32")
        self.rng = np.random.default_rng(None if seed is None else _integer("seed", seed, "None or an integer >= 0"))

    @property
    def greedy(self) -> bool:
        """Greedy without a penalty: the device's argmax is the whole choice."""
        return self.temperature == 0.0 and self.repetition_penalty == 1.0

    def device_k(self, vocab: int) -> int:
        """How many candidates the device must return for ``pick_top`` to
        decide: 1 for greedy with a penalty, top_k when 1 <= top_k <= 256
        (the topk op's limit) and below the vocabulary, else 0 (no top-k:
        the full logits go to ``pick``)."""
        if self.temperature == 0.0:
            return 1
        return self.top_k if 0 < self.top_k <= min(MAX_K, vocab - 1) else 0

    def pick(self, logits: np.ndarray, history: Sequence[int] = ()) -> int:
        """The next token from the full logits row (penalty, filters, draw on the host)."""
        x = np.asarray(logits, np.float32)
        if self.repetition_penalty != 1.0 and len(history):
            x = apply_repetition_penalty(x, np.asarray(history), self.repetition_penalty)
        if self.temperature == 0.0:
            return int(np.argmax(x))
        order = top_order(x, self.top_k)
        return self._draw(x[order].astype(np.float64), order)

    def pick_top(self, values: np.ndarray, ids: np.ndarray) -> int:
        """The next token from the device's top-k: ``values`` (the penalized
        logits, descending) and their ``ids``, at least ``device_k`` of them."""
        if self.temperature == 0.0:
            return int(ids[0])
        k = self.top_k
        return self._draw(np.asarray(values[:k], np.float64), np.asarray(ids[:k], np.int64))

    def _draw(self, vals: np.ndarray, order: np.ndarray) -> int:
        """top-p, min-p, temperature and the draw over candidates sorted best first."""
        if np.isnan(vals).any():   # no probability can be formed (numpy's draw raised ValueError)
            raise RlxError("the logits to sample from hold NaN (the model's output diverged)")
        if np.isposinf(vals[0]):
            # A strong penalty (a logit divided by a tiny one) can pass f32's
            # range: the tokens at +inf outrank every other and share the draw.
            vals = np.where(np.isposinf(vals), 0.0, -np.inf)
        probs = np.exp(vals - vals[0])
        probs /= probs.sum()
        if self.top_p < 1.0:
            cut = int(np.searchsorted(np.cumsum(probs), self.top_p)) + 1
            order, probs, vals = order[:cut], probs[:cut], vals[:cut]
        if self.min_p > 0.0:
            mask = probs >= self.min_p * probs[0]
            order, vals = order[mask], vals[mask]
        scaled = np.exp((vals - vals[0]) / self.temperature)
        scaled /= scaled.sum()
        return int(order[self.rng.choice(order.size, p=scaled)])
