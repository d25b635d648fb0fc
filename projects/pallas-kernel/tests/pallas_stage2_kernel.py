"""pallas-kernel stage 2: the kernel. ``execution_mode`` against the backends; the
learner's ``softmax_pallas`` program, read in the learner process (its ``pallas_call``
sites: grid, block shapes, index maps, the primitives inside and outside the kernel, the
``interpret`` flag; self-reported, see ``SELF_REPORTED``), against the shape arithmetic
(``ceil(rows / block_rows)`` programs, ``block_cols(cols)`` columns) and against the
program exported as StableHLO and read here (lowered mode, grid loop bound, block
tensors); its values, on shapes the blocks do not divide, against the float64 and float32
references, there and once more through the exported program run here; ``run_softmax``'s
declared mode, backend, grid and block against the ``pallas_call`` that ran."""

from __future__ import annotations

import math
import re

import jax
import jax.numpy as jnp
import numpy as np
import scipy.special
from pallas_harness import (
    BLOCK_ROWS,
    DTYPES,
    block_width,
    budget,
    checker,
    compare,
    draw,
    expect_close,
    exported_kernel,
    length,
    ragged,
    ref64,
    second_call,
)

from coursekit.checking import bridge
from coursekit.checking.bridge import LearnerFunction
from coursekit.checking.contract import short
from coursekit.checking.device import learner_backend
from coursekit.checking.errors import CheckFailed, LearnerCodeError, TamperEvidence
from coursekit.checking.learner import get_function
from coursekit.checking.values import as_array, fail_unless, require_keys
from coursekit.measure.pallas_inspect import KERNEL_CALL_MARKERS


def describe(shape, block_rows: int) -> str:
    rows, cols = shape
    divides = "divisible" if rows % block_rows == 0 else "NOT divisible"
    return (f"shape {tuple(shape)}, block_rows={block_rows} (rows {divides}; {cols} of "
            f"{block_width(cols)} block columns used)")



# What must hold, for a failure no diagnosis below names (the hints say what the evidence
# shows, never the code of a fix: the released checker can be read before any attempt).
KERNEL_HINT = ("each output cell must be the softmax of its row's n_cols data cells, "
               "whatever the block's other cells hold and whichever block the row is in")
# Not allowed outside the kernel: softmax arithmetic, and host callbacks (a way to compute
# the result somewhere else and hand it back).
FORBIDDEN_OUTSIDE = {"exp", "reduce_max", "reduce_sum", "div", "log", "logistic", "exp2",
                     "argmax", "cumsum", "cumlogsumexp", "cummax", "pure_callback",
                     "io_callback", "callback"}


# float32's exp is 0 below -104 (subnormal below -87.3): a row whose max lies more than
# ZERO_GAP below the max it was shifted by loses every value (0/0).
ZERO_GAP = 104.0


def wrong_rows(y, x, dtype_name: str) -> np.ndarray:
    """The rows of ``y`` with a cell outside the float64 reference's rounding budget."""
    rtol, atol = budget(DTYPES[dtype_name], x.shape[1])
    ref = ref64(x)
    y = np.asarray(y).astype(np.float64)
    with np.errstate(invalid="ignore"):
        ok = np.abs(y - ref) <= atol + rtol * np.abs(ref)
    return np.flatnonzero(~ok.all(axis=1))


# A replay of a classic mistake is compared where float32 settles it: not on rows whose
# largest exp lies between e^-SETTLED_GAP and 0 (XLA may flush what numpy keeps subnormal).
SETTLED_GAP = 69.0


