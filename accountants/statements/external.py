"""Runs described by the other tools of the field, read as our events: Opacus and TF-Privacy.

Pure: no torch (a `.pt` checkpoint is opened by `uldp.trainers.external_files`, which hands the
loaded object to `opacus_events`), no dp_accounting.

Opacus (github.com/pytorch/opacus, opacus/accountants/accountant.py and rdp.py, read at commit
4d0ebc8 of 2025-09-16). `RDPAccountant.history` is a list of (noise_multiplier, sample_rate,
num_steps) tuples; `step()` increments the last entry's num_steps when the noise multiplier and
sample rate are unchanged and appends (noise_multiplier, sample_rate, 1) otherwise. Each entry is
num_steps compositions of the Poisson-subsampled Gaussian with that multiplier and rate (Opacus's
`compute_rdp(q=sample_rate, noise_multiplier, steps)`, summed over the entries), which is our
SubsampledGaussian(noise_multiplier, sample_rate, num_steps); the entries compose sequentially.
`IAccountant.state_dict()` is an OrderedDict {"history": deepcopy(history), "mechanism":
cls.mechanism()}, the mechanism being "rdp" for RDPAccountant, "prv" for PRVAccountant and "gdp"
for GaussianAccountant; `load_state_dict` refuses a state without both keys or of another
mechanism, and so do we. `PrivacyEngine.save_checkpoint` (opacus/privacy_engine.py) torch.saves a
dict holding that state under "privacy_accountant_state_dict", which we also accept. Opacus turns
the RDP into epsilon with Balle et al. 2020, Thm. 21, our "improved" conversion, at its
DEFAULT_ALPHAS, our "tf-privacy" order preset: `account_event(opacus_events(state), delta, "rdp",
orders="tf-privacy")` is Opacus's `get_epsilon(delta)`, up to its omission of the
total-variation rule (`accountants.conversion`) and, at fractional orders, our tighter series
(`accountants.rdp.curves`); tests/accountants/test_interop.py gets Opacus's own test value back.
The event is what Opacus accounted, assumption included: `make_private` sets sample_rate =
1 / len(data_loader) and accounts Poisson sampling at that rate, which its DPDataLoader draws
(with `poisson_sampling=False` the batches are not Poisson-sampled, and the accounting, ours
too, then rests on an assumption the run did not meet).

TF-Privacy (github.com/tensorflow/privacy, tensorflow_privacy/privacy/analysis/
compute_dp_sgd_privacy_lib.py, read at commit 03035d5 of 2026-04-06): see `DpSgdDescription`.
"""

from __future__ import annotations

import json
import math
import numbers
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from uldp.errors import DataError, InvalidParameter
from uldp.input_files import CAPS, InputFileError, read_text

from ..events import SIGMA_MAX, SIGMA_MIN, Composed, Event, Group, SubsampledGaussian
from ..plan import dataset_rate, epochs_steps

#: The accountant type whose state we read (Opacus's `RDPAccountant.mechanism()`).
OPACUS_RDP = "rdp"
#: Where `PrivacyEngine.save_checkpoint` puts the accountant's state.
OPACUS_CHECKPOINT_KEY = "privacy_accountant_state_dict"


# --------------------------------------------------------------------------------------------
# Opacus


def opacus_events(obj: object) -> SubsampledGaussian | Composed:
    """The run an Opacus RDPAccountant accounted, as one of our events.

    obj: the accountant's `history` (a list of (noise_multiplier, sample_rate, num_steps)
    entries, tuples or, after JSON, lists), its `state_dict()` ({"history": [...],
    "mechanism": "rdp"}), or a `PrivacyEngine.save_checkpoint` dict holding that state under
    "privacy_accountant_state_dict". Consecutive entries with the same multiplier and rate are
    merged (Opacus merges them as it steps; a history joined from several runs may not be); one
    entry gives one SubsampledGaussian, several a Composed of them in order.

    DataError, one line naming the problem, for a state of another accountant type (Opacus's
    "prv" or "gdp"), a state without its keys, or a malformed or empty history.
    """
    history = _opacus_history(obj)
    if isinstance(history, (str, bytes)) or not isinstance(history, Sequence):
        raise DataError(
            "the Opacus history must be a list of (noise_multiplier, sample_rate, num_steps) "
            f"entries, got {type(history).__name__}"
        )
    if not history:
        raise DataError("the Opacus history is empty: the accountant recorded no step")
    merged: list[tuple[float, float, int]] = []
    for i, entry in enumerate(history):
        sigma, rate, steps = _opacus_entry(entry, i)
        if merged and merged[-1][:2] == (sigma, rate):
            merged[-1] = (sigma, rate, merged[-1][2] + steps)
        else:
            merged.append((sigma, rate, steps))
    runs = tuple(SubsampledGaussian(sigma, rate, steps) for sigma, rate, steps in merged)
    return runs[0] if len(runs) == 1 else Composed(runs)


