"""Secure aggregation with dropouts: Algorithm 3 of Baek et al. (IEEE Access 2021), lines 13-38.

The protocol of Bonawitz et al. (CCS 2017) with double masking, as parties exchanging explicit
frozen messages (docs/secagg.md). One `SecAggServer` per round, one `SecAggParticipant` per
sampled participant (ids are ints >= 0, the silo index):

    params = SecAggParams(threshold=k, dimension=d, bound=B, frac_bits=24)
    server = SecAggServer(params, round=t, participants=ids, weights={i: w_i}, min_weight_sum=n0)
    p = SecAggParticipant(i, params, round=t)
    adv = p.advertise()                         # AdvertiseKeys(i, t, c_i^PK, s_i^PK, d_i^PK, c(b_i))
    bcast = server.collect_keys(advs)           # KeyBroadcast: every advertised key, session id
    out = p.share_keys(bcast)                   # ShareKeys: one EncryptedShare per other participant
    inbox = server.route_shares(outs)           # {j: ShareInbox of the shares addressed to j}
    masked = p.masked_input(x_i, inbox[p.id])   # MaskedInput: y_i in Z_{2^64}^d, signed
    req = server.unmask_request(maskeds)        # UnmaskRequest(survivors, dropped), or ProtocolError
    resp = p.unmask(req)                        # UnmaskResponse: shares of b_i (survivors), s_j^SK (dropped)
    total = server.aggregate(resps)             # float64 sum of the survivors' x_i

`secure_sum(vectors, params, weights, dropped_before_upload, dropped_before_unmask, round,
min_weight_sum)` runs all of it in process. Every message has `to_bytes()` / `from_bytes()`; a
participant's state between two steps is `export_state()` bytes and `SecAggParticipant.from_state`.

One concept per module: `params`, `fixed_point` (float64 <-> Z_{2^64}), `shamir` (F_p, p = 2^521 - 1),
`keys` (X25519, HKDF), `sealed_shares` (ChaCha20-Poly1305 of the shares), `authentication`
(Ed25519 signatures of masked inputs and unmask responses, the commitment to b_i), `masks` (the
PRG, AES-256-CTR), `messages`, `participant`, `server`, `run`.
"""

from uldp.crypto.secagg.fixed_point import DEFAULT_FRAC_BITS, FixedPoint
from uldp.crypto.secagg.messages import (
    AdvertiseKeys,
    EncryptedShare,
    KeyBroadcast,
    MaskedInput,
    SecAggMessage,
    ShareInbox,
    ShareKeys,
    UnmaskRequest,
    UnmaskResponse,
)
from uldp.crypto.secagg.params import SecAggParams
from uldp.crypto.secagg.participant import SecAggParticipant
from uldp.crypto.secagg.run import secure_sum
from uldp.crypto.secagg.server import SecAggServer

__all__ = [
    "DEFAULT_FRAC_BITS",
    "AdvertiseKeys",
    "EncryptedShare",
    "FixedPoint",
    "KeyBroadcast",
    "MaskedInput",
    "SecAggMessage",
    "SecAggParams",
    "SecAggParticipant",
    "SecAggServer",
    "ShareInbox",
    "ShareKeys",
    "UnmaskRequest",
    "UnmaskResponse",
    "secure_sum",
]
