"""The server of one secure-aggregation round: Algorithm 3 of Baek et al. (2021), server side.

    SecAggServer(...)        line 17      refuses k > n, k < 2, and sampled weights below n0
    collect_keys(adverts)    line 17      U_1 = advertisers; broadcast their keys and a session id
    route_shares(messages)   line 23      U_2 = those whose shares arrived; forward each e_{i,j} to j
    unmask_request(masked)   lines 29-30  U_A = U_3 = those whose masked input arrived, each signature
                                          verified; sum the y_i; refuse (request nothing) if |U_A| < k
                                          or n' < n0
    aggregate(responses)     lines 36-38  verify each response's signature; rebuild b_i (i in U_A) and
                                          s_j^SK (j in U_2 \\ U_A) from k shares each, check them against
                                          c(b_i) and s_j^PK, strip H(b_i) and H(s_{i,j}), check the sum's
                                          range, decode

The server only ever holds public keys, ciphertexts it cannot open, masked inputs and, at the end,
the secrets the survivors released: b_i of each survivor and s_j^SK of each dropped participant,
never both for one participant, so it learns the survivors' sum and nothing about one input. At
every step it stops with a ProtocolError as soon as fewer than k participants remain (the round
cannot finish, and at the unmasking step nothing is requested, so nothing is revealed).

Nothing is released that fails a check (issue 32, item 8): a masked input or unmask response whose
Ed25519 signature does not verify under the key its sender advertised (altered or forged on the
way), a rebuilt secret that does not match what its owner advertised (c(b_i), s_i^PK: a corrupted
share), and an unmasked sum with a coordinate outside [-n M, n M] (n survivors, M = ceil(B 2^f),
the largest code of one input): a mask left in the sum, by any cause, makes it uniform on
Z_{2^64}, which lands in that range with probability (2 n M + 1) / 2^64 per coordinate.

A server object lives for one round; on Flower the ServerApp process holds it across the round's
four message exchanges (no state export is needed on this side).
"""

from __future__ import annotations

import math
import secrets
from collections.abc import Iterable, Mapping

import numpy as np