def _opacus_history(obj: object) -> object:
    """The history inside `obj`: a state dict's, a checkpoint's, or `obj` itself."""
    if not isinstance(obj, Mapping):
        return obj
    if OPACUS_CHECKPOINT_KEY in obj and "history" not in obj:
        obj = obj[OPACUS_CHECKPOINT_KEY]
        if not isinstance(obj, Mapping):
            raise DataError(
                f"the checkpoint's {OPACUS_CHECKPOINT_KEY!r} is a {type(obj).__name__}, "
                "not an Opacus accountant state"
            )
    missing = [key for key in ("history", "mechanism") if key not in obj]
    if missing:
        raise DataError(
            f"not an Opacus accountant state: no {missing[0]!r} key (an RDPAccountant's "
            "state_dict() has 'history' and 'mechanism')"
        )
    mechanism = obj["mechanism"]
    if mechanism != OPACUS_RDP:
        raise DataError(
            f"the Opacus accountant state is of type {mechanism!r}; uldp report reads "
            f"RDPAccountant states (mechanism {OPACUS_RDP!r})"
        )
    return obj["history"]


def _opacus_entry(entry: object, i: int) -> tuple[float, float, int]:
    """(noise_multiplier, sample_rate, num_steps) of history entry i, checked."""
    where = f"Opacus history entry {i}"
    if isinstance(entry, (str, bytes)) or not isinstance(entry, Sequence) or len(entry) != 3:
        raise DataError(f"{where} is {entry!r}, not (noise_multiplier, sample_rate, num_steps)")
    sigma = _real(entry[0], f"{where}: noise_multiplier")
    rate = _real(entry[1], f"{where}: sample_rate")
    steps = _scalar(entry[2])
    if isinstance(steps, bool) or not isinstance(steps, numbers.Integral):
        raise DataError(f"{where}: num_steps must be an integer, got {entry[2]!r}")
    if not SIGMA_MIN <= sigma <= SIGMA_MAX:
        # Opacus accepts a multiplier of 0 (no noise), whose epsilon is infinite.
        raise DataError(f"{where}: noise_multiplier must be in [{SIGMA_MIN:g}, {SIGMA_MAX:g}], got {sigma:g}")
    if not 0 < rate <= 1:
        raise DataError(f"{where}: sample_rate must be in (0, 1], got {rate:g}")
    if steps < 1:
        raise DataError(f"{where}: num_steps must be >= 1, got {int(steps)}")
    return sigma, rate, int(steps)


def _scalar(x: object) -> object:
    """A numpy or torch 0-d value as the Python number it holds (duck-typed: no torch import)."""
    item = getattr(x, "item", None)
    if callable(item) and getattr(x, "ndim", None) == 0:
        return item()
    return x


def _real(x: object, where: str) -> float:
    value = _scalar(x)
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise DataError(f"{where} must be a finite number, got {x!r}")
    return float(value)


