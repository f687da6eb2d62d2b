"""e_{i,j}: participant i's shares for j, authenticated-encrypted for j alone (Algorithm 3, lines 21 and 32).

The server relays these ciphertexts (line 23), so it must learn nothing from them and be unable
to alter, re-address or replay one unnoticed. Each is sealed with ChaCha20-Poly1305
(`crypto.sealing`, RFC 8439) under c_{i -> j} (`keys.share_key`, per direction and round), with
associated data (protocol, session, round, sender, receiver): j opens it only if all five are the
ones it expects, so a ciphertext that was altered, re-addressed to another participant or copied
from another round or session fails, and the failure is a ProtocolError naming sender, receiver
and round, raised before any of it is used. The plaintext is the two shares at j's point, 66 bytes
each (Bonawitz et al. put the ids in the plaintext; here the associated data binds them instead).
"""

from __future__ import annotations

from uldp.crypto.sealing import TAG_BYTES, SealedBox, open_sealed, seal
from uldp.crypto.secagg.keys import context
from uldp.crypto.secagg.messages import EncryptedShare
from uldp.crypto.secagg.shamir import SHARE_BYTES, share_from_bytes, share_to_bytes
from uldp.errors import ProtocolError


def associated_data(*, session: bytes, round_number: int, sender: int, receiver: int) -> bytes:
    return context("uldp/secagg/v1/encrypted-share", session, round_number, sender, receiver)


def seal_shares(
    key: bytes,
    *,
    session: bytes,
    round_number: int,
    sender: int,
    receiver: int,
    seed_share: int,
    key_share: int,
) -> EncryptedShare:
    """e_{sender, receiver}: the shares of b_sender and s_sender^SK at the receiver's point."""
    plaintext = share_to_bytes(seed_share) + share_to_bytes(key_share)
    ad = associated_data(session=session, round_number=round_number, sender=sender, receiver=receiver)
    box = seal(key, plaintext, ad)
    return EncryptedShare(sender, receiver, box.nonce, box.ciphertext + box.tag)


def open_shares(key: bytes, share: EncryptedShare, *, session: bytes, round_number: int) -> tuple[int, int]:
    """(seed share, key share) of `share`, or ProtocolError naming sender, receiver and round."""
    ad = associated_data(
        session=session, round_number=round_number, sender=share.sender, receiver=share.receiver
    )
    box = SealedBox(share.nonce, share.ciphertext[:-TAG_BYTES], share.ciphertext[-TAG_BYTES:])
    try:
        plaintext = open_sealed(key, box, ad)
    except ProtocolError:
        raise ProtocolError(
            f"share from participant {share.sender} to participant {share.receiver} (round {round_number}) "
            f"failed authentication: altered, re-addressed, or replayed from another round or session; "
            f"nothing of it was used"
        ) from None
    return share_from_bytes(plaintext[:SHARE_BYTES]), share_from_bytes(plaintext[SHARE_BYTES:])
