from sluice.leases import PREVIOUS_KEY_VALID_MS, KeyringSource, Lease, LeaseKeyring, LeaseSigner

NOW = 1_700_000_000_000
RING = LeaseKeyring(current_id=1, current="k" * 64)
LEASE = Lease(shard=3, seq=123456789, attempt=2, group="analytics")


class Store:
    """A secret store: the value it holds now, and how often it was read past any cache (forced)."""

    def __init__(self, ring: LeaseKeyring) -> None:
        self.value = ring.to_json()
        self.forced = 0

    def read(self, force: bool) -> str:
        self.forced += force
        return self.value


def signer(ring: LeaseKeyring = RING, now: int = NOW) -> LeaseSigner:
    return LeaseSigner(KeyringSource(Store(ring).read), lambda: now)


SIGNER = signer()


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
    assert signer(LeaseKeyring(current_id=1, current="x" * 64)).verify("orders:abcd", lease_id) is None


def test_changing_the_attempt_breaks_the_mac():
    other = SIGNER.sign("orders:abcd", Lease(3, 123456789, 3, "analytics"))
    assert other != SIGNER.sign("orders:abcd", LEASE)


def test_the_stack_generated_value_parses_and_round_trips():
    generated = '{"current_id": 1, "current": "AbC123"}'  # what GenerateSecretString produces
    ring = LeaseKeyring.parse(generated)
    assert ring == LeaseKeyring(current_id=1, current="AbC123")
    rotated = ring.rotated(NOW)
    assert LeaseKeyring.parse(rotated.to_json()) == rotated


def test_rotation_keeps_leases_signed_before_it_valid_for_one_visibility_period():
    old_id = SIGNER.sign("orders:abcd", LEASE)
    rotated = RING.rotated(NOW)
    assert rotated.current != RING.current and rotated.previous == RING.current
    after = signer(rotated, NOW + 1)
    new_id = after.sign("orders:abcd", LEASE)
    assert new_id != old_id
    assert after.verify("orders:abcd", old_id) == LEASE  # a live lease survives the rotation
    assert after.verify("orders:abcd", new_id) == LEASE
    late = signer(rotated, NOW + PREVIOUS_KEY_VALID_MS)
    assert late.verify("orders:abcd", old_id) is None  # the retired key is gone after its period
    assert late.verify("orders:abcd", new_id) == LEASE
    twice = signer(rotated.rotated(NOW + 1), NOW + 2)
    assert twice.verify("orders:abcd", old_id) is None  # only one previous key is kept


def test_a_container_with_a_stale_cache_rereads_the_secret_for_a_newer_key():
    store = Store(RING)
    stale = LeaseSigner(KeyringSource(store.read), lambda: NOW)
    assert stale.verify("orders:abcd", stale.sign("orders:abcd", LEASE)) == LEASE
    assert store.forced == 0
    rotated = RING.rotated(NOW)
    fresh_id = signer(rotated).sign("orders:abcd", LEASE)  # another container saw the rotation

    cached = {"value": store.value}  # the stale container's cache: the old value until forced

    def read(force: bool) -> str:
        if force:
            cached["value"] = rotated.to_json()
        return cached["value"]

    reader = LeaseSigner(KeyringSource(read), lambda: NOW)
    assert reader.verify("orders:abcd", fresh_id) == LEASE


def test_forged_key_ids_cannot_make_a_container_hammer_the_secret_store():
    store = Store(RING)
    victim = LeaseSigner(KeyringSource(store.read), lambda: NOW)
    other = signer(LeaseKeyring(current_id=7, current="z" * 64)).sign("orders:abcd", LEASE)
    for _ in range(50):
        assert victim.verify("orders:abcd", other) is None
    assert store.forced == 1  # at most one forced read per second
