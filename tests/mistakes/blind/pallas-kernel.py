"""pallas-kernel: blind mistakes, written from the README, starter and solution only."""

_JNP_MAX = "    z = z - jnp.max(z, axis=-1, keepdims=True)\n"
_JNP_RET = "return (e / jnp.sum(e, axis=-1, keepdims=True)).astype(x.dtype)"
_F64_Z = "    z = np.asarray(x).astype(np.float64)"
_F64_MAX = "    z = z - z.max(axis=-1, keepdims=True)\n"
_F64_RET = "    return e / e.sum(axis=-1, keepdims=True)"
_TOL_U = ("    u_out = float(jnp.finfo(dtype).eps) / 2\n"
          "    u32 = float(jnp.finfo(jnp.float32).eps) / 2")
_TOL_RTOL = "    rtol = u_out + (n + 4) * u32"
_TOL_ATOL = "    atol = 4 * u32"

_MODE_RET = 'return "interpreted" if backend == "cpu" else "compiled"'

_K_MASK = ("    cols = jax.lax.broadcasted_iota(jnp.int32, x.shape, 1)\n"
           "    x = jnp.where(cols < n_cols, x, -jnp.inf)\n")
_K_MAX_EXP = ("    m = jnp.max(x, axis=1, keepdims=True)\n"
              "    e = jnp.exp(x - m)")

_P_INTERP = ('    if interpret is None:\n'
             '        interpret = execution_mode() == "interpreted"')
_P_SPEC = "spec = pl.BlockSpec((block_rows, block_cols(cols)), lambda i: (i, 0))"
_P_GRID = "grid=(pl.cdiv(rows, block_rows),),"

_R_GRID = '"grid": [pl.cdiv(x.shape[0], block_rows)]'

_S_OK = ('        ok = bool(got.shape == expected.shape and\n'
         '                  np.all(np.abs(got - expected) <= tol["atol"] + tol["rtol"] * np.abs(expected)))')
_S_WARMUP = ("                for _ in range(warmup):\n"
             "                    jax.block_until_ready(fn(x))\n")
_S_ITERS = ("                for _ in range(iters):\n"
            "                    start = time.perf_counter()\n"
            "                    jax.block_until_ready(fn(x))\n"
            "                    samples.append(time.perf_counter() - start)")

_SUM_BASE = 'base = {tuple(r["shape"]): statistics.median(r["samples_s"])'
_SUM_SPEED = 'base[shape] / statistics.median(r["samples_s"])'
_SUM_STOPS = ('    last_help = max((i for i, p in enumerate(per_shape) if p["helps"]), default=-1)\n'
              '    stops = per_shape[last_help + 1]["shape"] if last_help + 1 < len(per_shape) else None')