from uldp.crypto.secagg.authentication import seed_commitment, verify
from uldp.crypto.secagg.keys import agree, load_private_key, mask_seed, public_key_of
from uldp.crypto.secagg.masks import MaskGenerator
from uldp.crypto.secagg.messages import (
    SESSION_BYTES,
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
from uldp.crypto.secagg.params import SecAggParams, check_id
from uldp.crypto.secagg.shamir import reconstruct_secret
from uldp.errors import InvalidParameter, ProtocolError

STEPS = ("collect_keys", "route_shares", "unmask_request", "aggregate", "done")


class SecAggServer:
    """One round `round` over `participants` (ids >= 0) with weights w_i and lower bound n0 on their sum."""

    def __init__(
        self,
        params: SecAggParams,
        *,
        round: int,
        participants: Iterable[int],
        weights: Mapping[int, float] | None = None,
        min_weight_sum: float | None = None,
    ) -> None:
        self.params = params
        self.round = check_id(round, "round")
        ids = [check_id(p, "participants") for p in participants]
        if len(set(ids)) != len(ids):
            raise InvalidParameter(f"participants must be distinct, got {sorted(ids)}")
        params.check_participants(len(ids))
        self.participants: tuple[int, ...] = tuple(sorted(ids))
        self.weights = _weights(self.participants, weights)
        if min_weight_sum is not None:
            n0 = float(min_weight_sum)
            if not math.isfinite(n0) or n0 < 0:
                raise InvalidParameter(
                    f"min_weight_sum n0 must be a finite number >= 0, got {min_weight_sum!r}"
                )
            total = self.weight_of(self.participants)
            if total < n0:
                raise InvalidParameter(
                    f"min_weight_sum n0 = {n0} exceeds the sampled participants' weight sum {total} "
                    f"(Algorithm 3, line 17): the round cannot meet its noise calibration"
                )
        self.min_weight_sum = min_weight_sum
        self.session = secrets.token_bytes(SESSION_BYTES)
        self.step = STEPS[0]
        self.keys: dict[int, AdvertiseKeys] = {}
        self.shared: tuple[int, ...] = ()
        self.survivors: tuple[int, ...] = ()
        self.dropped: tuple[int, ...] = ()
        self._masked_sum: np.ndarray | None = None

    def weight_of(self, ids: Iterable[int]) -> float:
        return math.fsum(self.weights[i] for i in ids)

    @property
    def survivor_weight(self) -> float:
        """n' = sum of the survivors' weights (line 30), once `unmask_request` has run."""
        return self.weight_of(self.survivors)

    # -- the steps -------------------------------------------------------------------------------

    def collect_keys(self, adverts: Iterable[AdvertiseKeys]) -> KeyBroadcast:
        """The key broadcast to U_1, the participants whose keys arrived."""
        self._expect("collect_keys")
        keys: dict[int, AdvertiseKeys] = {}
        for advert in adverts:
            self._check_round(advert, session=False)
            who = advert.participant
            if who not in self.weights:
                raise ProtocolError(f"keys of participant {who}, who was not sampled for round {self.round}")
            if who in keys:
                raise ProtocolError(f"participant {who} advertised keys twice in round {self.round}")
            keys[who] = advert
        self._enough("advertised keys", keys)
        self.keys, self.step = keys, "route_shares"
        return KeyBroadcast(self.round, self.session, tuple(keys[i] for i in sorted(keys)))

    def route_shares(self, messages: Iterable[ShareKeys]) -> dict[int, ShareInbox]:
        """{j: the shares addressed to j} for every j in U_2, the participants whose shares arrived."""
        self._expect("route_shares")
        received: dict[int, ShareKeys] = {}
        for message in messages:
            self._check_round(message)
            sender = message.sender
            if sender not in self.keys:
                raise ProtocolError(
                    f"shares from participant {sender}, who advertised no keys in round {self.round}"
                )
            if sender in received:
                raise ProtocolError(f"participant {sender} sent its shares twice in round {self.round}")
            receivers = [share.receiver for share in message.shares]
            if sorted(receivers) != sorted(set(self.keys) - {sender}):
                raise ProtocolError(
                    f"participant {sender} did not send exactly one share to every other participant "
                    f"of the key broadcast (round {self.round})"
                )
            if any(share.sender != sender for share in message.shares):
                raise ProtocolError(f"participant {sender}'s share message holds a share of another sender")
            received[sender] = message
        self._enough("sent their shares", received)
        shared = tuple(sorted(received))
        inboxes: dict[int, list[EncryptedShare]] = {j: [] for j in shared}
        for sender in shared:  # only between members of U_2: a share of a participant gone is useless
            for share in received[sender].shares:
                if share.receiver in inboxes:
                    inboxes[share.receiver].append(share)
        self.shared, self.step = shared, "unmask_request"
        return {j: ShareInbox(j, self.round, self.session, tuple(inboxes[j])) for j in shared}

    def unmask_request(self, masked_inputs: Iterable[MaskedInput]) -> UnmaskRequest:
        """The request to the survivors U_A; ProtocolError (nothing requested) if |U_A| < k or n' < n0."""
        self._expect("unmask_request")
        arrived: dict[int, MaskedInput] = {}
        for masked in masked_inputs:
            self._check_round(masked)
            who = masked.participant
            if who not in self.shared:
                raise ProtocolError(
                    f"masked input of participant {who}, whose shares never arrived (round {self.round})"
                )
            if who in arrived:
                raise ProtocolError(f"participant {who} sent two masked inputs in round {self.round}")
            if len(masked.masked) != 8 * self.params.dimension:
                raise ProtocolError(
                    f"masked input of participant {who} has {len(masked.masked) // 8} words, "
                    f"dimension = {self.params.dimension} expected"
                )
            # y_i is uniform on Z_{2^64}^d: only its sender's signature tells an altered one apart.
            self._check_signature(masked, who, "no share is requested, nothing is revealed")
            arrived[who] = masked
        self._enough(
            "sent their masked inputs", arrived, refusal="no share is requested, nothing is revealed"
        )
        total = np.zeros(self.params.dimension, dtype=np.uint64)
        for masked in arrived.values():
            np.add(total, masked.vector, out=total)  # modulo 2^64
        self.survivors = tuple(sorted(arrived))
        self.dropped = tuple(sorted(set(self.shared) - set(arrived)))
        self._masked_sum, self.step = total, "aggregate"
        return UnmaskRequest(self.round, self.session, self.survivors, self.dropped)

    def aggregate_encoded(self, responses: Iterable[UnmaskResponse]) -> np.ndarray:
        """sum_{i in U_A} enc(x_i) in Z_{2^64}^d: the masked sum with every mask stripped (lines 36-38)."""
        self._expect("aggregate")
        survivors, dropped = set(self.survivors), set(self.dropped)
        seed_shares: dict[int, dict[int, int]] = {i: {} for i in self.survivors}
        key_shares: dict[int, dict[int, int]] = {j: {} for j in self.dropped}
        responders: set[int] = set()
        for response in responses:
            self._check_round(response)
            who = response.participant
            if who not in survivors:
                raise ProtocolError(
                    f"unmask response from participant {who}, not a survivor of round {self.round}"
                )
            if who in responders:
                raise ProtocolError(
                    f"participant {who} answered the unmask request twice in round {self.round}"
                )
            seeds, keys = dict(response.seed_shares), dict(response.key_shares)
            if (
                len(seeds) != len(response.seed_shares)
                or len(keys) != len(response.key_shares)
                or set(seeds) != survivors
                or set(keys) != dropped
            ):
                raise ProtocolError(
                    f"participant {who}'s unmask response does not hold exactly one share per survivor "
                    f"and per dropped participant (round {self.round})"
                )
            self._check_signature(response, who, "no share of it is used, nothing is released")
            responders.add(who)
            x = who + 1
            for owner, y in seeds.items():
                seed_shares[owner][x] = y
            for owner, y in keys.items():
                key_shares[owner][x] = y
        # Only the count matters here: the sum is over U_A, whose weight unmask_request checked.
        self._enough("answered the unmask request", responders, weigh=False)
        k = self.params.threshold
        plus: list[bytes] = []
        minus = []  # H(b_i)
        for i in self.survivors:
            seed = reconstruct_secret(seed_shares[i], k)
            # With exactly k responses the shares have no redundancy: the commitment is the check.
            if seed_commitment(seed, round_number=self.round, participant=i) != self.keys[i].seed_commitment:
                raise ProtocolError(
                    f"the shares of participant {i}'s mask seed b_{i} do not rebuild the seed it committed "
                    f"to (round {self.round}): a corrupted share; nothing is released"
                )
            minus.append(seed)
        for j in self.dropped:
            private = reconstruct_secret(key_shares[j], k)
            if public_key_of(private) != self.keys[j].s_public:
                raise ProtocolError(
                    f"the shares of participant {j}'s mask key do not rebuild the key it advertised "
                    f"(round {self.round}): a corrupted share; nothing is released"
                )
            own = load_private_key(private)
            for i in self.survivors:
                seed = mask_seed(
                    agree(own, self.keys[i].s_public, peer=i),
                    session=self.session,
                    round_number=self.round,
                    i=i,
                    j=j,
                )
                # y_i holds +H(s_ij) if i < j and -H(s_ij) if i > j: take it back out.
                (minus if i < j else plus).append(seed)
        assert self._masked_sum is not None
        total = self._masked_sum.copy()
        MaskGenerator(self.params.dimension).apply(total, plus, minus)
        self.step = "done"
        self._check_range(total)
        return total

    def aggregate(self, responses: Iterable[UnmaskResponse]) -> np.ndarray:
        """The float64 sum of the survivors' inputs, exact up to their fixed-point rounding."""
        return self.params.fixed_point.decode(self.aggregate_encoded(responses))

    # -- checks --------------------------------------------------------------------------------------

    def _check_signature(self, message: MaskedInput | UnmaskResponse, who: int, refusal: str) -> None:
        """ProtocolError naming sender and round unless `message` carries `who`'s signature of it."""
        if not verify(
            self.keys[who].sign_public,
            message.signature,
            message.KIND,
            session=self.session,
            round_number=self.round,
            sender=who,
            content=message.signed_content,
        ):
            raise ProtocolError(
                f"the {message.KIND} message of participant {who} (round {self.round}) fails its "
                f"signature check: altered in transit or not sent by participant {who}; {refusal}"
            )

    def _check_range(self, total: np.ndarray) -> None:
        """ProtocolError unless every coordinate of the unmasked sum is within [-n M, n M].

        n survivors' codes, each at most M = ceil(B 2^f) in absolute value, sum to at most n M
        (`FixedPoint.check_capacity` keeps n M < 2^63, so the int64 reading is the exact sum). A
        coordinate beyond it is no sum of inputs within the bound: a mask is left in it (a share
        or masked input corrupted where no other check saw it) or an input broke the bound.
        """
        limit = len(self.survivors) * self.params.fixed_point.largest_code
        signed = total.view(np.int64)
        outside = np.flatnonzero((signed > limit) | (signed < -limit))
        if outside.size:
            index = int(outside[0])
            value = float(self.params.fixed_point.decode(total[index : index + 1])[0])
            n, most = len(self.survivors), math.ldexp(float(limit), -self.params.frac_bits)
            raise ProtocolError(
                f"round {self.round}: the unmasked sum is {value:.6g} at coordinate {index}, outside "
                f"[-n B, n B] = [-{most:g}, {most:g}] for n = {n} survivors ({outside.size} of "
                f"{total.size} coordinates are): a mask was not removed (a corrupted share or masked "
                f"input) or an input exceeded the bound; nothing is released"
            )

    def _expect(self, step: str) -> None:
        if self.step != step:
            raise ProtocolError(
                f"server of round {self.round}: {step} is not the next step (expected {self.step}); "
                f"each step runs once, in order"
            )

    def _check_round(self, message: SecAggMessage, *, session: bool = True) -> None:
        got = getattr(message, "round", None)
        if got != self.round:
            raise ProtocolError(
                f"server of round {self.round} received a {message.KIND} message of round {got}"
            )
        if session and getattr(message, "session", None) != self.session:
            raise ProtocolError(
                f"server of round {self.round} received a {message.KIND} message of another session"
            )

    def _enough(
        self, what: str, alive: Iterable[int], refusal: str = "the round stops here", weigh: bool = True
    ) -> None:
        """ProtocolError unless at least k participants (and, if `weigh`, weight n0) are in `alive`.

        Before the unmasking the weight is checked at every step: the survivors are a subset of
        the participants still present, so a round already below n0 stops as early as it can.
        """
        ids = sorted(alive)
        k = self.params.threshold
        if len(ids) < k:
            raise ProtocolError(
                f"round {self.round}: only {len(ids)} of the {len(self.participants)} participants {what}, "
                f"below the threshold k = {k}; {refusal}"
            )
        if weigh and self.min_weight_sum is not None and self.weight_of(ids) < self.min_weight_sum:
            raise ProtocolError(
                f"round {self.round}: the participants that {what} weigh {self.weight_of(ids)}, below "
                f"min_weight_sum n0 = {self.min_weight_sum} (Algorithm 3, line 17); {refusal}"
            )


def _weights(participants: tuple[int, ...], weights: Mapping[int, float] | None) -> dict[int, float]:
    if weights is None:
        return dict.fromkeys(participants, 1.0)
    missing = [p for p in participants if p not in weights]
    if missing:
        raise InvalidParameter(f"weights: no weight for participant(s) {missing}")
    checked = {p: float(weights[p]) for p in participants}
    bad = [p for p, w in checked.items() if not math.isfinite(w) or w < 0]
    if bad:
        raise InvalidParameter(f"weights must be finite and >= 0; participant(s) {bad} are not")
    return checked
