"""Device operations inside a traced region (coursekit.measure.device_trace), read through
the real ``jax.profiler.ProfileData``: from an XSpace laid out as a TPU v5e's was (JAX
0.10.2: planes "/device:TPU:0" with "XLA Modules", "XLA Ops" and "Async XLA Ops" lines,
"/host:CPU" with a "python3" thread; names and durations from that trace), and from a real
CPU trace of this machine, which has no device plane."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest
from jax.profiler import ProfileData

from coursekit.measure import device_trace as dt

FUSION = "%fusion = f32[]{:T(128)} fusion(f32[2048,2048]{1,0:T(8,128)S(1)} %copy-done), kind=kOutput"
COPY_START = ("%copy-start = (f32[2048,2048]{1,0:T(8,128)S(1)}, f32[2048,2048]{1,0:T(8,128)}, "
              "u32[]{:S(2)}) copy-start(f32[2048,2048]{1,0:T(8,128)} %a.1)")
COPY_DONE = "%copy-done = f32[2048,2048]{1,0:T(8,128)S(1)} copy-done(%copy-start)"


def event(meta: int, start_ns: float, dur_ns: float) -> str:
    return (f"events {{ metadata_id: {meta} offset_ps: {int(start_ns * 1000)} "
            f"duration_ps: {int(dur_ns * 1000)} }}")


def metadata(names: dict[int, str]) -> str:
    return " ".join(f'event_metadata {{ key: {k} value {{ id: {k} name: "{v}" }} }}'
                    for k, v in names.items())


def chip_like_space() -> ProfileData:
    """Two annotated regions 'R' on the host, each of which dispatched and waited for one
    program run: its copy-start, copy-done and fusion on the device (the chip's own start
    times and durations, in ns: the second run begins 231,868 ns before the second region
    on the host clock), and one more run outside every region."""
    ops = [event(1, 49393348, 13), event(2, 49393372, 3), event(3, 49393386, 90018),
           event(1, 50492676, 13), event(2, 50492700, 3), event(3, 50492713, 90020),
           event(3, 60000000, 5000)]
    mods = [event(4, 49393334, 90072), event(4, 50492661, 90073), event(4, 60000000, 5000)]
    host = [event(5, 49325889, 1393390), event(5, 50724529, 676250)]
    text = f'''
planes {{ id: 1 name: "/host:CPU"
  lines {{ id: 1 name: "python3" timestamp_ns: 0 {" ".join(host)} }}
  {metadata({5: "R"})} }}
planes {{ id: 2 name: "/device:TPU:0"
  lines {{ id: 1 name: "XLA Modules" timestamp_ns: 0 {" ".join(mods)} }}
  lines {{ id: 2 name: "XLA Ops" timestamp_ns: 0 {" ".join(ops)} }}
  lines {{ id: 3 name: "Async XLA Ops" timestamp_ns: 0 {event(1, 49393348, 27)} }}
  {metadata({1: COPY_START, 2: COPY_DONE, 3: FUSION, 4: "jit__lambda(12663912540292823401)"})} }}
'''
    return ProfileData.from_text_proto(text.replace('\\"', '"'))


def test_op_names_and_kinds_from_hlo_text():
    assert dt.op_name(FUSION) == "fusion" and dt.op_kind(FUSION) == "fusion"
    assert dt.op_name(COPY_START) == "copy-start"
    assert dt.op_name("%fusion.12 = bf16[8,128] fusion(...)") == "fusion.12"
    assert dt.op_kind("%fusion.12 = bf16[8,128] fusion(...)") == "fusion"
    assert dt.op_name("ynn_fusion") == "ynn_fusion"  # a CPU thunk's plain name


def test_device_ops_inside_each_region_of_a_chip_like_trace():
    found = dt.regions(chip_like_space(), "R")
    assert found["device_planes"] == ["/device:TPU:0"]
    # the smallest shift that puts both runs inside their regions: the second run's start
    # onto its region's start
    assert found["offset_ns"] == 50724529 - 50492661 == 231868
    assert (found["modules_placed"], found["modules_total"]) == (2, 3)
    first, second = found["regions"]
    assert first["dur_ns"] == 1393390
    assert [dt.op_kind(s.name) for s in first["ops"]] == ["copy-start", "copy-done", "fusion"]
    assert first["op_ns"] == 13 + 3 + 90018
    assert first["busy_ns"] == 13 + 3 + 90018      # no overlap between them
    assert list(first["by_op"]) == ["fusion", "copy-start", "copy-done"]   # largest first
    assert first["modules"] == {"jit__lambda(12663912540292823401)": 90072}
    assert second["op_ns"] == 13 + 3 + 90020
    # the run at 60 ms lies in no region: it is nobody's
    assert all(s.start_ns < 60_000_000 for r in found["regions"] for s in r["ops"])


def test_without_the_shift_the_second_run_would_land_in_the_first_region():
    space = chip_like_space()
    windows = dt.host_regions(space, "R")
    ops = dt.device_lines(space)["/device:TPU:0"]
    unshifted = [len(dt.clipped(w, ops)) for w in windows]
    assert unshifted == [6, 0]          # both runs' ops in the first region, none in the second
    found = dt.regions(space, "R")
    assert [len(r["ops"]) for r in found["regions"]] == [3, 3]


def test_clock_offset_prefers_no_shift_and_says_how_many_it_placed():
    windows = [dt.Span("R", 0, 100), dt.Span("R", 200, 100)]
    inside = [dt.Span("m", 10, 50), dt.Span("m", 220, 50)]
    assert dt.clock_offset(inside, windows) == (0.0, 2)
    late = [dt.Span("m", 10 - 40, 50), dt.Span("m", 220 - 40, 50)]   # device 40 ns behind
    assert dt.clock_offset(late, windows) == (30.0, 2)                # the smallest fix
    assert dt.clock_offset([dt.Span("m", 0, 500)], windows) == (0.0, 0)   # longer than any
    assert dt.clock_offset([], windows) == (0.0, 0)


def test_other_annotations_get_the_same_shift():
    found = dt.regions(chip_like_space(), "R", also=("R",))
    assert [r["op_ns"] for r in found["also"]["R"]] == [r["op_ns"] for r in found["regions"]]


def test_ops_are_clipped_to_the_region_and_overlaps_count_once():
    window = dt.Span("R", 100, 50)
    spans = [dt.Span("a", 90, 20), dt.Span("b", 105, 10), dt.Span("c", 140, 30),
             dt.Span("d", 200, 5)]
    inside = dt.clipped(window, spans)
    assert [(s.name, s.start_ns, s.dur_ns) for s in inside] == [
        ("a", 100, 10), ("b", 105, 10), ("c", 140, 10)]
    assert dt.union_ns(inside) == 15 + 10  # a and b overlap on 105-110, then c
    assert dt.union_ns([]) == 0


def test_a_cpu_trace_has_no_device_plane(tmp_path):
    f = jax.jit(lambda a: jnp.tanh(a @ a))
    a = jnp.ones((64, 64))
    jax.block_until_ready(f(a))
    with jax.profiler.trace(str(tmp_path)):
        with jax.profiler.TraceAnnotation("R"):
            jax.block_until_ready(f(a))
    (trace,) = tmp_path.glob("plugins/profile/*/*.trace.json.gz")  # the one run here
    xplane = dt.xplane_beside(trace)
    found = dt.region_device_ops(xplane, "R")
    assert found["device_planes"] == []
    assert len(found["regions"]) == 1 and found["regions"][0]["ops"] == []
    assert found["regions"][0]["dur_ns"] > 0


def test_a_missing_file_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="xplane.pb"):
        dt.load(tmp_path / "gone.xplane.pb")
    with pytest.raises(FileNotFoundError, match="xplane.pb beside"):
        dt.xplane_beside(tmp_path / "x.trace.json.gz")