MISTAKES = [
    # ------------------------------------------------------------ stage 1: softmax_jnp
    {"stage": 1, "id": "blind-jnp-no-max-shift",
     "misunderstood": "computes exp(x) / sum(exp(x)) directly, without subtracting the row max: rows near +1000 overflow",
     "edits": [(_JNP_MAX, "")]},
    {"stage": 1, "id": "blind-jnp-computes-in-input-dtype",
     "misunderstood": "computes in the input dtype (bfloat16 arithmetic for bfloat16 input) instead of float32",
     "edits": [("    z = x.astype(jnp.float32)", "    z = x")]},
    {"stage": 1, "id": "blind-jnp-global-max",
     "misunderstood": "subtracts the max of the whole array instead of each row's max: a row far below it underflows to 0/0",
     "edits": [("z - jnp.max(z, axis=-1, keepdims=True)", "z - jnp.max(z)")]},
    {"stage": 1, "id": "blind-jnp-returns-float32",
     "misunderstood": "returns the float32 result without casting back, so bfloat16 input gives float32 output",
     "edits": [(_JNP_RET, "return e / jnp.sum(e, axis=-1, keepdims=True)")]},
    {"stage": 1, "id": "blind-jnp-epsilon-denominator",
     "misunderstood": "adds an epsilon to the row sum 'to avoid division by zero', biasing every probability low",
     "edits": [(_JNP_RET, "return (e / (jnp.sum(e, axis=-1, keepdims=True) + 1e-5)).astype(x.dtype)")]},

    # ------------------------------------------------------- stage 1: softmax_numpy_f64
    {"stage": 1, "id": "blind-f64-returns-jax-array",
     "misunderstood": "wraps the result in jnp.asarray, returning a JAX array (float32 without x64) instead of a float64 ndarray",
     "edits": [(_F64_RET, "    return jnp.asarray(e / e.sum(axis=-1, keepdims=True))")]},
    {"stage": 1, "id": "blind-f64-computes-in-float32",
     "misunderstood": "keeps the input's float32 precision in the NumPy reference instead of converting to float64",
     "edits": [(_F64_Z, "    z = np.asarray(x).astype(np.float32)")]},
    {"stage": 1, "id": "blind-f64-no-max-shift",
     "misunderstood": "trusts float64's range and skips the max shift: exp(1000) still overflows float64",
     "edits": [(_F64_MAX, "")]},
    {"stage": 1, "id": "blind-f64-sum-over-columns",
     "misunderstood": "normalises by the sum over axis 0 (down each column) instead of along each row",
     "edits": [("e / e.sum(axis=-1, keepdims=True)", "e / e.sum(axis=0, keepdims=True)")]},
    {"stage": 1, "id": "blind-f64-reuses-jax-softmax",
     "misunderstood": "builds the 'independent' reference from jax.nn.softmax in float32 and only casts the result to float64",
     "edits": [(_F64_Z + "\n" + _F64_MAX + "    e = np.exp(z)\n" + _F64_RET,
                "    return np.asarray(jax.nn.softmax(jnp.asarray(x, jnp.float32), axis=-1), np.float64)")]},

    {"stage": 1, "id": "blind-f64-cached-by-shape",
     "misunderstood": "memoises the float64 reference in a module-level dict keyed on the input's shape: a second call with new data of the same shape returns the first call's probabilities",
     "edits": [(_F64_Z, "    cache = softmax_numpy_f64.__dict__.setdefault('cache', {})\n"
                        "    if np.shape(x) in cache:\n        return cache[np.shape(x)]\n" + _F64_Z),
               (_F64_RET, "    cache[np.shape(x)] = e / e.sum(axis=-1, keepdims=True)\n"
                          "    return cache[np.shape(x)]")]},

    # ---------------------------------------------------------------- stage 1: tolerance
    {"stage": 1, "id": "blind-tol-constant-per-dtype",
     "misunderstood": "guesses one rtol per dtype (1e-5 / 1e-2) instead of counting roundings as a function of the row length",
     "edits": [(_TOL_RTOL, "    rtol = 1e-5 if u_out == u32 else 1e-2")]},
    {"stage": 1, "id": "blind-tol-forgets-output-rounding",
     "misunderstood": "counts the float32 roundings but forgets the final rounding to the output dtype",
     "edits": [(_TOL_RTOL, "    rtol = (n + 4) * u32")]},
    {"stage": 1, "id": "blind-tol-eps-as-unit-roundoff",
     "misunderstood": "uses machine epsilon as the unit roundoff (eps, not eps / 2), doubling every term",
     "edits": [(_TOL_U, "    u_out = float(jnp.finfo(dtype).eps)\n"
                        "    u32 = float(jnp.finfo(jnp.float32).eps)")]},
    {"stage": 1, "id": "blind-tol-no-atol",
     "misunderstood": "thinks a relative test suffices and sets atol to 0",
     "edits": [(_TOL_ATOL, "    atol = 0.0")]},
    {"stage": 1, "id": "blind-tol-atol-in-output-dtype",
     "misunderstood": "scales atol by the output dtype's roundoff instead of float32's (huge for bfloat16)",
     "edits": [(_TOL_ATOL, "    atol = 4 * u_out")]},
    {"stage": 1, "id": "blind-tol-sum-in-output-dtype",
     "misunderstood": "counts the sum's roundings in the output dtype, as if the computation ran in bfloat16",
     "edits": [(_TOL_RTOL, "    rtol = (n + 4) * u_out")]},
    {"stage": 1, "id": "blind-tol-finfo-resolution",
     "misunderstood": "takes the output unit roundoff from finfo.resolution (decimal digits: 1e-6, 1e-2) instead of eps / 2",
     "edits": [("    u_out = float(jnp.finfo(dtype).eps) / 2",
                "    u_out = float(jnp.finfo(dtype).resolution)")]},
    {"stage": 1, "id": "blind-tol-empty-why",
     "misunderstood": "treats `why` as optional and returns an empty explanation",
     "edits": [('    return {"rtol": rtol, "atol": atol, "why": why}',
                '    return {"rtol": rtol, "atol": atol, "why": ""}')]},

    # ----------------------------------------------------------- stage 2: execution_mode
    {"stage": 2, "id": "blind-mode-ignores-backend-argument",
     "misunderstood": "always asks jax.default_backend(), ignoring the backend it was given",
     "edits": [("    backend = backend or jax.default_backend()", "    backend = jax.default_backend()")]},
    {"stage": 2, "id": "blind-mode-only-gpu-compiles",
     "misunderstood": "thinks only GPU (Triton) compiles Pallas, so TPU is declared interpreted",
     "edits": [(_MODE_RET, 'return "compiled" if backend == "gpu" else "interpreted"')]},

    # ----------------------------------------------------------- stage 2: softmax_kernel
    {"stage": 2, "id": "blind-kernel-pads-with-zero",
     "misunderstood": "masks the padded cells to 0 instead of -inf, so each adds exp(-m) to the row sum",
     "edits": [("x = jnp.where(cols < n_cols, x, -jnp.inf)", "x = jnp.where(cols < n_cols, x, 0.0)")]},
    {"stage": 2, "id": "blind-kernel-no-mask",
     "misunderstood": "reduces over the whole block, padding included: right only when the row fills the block",
     "edits": [(_K_MASK, "")]},
    {"stage": 2, "id": "blind-kernel-mask-off-by-one",
     "misunderstood": "masks with cols <= n_cols, letting the first padded cell into both reductions",
     "edits": [("x = jnp.where(cols < n_cols, x, -jnp.inf)", "x = jnp.where(cols <= n_cols, x, -jnp.inf)")]},
    {"stage": 2, "id": "blind-kernel-computes-in-block-dtype",
     "misunderstood": "does the arithmetic in the block's dtype (bfloat16) instead of upcasting to float32",
     "edits": [("    x = x_ref[...].astype(jnp.float32)", "    x = x_ref[...]")]},
    {"stage": 2, "id": "blind-kernel-nan-to-minus-inf",
     "misunderstood": "replaces the NaNs interpreted Pallas puts in the padding instead of masking by column: garbage that is not NaN gets in",
     "edits": [(_K_MASK, "    x = jnp.where(jnp.isnan(x), -jnp.inf, x)\n")]},
    {"stage": 2, "id": "blind-kernel-sum-over-rows",
     "misunderstood": "takes the sum over axis 0 (across the block's rows) instead of along each row",
     "edits": [("s = jnp.sum(e, axis=1, keepdims=True)", "s = jnp.sum(e, axis=0, keepdims=True)")]},
    {"stage": 2, "id": "blind-kernel-no-max-shift",
     "misunderstood": "skips the row max in the kernel (the mask alone seemed enough): rows near +1000 overflow",
     "edits": [(_K_MAX_EXP, "    e = jnp.exp(x)")]},

    # ----------------------------------------------------------- stage 2: softmax_pallas
    {"stage": 2, "id": "blind-pallas-grid-floor",
     "misunderstood": "grid of rows // block_rows programs: the last partial block is never computed (none at all for few rows)",
     "edits": [(_P_GRID, "grid=(rows // block_rows,),")]},
    {"stage": 2, "id": "blind-pallas-block-exact-width",
     "misunderstood": "uses the row length itself as the block width instead of block_cols(cols)",
     "edits": [(_P_SPEC, "spec = pl.BlockSpec((block_rows, cols), lambda i: (i, 0))")]},
    {"stage": 2, "id": "blind-pallas-interpret-hardcoded",
     "misunderstood": "hard-codes interpret=True because the course machine is a CPU, instead of following execution_mode()",
     "edits": [(_P_INTERP, "    interpret = True")]},
    {"stage": 2, "id": "blind-pallas-index-map-element-offset",
     "misunderstood": "returns an element offset (i * block_rows) from the index map instead of a block index",
     "edits": [("lambda i: (i, 0))", "lambda i: (i * block_rows, 0))")]},
    {"stage": 2, "id": "blind-pallas-single-program",
     "misunderstood": "puts every row in one block with a grid of one program, ignoring block_rows",
     "edits": [(_P_SPEC, "spec = pl.BlockSpec((rows, block_cols(cols)), lambda i: (0, 0))"),
               (_P_GRID, "grid=(1,),")]},
    {"stage": 2, "id": "blind-pallas-max-shift-outside",
     "misunderstood": "does the stabilising max subtraction in the wrapper (softmax arithmetic outside the kernel, in x's dtype)",
     "edits": [("    )(x)\n", "    )(x - jnp.max(x, axis=1, keepdims=True))\n")]},
    {"stage": 2, "id": "blind-pallas-float32-output",
     "misunderstood": "declares a float32 output whatever x's dtype, so bfloat16 input gives float32 output",
     "edits": [("out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype)",
                "out_shape=jax.ShapeDtypeStruct(x.shape, jnp.float32)")]},
    {"stage": 2, "id": "blind-pallas-n-cols-block-width",
     "misunderstood": "passes the block width as n_cols, so the kernel's mask keeps the padding",
     "edits": [("functools.partial(softmax_kernel, n_cols=cols)",
                "functools.partial(softmax_kernel, n_cols=block_cols(cols))")]},

    # -------------------------------------------------------------- stage 2: run_softmax
    {"stage": 2, "id": "blind-run-declares-floor-grid",
     "misunderstood": "declares the grid as rows // block_rows, not the ceil the pallas_call really ran",
     "edits": [(_R_GRID, '"grid": [x.shape[0] // block_rows]')]},
    {"stage": 2, "id": "blind-run-declares-compiled",
     "misunderstood": "declares mode 'compiled' because softmax_pallas is jitted, although the kernel ran interpreted",
     "edits": [('{"y": np.asarray(y), "mode": execution_mode(),', '{"y": np.asarray(y), "mode": "compiled",')]},
    {"stage": 2, "id": "blind-run-y-jax-array",
     "misunderstood": "returns y as the JAX array instead of a NumPy ndarray",
     "edits": [('{"y": np.asarray(y),', '{"y": y,')]},
    {"stage": 2, "id": "blind-run-ignores-block-rows",
     "misunderstood": "runs softmax_pallas with its default block size while declaring the block_rows it was given",
     "edits": [("softmax_pallas(x, block_rows=block_rows)", "softmax_pallas(x)")]},
    # issue 53: state carried across calls (the checks called each function once per shape)
    {"stage": 2, "id": "blind-run-cached-by-shape",
     "misunderstood": "keeps each run's output in a module-level dict keyed on (shape, block_rows) 'to skip recompiling': a second run with new data of the same shape returns the first run's y",
     "edits": [("    y = jax.block_until_ready(softmax_pallas(x, block_rows=block_rows))\n",
                "    runs = run_softmax.__dict__.setdefault('runs', {})\n"
                "    key = (x.shape, block_rows)\n"
                "    if key not in runs:\n"
                "        runs[key] = jax.block_until_ready(softmax_pallas(x, block_rows=block_rows))\n"
                "    y = runs[key]\n")]},
    {"stage": 2, "id": "blind-run-grid-bare-int",
     "misunderstood": "declares grid as a bare int instead of a list of ints",
     "edits": [(_R_GRID, '"grid": pl.cdiv(x.shape[0], block_rows)')]},

    # -------------------------------------------------------------------- stage 3: sweep
    {"stage": 3, "id": "blind-sweep-samples-not-synced",
     "misunderstood": "times each call without waiting for its result, measuring only the asynchronous dispatch",
     "edits": [(_S_ITERS, "                for _ in range(iters):\n"
                          "                    start = time.perf_counter()\n"
                          "                    fn(x)\n"
                          "                    samples.append(time.perf_counter() - start)")]},
    {"stage": 3, "id": "blind-sweep-first-call-in-samples",
     "misunderstood": "keeps the first (compiling) call's time as a sample, giving iters + 1 samples",
     "edits": [("        samples = []\n", "        samples = [first_call_s]\n")]},
    {"stage": 3, "id": "blind-sweep-warmup-timed",
     "misunderstood": "times the warmup calls too, recording warmup + iters samples",
     "edits": [(_S_WARMUP + "                for _ in range(iters):",
                "                for _ in range(warmup + iters):")]},
    {"stage": 3, "id": "blind-sweep-skips-warmup",
     "misunderstood": "records warmup in the record but never makes the warmup calls (the first call seemed warmup enough)",
     "edits": [(_S_WARMUP, "")]},
    {"stage": 3, "id": "blind-sweep-loop-average",
     "misunderstood": "times the whole loop once and repeats its average, instead of one raw sample per call",
     "edits": [(_S_ITERS, "                start = time.perf_counter()\n"
                          "                for _ in range(iters):\n"
                          "                    jax.block_until_ready(fn(x))\n"
                          "                samples = [(time.perf_counter() - start) / iters] * iters")]},
    {"stage": 3, "id": "blind-sweep-ok-means-finite",
     "misunderstood": "judges the output only for NaN/inf, so a finite but wrong kernel is timed",
     "edits": [(_S_OK, "        ok = bool(got.shape == expected.shape and np.all(np.isfinite(got)))")]},
    {"stage": 3, "id": "blind-sweep-allclose-defaults",
     "misunderstood": "judges the output with np.allclose's default tolerances instead of tolerance(dtype, cols)",
     "edits": [(_S_OK, "        ok = bool(got.shape == expected.shape and np.allclose(got, expected))")]},
    {"stage": 3, "id": "blind-sweep-tolerance-absolute",
     "misunderstood": "applies the relative budget as an absolute one (atol + rtol), so errors at small probabilities pass",
     "edits": [(_S_OK, '        ok = bool(got.shape == expected.shape and\n'
                       '                  np.all(np.abs(got - expected) <= tol["atol"] + tol["rtol"]))')]},
    {"stage": 3, "id": "blind-sweep-baseline-mode-interpreted",
     "misunderstood": "labels the jnp baseline with execution_mode() too, although XLA compiles it on every backend",
     "edits": [('"grid": None, "mode": "compiled",', '"grid": None, "mode": execution_mode(),')]},
    {"stage": 3, "id": "blind-sweep-grid-floor",
     "misunderstood": "records the kernel's grid as rows // b instead of ceil(rows / b)",
     "edits": [('"grid": [pl.cdiv(rows, int(b))]', '"grid": [rows // int(b)]')]},
    {"stage": 3, "id": "blind-sweep-global-numpy-rng",
     "misunderstood": "draws x from numpy's seeded global generator instead of a local Generator from the seed",
     "edits": [("    rng = np.random.default_rng(seed)", "    np.random.seed(seed)"),
               ("x = jnp.asarray(rng.standard_normal((rows, cols)), dtype)",
                "x = jnp.asarray(np.random.standard_normal((rows, cols)), dtype)")]},
    {"stage": 3, "id": "blind-sweep-compiles-warmed-assumed-zero",
     "misunderstood": "writes compiles_warmed as 0 because 'warmed calls never compile', instead of counting",
     "edits": [('"compiles_warmed": warmed[0]', '"compiles_warmed": 0')]},
    {"stage": 3, "id": "blind-sweep-extra-check-call",
     "misunderstood": "calls the function once more to get an output to check, making 2 + warmup + iters calls",
     "edits": [("        got = np.asarray(out).astype(np.float64)",
                "        got = np.asarray(fn(x)).astype(np.float64)")]},

    # ---------------------------------------------------------------- stage 3: summarize
    {"stage": 3, "id": "blind-summary-mean-not-median",
     "misunderstood": "uses the mean of the samples instead of the median (one slow sample moves it)",
     "edits": [(_SUM_BASE, 'base = {tuple(r["shape"]): statistics.mean(r["samples_s"])'),
               (_SUM_SPEED, 'base[shape] / statistics.mean(r["samples_s"])')]},
    {"stage": 3, "id": "blind-summary-speedup-inverted",
     "misunderstood": "computes the speedup as kernel time / baseline time",
     "edits": [(_SUM_SPEED, 'statistics.median(r["samples_s"]) / base[shape]')]},
    {"stage": 3, "id": "blind-summary-keeps-wrong-blocks",
     "misunderstood": "ranks every block with samples, including blocks whose output was wrong",
     "edits": [('if tuple(r["shape"]) == shape and r.get("output_ok") and r["samples_s"]}',
                'if tuple(r["shape"]) == shape and r["samples_s"]}')]},
    {"stage": 3, "id": "blind-summary-best-is-min",
     "misunderstood": "picks the best block as the one with the smallest value, as if the speedups were times",
     "edits": [("best = max(speedups, key=speedups.get)", "best = min(speedups, key=speedups.get)")]},
    {"stage": 3, "id": "blind-summary-no-mode-check",
     "misunderstood": "checks only backend and dtype for mixing, accepting kernel records of different modes",
     "edits": [('(("mode", kernels), ("backend", records), ("dtype", records))',
                '(("backend", records), ("dtype", records))')]},
    {"stage": 3, "id": "blind-summary-mode-check-includes-baseline",
     "misunderstood": "requires one mode across all records, so the compiled baseline beside an interpreted kernel is rejected",
     "edits": [('(("mode", kernels), ("backend", records), ("dtype", records))',
                '(("mode", records), ("backend", records), ("dtype", records))')]},
    {"stage": 3, "id": "blind-summary-stops-at-first-miss",
     "misunderstood": "reports the first shape where the kernel does not help, even if it helps again at a larger one",
     "edits": [(_SUM_STOPS, '    stops = next((p["shape"] for p in per_shape if not p["helps"]), None)')]},
    {"stage": 3, "id": "blind-summary-stops-at-last-help",
     "misunderstood": "reports the last shape where the kernel helps instead of the one after it",
     "edits": [(_SUM_STOPS, '    last_help = max((i for i, p in enumerate(per_shape) if p["helps"]), default=-1)\n'
                            '    stops = per_shape[last_help]["shape"] if last_help >= 0 else None')]},
    {"stage": 3, "id": "blind-summary-record-order",
     "misunderstood": "keeps the shapes in record order instead of sorting them by element count",
     "edits": [("    shapes = sorted(base, key=lambda s: (math.prod(s), s))", "    shapes = list(base)")]},
    {"stage": 3, "id": "blind-summary-helps-above-one",
     "misunderstood": "says the kernel helps whenever its speedup exceeds 1, ignoring the noise margin HELP_MARGIN",
     "edits": [('best_speedup is not None and best_speedup > HELP_MARGIN',
                'best_speedup is not None and best_speedup > 1')]},
    {"stage": 3, "id": "blind-summary-caveat-without-target",
     "misunderstood": "writes a caveat that the run was interpreted but not that it says nothing about the target's speed",
     "edits": [('"these timings measure the Pallas interpreter and say nothing about the "\n'
                '                  "kernel\'s speed on a target accelerator."',
                '"these timings are slower than a compiled kernel would be."')]},
    {"stage": 3, "id": "blind-summary-caveat-from-backend",
     "misunderstood": "decides the caveat from the backend being 'cpu' instead of from the kernel's recorded mode",
     "edits": [('    if mode == "interpreted":', '    if kernels[0]["backend"] == "cpu":')]},
    {"stage": 3, "id": "blind-summary-mode-from-first-record",
     "misunderstood": "reads the mode from the first record, which is the compiled jnp baseline, not from the kernel records",
     "edits": [('    mode = kernels[0]["mode"]', '    mode = records[0]["mode"]')]},
    {"stage": 3, "id": "blind-summary-block-keys-strings",
     "misunderstood": "keys speedup_by_block by str(block_rows) 'for JSON' instead of the int block size",
     "edits": [('speedups = {r["block_rows"]: base[shape]', 'speedups = {str(r["block_rows"]): base[shape]')]},
    {"stage": 3, "id": "blind-summary-no-baseline-check",
     "misunderstood": "raises only when kernel records are missing; with no baseline it returns an empty summary",
     "edits": [("    if not kernels or not baselines:", "    if not kernels:")]},
]

