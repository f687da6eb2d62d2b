"""dp-fedavg-robust's uploads through secure aggregation (Baek et al. 2021, Algorithm 3 lines 13-38).

The protocol is `uldp.crypto.secagg`'s (Bonawitz et al.'s double masking, docs/secagg.md); this
module only carries its messages through the algorithm's phases, as bytes in numpy uint8 arrays,
so that the same code runs in process and on Flower:

    keys      server -> sampled U^t: the round's parameters   participant -> AdvertiseKeys
    shares    server -> U_1: KeyBroadcast                       participant -> ShareKeys
    upload    server -> U_2: its ShareInbox                     participant -> MaskedInput of M_i
    calibrate server -> survivors: UnmaskRequest (and n')       participant -> UnmaskResponse

A participant's secret state between two phases (its X25519 keys, b_i, the shares it holds) lives
in its phase store (`export_state` bytes), never at the server. The server reads only the
masked inputs, whose sum over the survivors it unmasks; a step with fewer than k participants
alive (or survivors lighter than n_0) refuses, and then nothing is revealed and the round
releases nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from uldp.errors import InvalidParameter, ProtocolError

if TYPE_CHECKING:
    import numpy as np

    from .base import Context, TrainConfig

_STATE = "secagg_state"


def check_available() -> None:
    """InvalidParameter (one line) if the crypto extra is missing; before round 1."""
    try:
        import uldp.crypto.secagg  # noqa: F401
    except ImportError as error:
        raise InvalidParameter(
            f"--secure needs the crypto extra (pip install 'uldp[crypto]'): {error}"
        ) from None


def threshold(cfg: TrainConfig, sampled: int) -> int:
    """Shamir's k for a round of `sampled` participants: --threshold, else a majority (at least 2)."""
    return cfg.threshold if cfg.threshold is not None else max(2, sampled // 2 + 1)


def _bytes(data: bytes) -> np.ndarray:
    import numpy as np

    return np.frombuffer(data, dtype=np.uint8).copy()


def _read(payload: dict[str, np.ndarray], key: str) -> bytes:
    import numpy as np

    if key not in payload:
        raise ProtocolError(f"the secure aggregation message has no {key}")
    return np.asarray(payload[key], dtype=np.uint8).tobytes()


class SecureRound:
    """The server's side of one round's secure aggregation, over `algorithm.silos`' phases;
    `bound` is the algorithm's bound on every coordinate of an upload
    (`dropout_robust.upload_bound`)."""

    def __init__(
        self,
        algorithm: Any,
        round: int,
        sampled: list[int],
        weights: np.ndarray,
        ctx: Context,
        cfg: TrainConfig,
        bound: float,
    ) -> None:
        self.algorithm, self.round, self.sampled, self.ctx, self.cfg = algorithm, round, sampled, ctx, cfg
        self.weights = {s: float(weights[s]) for s in sampled}
        self.k = threshold(cfg, len(sampled))
        self.bound = bound  # per coordinate of an upload M_i, for the fixed-point encoding
        self.server: Any = None
        self.inboxes: dict[int, Any] = {}

    def _phase(
        self, name: str, payloads: dict[int, dict[str, np.ndarray]]
    ) -> dict[int, dict[str, np.ndarray]]:
        return self.algorithm.silos.phase(self.algorithm, self.round, name, payloads, self.ctx, self.cfg)

    def setup(self) -> str | None:
        """Keys and shares (lines 13-23); the reason the round cannot run, or None."""
        import numpy as np

        from uldp.crypto.secagg import AdvertiseKeys, SecAggParams, SecAggServer, ShareKeys

        if self.k > len(self.sampled):
            return f"{len(self.sampled)} sampled, fewer than the threshold k = {self.k} of secure aggregation"
        params = SecAggParams(threshold=self.k, dimension=self.ctx.n_params, bound=self.bound)
        self.server = SecAggServer(
            params,
            round=self.round,
            participants=self.sampled,
            weights=self.weights,
            min_weight_sum=self.cfg.min_weight_sum,
        )
        described = np.array(
            [params.threshold, params.dimension, params.bound, params.frac_bits], dtype=np.float64
        )
        try:
            adverts = self._phase("keys", {s: {"params": described} for s in self.sampled})
            broadcast = self.server.collect_keys(
                AdvertiseKeys.from_bytes(_read(reply, "advertise")) for reply in adverts.values()
            )
            sent = self._phase("shares", {s: {"broadcast": _bytes(broadcast.to_bytes())} for s in adverts})
            self.inboxes = self.server.route_shares(
                ShareKeys.from_bytes(_read(reply, "shares")) for reply in sent.values()
            )
        except ProtocolError as refusal:
            return f"secure aggregation refused: {refusal}"
        return None

    def add_upload_payloads(self, payloads: dict[int, dict[str, np.ndarray]]) -> None:
        """Each uploader's inbox of shares; a participant whose shares never arrived cannot upload."""
        for s in list(payloads):
            if s in self.inboxes:
                payloads[s]["inbox"] = _bytes(self.inboxes[s].to_bytes())
            else:
                del payloads[s]

    def add_unmask_payloads(
        self, uploads: dict[int, dict[str, np.ndarray]], payloads: dict[int, dict[str, np.ndarray]]
    ) -> str | None:
        """The unmask request (lines 28-30) to every participant asked; the refusal, or None."""
        from uldp.crypto.secagg import MaskedInput

        try:
            request = self.server.unmask_request(
                MaskedInput.from_bytes(_read(reply, "masked")) for reply in uploads.values()
            )
        except ProtocolError as refusal:
            return f"secure aggregation refused: {refusal}"
        encoded = _bytes(request.to_bytes())
        for payload in payloads.values():
            payload["unmask"] = encoded
        return None

    def unmasked_sum(self, replies: dict[int, dict[str, np.ndarray]]) -> tuple[Any, str | None]:
        """sum_{i in U_A} M_i (lines 35-38), or the refusal when fewer than k answered."""
        from uldp.crypto.secagg import UnmaskResponse

        try:
            total = self.server.aggregate(
                UnmaskResponse.from_bytes(_read(r, "unmask")) for r in replies.values()
            )
        except ProtocolError as refusal:
            return None, f"secure aggregation refused: {refusal}"
        return total, None


# --- a participant's steps (called from DropoutRobust.silo_phase) ------------------------------
def participant_step(
    name: str,
    silo: int,
    round: int,
    payload: dict[str, np.ndarray],
    store: dict[str, np.ndarray],
    cfg: TrainConfig,
) -> dict[str, np.ndarray]:
    """`keys`: fresh key pairs and b_i for this round (line 13), the advertisement out; `shares`:
    the Shamir shares of b_i and s_i^SK, each sealed for its receiver (lines 19-21)."""
    import numpy as np

    from uldp.crypto.secagg import KeyBroadcast, SecAggParams, SecAggParticipant

    if name == "keys":
        k, d, bound, frac_bits = np.asarray(payload["params"], dtype=np.float64).tolist()
        params = SecAggParams(threshold=int(k), dimension=int(d), bound=bound, frac_bits=int(frac_bits))
        participant = SecAggParticipant(silo, params, round=round)
        store[_STATE] = _bytes(participant.export_state())
        return {"advertise": _bytes(participant.advertise().to_bytes())}
    participant = _participant(store, silo)
    shares = participant.share_keys(KeyBroadcast.from_bytes(_read(payload, "broadcast")))
    store[_STATE] = _bytes(participant.export_state())
    return {"shares": _bytes(shares.to_bytes())}


def participant_masked_upload(
    silo: int,
    round: int,
    message: np.ndarray,
    payload: dict[str, np.ndarray],
    store: dict[str, np.ndarray],
    cfg: TrainConfig,
) -> dict[str, np.ndarray]:
    """y_i = enc(M_i) + PRG(b_i) + the pairwise masks (line 27): all the server gets of M_i."""
    from uldp.crypto.secagg import ShareInbox

    participant = _participant(store, silo)
    masked = participant.masked_input(message, ShareInbox.from_bytes(_read(payload, "inbox")))
    store[_STATE] = _bytes(participant.export_state())
    return {"masked": _bytes(masked.to_bytes())}


def participant_unmask(
    silo: int, round: int, payload: dict[str, np.ndarray], store: dict[str, np.ndarray], cfg: TrainConfig
) -> dict[str, np.ndarray]:
    """The shares of the survivors' b_j and of the dropped ones' s_j^SK (line 33), never both for one."""
    from uldp.crypto.secagg import UnmaskRequest

    participant = _participant(store, silo)
    response = participant.unmask(UnmaskRequest.from_bytes(_read(payload, "unmask")))
    store.pop(_STATE, None)  # the round is over: its keys are not kept
    return {"unmask": _bytes(response.to_bytes())}


def _participant(store: dict[str, np.ndarray], silo: int) -> Any:
    from uldp.crypto.secagg import SecAggParticipant

    if _STATE not in store:
        raise ProtocolError(f"participant {silo} has no secure aggregation state for this step")
    return SecAggParticipant.from_state(_read(store, _STATE))
