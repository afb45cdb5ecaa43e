"""Random short-time Fourier transforms: rlx.signal.stft_array and
istft_array on the device under test, against the definitions librosa
implements; and random log-mel front ends against librosa's
(``log_mel_case``, below).

``signal_case(seed)`` is a pure function of its seed: an even seed an
stft, an odd one an istft, with n_fft from 1 (stft) or 2 (istft) to 1024,
a window of its own length (hann, hamming or boxcar, one sample long
included) or of n_fft, hop lengths from 1 to twice the window (the
default too), centre padding (constant or reflect) or none, no, one or
two batch axes, and for istft a `length` or none.

- stft against its definition in float64 (numpy's padding, frames, the
  scipy window centred in n_fft, numpy's rfft): librosa 0.11 computes the
  last centred frame differently when reflect padding reaches into it, so
  librosa itself is only the judge of which arguments are refused. Bound:
  2e-5 log2(n_fft) of the largest bin.
- istft against librosa.istft where the summed squared windows are above
  1e-3 of their largest (elsewhere both divide by almost nothing); bound
  1e-4 of the largest sample there.
- refusals: rlx raises an RlxError exactly where librosa raises, except
  two cases where rlx refuses or computes on purpose: a default hop of
  win_length // 4 = 0 (rlx refuses a zero hop, librosa runs it), and
  n_fft = 1 with centring (librosa's framing fails on its zero padding,
  the definition has an answer).

The first sweeps found two bugs: a one-sample hann / hamming window was 0
/ 0.08 where scipy's is 1, and an istft of one centred frame (no sample
left) raised an IndexError while building its graph.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

import rlx
from rlx import signal

from .ops import repro_command

N_FFTS = (1, 2, 3, 4, 5, 8, 16, 30, 64, 100, 128, 255, 256, 400, 512, 1024)


@dataclass
class SignalCase:
    seed: int
    inverse: bool
    n_fft: int
    win_length: int | None
    hop_length: int | None
    center: bool
    pad_mode: str
    window: str
    value: np.ndarray          # the signal (stft) or the spectrogram (istft)
    length: int | None

    def describe(self) -> str:
        what = "istft" if self.inverse else "stft"
        return (f"{what} of {self.value.shape} ({self.value.dtype}), n_fft {self.n_fft}, win_length "
                f"{self.win_length}, hop_length {self.hop_length}, center {self.center}, pad_mode "
                f"{self.pad_mode!r}, window {self.window!r}, length {self.length}")

    def command(self) -> str:
        return repro_command("signal", self.seed)


def signal_case(seed: int) -> SignalCase:
    rng = np.random.default_rng([seed, 13])
    inverse = seed % 2 == 1
    n_fft = int(rng.choice(N_FFTS[1:] if inverse else N_FFTS))
    win = None if rng.random() < 0.5 else int(rng.integers(1, n_fft + 1))
    reach = win or n_fft
    hop = None if rng.random() < 0.3 else int(rng.integers(1, (reach if inverse else 2 * reach) + 1))
    center = bool(rng.random() < 0.6)
    pad_mode = str(rng.choice(["constant", "reflect"]))
    window = str(rng.choice(["hann", "hamming", "boxcar"]))
    lead = [(), (2,), (1, 3)][int(rng.integers(0, 3))]
    length = None
    if inverse:
        shape = lead + (n_fft // 2 + 1, int(rng.integers(1, 60)))
        value = (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex64)
        length = None if rng.random() < 0.6 else int(rng.integers(1, 3000))
    else:
        value = rng.standard_normal(lead + (int(rng.integers(1, 3000)),)).astype(np.float32)
    return SignalCase(seed, inverse, n_fft, win, hop, center, pad_mode, window, value, length)


def _stft_definition(case: SignalCase) -> np.ndarray:
    import scipy.signal

    reach = case.win_length or case.n_fft
    window = scipy.signal.get_window(case.window, reach, fftbins=True)
    left = (case.n_fft - reach) // 2
    window = np.pad(window, (left, case.n_fft - reach - left))
    y = case.value.astype(np.float64)
    if case.center:
        half = case.n_fft // 2
        y = np.pad(y, [(0, 0)] * (y.ndim - 1) + [(half, half)], mode=case.pad_mode)
    hop = case.hop_length or reach // 4
    n_frames = 1 + (y.shape[-1] - case.n_fft) // hop
    frames = [np.fft.rfft(y[..., i * hop:i * hop + case.n_fft] * window, axis=-1) for i in range(n_frames)]
    return np.stack(frames, -1)


def _librosa(case: SignalCase):
    import librosa

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if case.inverse:
            return librosa.istft(case.value, hop_length=case.hop_length, win_length=case.win_length,
                                 n_fft=case.n_fft, window=case.window, center=case.center, length=case.length)
        return librosa.stft(case.value, n_fft=case.n_fft, hop_length=case.hop_length, win_length=case.win_length,
                            window=case.window, center=case.center, pad_mode=case.pad_mode)


def _rlx(case: SignalCase) -> np.ndarray:
    if case.inverse:
        return signal.istft_array(case.value, hop_length=case.hop_length, win_length=case.win_length,
                                  n_fft=case.n_fft, window=case.window, center=case.center, length=case.length)
    return signal.stft_array(case.value, n_fft=case.n_fft, hop_length=case.hop_length,
                             win_length=case.win_length, window=case.window, center=case.center,
                             pad_mode=case.pad_mode)


def check_signal_case(case: SignalCase) -> str | None:
    """The failure (None: passed) of rlx's transform against the peers."""
    reach = case.win_length or case.n_fft
    if case.hop_length is None and reach < 4:
        try:
            _rlx(case)
        except rlx.RlxError as e:   # a zero default hop: refused, saying why
            return None if "hop_length" in str(e) else f"{case.describe()}: refused for another reason: {e}"
        return f"{case.describe()}: a zero default hop was not refused"
    try:
        want = _librosa(case)
        librosa_error = None
    except Exception as e:   # noqa: BLE001 (whatever librosa raises counts as a refusal)
        want, librosa_error = None, e
    try:
        got = _rlx(case)
    except rlx.RlxError as e:
        if librosa_error is None:
            return f"{case.describe()}: rlx refused ({e}) what librosa computes; re-run: {case.command()}"
        return None
    if librosa_error is not None:
        if not case.inverse and case.n_fft == 1 and case.center:
            want = None   # librosa's framing fails on its zero padding; the definition has an answer
        else:
            return (f"{case.describe()}: librosa refused ({type(librosa_error).__name__}: {librosa_error}) "
                    f"what rlx computed; re-run: {case.command()}")
    if not case.inverse:
        want = _stft_definition(case)
        scale = max(float(np.abs(want).max(initial=0.0)), 1e-30)
        bound = 2e-5 * max(1.0, np.log2(case.n_fft))
        region = np.ones(want.shape, bool)
    else:
        import librosa

        hop = case.hop_length or reach // 4
        env = librosa.filters.window_sumsquare(window=case.window, n_frames=case.value.shape[-1], hop_length=hop,
                                               win_length=reach, n_fft=case.n_fft, dtype=np.float64)
        env = env[case.n_fft // 2:] if case.center else env
        env = np.pad(env, (0, max(0, want.shape[-1] - env.shape[0])))[:want.shape[-1]]
        region = np.broadcast_to(env > 1e-3 * max(float(env.max(initial=0.0)), 1e-30), want.shape)
        scale = max(float(np.abs(np.where(region, want, 0.0)).max(initial=0.0)), 1e-30)
        bound = 1e-4
    if got.shape != want.shape:
        return f"{case.describe()}: shape {got.shape}, want {want.shape}; re-run: {case.command()}"
    err = float(np.abs(np.where(region, got - want, 0.0)).max(initial=0.0)) / scale
    if err > bound:
        return f"{case.describe()}: error {err:.3g} of the largest value (bound {bound:.3g}); re-run: {case.command()}"
    return None


# ---------------------------------------------------------------- log-mel spectrograms

@dataclass
class LogMelCase:
    seed: int
    kwargs: dict
    value: np.ndarray

    def describe(self) -> str:
        return f"log-mel of {self.value.shape}, {self.kwargs}"

    def command(self) -> str:
        return repro_command("log_mel", self.seed)


def log_mel_case(seed: int) -> LogMelCase:
    """A tone plus noise at a random rate through a random front end: n_fft,
    hop, mel count (1 included), band edges, HTK or Slaney mels and
    normalisation, magnitude or power, ref (a number or "max"), amin, top_db,
    centring."""
    rng = np.random.default_rng([seed, 17])
    sr = float(rng.choice([8000, 16000, 22050, 44100]))
    n_fft = int(rng.choice([16, 64, 100, 256, 400, 512, 1024]))
    fmin = float(rng.choice([0.0, 20.0, 300.0]))
    kwargs = dict(sr=sr, n_fft=n_fft, hop_length=None if rng.random() < 0.3 else int(rng.integers(1, n_fft + 1)),
                  n_mels=int(rng.choice([1, 8, 40, 80, 128])), fmin=fmin,
                  fmax=None if rng.random() < 0.5 else float(rng.uniform(fmin + 100.0, sr / 2)),
                  htk=bool(rng.random() < 0.3), norm=None if rng.random() < 0.3 else "slaney",
                  power=float(rng.choice([1.0, 2.0])), center=bool(rng.random() < 0.7),
                  ref=float(rng.choice([1.0, 0.5, 10.0])), amin=float(rng.choice([1e-10, 1e-5])),
                  top_db=None if rng.random() < 0.5 else float(rng.choice([0.0, 20.0, 80.0])))
    n = int(rng.integers(n_fft, 8000))
    lead = [(), (2,)][int(rng.integers(0, 2))]
    t = np.arange(n) / sr
    tone = 0.5 * np.sin(2 * np.pi * rng.uniform(50.0, sr / 3) * t)
    value = (tone + 0.05 * rng.standard_normal(lead + (n,))).astype(np.float32)
    if rng.random() < 0.25:   # drawn last, so the earlier seeds' cases stay as they were
        kwargs["ref"] = "max"
    return LogMelCase(seed, kwargs, value)


def check_log_mel_case(case: LogMelCase) -> str | None:
    """rlx.signal.log_mel_spectrogram_array against librosa.power_to_db(
    librosa.feature.melspectrogram(...)): dB within 5e-3 where the mel
    power is above 1e-8 of the largest (power scale for both magnitude and
    power spectra: the transform's f32 error is relative to its largest
    bin, so fainter bins carry more dB error)."""
    import librosa

    kw = dict(case.kwargs)
    ref, amin, top_db = kw.pop("ref"), kw.pop("amin"), kw.pop("top_db")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mel = librosa.feature.melspectrogram(y=case.value, **kw)
        # Clip by clip: each has its own peak (librosa >= 1.0, and rlx; librosa 0.11 took the batch's).
        want = np.stack([librosa.power_to_db(m, ref=np.max if ref == "max" else ref, amin=amin, top_db=top_db)
                         for m in mel.reshape((-1,) + mel.shape[-2:])]).reshape(mel.shape)
    got = signal.log_mel_spectrogram_array(case.value, **case.kwargs)
    if got.shape != want.shape:
        return f"{case.describe()}: shape {got.shape}, want {want.shape}; re-run: {case.command()}"
    power = mel ** (2.0 / kw["power"])
    live = power > 1e-8 * power.max(initial=0.0)
    err = float(np.abs(got - want)[live].max(initial=0.0))
    if err > 5e-3:
        return f"{case.describe()}: {err:.3g} dB from librosa (bound 5e-3); re-run: {case.command()}"
    return None
