"""Small (insecure, fast) Paillier keys shared by the crypto tests."""

from __future__ import annotations

import pytest

from uldp.crypto.paillier import generate_keypair


@pytest.fixture(scope="session")
def keypair_1024():
    """A 1024-bit test key pair: insecure, for tests only (test_keys=True)."""
    return generate_keypair(1024, test_keys=True)


@pytest.fixture(scope="session")
def keypair_512():
    return generate_keypair(512, test_keys=True)
