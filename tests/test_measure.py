"""The bandwidth and peak-memory helpers measure what they claim: in-place samples pay no
page faults and a fresh output pays about one per page; cache sizes and sweep sizes come
from sysfs; the run-only peak is reset after compile, repeated in fresh processes, and
orders the remat policies the way the compiler's plan does."""

from __future__ import annotations

import os

import pytest

from coursekit.instructor import bandwidth as answers
from coursekit.instructor import peak_memory as pm
from coursekit.measure import bandwidth as bw

MiB = 2**20


def test_cache_sizes_from_a_sysfs_tree(tmp_path):
    for i, (level, kind, size) in enumerate(((1, "Data", "48K"), (1, "Instruction", "32K"),
                                             (2, "Unified", "2048K"), (3, "Unified", "300M"))):
        d = tmp_path / f"index{i}"
        d.mkdir()
        (d / "level").write_text(f"{level}\n")
        (d / "type").write_text(f"{kind}\n")
        (d / "size").write_text(f"{size}\n")
    caches = answers.cache_sizes(tmp_path)
    assert caches == {"L1": 48 * 2**10, "L2": 2 * MiB, "L3": 300 * MiB}
    assert answers.cache_sizes(tmp_path / "missing") == {}
    assert answers.level_of(40 * 2**10, caches) == "L1" and answers.level_of(300 * MiB + 1, caches) == "DRAM"


def test_sweep_spans_past_the_last_level_cache_and_can_be_capped():
    caches = {"L1": 48 * 2**10, "L2": 2 * MiB, "L3": 300 * MiB}
    sizes = bw.sweep_sizes(caches, beyond=4)
    assert sizes == sorted(sizes) and max(sizes) >= 4 * 300 * MiB - bw.PAGE
    for size in caches.values():           # a point inside and past every level
        assert size // 2 in sizes and 2 * size in sizes
    capped = bw.sweep_sizes(caches, largest=8 * MiB)
    assert max(capped) <= 8 * MiB and all(s % bw.PAGE == 0 for s in capped)


def test_in_place_pays_no_page_faults_and_a_fresh_output_pays_one_per_page():
    nbytes = 64 * MiB                      # past glibc's 32 MiB mmap threshold
    recs = answers.measure_interleaved(("in_place", "fresh_output", "read_sum"), nbytes,
                                  rounds=2, iters=2)
    pages = nbytes // bw.PAGE
    assert recs["in_place"]["donated"] is True
    assert recs["in_place"]["faults_per_call"] < pages / 100
    assert recs["fresh_output"]["faults_per_call"] >= pages * 0.9
    assert recs["in_place"]["moved_bytes"] == 2 * nbytes
    assert recs["read_sum"]["moved_bytes"] == nbytes
    for rec in recs.values():
        assert len(rec["samples_s"]) == len(rec["minor_faults"]) == len(rec["round_ids"]) == 4
    # CPU figure, load-tolerant: page faulting costs far more than the window of noise
    assert recs["in_place"]["best_bandwidth"] > 1.5 * recs["fresh_output"]["best_bandwidth"]


def test_level_bandwidths_read_each_level_and_ignore_just_past_the_cache():
    caches = {"L1": 32 * 2**10, "L2": MiB}
    recs = [{"kind": "in_place", "working_set_bytes": ws, "best_bandwidth": b}
            for ws, b in ((16 * 2**10, 50.0), (512 * 2**10, 30.0), (600 * 2**10, 31.0),
                          (int(1.5 * MiB), 99.0), (4 * MiB, 10.0))]
    levels = bw.level_bandwidths(recs, caches, lambda ws: answers.level_of(ws, caches))
    assert list(levels) == ["L1", "L2", "DRAM"]
    assert levels["L2"]["bandwidth"] == 31.0 and levels["DRAM"]["bandwidth"] == 10.0


def test_theoretical_peak_states_its_assumptions():
    peak = bw.theoretical_peak_flops(cores=2, ghz=2.0, flags={"avx512f", "fma"}, fma_units=2)
    assert peak["flops"] == 2 * 2.0e9 * 64 and peak["flop_per_cycle"] == 64
    assert "assumed" in peak["assumption"]
    assert bw.theoretical_peak_flops(cores=1, ghz=1.0, flags=set(), fma_units=1)["flops"] == 4e9
    b = answers.bounds(10.0, 4.0, peak_flops=5.0, bandwidth=1.0)
    assert (b["lower_s"], b["upper_s"]) == (4.0, 6.0)


def test_reset_lowers_the_high_water_mark():
    if not os.path.exists("/proc/self/clear_refs"):
        pytest.skip("no /proc/self/clear_refs")
    blob = bytearray(64 * MiB)             # raise the high-water mark, then drop it
    del blob
    before = pm.status_bytes("VmHWM")
    assert pm.reset_high_water_mark()
    assert pm.status_bytes("VmHWM") < before


@pytest.mark.slow
def test_run_only_peak_orders_policies_with_repeats():
    cfg = dict(depth=3, width=33, hidden=513, batch=3001)
    got = pm.fresh_process_peaks({p: (pm.blocks_factory(), dict(cfg, policy=p))
                                  for p in ("none", "nothing_saveable")}, repeats=3)
    plain, remat = got["none"], got["nothing_saveable"]
    assert len(set(plain["pids"] + remat["pids"])) == 6 and os.getpid() not in plain["pids"]
    assert remat["temp_size_in_bytes"] < plain["temp_size_in_bytes"]
    assert plain["argument_size_in_bytes"] == remat["argument_size_in_bytes"]
    # the run alone: at least the planned temporaries, far below the unreset VmHWM
    for rec in (plain, remat):
        assert min(rec["run_peak_bytes"]) >= rec["temp_size_in_bytes"]
        assert max(rec["run_peak_bytes"]) < min(rec["vmhwm_bytes"]) / 2
        assert rec["device_peak_bytes"] is None or rec["device"] != "cpu"
    assert max(remat["run_peak_bytes"]) < min(plain["run_peak_bytes"])


def test_nested_compile_counters_leave_by_identity():
    import jax
    import jax.numpy as jnp

    from coursekit.measure.timing import count_compiles
    x = jnp.ones(3)
    with count_compiles() as outer:
        with count_compiles() as inner:  # equal in value to outer all along
            jax.jit(lambda v: v * 4.5)(x)
        assert inner[0] == outer[0] >= 1
        before = outer[0]
        jax.jit(lambda v: v * 5.75)(x)  # still counted: the inner one left, not outer
        assert outer[0] > before
