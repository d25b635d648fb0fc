"""Readiness review question 4, "an image/runtime change or a model optimisation?"
(coursekit.provenance.compare.change_kind): two run records of the same step from two
environments whose JAX version and backend differ (this CPU machine's pinned JAX, and the
TPU v5e machine's image as measured there: JAX 0.10.2, Python 3.11.7, 1 TPU device, 13
cores) are read as an environment change and never compared; records of one environment
are the code's difference, for decide to judge."""

from __future__ import annotations

from coursekit.provenance import records
from coursekit.provenance.compare import change_kind, guarded_decide

CPU_MACHINE = {"python": "3.12.1", "platform": "Linux-6.18-x86_64-with-glibc2.36",
               "numpy": "2.5.5", "jax": "0.12.0.1", "jaxlib": "0.12.0.1", "backend": "cpu",
               "devices": 8, "xla_flags": "--xla_force_host_platform_device_count=8",
               "cpu": "AMD EPYC", "cpu_cores": 2}
TPU_IMAGE = {**CPU_MACHINE, "python": "3.11.7", "numpy": "2.4.6", "jax": "0.10.2",
             "jaxlib": "0.10.2", "backend": "tpu", "devices": 1, "xla_flags": "",
             "cpu_cores": 13}


def record(label: str, seconds: float, fingerprint: dict) -> dict:
    timing = {"label": label, "sync": "block_until_ready", "warmup": 2, "iters": 4,
              "first_call_s": 1.0, "samples_s": [seconds] * 4, "compiles_first_call": 1,
              "compiles_warmed": 0, "shapes": [[64, 16]], "dtypes": ["float32"],
              "output_ok": True, "backend": fingerprint["backend"]}
    return records.make_run_record(timing, boundary="train_step", fingerprint=fingerprint)


def test_jax_version_and_backend_apart_is_an_image_change_never_compared():
    here, there = record("before", 0.010, CPU_MACHINE), record("before", 0.002, TPU_IMAGE)
    got = change_kind(here, there)
    assert got["kind"] == "environment"
    assert got["stack"][:2] == ["jax: '0.12.0.1' vs '0.10.2'", "jaxlib: '0.12.0.1' vs '0.10.2'"]
    assert "backend: 'cpu' vs 'tpu'" in got["place"] and "devices: 8 vs 1" in got["place"]
    assert "never compared as a model change" in got["sentence"]
    called = []
    verdict = guarded_decide(here, there, lambda a, b: called.append(1) or {"decision": "accept"})
    assert verdict["refused"] and verdict["decision"] == "reject" and not called  # a 5x "speedup"


def test_a_runtime_flag_alone_is_an_environment_change_too():
    flags = {**CPU_MACHINE, "xla_flags": "--xla_force_host_platform_device_count=2",
             "devices": 2}
    got = change_kind(record("before", 0.01, CPU_MACHINE), record("before", 0.008, flags))
    assert got["kind"] == "environment" and got["stack"] == [
        "xla_flags: '--xla_force_host_platform_device_count=8' vs "
        "'--xla_force_host_platform_device_count=2'"]


def test_one_environment_leaves_the_difference_to_the_code():
    got = change_kind(record("before", 0.010, CPU_MACHINE), record("after", 0.009, CPU_MACHINE))
    assert got == {"kind": "code", "stack": [], "place": [], "other": [],
                   "sentence": got["sentence"]} and "decide() judges it" in got["sentence"]