JUSTIFIED: dict[str, str] = {
    "blind-sweep-global-numpy-rng": (
        "Keeps the contract: sweep's x is 'drawn (standard normal, dtype) from seed', and "
        "NumPy's global generator seeded with seed draws a standard normal x the seed "
        "decides, so every record the checker reads (calls, times, output checks, declared "
        "facts) is a correct sweep's. What differs is a side effect the contract does not "
        "forbid (the caller's global generator reseeded); failing it would fail a sweep "
        "that keeps the contract."),
}


# A second blind batch (2026-12-06, issue 53): written from the learner's copy and
# the solutions only, each confirmed wrong by a measurement quoted in its line.
MISTAKES += [
    {"stage": 1, "id": "blind-b2-jnp-no-max-shift",
     "misunderstood": "drops the row-max subtraction before exp, so rows near +-1000 overflow or underflow to inf/0 and give NaN: measured 'rows near +-1000: max err ref=1.23e-08 mut=non-finite (6 cells)'",
     "named_by": ["overflow", "max subtraction", "nan", "large values"],
     "edits": [("    z = z - jnp.max(z, axis=-1, keepdims=True)\n", "")]},
    {"stage": 1, "id": "blind-b2-tolerance-eps-not-roundoff",
     "misunderstood": "uses float32's machine epsilon as the unit roundoff (eps, not eps/2), so rtol is twice the error count, past the 1.5x allowed: measured 'float32, 1000 cols: rtol ref=5.99e-05 mut=0.00012 (2.00x)'",
     "named_by": ["eps", "unit roundoff", "twice", "eps / 2"],
     "edits": [("    u32 = float(jnp.finfo(jnp.float32).eps) / 2\n",
                "    u32 = float(jnp.finfo(jnp.float32).eps)\n")]},
    {"stage": 2, "id": "blind-b2-kernel-padding-unmasked",
     "misunderstood": "does not mask the block's columns past n_cols, so the NaN (or junk) the padding holds enters the row max and sum: measured '(20, 100) interpreted, block 8: ref max err=1.6e-08 mut=non-finite (2000 cells)'",
     "named_by": ["padding", "past the edge", "mask", "nan"],
     "edits": [("    x = jnp.where(cols < n_cols, x, -jnp.inf)\n", "")]},
    {"stage": 2, "id": "blind-b2-grid-floor-division",
     "misunderstood": "sizes the grid with rows // block_rows (floor) instead of cdiv, so the last partial run of rows is never computed: measured '(20, 100) block 8: ref max err=1.6e-08; mut wrong rows=[16, 17, 18, 19]'",
     "named_by": ["floor division", "partial block", "last rows", "cdiv"],
     "edits": [("        grid=(pl.cdiv(rows, block_rows),),\n",
                "        grid=(rows // block_rows,),\n")]},
    {"stage": 3, "id": "blind-b2-sweep-no-warmup",
     "misunderstood": "leaves out the untimed warm-up calls, so samples start right after the first call and the kernel is called 1 + iters times instead of 1 + warmup + iters: measured 'kernel calls with warmup=2 iters=3: ref=6 mut=4'",
     "named_by": ["warm-up", "warmup", "untimed calls", "call count"],
     "edits": [("                for _ in range(warmup):\n                    jax.block_until_ready(fn(x))\n", "")]},
    {"stage": 3, "id": "blind-b2-summarize-mean-samples",
     "misunderstood": "summarises the kernel's samples with the mean instead of the median, so one stalled sample flips the verdict: measured 'one stalled sample: speedup ref=2.000 helps=True mut=0.156 helps=False'",
     "named_by": ["mean", "median", "stall", "outlier"],
     "edits": [('        speedups = {r["block_rows"]: base[shape] / statistics.median(r["samples_s"])\n',
                '        speedups = {r["block_rows"]: base[shape] / statistics.mean(r["samples_s"])\n')]},
    # blind batch 3 (2026-12-06, written from a learner's copy and the solutions only)
    {"stage": 1, "id": "blind-b3-jnp-max-without-keepdims",
     "misunderstood": "subtracts the row max without keepdims, so the (rows,) maxima broadcast along columns: an error unless rows == cols, and a per-column (not per-row) shift when square; measured (3,5): ValueError Incompatible shapes for broadcasting; (4,4) values x50: max |mistake - ref| 1",
     "named_by": ["keepdims", "broadcast", "square", "row max"],
     "edits": [("    z = z - jnp.max(z, axis=-1, keepdims=True)\n",
                "    z = z - jnp.max(z, axis=-1)\n")]},
    {"stage": 1, "id": "blind-b3-tol-counts-block-width",
     "misunderstood": "counts the sum's roundings over the padded block width block_cols(n) instead of the row's n terms (the padded cells are -inf, exp 0, exactly); measured float32 rtol vs reference: n=10 8.87x, n=300 1.70x, n=3000 1.36x (over the 1.5x bound at short rows)",
     "named_by": ["block width", "padded", "row length", "128"],
     "edits": [("    n = int(n_cols)\n", "    n = block_cols(n_cols)\n")]},
    {"stage": 2, "id": "blind-b3-mode-cached-first-answer",
     "misunderstood": "caches the first answer of execution_mode on the function ('the machine does not change') and ignores the backend argument on later calls; measured after execution_mode(): ref ('tpu', 'gpu') -> compiled, compiled; mistake -> interpreted, interpreted",
     "named_by": ["cache", "first call", "backend argument", "earlier call"],
     "edits": [("""    backend = backend or jax.default_backend()
    return "interpreted" if backend == "cpu" else "compiled"
""", """    if not hasattr(execution_mode, "_mode"):  # the machine does not change
        backend = backend or jax.default_backend()
        execution_mode._mode = "interpreted" if backend == "cpu" else "compiled"
    return execution_mode._mode
""")]},
    {"stage": 2, "id": "blind-b3-pallas-grid-plus-one",
     "misunderstood": "writes ceil as rows // block_rows + 1, one program too many whenever block_rows divides rows (values unchanged, so only the grid shows it); measured rows 16, block_rows 8: ref grid (2,), mistake grid (3,) while run_softmax declares [2]",
     "named_by": ["grid", "off by one", "+ 1", "cdiv"],
     "edits": [("        grid=(pl.cdiv(rows, block_rows),),\n",
                "        grid=(rows // block_rows + 1,),\n")]},
    {"stage": 3, "id": "blind-b3-sweep-checks-first-row-only",
     "misunderstood": "judges output_ok on the first row alone, so a kernel wrong only in its ragged last block (where padding bugs live) is declared right and timed; measured kernel x1.5 in its last 3 rows, (20,130) b=8: ref output_ok False samples 0, mistake output_ok True samples 2",
     "named_by": ["first row", "every row", "last block", "output check"],
     "edits": [("np.all(np.abs(got - expected) <= tol[\"atol\"] + tol[\"rtol\"] * np.abs(expected)))",
                "np.all(np.abs(got[0] - expected[0]) <= tol[\"atol\"] + tol[\"rtol\"] * np.abs(expected[0])))")]},
    {"stage": 3, "id": "blind-b3-summarize-blocks-not-matched-by-shape",
     "misunderstood": "builds speedup_by_block from kernel records of every shape, not the entry's own, so the last shape's record overwrites each block; measured planted kernels 2x faster at (8,128) and 2x slower at (64,512): ref speedups [{8: 2.0}, {8: 0.5}] stops at [64, 512], mistake [{8: 0.5}, {8: 0.5}] stops at [8, 128]",
     "named_by": ["shape", "other shape", "speedup_by_block", "matched"],
     "edits": [("                    if tuple(r[\"shape\"]) == shape and r.get(\"output_ok\") and r[\"samples_s\"]}",
                "                    if r.get(\"output_ok\") and r[\"samples_s\"]}")]},
    # ------------------------------------------------------------ batch 4 (blind, s7)
    {"stage": 1, "id": "blind-b4-numpy-ref-float32",
     "misunderstood": "casts the input to float32 instead of float64 in the NumPy reference, so it returns float32 and flushes tiny probabilities a float64 softmax keeps; measured: row [0, -500, -800]: ref [1.0, 7.12e-218, 0.0] float64, mutant [1.0, 0.0, 0.0] float32",
     "named_by": ["float32", "float64", "underflow", "dtype"],
     "edits": [("    z = np.asarray(x).astype(np.float64)\n",
                "    z = np.asarray(x).astype(np.float32)\n")]},
    {"stage": 1, "id": "blind-b4-tolerance-ignores-dtype",
     "misunderstood": "takes the output rounding from float32 whatever dtype is asked, so the bfloat16 budget ignores the final rounding to bfloat16 and is no wider than float32's; measured: bfloat16, n=300: rtol ref 0.00392, mutant 1.82e-05 (the same as its float32 one)",
     "named_by": ["bfloat16", "dtype", "output rounding", "ignored"],
     "edits": [("    u_out = float(jnp.finfo(dtype).eps) / 2\n",
                "    u_out = float(jnp.finfo(jnp.float32).eps) / 2\n")]},
    {"stage": 2, "id": "blind-b4-kernel-mask-includes-edge-column",
     "misunderstood": "masks the padding with cols <= n_cols, letting the first cell past the row's edge into the max and the sum (NaN when interpreted) on every row length that is not the block width; measured: (10, 200), block width 256, interpreted: NaN cells ref 0, mutant 2000 of 2000",
     "named_by": ["mask", "off-by-one", "padding", "edge"],
     "edits": [("    x = jnp.where(cols < n_cols, x, -jnp.inf)\n",
                "    x = jnp.where(cols <= n_cols, x, -jnp.inf)\n")]},
    {"stage": 2, "id": "blind-b4-run-softmax-drops-block-rows",
     "misunderstood": "calls softmax_pallas without the block_rows it was given (the default 8 runs) while reporting the requested block_rows and its grid; measured: block_rows=4 on (20, 130): ref ran block_rows 4, mutant ran 8 while reporting block_rows 4 and grid [5]",
     "named_by": ["block_rows", "ignored", "default", "grid"],
     "edits": [("    y = jax.block_until_ready(softmax_pallas(x, block_rows=block_rows))\n",
                "    y = jax.block_until_ready(softmax_pallas(x))\n")]},
    {"stage": 3, "id": "blind-b4-sweep-checks-first-row",
     "misunderstood": "judges output_ok on the first row only, so a kernel wrong in later rows (a ragged last block) is timed as correct; measured: kernel wrong (x1.5) on rows 1..11 of (12, 130): output_ok ref False (0 samples), mutant True (timed)",
     "named_by": ["first row", "output_ok", "wrong kernel", "only"],
     "edits": [("                  np.all(np.abs(got - expected) <= tol[\"atol\"] + tol[\"rtol\"] * np.abs(expected)))\n",
                "                  np.all(np.abs(got[0] - expected[0]) <= tol[\"atol\"] + tol[\"rtol\"] * np.abs(expected[0])))\n")]},
    {"stage": 3, "id": "blind-b4-summarize-baseline-mean",
     "misunderstood": "summarises the baseline by the mean of its samples instead of the median, so its median and every speedup move with one slow sample; measured: planted baseline samples [1,1,1,1,9] s, kernel [1]*5 s: baseline_median_s ref 1.0, mutant 2.6; helps ref False, mutant True",
     "named_by": ["mean", "median", "baseline", "outlier"],
     "edits": [("    base = {tuple(r[\"shape\"]): statistics.median(r[\"samples_s\"])\n",
                "    base = {tuple(r[\"shape\"]): statistics.mean(r[\"samples_s\"])\n")]},
]

