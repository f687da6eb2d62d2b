"""The public parameters of Protocol 1 that every party agrees on before setup."""

from __future__ import annotations

from dataclasses import dataclass, field

from uldp.crypto.encoding import Encoding
from uldp.crypto.paillier import DEFAULT_KEY_BITS, check_key_bits
from uldp.crypto.protocol.sampling import SamplingParams
from uldp.errors import InvalidParameter


@dataclass(frozen=True)
class ProtocolParams:
    """|S|, |U|, d, the security parameter λ (Paillier key size) and the encoding (P, N_max).

    `test_keys=True` allows keys below 2048 bits; it is insecure and meant for tests only.
    `sampling`: private user-level sub-sampling (P slots, m real, the audit rate), or None when
    the server draws the sample in the clear (Protocol 1 step 2(a)).
    """

    silos: int
    users: int
    dimension: int
    key_bits: int = DEFAULT_KEY_BITS
    encoding: Encoding = field(default_factory=Encoding)
    test_keys: bool = False
    sampling: SamplingParams | None = None

    def __post_init__(self) -> None:
        for name in ("silos", "users", "dimension"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidParameter(f"{name} must be a positive integer, got {value!r}")
        check_key_bits(self.key_bits, test_keys=self.test_keys)
