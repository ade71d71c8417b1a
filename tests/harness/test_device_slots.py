"""How many input slots a device-time round replays (`rounds.slots_for`): enough to last the round's target
and to stage more than L2, but the L2 rule alone never asks for thousands of tiny sets (their staging and
a graph of slots x launches nodes cost ~30 s per contender on the H100 for an ATen spec)."""
from workbench.harness.rounds import L2_BYTES, MAX_L2_SLOTS, slots_for


def test_large_sets_need_few_slots():
    assert slots_for(256 * 2**20, 1024, per_call_s=5e-3, target_s=0.02) == 4


def test_mid_sets_stage_twice_l2():
    n = slots_for(4 * 2**20, 1024, per_call_s=1e-3, target_s=0.02)
    assert n * 4 * 2**20 >= 2 * L2_BYTES and n <= MAX_L2_SLOTS


def test_tiny_sets_are_bounded_by_the_l2_cap_not_by_thousands():
    # 20 KB of samples, a host-bound forward of 150 us: the round's target asks for 134, L2 alone for 5,243
    assert slots_for(20_000, 1024, per_call_s=150e-6, target_s=0.02) == 134
    assert slots_for(20_000, 1024, per_call_s=5e-3, target_s=0.02) == MAX_L2_SLOTS


def test_a_fast_forward_still_fills_the_round_within_the_memory_bound():
    assert slots_for(1_000, 1024, per_call_s=5e-6, target_s=0.02) == 1024
    assert slots_for(1_000, 300, per_call_s=5e-6, target_s=0.02) == 300