# Batch b5 (2026-12-07): six more, written from the learner's copy (README, starter,
# notebooks) and the reference solution only, never a checker or this corpus.
MISTAKES += [
    {"stage": 1, "id": "blind-b5-tolerance-eps-not-unit-roundoff",
     "misunderstood": "The learner believed the output rounding costs machine epsilon rather than the unit roundoff (eps / 2), doubling the final-rounding term that dominates bfloat16's budget.",
     "named_by": ["unit roundoff", "eps / 2", "bfloat16", "too loose"],
     "edits": [("    u_out = float(jnp.finfo(dtype).eps) / 2",
                "    u_out = float(jnp.finfo(dtype).eps)")]},
    {"stage": 1, "id": "blind-b5-f64-reference-no-max-shift",
     "misunderstood": "The learner believed float64's range makes the max subtraction unnecessary, but exp(1000) still overflows float64 and rows near +1000 come out NaN.",
     "named_by": ["subtract the row max", "overflow", "near 1000"],
     "edits": [("    z = z - z.max(axis=-1, keepdims=True)\n    e = np.exp(z)",
                "    e = np.exp(z)")]},
    {"stage": 2, "id": "blind-b5-kernel-mask-off-by-one",
     "misunderstood": "The learner believed the data columns run up to and including index n_cols, so one padding cell past the edge enters the max and the sum.",
     "named_by": ["off by one", "past the edge", "padding", "ragged"],
     "edits": [("x = jnp.where(cols < n_cols, x, -jnp.inf)",
                "x = jnp.where(cols <= n_cols, x, -jnp.inf)")]},
    {"stage": 2, "id": "blind-b5-grid-floor-division",
     "misunderstood": "The learner believed the grid is rows // block_rows, dropping the last partial run of rows (and every row when there are fewer rows than a block).",
     "named_by": ["cdiv", "partial block", "last rows", "floor division"],
     "edits": [("grid=(pl.cdiv(rows, block_rows),),", "grid=(rows // block_rows,),")]},
    {"stage": 3, "id": "blind-b5-sweep-checks-first-row-only",
     "misunderstood": "The learner believed checking the first row of the output is enough to judge it, so a kernel wrong only in later rows or in the last block is timed.",
     "named_by": ["every element", "first row", "output check"],
     "edits": [("np.all(np.abs(got - expected) <= tol[\"atol\"] + tol[\"rtol\"] * np.abs(expected)))",
                "np.all(np.abs(got[0] - expected[0]) <= tol[\"atol\"] + tol[\"rtol\"] * np.abs(expected[0])))")]},
    {"stage": 3, "id": "blind-b5-stops-at-first-non-helping",
     "misunderstood": "The learner believed the kernel stops helping at the first shape where it does not help, not after the last shape where it helps (it may help again later).",
     "named_by": ["last shape where it helps", "never helps again", "first shape"],
     "edits": [("    stops = per_shape[last_help + 1][\"shape\"] if last_help + 1 < len(per_shape) else None",
                "    stops = next((p[\"shape\"] for p in per_shape if not p[\"helps\"]), None)")]},
]


