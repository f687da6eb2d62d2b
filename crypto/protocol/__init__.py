"""Protocol 1 of ULDP-FL (§4.1): the private weighting protocol, as parties exchanging messages."""

from uldp.crypto.protocol.messages import (
    BlindedHistogramMessage,
    DhKeyMessage,
    DhKeysBroadcast,
    EncryptedWeightsMessage,
    MaskedSumMessage,
    PaillierKeyMessage,
    SealedSeedMessage,
)
from uldp.crypto.protocol.params import ProtocolParams
from uldp.crypto.protocol.run import (
    Federation,
    RoundResult,
    WeightingSession,
    largest_value,
    plaintext_weighted_sum,
    rounding_tolerance,
    secure_weighted_sum,
    session_params,
    setup,
    weighting_round,
)
from uldp.crypto.protocol.server import AggregationServer
from uldp.crypto.protocol.silo import Silo, SiloState

__all__ = [
    "AggregationServer",
    "BlindedHistogramMessage",
    "DhKeyMessage",
    "DhKeysBroadcast",
    "EncryptedWeightsMessage",
    "Federation",
    "MaskedSumMessage",
    "PaillierKeyMessage",
    "ProtocolParams",
    "RoundResult",
    "SealedSeedMessage",
    "Silo",
    "SiloState",
    "largest_value",
    "plaintext_weighted_sum",
    "rounding_tolerance",
    "secure_weighted_sum",
    "session_params",
    "setup",
    "weighting_round",
    "WeightingSession",
]
