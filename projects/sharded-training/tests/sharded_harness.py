"""sharded-training's checker object and what every stage shares: the 8 CPU devices
(set before jax is imported), one compilation cache for the run, the stated tolerance
of sharded against single-device results, and what the learner process reports about
itself (``SELF_REPORTED``) with what each report is cross-checked against.

The learner's code runs in a learner process (the Checker's learner-process flag): it
is started by ``Checker.run``, after ``use_cpu_devices`` below has set XLA_FLAGS in this
process's environment, which the learner process inherits, and after the learner's
platforms are set to the CPU, so it sees the same 8 CPU devices on any machine, an
accelerator's included (stage 1's mesh_over_devices asks it). The autograder's runner
starts a learner process early (``bridge.prestart``) for a check.py that asks for one,
before check.py has run, with the device count check.py declares
(``LEARNER_CPU_DEVICES``, on the CPU); an early process without these devices is
discarded here and ``Checker.run`` starts one."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

from coursekit.facts import use_cpu_devices

N_DEVICES = 8
# Grading is the same on every machine: 8 CPU devices, even where a GPU is present (the
# fake-device flag only splits the CPU). An explicit JAX_PLATFORMS is respected.
use_cpu_devices(N_DEVICES)  # before jax is imported

from coursekit.checking import bridge  # noqa: E402 - imports no jax
from coursekit.checking.wire import protocol  # noqa: E402 - imports no jax

# ... and in this project's learner processes too. Other projects hand the chip to the
# learner process (the user's own platforms come back there); here it would open the
# chip and find one device where every stage places on eight (a TPU v5e: "the learner
# process sees 1 devices, not 8", KeyError: 1 placing on device 1). So they stay on the
# CPU's 8 devices on any machine, and their figures are CPU figures ("measured on: CPU
# figure", as device_facts labels them). Notebook 05 shows the chip in a cell of its own.
os.environ[protocol.ENV_LEARNER_PLATFORMS] = "cpu"

# A learner process started early (the runner reads check.py's LEARNER_CPU_DEVICES) is
# kept when it has these devices; one started without them would see one device: stopped.
bridge.discard_prestarted_unless({k: os.environ[k] for k in ("XLA_FLAGS", "JAX_PLATFORMS")})
from coursekit.checking.contract import Checker  # noqa: E402 - after the device flag
from coursekit.workloads.jaxcache import enable_compilation_cache  # noqa: E402

checker = Checker("sharded-training", {
    1: "mesh and placement", 2: "count-weighted global updates",
    3: "fresh-process recovery", 4: "trace and timing"}, learner_process=True)

# Answers of the inspectors (coursekit/workloads/remote_sharded_training.py) and workload
# facts: produced in the learner process, beside the learner's code. Each is used only
# with the independent evidence named here.
SELF_REPORTED = {
    "mesh_info (device ids, axis names of a mesh)": "the mesh the learner's exported step "
        "program declares (sdy.mesh, mhlo.num_partitions), parsed here from its StableHLO "
        "(stage 1 compiled_step_has_all_reduce); contradiction: TamperEvidence",
    "sharding_info (spec and mesh of a NamedSharding)": "stated facts about the learner's "
        "object only; the placement they lead to is checked through the exported program",
    "placement (each leaf's type, devices, piece shapes)": "the argument shardings of the "
        "learner's step exported as StableHLO with those arrays (parsed here) and the "
        "device count it was lowered for; TamperEvidence when they disagree",
    "placement shard_data (what each device holds)": "each piece must have its reported "
        "shape, and a whole-leaf piece equal the value returned as data (TamperEvidence "
        "otherwise); the data themselves against the checker's own batch",
    "leaves (array values returned as data)": "stored outputs of fixed inputs, the "
        "checker's own single-device step (or the learner's step on one device), "
        "gradient, initial state and checkpoint files read here; the program exported "
        "by the learner process is also compiled and run here on the checker's devices",
    "export (the step's StableHLO bytes)": "deserialised, analysed (shardings, "
        "shard_map) and compiled here; its result on the checker's own placed inputs must "
        "equal the learner's step result (stage 1)",
    "device_count": "the device ids of the learner's own meshes and arrays",
    "stand_in_step workload facts (calls, compiled_at, compiles)": "the trace this process "
        "parses (one region per traced call), the wall time this process measured around "
        "the call (calls x the checker's own fastest sample / 6 cannot exceed it) and the "
        "record's own counts",
    "stand_in_step workload facts (unready_at_next_call, unready_seen_after_s)": "only "
        "ever a reason to fail (a synchronised timer is never listed, and its times are "
        "never shorter than when its output was last seen unfinished); the samples and "
        "traced regions are also timed against the checker's own, in interleaved rounds",
    "stand_in_step workload facts (began_at, returned_at)": "in order, or TamperEvidence; "
        "only ever a reason to fail: a sample past its call's window (previous return to "
        "next entry) that also holds the one before it is named as timestamps",
    "profile record (samples_s, first_call_s)": "their sum against the call's wall time "
        "measured here; the median against the checker's own synchronised samples of the "
        "same step, in interleaved rounds (stage 4)",
    "raises (the exception check_same_mesh raised)": "its message is the graded output",
    "call_watched (shard_maps traced during the learner's own call)": "none independent "
        "for the count: it is only ever a reason to fail (0 means no per-shard code ran); "
        "the call's values against the checker's own counts",
    "call_guarded (a device-to-device copy refused during init_state)": "only ever a "
        "reason to fail, with JAX's own message; the state's values against the checker's "
        "own initial state",
    "deleted (which arrays a step call left deleted, stage 1)": "only ever a reason to "
        "fail (a donating step deletes the caller's state); the step's values against "
        "the checker's own single-device step",
}

# One compilation cache for this run: the checker and every training process it starts
# (fresh processes compile the same programs; a hit loads them instead). Removed at exit.
_CACHE_DIR = tempfile.mkdtemp(prefix="sharded-check-jaxcache-")
atexit.register(shutil.rmtree, _CACHE_DIR, ignore_errors=True)
enable_compilation_cache(_CACHE_DIR)

RTOL, ATOL = 1e-4, 1e-5          # sharded vs single-device (summation order differs)
