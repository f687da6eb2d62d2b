"""Protocol 1 of ULDP-FL (§4.1): the private weighting protocol, as parties exchanging messages."""
from crypto.protocol.messages import (
    BlindedHistogramMessage, DhKeyMessage, DhKeysBroadcast, EncryptedWeightsMessage,
    MaskedSumMessage, PaillierKeyMessage, SealedSeedMessage,
)
from crypto.protocol.params import ProtocolParams
from crypto.protocol.run import (
    Federation, RoundResult, largest_value, plaintext_weighted_sum, rounding_tolerance,
    secure_weighted_sum, WeightingSession, setup, weighting_round,
)
from crypto.protocol.server import AggregationServer
from crypto.protocol.silo import Silo

__all__ = [
    "AggregationServer", "BlindedHistogramMessage", "DhKeyMessage", "DhKeysBroadcast",
    "EncryptedWeightsMessage", "Federation", "MaskedSumMessage", "PaillierKeyMessage",
    "ProtocolParams", "RoundResult", "SealedSeedMessage", "Silo", "largest_value",
    "plaintext_weighted_sum", "rounding_tolerance", "secure_weighted_sum", "setup",
    "weighting_round", "WeightingSession",
]