# Batch b6 (2026-12-07, ninth session): six more, written from the learner's copy
# (README, starter, notebooks, docs/learners.md) and the reference solution only,
# never a checker or this corpus; each confirmed wrong by hand (a differing value).
MISTAKES += [
    {"stage": 1, "id": 'blind-b6-tolerance-eps-as-unit-roundoff',
     "misunderstood": 'The learner took finfo.eps as the unit roundoff, but u = eps / 2 for round-to-nearest; every term of the budget doubles, so rtol is 2x too loose (and atol 8 u32 instead of 4).',
     "named_by": ['in the place of the unit roundoff', 'unit roundoff is eps / 2', '2x too loose', 'rtol upper bound'],
     "edits": [('    u_out = float(jnp.finfo(dtype).eps) / 2',
                '    u_out = float(jnp.finfo(dtype).eps)'),
               ('    u32 = float(jnp.finfo(jnp.float32).eps) / 2',
                '    u32 = float(jnp.finfo(jnp.float32).eps)')]},
    {"stage": 1, "id": 'blind-b6-softmax-jnp-no-upcast',
     "misunderstood": "The learner kept x's dtype for the arithmetic, believing the max-shift alone makes it accurate; bfloat16 inputs are then reduced and exponentiated in bfloat16, several times the float32-then-round-once budget.",
     "named_by": ['computed in bfloat16 itself', 'compute in float32', 'bfloat16 arithmetic', 'round once to the output dtype'],
     "edits": [('    z = x.astype(jnp.float32)',
                '    z = x')]},
    {"stage": 2, "id": 'blind-b6-kernel-pads-with-zero',
     "misunderstood": "The learner masked the cells past the row's edge with 0, believing zeros are harmless padding; exp(0 - max) enters the sum, so every ragged row is normalised wrongly (right only when the row length fills the block).",
     "named_by": ['counted as 0s', 'identity of the reduction', 'pad with -inf', 'ragged row length'],
     "edits": [('    x = jnp.where(cols < n_cols, x, -jnp.inf)',
                '    x = jnp.where(cols < n_cols, x, 0.0)')]},
    {"stage": 2, "id": 'blind-b6-grid-floor-division',
     "misunderstood": 'The learner sized the grid as rows // block_rows, believing the blocks tile the rows; the last partial run of rows has no program, so those output rows are never written (and with fewer rows than a block nothing is).',
     "named_by": ['rounds the count down', 'cdiv(rows, block_rows)', 'last partial block', 'rows never written'],
     "edits": [('        grid=(pl.cdiv(rows, block_rows),),',
                '        grid=(rows // block_rows,),')]},
    {"stage": 3, "id": 'blind-b6-sweep-first-call-counted-as-warmup',
     "misunderstood": 'The learner counted the compiling first call as one of the warm-up calls, making warmup - 1 more; the record then claims warmup calls it did not make and the kernel is called warmup + iters times, not 1 + warmup + iters.',
     "named_by": ['counted as one of the warm-up calls', '1 + warmup + iters calls', 'first call is not a warm-up', 'call count'],
     "edits": [('                for _ in range(warmup):',
                '                for _ in range(warmup - 1):')]},
    {"stage": 3, "id": 'blind-b6-stops-at-first-non-helping',
     "misunderstood": 'The learner reported the first shape where the kernel does not help, believing help only ever stops once; the contract asks for the shape after the last one where it helps (from there on it never helps again).',
     "named_by": ['after the last shape where it helps', 'never helps again', 'stops_helping_at'],
     "edits": [('    last_help = max((i for i, p in enumerate(per_shape) if p["helps"]), default=-1)\n    stops = per_shape[last_help + 1]["shape"] if last_help + 1 < len(per_shape) else None',
                '    stops = next((p["shape"] for p in per_shape if not p["helps"]), None)')]},
]