def read_opacus_file(path: str | os.PathLike[str]) -> SubsampledGaussian | Composed:
    """`opacus_events` of a JSON file: a history, a state dict or a checkpoint dict.

    (`json.dump(accountant.state_dict(), f)` writes one: the tuples become lists.) DataError for
    a missing, unreadable or non-JSON file. A torch `.pt` file is read by
    `uldp.trainers.external_files.read_opacus_state`.
    """
    name = Path(path).name
    try:
        text = read_text(path, None, cap=CAPS["json"])  # utf-8-sig: a BOM some editors write
    except InputFileError as exc:  # no such file, a FIFO, a device, over the cap
        raise DataError(f"{name}: {exc.reason}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(f"{name}: cannot read it as a JSON text file ({exc})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataError(f"{name}: not JSON ({exc}); a torch .pt file needs torch to be read") from None
    try:
        return opacus_events(data)
    except DataError as exc:
        raise DataError(f"{name}: {exc}") from None


# --------------------------------------------------------------------------------------------
# TF-Privacy


@dataclass(frozen=True)
class DpSgdDescription:
    """DP-SGD as TF-Privacy's `compute_dp_sgd_privacy_statement` describes it.

    What TF-Privacy does (compute_dp_sgd_privacy_lib.py):
    - q = batch_size / number_of_examples, the Poisson sampling probability, and
      steps = int(math.ceil(num_epochs / q)); the event is SelfComposedDpEvent(
      PoissonSampledDpEvent(q, GaussianDpEvent(noise_multiplier)), steps). The statement prints it
      as "Epsilon assuming Poisson sampling (*)", with the caveat that "Poisson sampling is not
      usually done in training pipelines, but assuming that the data was randomly shuffled, it
      is believed that the actual epsilon should be closer to this value than the conservative
      assumption of an arbitrary data order". The deprecated `compute_dp_sgd_privacy` computes
      steps as ceil(epochs * n / batch_size) and refuses q > 1.
    - "Epsilon with each example occurring once per epoch": no amplification, each example in
      one batch per epoch (any order): SelfComposedDpEvent(GaussianDpEvent(noise_multiplier),
      int(math.ceil(num_epochs))).
    - used_microbatching (its default True): noise_multiplier /= 2, since microbatches of more
      than one example double the add-or-remove sensitivity ("How to DP-fy ML", Sec. 5.6).
    - User level, max_examples_per_user = k (None: "No user-level privacy guarantee is possible
      without a bound on the number of examples per user"); k = 1 is the example-level epsilon.
      Without sampling, all k examples may share one batch: the noise multiplier divided by k.
      With Poisson sampling, by group privacy: with RDP, Vadhan 2017 Lemma 2.2 from the
      example-level (eps, delta'), user (k eps, delta' (e^{k eps} - 1) / (e^{eps} - 1)), delta'
      found by a line search (infinite when none is found); with PLD, the Mixture of Gaussians
      of Ganesh 2024 (arXiv 2401.10294, Thm. 3.1): MixtureOfGaussiansDpEvent(noise_multiplier,
      sensitivities 0..k, Binomial(k, q) probabilities) self-composed `steps` times.
    - Its defaults: RdpAccountant's DEFAULT_RDP_ORDERS and PLDAccountant's 1e-4 grid.

    How ours maps to it:
    - `q`, `steps`: the same expressions, floating point included (3 epochs of 47 examples in
      batches of 3 take ceil(47.00000000000001) = 48 steps there and here, one more than exact
      arithmetic; an extra step only loosens the bound), so the events are TF-Privacy's.
    - `mechanism()`: SubsampledGaussian(sigma, q, steps), the Poisson line; `mechanism(poisson=
      False)`: SubsampledGaussian(sigma, 1, ceil(epochs)), the once-per-epoch line; sigma is
      noise_multiplier, halved when `used_microbatching`, whose default is TF-Privacy's (True):
      the safe side when the microbatch size is not known. Microbatches of one example (the
      case of Opacus, and of TF-Privacy with num_microbatches = batch size) need False.
    - `user_event()`: Group(mechanism(), k), accounted by our group methods: "pld" is TF-Privacy's
      PLD path (the same mixture; our grid is chosen per mechanism, accountants/tight/pld.py),
      "normal" is its RDP path with Kasiviswanathan-Smith's delta' k e^{(k-1) eps} in place of
      Vadhan's (looser, so ours is the larger epsilon), "rdp" is Lemma 6 (no TF-Privacy
      counterpart). `user_event(poisson=False)`: SubsampledGaussian(sigma / k, 1, ceil(epochs)),
      TF-Privacy's no-sampling bound (all k examples in one batch: sensitivity k). k = 1 gives
      the record-level mechanism, as there.

    Validation errors are InvalidParameter naming the field.
    """

    noise_multiplier: float
    batch_size: int
    dataset_size: int
    epochs: float
    max_examples_per_user: int | None = None
    used_microbatching: bool = True  # TF-Privacy's default: the larger, always valid, epsilon

    def __post_init__(self) -> None:
        _check_real(self.noise_multiplier, "noise_multiplier")
        if not SIGMA_MIN <= self.noise_multiplier <= SIGMA_MAX:
            raise InvalidParameter(
                f"noise_multiplier must be in [{SIGMA_MIN:g}, {SIGMA_MAX:g}], got {self.noise_multiplier:g}"
            )
        _check_int(self.batch_size, "batch_size")
        _check_int(self.dataset_size, "dataset_size")
        if self.batch_size < 1:
            raise InvalidParameter(f"batch_size must be >= 1, got {self.batch_size}")
        if self.dataset_size < self.batch_size:
            raise InvalidParameter(
                f"dataset_size must be >= batch_size ({self.batch_size}), got {self.dataset_size}"
            )
        _check_real(self.epochs, "epochs")
        if not self.epochs > 0:
            raise InvalidParameter(f"epochs must be > 0, got {self.epochs}")
        if self.max_examples_per_user is not None:
            _check_int(self.max_examples_per_user, "max_examples_per_user")
            if self.max_examples_per_user < 1:
                raise InvalidParameter(
                    f"max_examples_per_user must be >= 1, got {self.max_examples_per_user}"
                )
        if not isinstance(self.used_microbatching, bool):
            raise InvalidParameter(
                f"used_microbatching must be true or false, got {self.used_microbatching!r}"
            )

    @property
    def q(self) -> float:
        """TF-Privacy's poisson_subsampling_probability = batch_size / number_of_examples."""
        return dataset_rate(self.batch_size, self.dataset_size)

    @property
    def steps(self) -> int:
        """TF-Privacy's count = int(math.ceil(num_epochs / poisson_subsampling_probability))."""
        return epochs_steps(self.epochs, self.q)

    @property
    def epoch_steps(self) -> int:
        """Compositions without sampling, one per (started) epoch: int(math.ceil(num_epochs))."""
        return int(math.ceil(self.epochs))

    @property
    def microbatching_assumption(self) -> str:
        """What the accounted multiplier assumes about microbatches, for a statement's assumptions."""
        if self.used_microbatching:
            return (
                f"used_microbatching=True (TF-Privacy's default): microbatches of more than one "
                f"record double the add-or-remove sensitivity, so the noise multiplier accounted is "
                f'{self.noise_multiplier:g} / 2 = {self.sigma:g} ("How to DP-fy ML", Sec. 5.6); '
                "with one record per microbatch (Opacus) --no-microbatching accounts "
                f"{self.noise_multiplier:g}"
            )
        return (
            "used_microbatching=False: every record clipped on its own (microbatches of one record, "
            f"as in Opacus), so the noise multiplier accounted is {self.noise_multiplier:g}; "
            "microbatches of several records would halve it (TF-Privacy's default, --microbatching)"
        )

    @property
    def sigma(self) -> float:
        """The noise multiplier accounted: halved with microbatching (TF-Privacy's b/271462792)."""
        return self.noise_multiplier / 2 if self.used_microbatching else float(self.noise_multiplier)

    def mechanism(self, *, poisson: bool = True) -> SubsampledGaussian:
        """The example-level run: Poisson-sampled (TF-Privacy's (*) line), or once per epoch."""
        if poisson:
            return SubsampledGaussian(self.sigma, self.q, self.steps)
        return SubsampledGaussian(self.sigma, 1.0, self.epoch_steps)

    def once_per_epoch_claims(self) -> list[str]:
        """The once-per-epoch claims, in words, for an export of the Poisson line alone (`dp_events.
        dp_event_document`'s `also_stated`): the same run read without sampling."""
        plain = f"{self.epoch_steps} compositions of GaussianDpEvent({{}}) (no sampling)"
        out = [
            f"one record (once per epoch): {plain.format(f'{self.sigma:g}')}, stated beside the sampled line"
        ]
        k = self.max_examples_per_user
        if k is not None and k > 1:
            out.append(
                f"one user (at most {k} records, once per epoch): {plain.format(f'{self.sigma / k:g}')}, "
                "all k records in one batch"
            )
        return out

    def user_event(self, *, poisson: bool = True) -> Event:
        """The user-level event for at most k = max_examples_per_user examples per user.

        Poisson: Group(mechanism(), k); once per epoch: the Gaussian with noise multiplier
        sigma / k (all k examples in one batch). InvalidParameter without a bound k.
        """
        k = self.max_examples_per_user
        if k is None:
            raise InvalidParameter(
                "max_examples_per_user is needed for a user-level guarantee: none is possible "
                "without a bound on the number of examples per user"
            )
        if k == 1:
            return self.mechanism(poisson=poisson)
        if poisson:
            return Group(self.mechanism(), k)
        return SubsampledGaussian(self.sigma / k, 1.0, self.epoch_steps)


def _check_real(x: Any, name: str) -> None:
    if isinstance(x, bool) or not isinstance(x, numbers.Real) or not math.isfinite(x):
        raise InvalidParameter(f"{name} must be a finite number, got {x!r}")


def _check_int(x: Any, name: str) -> None:
    if isinstance(x, bool) or not isinstance(x, numbers.Integral):
        raise InvalidParameter(f"{name} must be an integer, got {x!r}")