def mistake_replays(x, block_rows: int):
    """This process's float32 replays of two kernel mistakes, each as (kind, rows it
    covers, y of x's shape, which of the covered rows it leaves unsettled):
    ``zero-padding`` (the columns past the edge counted as 0s, every row) and
    ``block-max`` (each block's max in place of each row's, the rows of full blocks: a
    partial block's rows past the edge hold anything)."""
    z = np.asarray(jnp.asarray(x, jnp.float32)).astype(np.float32)
    rows, cols = z.shape
    width = block_width(cols)
    with np.errstate(invalid="ignore", divide="ignore", under="ignore", over="ignore"):
        if cols < width:  # the whole padded row's softmax (SciPy's, in float32)
            padded = np.zeros((rows, width), np.float32)
            padded[:, :cols] = z
            yield ("zero-padding", np.arange(rows),
                   scipy.special.softmax(padded, axis=1)[:, :cols], np.zeros(rows, bool))
        full = (rows // block_rows) * block_rows
        if full:
            row_max = z.max(axis=1).astype(np.float64)
            shift = np.repeat(z[:full].reshape(-1, block_rows, cols).max(axis=(1, 2)),
                              block_rows)
            e = np.exp(z[:full] - shift[:, None])
            gap = shift - row_max[:full]
            y = np.full(z.shape, np.nan, np.float32)  # rows past the full blocks: none
            y[:full] = e / e.sum(axis=1, keepdims=True)
            yield ("block-max", np.arange(full), y,
                   (gap > SETTLED_GAP) & (gap < ZERO_GAP + 1))


def replayed_mistake(x, y, bad, dtype_name: str, block_rows: int):
    """The first mistake whose replay this process computes that the learner's output
    equals on every settled row it covers (to rtol max(1e-3, 2 eps of the dtype), NaN
    where NaN), with at least one wrong row among them and the replay itself wrong on
    each: (kind, rtol, a wrong row, its worst column, the replay's value there), or
    None."""
    rtol = max(1e-3, 2 * float(jnp.finfo(DTYPES[dtype_name]).eps))
    y = np.asarray(y).astype(np.float64)
    for kind, covered, replay, unsettled in mistake_replays(x, block_rows):
        # rounded once to the output dtype, as the kernel's store rounds
        replay = np.asarray(jnp.asarray(replay).astype(DTYPES[dtype_name]), np.float64)
        settled = covered[~unsettled]
        wrong = np.intersect1d(bad, settled)
        # the mistake explains a wrong row only where it is itself wrong (outside the
        # budget): where it equals softmax, it matches a right answer and a near one too
        if not wrong.size or not np.isin(wrong, wrong_rows(replay, x, dtype_name)).all():
            continue
        same = np.isclose(y[settled], replay[settled], rtol=rtol, atol=1e-6, equal_nan=True)
        if same.all():
            with np.errstate(invalid="ignore"):
                off = np.abs(y[wrong] - ref64(x)[wrong])
            i, c = np.unravel_index(int(np.argmax(np.where(np.isnan(off), np.inf, off))),
                                    off.shape)
            r = int(wrong[i])
            return kind, rtol, r, int(c), float(replay[r, c])
    return None


def kernel_diagnosis(impl, x, y, dtype_name: str, block_rows: int) -> tuple[str, str]:
    """(kind, hint) for a kernel result outside the budget. First by replay: the learner's
    output equals this process's replay of a classic mistake (``mistake_replays``:
    ``zero-padding``, ``block-max``); else from where its wrong rows lie:
    ``partial-block`` (only the last, partial block's rows), ``low-precision`` (bfloat16
    wrong, the same values as float32 right: measured here with one more call),
    ``edge-columns`` (the blocks hold columns past the edge), else ``unknown``, whose hint
    names no cause; ``one-block`` (the rows of one grid program alone, the others
    right). ``low-precision`` is asked before the row-place kinds: it is measured, they
    are inferred, and a bfloat16 step's errors can fall in one block by chance."""
    rows, cols = x.shape
    bad = wrong_rows(y, x, dtype_name)
    full = (rows // block_rows) * block_rows  # rows of full blocks: [0, full)
    in_full = bad[bad < full]
    found = replayed_mistake(x, y, bad, dtype_name, block_rows)
    if found:
        kind, rtol, r, c, replayed = found
        yours = float(np.asarray(y).astype(np.float64)[r, c])
        evidence = (f"row {r}, column {c}: yours {yours:.6g}, that replay's {replayed:.6g}, "
                    f"the reference's {float(ref64(x)[r, c]):.6g}")
        if kind == "zero-padding":
            return kind, (
                f"your output equals (rtol {rtol:.0e}) this checker's softmax with the "
                f"{block_width(cols) - cols} columns past the array's edge counted as 0s "
                f"({evidence}): those cells entered the row's max and sum as zeros (a 0 "
                f"raises the max of a row below 0 and adds exp(0 - max) to its sum); "
                f"{KERNEL_HINT}")
        z = np.asarray(jnp.asarray(x, jnp.float32)).astype(np.float64)
        start = r - r % block_rows
        return kind, (
            f"the rows of full blocks equal (rtol {rtol:.0e}) this checker's softmax with "
            f"each block's max in place of each row's ({evidence}; row {r}'s max "
            f"{z[r].max():.4g}, its block's {z[start:start + block_rows].max():.4g}): one "
            "max was shared by the rows of a block, and exp of a gap over "
            f"{ZERO_GAP:.0f} underflows to 0 in float32; each row's softmax is shifted by "
            "that row's own max")
    # measured before anything is inferred from where the wrong rows lie: a bfloat16
    # step over budget by a hair can miss every row but one block's by chance
    if dtype_name == "bfloat16":
        x32 = x.astype(jnp.float32)  # the same values, exactly
        try:
            y32 = as_array(learner_kernel(impl, block_rows)(x32), "float32", shape=x.shape,
                           dtype=jnp.float32)
        except (CheckFailed, LearnerCodeError):
            y32 = None
        if y32 is not None and not wrong_rows(y32, x32, "float32").size:
            return "low-precision", (
                "the same values given as float32 come out within float32's budget, so "
                "no mask or grid is at fault: a step runs in bfloat16 (x_ref's dtype), "
                "where the contract computes in float32 and rounds once to the output "
                "dtype")
    if bad.size and not in_full.size and full:
        return "partial-block", (
            f"only rows of the last, partial block (rows {full}..{rows - 1}) are wrong, "
            "the rows of full blocks right: that block is not computed, or the rows past "
            "the array's edge in it (which hold anything: NaN, interpreted) reach the rows "
            "inside it")
    programs = -(-rows // block_rows)
    blocks = np.unique(bad // block_rows)
    if programs > 1 and blocks.size == 1:
        k = int(blocks[0])
        which = "first" if k == 0 else "last" if k == programs - 1 else "a middle one"
        return "one-block", (
            f"only the rows of grid program {k} ({which} of {programs}: rows "
            f"{k * block_rows}..{min(rows, (k + 1) * block_rows) - 1}) are wrong, every other "
            "program's rows right: the kernel computes otherwise in that one program (what "
            f"it does depends on its program id or its place in the grid); {KERNEL_HINT}")
    if np.isnan(np.asarray(y, np.float64)[bad]).any():
        return nan_diagnosis(impl, x, bad, block_rows)
    if cols < block_width(cols):
        return "edge-columns", (
            f"{bad.size} of {rows} rows are wrong, {in_full.size} of them in full blocks, "
            f"and the blocks hold {block_width(cols) - cols} "
            f"cells past the array's edge in each row ({cols} of {block_width(cols)} "
            f"columns are data): {KERNEL_HINT}")
    return "unknown", (
        f"{bad.size} rows of full blocks with no cell past the array's edge are wrong "
        f"(first: row {int(bad[0]) if bad.size else '-'}), so masking and the grid are "
        "not the cause: compare that row's max, exp, sum and division with softmax_jnp's")


def nan_from(impl, x, block_rows: int, nan_in: str) -> bool:
    """Whether the learner's kernel body, on ``x`` laid out in its blocks by the checker
    (``pallas-kernel/kernel_on_padding``), gives NaN in a data cell when NaN fills only
    the cells past the array's edge in ``nan_in`` ("columns": past n_cols in each row;
    "first-column": column n_cols alone; "later-columns": those after it; "rows": the
    block's rows past the last row), the other padding finite and far below
    every row's max (what no correct kernel lets reach a result either way)."""
    rows, cols = x.shape
    width, programs = block_width(cols), -(-rows // block_rows)
    padded = np.full((programs * block_rows, width), -1e30, np.float32)
    padded[:rows, :cols] = np.asarray(x, np.float32)
    padded[rows:, :cols] = padded[:1, :cols]
    if nan_in == "columns":
        padded[:, cols:] = np.nan
    elif nan_in == "first-column":      # column n_cols alone: the first past the edge
        padded[:, cols] = np.nan
    elif nan_in == "later-columns":     # every column past the edge but that one
        padded[:, cols + 1:] = np.nan
    else:
        padded[rows:] = np.nan
    try:
        y = bridge.inspect(impl, "pallas-kernel/kernel_on_padding",
                           LearnerFunction("softmax_kernel"), padded, cols, rows, block_rows)
        return bool(np.isnan(np.asarray(y, np.float64)).any())
    except (CheckFailed, LearnerCodeError):
        return False


def nan_diagnosis(impl, x, bad, block_rows: int) -> tuple[str, str]:
    """(kind, hint) for NaN from inputs that hold none: the cells interpreted Pallas pads
    with NaN reached the result, past n_cols in each row or in the block's rows past the
    array's edge, as the learner's kernel body shows on padding filled here with NaN in
    one of the two alone."""
    rows, cols = x.shape
    width = block_width(cols)
    by_columns = cols < width and nan_from(impl, x, block_rows, "columns")
    by_rows = rows % block_rows != 0 and nan_from(impl, x, block_rows, "rows")
    found = f"NaN in {len(bad)} of {rows} rows, from inputs that hold none"
    if by_columns and not by_rows and width - cols >= 2 and \
            nan_from(impl, x, block_rows, "first-column") and \
            not nan_from(impl, x, block_rows, "later-columns"):
        return "edge-columns", (
            f"{found}: with NaN in column {cols} alone, the first past the array's edge "
            f"(the data are columns 0..{cols - 1}), your kernel body gives NaN, and with "
            "NaN in every later one alone it does not: the mask lets in one column too "
            f"many (off by one); {KERNEL_HINT}")
    if by_columns and not by_rows:
        return "edge-columns", (
            f"{found}: the NaN that interpreted Pallas puts in the {width - cols} cells past "
            f"the array's edge in each row ({cols} of {width} columns are data) reached the "
            "result through the row's max or sum (your kernel body gives NaN with NaN "
            f"there alone); {KERNEL_HINT}")
    if by_rows and not by_columns:
        return "edge-rows", (
            f"{found}: with NaN in the block's rows past the array's edge alone (the rows "
            f"after row {rows - 1}), your kernel body gives NaN in rows inside it: a "
            f"reduction spans the block's rows; {KERNEL_HINT}")
    return "padding-nan", (
        f"{found}: the NaN interpreted Pallas puts past the array's edge (in the "
        f"{width - cols} columns past n_cols, or the block's rows past the last row) "
        f"reached the result; {KERNEL_HINT}")


def expect_kernel_close(impl, y, x, dtype_name: str, what: str, block_rows: int,
                        also_jnp: bool = False) -> None:
    """expect_close with the hint from kernel_diagnosis; the kind of the failure is
    ``err.kind``."""
    y = as_array(y, what, shape=tuple(x.shape), dtype=DTYPES[dtype_name])
    try:
        expect_close(y, x, dtype_name, what, KERNEL_HINT, also_jnp=also_jnp)
    except CheckFailed as err:
        err.kind, err.hint = kernel_diagnosis(impl, x, y, dtype_name, block_rows)
        raise


def learner_kernel(impl, block_rows: int):
    """The learner's softmax_pallas(x, block_rows=...), run in the learner process."""
    fn = get_function(impl, "softmax_pallas")
    return lambda x: fn(x, block_rows=block_rows)


def learner_sites(impl, x, block_rows: int, programs: int = 0) -> dict:
    """The learner process's reading of softmax_pallas(x, block_rows=...)'s program
    (self-reported: ``SELF_REPORTED``)."""
    get_function(impl, "softmax_pallas")
    info = bridge.inspect(impl, "pallas-kernel/sites", LearnerFunction("softmax_pallas"), x,
                          programs=programs, block_rows=block_rows)
    if not (isinstance(info, dict) and isinstance(info.get("sites"), list)
            and isinstance(info.get("outside"), list)
            and all(isinstance(s, dict) and {"grid", "block_shapes", "interpret",
                                             "kernel_primitives"} <= set(s)
                    for s in info["sites"])):
        raise TamperEvidence(f"the sites inspector answered {short(info)}")
    return info


def program_facts(exported) -> dict:
    """What this process reads from an exported StableHLO program: the lowered mode (a
    compiled Pallas kernel is a custom call), the bounds of its loops (an interpreted
    pallas_call is a loop over its grid: ``iterArg < programs``) and its tensor shapes."""
    text = exported.mlir_module()
    constants = dict(re.findall(r"%(\w+) = stablehlo\.constant dense<(-?\d+)> : tensor<i32>",
                                text))
    bounds = [int(constants[name]) for name in
              re.findall(r"stablehlo\.compare\s+LT,\s*%iterArg\w*,\s*%(\w+)", text)
              if name in constants]
    return {"lowered": "compiled" if any(m in text for m in KERNEL_CALL_MARKERS)
            else "interpreted", "loops": text.count("stablehlo.while"),
            "bounds": bounds, "tensors": set(re.findall(r"tensor<((?:\d+x)+)\w+>", text))}


def cross_check_sites(impl, x, block_rows: int, info: dict) -> dict:
    """The learner process's site report against the exported program read here: an
    interpreted pallas_call is a loop over its grid with (block_rows, block_cols) block
    tensors in the body. Returns the program's facts."""
    exported = exported_kernel(impl, x, block_rows)
    if exported is None:  # a compiled kernel that cannot be exported: its mode read there
        return {"lowered": bridge.inspect(impl, "pallas-kernel/lowered_mode",
                                          LearnerFunction("softmax_pallas"), x,
                                          block_rows=block_rows)}
    facts = program_facts(exported)
    sites = info["sites"]
    if facts["lowered"] != "interpreted" or not sites \
            or not all(s["interpret"] for s in sites):
        return facts  # a compiled kernel is one custom call: nothing more to read here
    if not facts["loops"]:
        raise TamperEvidence(f"the learner process reported {len(sites)} interpreted "
                             "pallas_call(s), but the exported program has no grid loop")
    for s in sites:
        grid = s["grid"]
        if len(grid) == 1 and grid[0] > 1 and grid[0] not in facts["bounds"]:
            raise TamperEvidence(f"the learner process reported grid {grid}, but the "
                                 f"exported program's loops run {facts['bounds']} times")
        for block in s["block_shapes"]:
            dims = "".join(f"{d}x" for d in block if d is not None)
            if dims and dims not in facts["tensors"]:
                raise TamperEvidence(f"the learner process reported block {block}, but "
                                     "the exported program holds no such tensor")
    return facts


# The backends execution_mode is asked about, each answer's right one: the accelerators
# first, so that on a CPU machine an answer kept from an earlier call (a first call's
# "compiled" given again for "cpu") is told apart from the argument left unread (the
# machine's own "interpreted" for "gpu").
MODES = (("gpu", "compiled"), ("tpu", "compiled"), ("cpu", "interpreted"))


def mode_hint(backend: str, got, answers: dict, here: str) -> str:
    """What a wrong ``execution_mode(backend)`` answer ``got`` shows, given the answers of
    the calls before it in this check (``answers``: backend -> answer) and the mode of the
    machine the learner's code runs on (``here``)."""
    if answers and all(a == got for a in answers.values()):
        asked = ", ".join(map(repr, answers))
        return (f"execution_mode({backend!r}) gave {got!r}, the answer each earlier call "
                f"gave ({asked}, right there): a later call with another backend argument "
                "returned an earlier call's answer (or takes 'cpu' for an accelerator: "
                "compiled Pallas does not run on CPU)")
    if got == here and backend != "cpu":
        return (f"execution_mode({backend!r}) gave {got!r}, the mode of the machine this "
                f"runs on ({here}), not of the backend argument: the answer follows this "
                "machine (or an earlier call's answer), not the backend it is asked about")
    return "compiled Pallas does not run on CPU: there it must run with interpret=True"


@checker.check(2)
def execution_mode_by_backend(impl, ctx):
    mode = get_function(impl, "execution_mode")
    here = "interpreted" if learner_backend(ctx) == "cpu" else "compiled"
    answers = {}
    for backend, want in MODES:
        got = mode(backend)
        fail_unless(got == want and isinstance(got, str), f"execution_mode({backend!r})",
                    yours=got, expected=want, hint=mode_hint(backend, got, answers, here))
        answers[backend] = got
    got = mode()
    named = answers.get(learner_backend(ctx))
    fail_unless(got == here, "execution_mode() without an argument must describe "
                "jax.default_backend() where it runs", yours=got, expected=here,
                hint=(f"execution_mode({learner_backend(ctx)!r}) says {named!r} where it "
                      f"runs, execution_mode() says {got!r}: the default None is compared "
                      "as it is, not first resolved to jax.default_backend()")
                if named == here else None)


@checker.check(2)
def kernel_is_a_pallas_call(impl, ctx):
    rng = ctx.rng("pallas-call")
    block_rows = int(rng.choice(BLOCK_ROWS))
    shape = (ragged(rng, 20, 60, block_rows), length(rng, 130, 500, 2))
    x = draw(rng, shape, jnp.float32)
    info = learner_sites(impl, x, block_rows)
    fail_unless(len(info["sites"]) > 0, "softmax_pallas runs no pallas_call: the result "
                "comes from ordinary jax.numpy code, not from a kernel",
                yours=f"primitives {sorted(info['outside'])[:12]}",
                expected="a pallas_call in the program",
                hint="softmax_pallas must run softmax_kernel through one pallas_call, "
                "as its docstring states")
    outside = set(info["outside"]) & FORBIDDEN_OUTSIDE
    fail_unless(not outside, "softmax arithmetic runs outside the kernel",
                yours=sorted(outside), expected="none: exp, max and sum inside the kernel",
                hint="the kernel must do the whole softmax; the wrapper only sets up the "
                "pallas_call")
    inside = set().union(*(set(s["kernel_primitives"]) for s in info["sites"]))
    missing = {"exp", "reduce_max", "reduce_sum"} - inside
    fail_unless(not missing, "the kernel does not contain the softmax's reductions",
                yours=sorted(inside)[:20], expected=f"also {sorted(missing)}",
                hint="the row's max and sum must be computed inside softmax_kernel")
    cross_check_sites(impl, x, block_rows, info)


@checker.check(2)
def grid_and_blockspec(impl, ctx):
    rng = ctx.rng("grid")
    for block_rows in rng.permutation(BLOCK_ROWS)[:2]:
        block_rows = int(block_rows)
        shape = (ragged(rng, 3 * block_rows, 6 * block_rows, block_rows),
                 length(rng, 20, 900, 2))
        x = draw(rng, shape, jnp.float32)
        want_grid = [math.ceil(shape[0] / block_rows)]
        info = learner_sites(impl, x, block_rows, programs=want_grid[0])
        sites = info["sites"]
        fail_unless(len(sites) == 1, "softmax_pallas should make exactly one pallas_call",
                    yours=len(sites), expected=1)
        fail_unless(sites[0]["grid"] == want_grid,
                    f"wrong grid for {describe(shape, block_rows)}",
                    yours=tuple(sites[0]["grid"]), expected=tuple(want_grid),
                    hint=grid_hint(sites[0]["grid"], want_grid))
        want_block = [block_rows, block_width(shape[1])]
        for k, block in enumerate(sites[0]["block_shapes"]):
            fail_unless(block == want_block, f"block shape {k} of the pallas_call "
                        f"for {describe(shape, block_rows)}", yours=tuple(block),
                        expected=tuple(want_block), hint="input and output blocks alike: "
                        "block_rows rows by the block width block_cols gives, whole rows "
                        "per block, program i on row block i")
        # Interpreted Pallas clamps an out-of-range block index (compiled Pallas does
        # not), so a wrong index map can pass on CPU: read the map itself.
        want_index = [[i, 0] for i in range(want_grid[0])]
        indices = info.get("block_indices")
        fail_unless(isinstance(indices, list) and len(indices) == 2,
                    "the pallas_call should have one BlockSpec for the input and one for "
                    "the output", yours=short(indices), expected="2 index maps")
        for k, got in enumerate(indices):
            fail_unless(got == want_index, f"BlockSpec {k}'s index map for "
                        f"{describe(shape, block_rows)} does not give program i the row "
                        "block i and the one column block",
                        yours=[tuple(g) for g in got[:6]] if isinstance(got, list) else got,
                        expected=[tuple(w) for w in want_index[:6]], hint="program i must "
                        "get row block i, and the whole row: column block 0 of every row")
        cross_check_sites(impl, x, block_rows, info)
    divisible_grid(impl, rng, block_rows, shape[1])
    fewer_rows_than_a_block(impl, rng, block_rows, shape[1])


def grid_hint(grid: list, want: list) -> str:
    """What a wrong grid shows: more axes than the one the contract asks, or a count of
    programs off the blocks of rows."""
    if len(grid) > 1:
        return (f"your grid has {len(grid)} axes, {tuple(grid)}: the contract's grid is "
                f"one-dimensional, program i owning the i-th block of rows; a block "
                "already spans every column, so a column axis is always of size 1 and "
                "only adds an argument to the index maps")
    return ("one program per block of rows, the last, partial block included: a grid "
            "that rounds the count down drops those rows")


def fewer_rows_than_a_block(impl, rng, block_rows: int, cols: int) -> None:
    """Fewer rows than ``block_rows``: still one program, and its block still
    ``block_rows`` rows (a partial block, the array's edge inside it), as the contract
    fixes the block whatever the rows."""
    shape = (int(rng.integers(1, block_rows)), cols)
    info = learner_sites(impl, jnp.zeros(shape, jnp.float32), block_rows)
    sites = info["sites"]
    fail_unless(len(sites) == 1 and sites[0]["grid"] == [1],
                f"wrong grid for {describe(shape, block_rows)}",
                yours=tuple(sites[0]["grid"]) if len(sites) == 1 else f"{len(sites)} calls",
                expected=(1,), hint="fewer rows than one block: one program")
    want_block = [block_rows, block_width(cols)]
    for k, block in enumerate(sites[0]["block_shapes"]):
        fail_unless(block == want_block, f"block shape {k} of the pallas_call for "
                    f"{describe(shape, block_rows)}", yours=tuple(block),
                    expected=tuple(want_block),
                    hint=(f"yours is as tall as the array ({shape[0]} rows): the block is "
                          f"block_rows rows whatever the rows, the array's edge inside "
                          "the one partial block, as in the last block of a ragged shape")
                    if block[:1] == [shape[0]] else "input and output blocks alike: "
                    "block_rows rows by the block width block_cols gives")


def divisible_grid(impl, rng, block_rows: int, cols: int) -> None:
    """The grid once more, on rows that ``block_rows`` divides (the shapes before are
    ragged, where a count rounded down plus one is ceil too): one program per block,
    none past the last row (its block would lie wholly past the array's edge)."""
    blocks = int(rng.integers(2, 5))
    shape = (blocks * block_rows, cols)
    x = jnp.zeros(shape, jnp.float32)  # the program is read, not run
    info = learner_sites(impl, x, block_rows)
    grid = info["sites"][0]["grid"] if info["sites"] else None
    extra = isinstance(grid, list) and len(grid) == 1 and isinstance(grid[0], int) \
        and grid[0] > blocks
    too_many = "one program" if extra and grid[0] == blocks + 1 else \
        f"{grid[0] - blocks} programs" if extra else ""
    fail_unless(grid == [blocks], f"wrong grid for {describe(shape, block_rows)}",
                yours=tuple(grid or ()), expected=(blocks,),
                hint=(f"right on the ragged shapes before, and {too_many} too many where "
                      f"block_rows divides the rows: program {blocks} owns "
                      f"no row (its block starts at row {shape[0]}, past the array's edge; "
                      f"{blocks} blocks of {block_rows} rows hold all {shape[0]})")
                if extra else "one program per block of rows: where block_rows divides the "
                "rows, exactly rows / block_rows programs")


def kernel_matches(impl, ctx, dtype_name: str, salt: str) -> None:
    """float32: a divisible shape, one neither dimension divides, and that one again
    with finite values past the edge (``finite_padding``). bfloat16: two divisible
    shapes, so it fails on precision alone: the mask and grid are float32's cases, and
    one mistake there fails there, not here too."""
    rng = ctx.rng(salt)
    cases = []
    b = int(rng.choice(BLOCK_ROWS))
    cases.append(((b * int(rng.integers(2, 4)), int(rng.choice([128, 256]))), b))  # divisible
    b = int(rng.choice(BLOCK_ROWS))
    if dtype_name == "bfloat16":
        cases.append(((b * int(rng.integers(2, 5)), int(rng.choice([256, 512, 1024]))), b))
    else:
        cols = length(rng, 129, 700, 2) if rng.random() < 0.7 else length(rng, 3, 127, 2)
        cases.append(((ragged(rng, b + 1, 4 * b, b), cols), b))  # neither dimension divides
    passed = []
    for shape, block_rows in cases:
        x = draw(rng, shape, DTYPES[dtype_name])
        what = f"softmax_pallas on {dtype_name} {describe(shape, block_rows)}"
        try:
            y = learner_kernel(impl, block_rows)(x)
            expect_kernel_close(impl, y, x, dtype_name, what, block_rows, also_jnp=True)
        except CheckFailed as err:
            if passed and getattr(err, "kind", None) in ("edge-columns", "partial-block",
                                                          "zero-padding", "edge-rows",
                                                          "padding-nan"):
                err.args = (f"{err.args[0]} (it was right on {passed[0]}: a kernel correct "
                            "only where the blocks divide the array)",)
            raise
        passed.append(describe(shape, block_rows))
    # called again in the same process, on new data of the last case's shape and block
    again_x = draw(rng, x.shape, DTYPES[dtype_name])
    again = learner_kernel(impl, block_rows)(again_x)
    with second_call(again, y, "softmax_pallas"):
        expect_kernel_close(impl, again, again_x, dtype_name, what, block_rows)
    if dtype_name == "float32":
        finite_padding(impl, rng, x, block_rows)
    # The same program exported and run here: the values this process computes through
    # the learner's kernel must be right too (on the ragged case).
    exported = exported_kernel(impl, x, block_rows)
    try:
        if exported is None:
            return  # a compiled kernel jax cannot export (off CPU): nothing to run here
        y = jax.jit(exported.call)(x)
        expect_close(y, x, dtype_name, f"{what}, exported and run by the checker",
                     KERNEL_HINT)
    except CheckFailed as err:
        raise TamperEvidence(f"the learner process's result was right, but its exported "
                             f"program computes otherwise here: {err.args[0]}") from None


# Finite values past the array's edge (interpreted Pallas fills those cells with NaN; an
# accelerator leaves whatever the memory held): each row's max plus this much, so a cell
# that enters the max moves every probability of its row by a factor e^5 or more.
GARBAGE_ABOVE_MAX = (5.0, 40.0)


def finite_padding(impl, rng, x, block_rows: int) -> None:
    """The learner's kernel body on ``x`` (rows and columns ragged) laid out in its blocks
    by the checker, every cell past the array's edge holding a finite value above its
    row's max, through a ``pallas_call`` built in the learner process
    (``pallas-kernel/kernel_on_padding``, self-reported) and compared here with the
    float64 reference: right only when the row's n_cols data cells alone make its
    softmax, whatever the memory past them holds, as on an accelerator."""
    rows, cols = x.shape
    width, programs = block_width(cols), -(-rows // block_rows)
    z = np.asarray(x, np.float32)
    top = np.max(z, axis=1)
    padded = np.empty((programs * block_rows, width), np.float32)
    padded[:rows] = (top + rng.uniform(*GARBAGE_ABOVE_MAX, rows))[:, None]
    padded[rows:] = float(top.max()) + rng.uniform(*GARBAGE_ABOVE_MAX)
    padded[:rows, :cols] = z
    get_function(impl, "softmax_kernel")  # a missing function is named
    y = bridge.inspect(impl, "pallas-kernel/kernel_on_padding",
                       LearnerFunction("softmax_kernel"), padded, cols, rows, block_rows)
    what = (f"softmax_kernel on float32 {describe(x.shape, block_rows)}, the "
            f"{width - cols} cells past the array's edge in each row holding finite values "
            "above the row's max (as an accelerator's memory may)")
    try:
        expect_close(y, x, "float32", what, KERNEL_HINT)
    except CheckFailed as err:
        err.hint = ("right where the cells past the array's edge hold NaN (as interpreted "
                    "Pallas fills them) and wrong where they hold finite values: those "
                    "cells entered the row's max and sum; " + KERNEL_HINT)
        raise


@checker.check(2)
def matches_references_float32(impl, ctx):
    kernel_matches(impl, ctx, "float32", "match-f32")


@checker.check(2)
def matches_references_bfloat16(impl, ctx):
    kernel_matches(impl, ctx, "bfloat16", "match-bf16")


@checker.check(2)
def edge_shapes(impl, ctx):
    rng = ctx.rng("edges")
    block_rows = int(rng.choice(BLOCK_ROWS[1:]))
    for shape in ((1, 1), (ragged(rng, 2, block_rows, block_rows), length(rng, 3, 127, 2)),
                  (block_rows + 1, int(rng.choice([129, 1023, 1025])))):
        x = draw(rng, shape, jnp.float32)
        expect_kernel_close(impl, learner_kernel(impl, block_rows)(x), x, "float32",
                            f"softmax_pallas on {describe(shape, block_rows)}", block_rows)


def run_observed(impl, x, block_rows: int) -> tuple[dict, list[dict]]:
    """``run_softmax(x, block_rows=...)`` run once in the learner process with every
    ``pallas_call`` it traced recorded there (self-reported: ``SELF_REPORTED``):
    (its result, the sites of the kernels that ran)."""
    get_function(impl, "run_softmax")
    answer = bridge.inspect(impl, "pallas-kernel/run_observed",
                            LearnerFunction("run_softmax"), x, block_rows=block_rows)
    sites = answer.get("sites") if isinstance(answer, dict) else None
    if not (isinstance(sites, list) and all(
            isinstance(s, dict) and isinstance(s.get("grid"), list)
            and isinstance(s.get("block_shapes"), list) for s in sites)):
        raise TamperEvidence(f"the run_softmax observer answered {short(answer)}")
    result = require_keys(answer.get("result"), ("y", "mode", "backend", "block_rows",
                                                 "grid"), "run_softmax")
    return result, sites


def declared_is_what_ran(result: dict, sites: list[dict], shape, block_rows: int) -> None:
    """run_softmax's declared block and grid against the pallas_call(s) its own run
    traced; the observed ones cross-checked against the shape arithmetic (a grid of
    ceil(rows / block) for the block that ran) and the result's values (checked before)."""
    fail_unless(bool(sites), "run_softmax ran no pallas_call of its own (none was traced "
                "while it ran, with JAX's caches cleared first)", yours="no pallas_call",
                expected=f"softmax_pallas(x, block_rows={block_rows}) run inside run_softmax",
                hint="run_softmax must run softmax_pallas on x with the block_rows it was "
                "given and report that run")
    for site in sites:
        blocks = {b[0] for b in site["block_shapes"] if b}
        ran_rows = blocks.pop() if len(blocks) == 1 else None
        if ran_rows is not None and site["grid"] != [math.ceil(shape[0] / ran_rows)]:
            raise TamperEvidence(f"the run_softmax observer reported grid {site['grid']} "
                                 f"for blocks of {ran_rows} rows on {shape[0]} rows")
        fail_unless(ran_rows == block_rows == result["block_rows"]
                    and list(result["grid"]) == site["grid"],
                    f"run_softmax(x, block_rows={block_rows}) reports a launch that is not "
                    "the one it ran", yours=f"declared block_rows={result['block_rows']!r}, "
                    f"grid={result['grid']!r}", expected=f"what its own run traced: blocks "
                    f"{[tuple(b) for b in site['block_shapes']]}, grid {site['grid']}",
                    hint="run_softmax must run softmax_pallas with the block_rows it was "
                    "given, and declare the block and grid of that very call")


def same_as_own(impl, y, x, block_rows: int) -> np.ndarray:
    """run_softmax's ``y`` on ``x``: the output softmax_pallas gives on x with this block,
    right or wrong (the value checks judge the kernel's values)."""
    shape = tuple(x.shape)
    y = as_array(y, "run_softmax()['y']", shape=shape, dtype=jnp.float32)
    own = as_array(learner_kernel(impl, block_rows)(x), "softmax_pallas", shape=shape,
                   dtype=jnp.float32)
    rtol, atol = budget(jnp.float32, shape[1])
    same, (i, j), _ = compare(np.where(np.isnan(own) & np.isnan(y), 0.0, y),
                              np.nan_to_num(np.asarray(own, np.float64)), rtol, atol)
    fail_unless(same, f"run_softmax(x, block_rows={block_rows})['y'] is not the output of "
                f"softmax_pallas on the same x and block (first apart at [{i}, {j}])",
                yours=float(np.asarray(y, np.float64)[i, j]),
                expected=float(np.asarray(own, np.float64)[i, j]),
                hint="run_softmax returns the output of the softmax_pallas call it ran")
    return y


@checker.check(2)
def declared_mode_is_the_one_that_ran(impl, ctx):
    rng = ctx.rng("mode")
    block_rows = int(rng.choice(BLOCK_ROWS[1:]))  # not run_softmax's default (8)
    # more columns than 3 blocks of rows: a grid over the columns is always another grid
    # (60-400 columns once matched the rows' 2 or 3 blocks of 32 at 1 seed in about 10)
    shape = (ragged(rng, block_rows + 1, 3 * block_rows, block_rows),
             length(rng, max(60, 3 * block_rows + 1), 400, 2))
    x = draw(rng, shape, jnp.float32)
    result, ran_sites = run_observed(impl, x, block_rows)
    # run_softmax reports its kernel's output: the same as softmax_pallas gives on x with
    # this block, right or wrong (the value checks above judge the kernel's values)
    fail_unless(isinstance(result["y"], np.ndarray), "run_softmax()['y'] is not a NumPy "
                "array", yours=type(result["y"]).__name__, expected="numpy.ndarray",
                hint="the result is plain host data: y a NumPy array, as the contract lists "
                "it (a jax.Array stays on its device)")
    y = same_as_own(impl, result["y"], x, block_rows)
    # run again in the same process, on new data of the same shape
    again_x = draw(rng, shape, jnp.float32)
    again, _ = run_observed(impl, again_x, block_rows)
    with second_call(again["y"], y, "run_softmax"):
        same_as_own(impl, again["y"], again_x, block_rows)
    backend = learner_backend(ctx)
    fail_unless(result["backend"] == backend, "run_softmax declares the wrong backend",
                yours=result["backend"], expected=backend)
    info = learner_sites(impl, x, block_rows)
    sites = info["sites"]
    fail_unless(bool(sites), "no pallas_call ran, so no kernel mode can be declared",
                hint="stage 2's softmax_pallas must call pl.pallas_call")
    ran = "interpreted" if all(s["interpret"] for s in sites) else "compiled"
    # The lowered program, read here from the learner's exported StableHLO.
    lowered = cross_check_sites(impl, x, block_rows, info)["lowered"]
    fail_unless(lowered == ran, "the pallas_call's interpret flag and the lowered program "
                "disagree", yours=f"flag says {ran}", expected=f"lowered program: {lowered}")
    # The declared launch, compared exactly with the pallas_call the checker found.
    want_grid = [math.ceil(shape[0] / block_rows)]
    fail_unless(list(sites[0]["grid"]) == want_grid, "the pallas_call that ran has the wrong "
                "grid", yours=tuple(sites[0]["grid"]), expected=tuple(want_grid))
    grid = result["grid"]
    fail_unless(isinstance(grid, (list, tuple)) and [int(g) for g in grid] == want_grid
                and all(isinstance(g, int) for g in grid),
                "run_softmax declares a grid that is not the one that ran", yours=grid,
                expected=f"{want_grid} (the grid of the pallas_call found in the program: "
                f"ceil({shape[0]} / {block_rows}))",
                hint="report the grid you passed to pallas_call, as a list of ints")
    fail_unless(type(result["block_rows"]) is int and result["block_rows"] == block_rows
                == sites[0]["block_shapes"][0][0],
                "run_softmax declares block_rows that are not the block that ran",
                yours=result["block_rows"], expected=f"{block_rows} (the pallas_call's "
                f"block is {tuple(sites[0]['block_shapes'][0])})")
    declared_is_what_ran(result, ran_sites, shape, block_rows)
    fail_unless(result["mode"] == ran, "the declared execution mode is not the one that ran",
                yours=result["mode"], expected=f"{ran} (read from the program that ran on "
                f"{backend})", hint="the declared mode must be the one the pallas_call ran in: "
                "a mode written in separately from the call can disagree with it")
    if backend == "cpu":
        fail_unless(ran == "interpreted", "on CPU only interpreted Pallas runs",
                    yours=ran, expected="interpreted")
    # interpret=None must follow execution_mode(): traced (not run) in the learner process
    # with the learner module's execution_mode swapped (and put back), on a shape no
    # other check traces (jit caches traces per shape).
    get_function(impl, "execution_mode")
    odd = jnp.zeros((3, 5), jnp.bfloat16)
    for mode in ("compiled", "interpreted"):
        flags = bridge.inspect(impl, "pallas-kernel/interpret_flags_with_mode",
                               LearnerFunction("softmax_pallas"),
                               LearnerFunction("execution_mode"), mode, odd)
        fail_unless(isinstance(flags, list) and bool(flags)
                    and flags[0] is (mode == "interpreted"),
                    "softmax_pallas's interpret flag does not follow execution_mode()",
                    yours=f"interpret={flags[0] if flags else None} when "
                    f"execution_mode() says {mode!r}", expected=f"interpret="
                    f"{mode == 'interpreted'}", hint="with interpret=None the call must run in the "
                    "mode execution_mode() names: on a GPU the same code must compile")
        odd = jnp.zeros((3, 6), jnp.bfloat16)

