"""A secure-aggregation message signed anew by its own sender: what a participant that corrupts
its own message could send, which no signature check catches (the tests of what else does)."""

from __future__ import annotations

import dataclasses

from uldp.crypto.secagg.authentication import sign


def signed_by(private: bytes, message):
    """`message` with a fresh signature under `private`, over its own kind, session, round and sender."""
    signature = sign(
        private,
        message.KIND,
        session=message.session,
        round_number=message.round,
        sender=message.participant,
        content=message.signed_content,
    )
    return dataclasses.replace(message, signature=signature)