# Blind batch b7 (2026-12-07): written from a learner's copy and the solutions only,
# told the earlier batches' mistakes so as not to repeat them.
MISTAKES += [
    {"stage": 1, "id": 'blind-b7-jnp-divides-in-output-dtype',
     "misunderstood": "The learner cast the exponentials and their sum back to x's dtype before dividing, believing only the arithmetic up to the sum must be float32; for bfloat16 the result is rounded three times (numerator, sum, quotient) instead of once, past the budget.",
     "named_by": ['rounded once to the output dtype', 'cast after the division', 'bfloat16 double rounding'],
     "edits": [('    return (e / jnp.sum(e, axis=-1, keepdims=True)).astype(x.dtype)',
                '    return e.astype(x.dtype) / jnp.sum(e, axis=-1, keepdims=True).astype(x.dtype)')]},
    {"stage": 1, "id": 'blind-b7-tol-atol-grows-with-row',
     "misunderstood": "The learner applied the row-length rounding count to atol as well as rtol, believing the absolute slack must grow with the sum's length; the contract wants atol of the order of float32's unit roundoff (1 to 10 u32) whatever the row length.",
     "named_by": ['atol between 1 and 10 u32', 'atol independent of n', 'only rtol grows with the row length'],
     "edits": [('    atol = 4 * u32\n',
                '    atol = (n + 4) * u32\n')]},
    {"stage": 2, "id": 'blind-b7-kernel-masks-max-only',
     "misunderstood": 'The learner masked the padding only for the row max, believing the mask is there for stability and the padded cells are harmless afterwards since they are never written back; their exp still enters the row sum (NaN when interpreted, junk on a device).',
     "named_by": ['identity for each reduction', 'mask the sum as well as the max', 'padding enters the row sum'],
     "edits": [('    x = jnp.where(cols < n_cols, x, -jnp.inf)\n    m = jnp.max(x, axis=1, keepdims=True)\n',
                '    m = jnp.max(jnp.where(cols < n_cols, x, -jnp.inf), axis=1, keepdims=True)\n')]},
    {"stage": 2, "id": 'blind-b7-pallas-block-clipped-to-rows',
     "misunderstood": 'The learner believed a block may not be taller than the array, so with fewer rows than block_rows it shrank the block to the row count; the contract fixes the block at (block_rows, block_cols(cols)) and lets the last run be partial.',
     "named_by": ['block shape (block_rows, block_cols)', 'partial last block', 'fewer rows than a block'],
     "edits": [('    spec = pl.BlockSpec((block_rows, block_cols(cols)), lambda i: (i, 0))',
                '    spec = pl.BlockSpec((min(block_rows, rows), block_cols(cols)), lambda i: (i, 0))')]},
    {"stage": 3, "id": 'blind-b7-summary-never-helped-none',
     "misunderstood": "The learner believed a kernel that never helps never 'stops helping', so with no helping shape it reports None; the contract gives the shape after the last helping one (the first shape when none helps) and None only when it helps at the largest shape.",
     "named_by": ['shape after the last one where it helps', 'never helps: the first shape', 'None only when it helps at the end'],
     "edits": [('    stops = per_shape[last_help + 1]["shape"] if last_help + 1 < len(per_shape) else None',
                '    stops = per_shape[last_help + 1]["shape"] if 0 <= last_help < len(per_shape) - 1 else None')]},
    {"stage": 3, "id": 'blind-b7-summary-mix-check-kernels-only',
     "misunderstood": 'The learner checked backend and dtype for mixing among the kernel records only, treating the baseline as a reference outside the run; a baseline of another dtype or backend is not comparable and must be refused like a kernel record.',
     "named_by": ['backend and dtype across all records', 'baseline must match', 'refuse mixed runs'],
     "edits": [('for key, group in (("mode", kernels), ("backend", records), ("dtype", records)):',
                'for key, group in (("mode", kernels), ("backend", kernels), ("dtype", kernels)):')]},
]

