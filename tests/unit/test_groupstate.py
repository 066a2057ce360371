from sluice.engine.groupstate import GroupState, Pending


def test_state_round_trips_and_ack_level_is_lowest_pending():
    state = GroupState(read=500, read_item=400, version=7)
    state.pending = {
        410: Pending(item=400, due_ms=1_700_000_030_000, attempts=1, leased=True),
        405: Pending(item=400, due_ms=1_700_000_090_000, attempts=3, leased=False),
    }
    decoded = GroupState.decode(state.encode(), 7)
    assert decoded == state
    assert decoded.ack_level == 405
    assert GroupState(read=9).ack_level == 9


def test_due_lists_expired_leases_and_ripe_delays_in_order():
    state = GroupState(read=10)
    state.pending = {
        3: Pending(0, 100, 1, True),
        1: Pending(0, 50, 0, False),
        2: Pending(0, 500, 1, True),
    }
    assert state.due(100) == [1, 3]


def test_a_hundred_leases_of_one_pull_pack_into_a_few_hundred_bytes():
    state = GroupState(read=100_100, read_item=100_000)
    state.pending = {100_000 + i: Pending(100_000, 1_700_000_030_000, 1, True) for i in range(100)}
    assert len(state.encode()) < 512  # the whole state item stays under 1 KB: one write unit
