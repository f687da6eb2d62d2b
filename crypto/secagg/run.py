"""One secure-aggregation round with every party in this process: `secure_sum`.

For in-process training and the benchmark. The parties are the same objects as on Flower and
exchange the same messages, handed over directly instead of as bytes; dropouts are simulated by
leaving a participant's message out at the step where it drops.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

import numpy as np

from uldp.crypto.secagg.params import SecAggParams
from uldp.crypto.secagg.participant import SecAggParticipant
from uldp.crypto.secagg.server import SecAggServer
from uldp.errors import InvalidParameter


def secure_sum(
    vectors: Mapping[int, np.ndarray],
    params: SecAggParams,
    weights: Mapping[int, float] | None = None,
    dropped_before_upload: Collection[int] = frozenset(),
    dropped_before_unmask: Collection[int] = frozenset(),
    round: int = 0,
    min_weight_sum: float | None = None,
) -> np.ndarray:
    """The sum of the vectors of the participants that upload, by secure aggregation.

    `vectors` maps each sampled participant's id to its float vector of length `params.dimension`.
    Participants in `dropped_before_upload` share their keys, then drop before sending their masked
    input: they are left out of the sum (their pairwise masks are rebuilt and removed). Those in
    `dropped_before_unmask` send their masked input, then drop: they stay in the sum (their seeds
    b_i are rebuilt from the others' shares). Raises InvalidParameter for unusable parameters and
    ProtocolError when too few participants (below k) or too little weight (below n0) remain.
    """
    ids = sorted(vectors)
    before_upload, before_unmask = set(dropped_before_upload), set(dropped_before_unmask)
    unknown = sorted((before_upload | before_unmask) - set(ids))
    if unknown:
        raise InvalidParameter(f"dropped participant(s) {unknown} are not among the vectors' participants")
    if before_upload & before_unmask:
        raise InvalidParameter("a participant cannot drop both before upload and before unmask")
    server = SecAggServer(
        params, round=round, participants=ids, weights=weights, min_weight_sum=min_weight_sum
    )
    parties = {i: SecAggParticipant(i, params, round=round) for i in ids}
    broadcast = server.collect_keys(p.advertise() for p in parties.values())
    inboxes = server.route_shares([p.share_keys(broadcast) for p in parties.values()])
    uploading = [i for i in ids if i not in before_upload]
    request = server.unmask_request([parties[i].masked_input(vectors[i], inboxes[i]) for i in uploading])
    responding = [i for i in request.survivors if i not in before_unmask]
    return server.aggregate([parties[i].unmask(request) for i in responding])