# Blind batch b8 (2026-12-07, eleventh session): written from a learner's copy and the
# solutions only, told the 812 earlier mistakes so as not to repeat them; each
# confirmed wrong by a value it changes.
MISTAKES += [
    {"stage": 1, "id": 'blind-b8-f64-sum-whole-array',
     "misunderstood": 'The learner normalised by e.sum() with no axis, believing the sum of the shifted exponentials is per row already; it sums the whole array, so each row sums to its share of the total instead of 1.',
     "named_by": ['sum along each row', 'axis=-1, keepdims=True', 'each row sums to 1'],
     "edits": [('return e / e.sum(axis=-1, keepdims=True)',
                'return e / e.sum()')]},
    {"stage": 1, "id": 'blind-b8-jnp-max-down-columns',
     "misunderstood": "The learner subtracted the max along axis 0 (each column's max), believing any stabilising shift leaves the softmax unchanged; the shift must be constant along each row (the row max), and a per-column shift changes every row's probabilities.",
     "named_by": ['the row max, axis=-1', 'shift constant along the row', 'softmax is invariant only to a per-row shift'],
     "edits": [('z = z - jnp.max(z, axis=-1, keepdims=True)',
                'z = z - jnp.max(z, axis=0, keepdims=True)')]},
    {"stage": 2, "id": 'blind-b8-mode-default-not-resolved',
     "misunderstood": "The learner compared the backend argument with 'cpu' without resolving the default, believing None already means this machine; execution_mode() on a CPU then says 'compiled' (None is not 'cpu'), and softmax_pallas with interpret=None tries compiled Pallas.",
     "named_by": ['None means jax.default_backend()', 'the default must be resolved', 'interpreted on cpu'],
     "edits": [('    backend = backend or jax.default_backend()\n',
                '')]},
    {"stage": 2, "id": 'blind-b8-pallas-two-dim-grid',
     "misunderstood": 'The learner gave the grid a second axis for the column blocks (always one, since a block spans every column), believing a 2-D array needs a 2-D grid; the contract asks for a one-dimensional grid in which program i owns the i-th run of rows.',
     "named_by": ['a one-dimensional grid', 'one index-map argument', 'the block already spans every column'],
     "edits": [('lambda i: (i, 0))',
                'lambda i, j: (i, j))'),
               ('grid=(pl.cdiv(rows, block_rows),),',
                'grid=(pl.cdiv(rows, block_rows), 1),')]},
    {"stage": 3, "id": 'blind-b8-sweep-tolerance-from-rows',
     "misunderstood": "The learner passed the shape's row count to tolerance, reading n_cols as 'the number of rows summed'; the budget depends on the row length (cols), so on a tall shape a kernel wrong by several budgets passes the output check and is timed.",
     "named_by": ['tolerance(dtype, cols)', 'the row length, not the row count', 'a wrong kernel must not be timed'],
     "edits": [('tol = tolerance(dtype, cols)',
                'tol = tolerance(dtype, rows)')]},
    {"stage": 3, "id": 'blind-b8-summary-mode-from-machine',
     "misunderstood": "The learner took the summary's mode from execution_mode() on the machine summarising, believing it is the same as where the records ran; the contract reports the kernel records' mode, so records of a compiled GPU run summarised on a CPU say 'interpreted' and get a caveat.",
     "named_by": ['mode from the kernel records', 'not from this machine', 'caveat only when the records ran interpreted'],
     "edits": [('mode = kernels[0]["mode"]',
                'mode = execution_mode()')]},
    # blind batch b9 (2026-12-07, twelfth session): written from a learner's copy, the
    # solutions and the 842 earlier mistakes, never the checkers
    {'stage': 1,
     'id': 'blind-b9-tol-pairwise-log2-count',
     'misunderstood': "The learner counted the row sum's roundings as ceil(log2 n), the bound "
                      'of pairwise summation, believing XLA always sums pairwise; the '
                      "contract's analysis counts (n - 1) roundings for a sum of n terms (the "
                      'error bound the budget must cover), so rtol grows with n, not log n.',
     'named_by': ['log2(n) roundings instead of n',
                  'pairwise summation bound',
                  'rtol grows linearly with the row length'],
     'edits': [('    rtol = u_out + (n + 4) * u32',
                '    rtol = u_out + (math.ceil(math.log2(n)) + 4) * u32')]},
    {'stage': 1,
     'id': 'blind-b9-f64-rounded-to-input-dtype',
     'misunderstood': 'The learner computed the reference in float64 but rounded the result '
                      "back to x's dtype 'to match the kernel's output', like softmax_jnp "
                      'does; the contract returns a float64 ndarray, keeping probabilities '
                      'that float32 flushes to 0.',
     'named_by': ['cast back to the input dtype',
                  'float64 result required',
                  'tiny probabilities flushed'],
     'edits': [('    return e / e.sum(axis=-1, keepdims=True)',
                '    return (e / e.sum(axis=-1, keepdims=True)).astype(np.asarray(x).dtype)')]},
    {'stage': 2,
     'id': 'blind-b9-pallas-index-map-axes-swapped',
     'misunderstood': 'The learner wrote the index map as (0, i), believing the block index '
                      'lists the column block first; program i must own the i-th run of rows, '
                      "(i, 0), so with the axes swapped every program reads the first rows' "
                      'block offset along the columns.',
     'named_by': ['index map axes swapped',
                  'program i must own row block i',
                  '(i, 0) not (0, i)'],
     'edits': [('lambda i: (i, 0)', 'lambda i: (0, i)')]},
    {'stage': 2,
     'id': 'blind-b9-run-y-as-float64',
     'misunderstood': 'The learner converted y to float64 in run_softmax so it compares '
                      "cleanly with the float64 reference; the contract's y is the output of "
                      "the softmax_pallas call it ran, in x's dtype.",
     'named_by': ['y converted to float64',
                  "output dtype must be x's dtype",
                  'the array softmax_pallas returned'],
     'edits': [('    return {"y": np.asarray(y),',
                '    return {"y": np.asarray(y, dtype=np.float64),')]},
    {'stage': 3,
     'id': 'blind-b9-sweep-baseline-per-block',
     'misunderstood': 'The learner timed the baseline again before every block size so each '
                      "kernel record has 'its own' baseline next to it; the contract has one "
                      'baseline record per shape followed by one record per block size.',
     'named_by': ['one baseline record per shape',
                  'baseline repeated before each block',
                  'record count 1 + blocks per shape'],
     'edits': [('        records.append({"impl": "jnp", "block_rows": None, "grid": None, '
                '"mode": "compiled",\n'
                '                        **common, **measure(baseline, x, expected, tol)})\n'
                '        for b in block_rows_list:\n',
                '        for b in block_rows_list:\n'
                '            records.append({"impl": "jnp", "block_rows": None, "grid": None,\n'
                '                            "mode": "compiled", **common,\n'
                '                            **measure(baseline, x, expected, tol)})\n')]},
    {'stage': 3,
     'id': 'blind-b9-summary-helps-at-margin',
     'misunderstood': 'The learner counted a speedup exactly at HELP_MARGIN as helping (>=), '
                      'believing the margin is the smallest gain that helps; the contract says '
                      'helps = best_speedup > HELP_MARGIN, a speedup at the margin is still '
                      'within the noise.',
     'named_by': ['at the margin counts as helping',
                  '>= where > is asked',
                  'strictly above HELP_MARGIN'],
     'edits': [('best_speedup is not None and best_speedup > HELP_MARGIN',
                'best_speedup is not None and best_speedup >= HELP_MARGIN')]},
]
