from sluice.leases import Lease, LeaseSigner

SIGNER = LeaseSigner(b"k" * 32)
LEASE = Lease(shard=3, seq=123456789, attempt=2, group="analytics")


def test_a_signed_lease_verifies_on_its_queue():
    assert SIGNER.verify("orders:abcd", SIGNER.sign("orders:abcd", LEASE)) == LEASE


def test_a_lease_is_useless_on_another_queue_or_incarnation():
    lease_id = SIGNER.sign("orders:abcd", LEASE)
    assert SIGNER.verify("payments:abcd", lease_id) is None
    assert SIGNER.verify("orders:ffff", lease_id) is None


def test_forged_and_garbled_ids_are_rejected():
    lease_id = SIGNER.sign("orders:abcd", LEASE)
    flipped = lease_id[:-2] + ("A" if lease_id[-2] != "A" else "B") + lease_id[-1]
    for bad in [flipped, "", "garbage", "!!!!", lease_id[:10], "A" * 200]:
        assert SIGNER.verify("orders:abcd", bad) is None
    assert LeaseSigner(b"x" * 32).verify("orders:abcd", lease_id) is None


def test_changing_the_attempt_breaks_the_mac():
    other = SIGNER.sign("orders:abcd", Lease(3, 123456789, 3, "analytics"))
    assert other != SIGNER.sign("orders:abcd", LEASE)
