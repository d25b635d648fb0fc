"""sharded-training stage 3: fresh-process recovery. A checkpoint round trip in the
learner process (the Orbax manager stays there as a handle; this process reads the
checkpoint folder and the saved state itself, with Orbax, and compares it with the state
the learner returned as data) and three short ``train`` calls there, each later one with
another config (what a later call shows: state kept from the first), then the shared
driver runs of ``sharded_stage3_runs``
(uninterrupted, SIGKILLed mid-save and resumed, resumed on 4 devices, two processes),
each compared with the uninterrupted run: bitwise on the same mesh, within tolerance
across meshes. The driver processes import the learner's file themselves (each is its
own process, never this one) and write their final state to files this process reads.
Checks are registered in the dependency order that ``sharded_stage3_runs`` explains."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
from sharded_harness import ATOL, N_DEVICES, RTOL, checker
from sharded_learner import (
    ask,
    call,
    learner_fn,
    learner_mesh,
    learner_state,
    learner_step,
    learner_training,
    run_step,
)
from sharded_reference import ref_batch, ref_data, ref_train
from sharded_stage3_runs import (
    driver_run,
    killed_mid_run,
    stage3_config,
    two_process_failure,
    two_processes,
    uninterrupted,
)
from sharded_trees import compare_trees, expect_on_mesh, flat, host, hosts, is_key

from coursekit.checking.errors import CheckFailed, LearnerCodeError
from coursekit.checking.graded import available
from coursekit.checking.learner import require_written
from coursekit.checking.values import fail_unless
from coursekit.workloads import procgroup, trainruns

# The training state's fields, as the contract lists them.
FIELDS = ("params", "opt_state", "step", "key", "data_pos")


def missing_fields(names) -> list[str]:
    """The state's fields with no leaf among ``names`` (normalised leaf names)."""
    have = {name.split("/")[0] for name in names}
    return [field for field in FIELDS if field not in have]


def saved_checkpoint(killed: dict, restored: int | None) -> dict | None:
    """The killed run's newest finished checkpoint, read here with Orbax from the copy
    taken before any resume (once: a later resume in that copy may remove it), as
    {normalised leaf name: array}; None when there is none or it cannot be read."""
    if restored is None:
        return None
    if "saved_leaves" not in killed:
        try:
            killed["saved_leaves"] = checkpoint_on_disk(Path(killed["copy"]) / str(restored))
        except (CheckFailed, OSError):
            killed["saved_leaves"] = None
    return killed["saved_leaves"]


def saved_step(killed: dict, restored: int | None) -> int | None:
    """The ``step`` inside the killed run's newest finished checkpoint, read here."""
    leaves = saved_checkpoint(killed, restored)
    try:
        return int(np.asarray(leaves["step"]))
    except (KeyError, TypeError, ValueError):
        return None


def fields_not_saved(killed: dict, restored: int | None, what: str,
                     error: Exception | None = None) -> None:
    """Fails naming every field of the state that the checkpoint the run resumed from
    does not hold (read here): the cause of whatever the resumed run did next (raised
    in restore_latest, or continued with a fresh key or data position)."""
    leaves = saved_checkpoint(killed, restored)
    missing = missing_fields(leaves) if leaves is not None else []
    if not missing:
        return
    raise CheckFailed(
        f"{what}: the checkpoint of step {restored} holds no {', '.join(missing)} (read "
        "here from disk), so no restart can continue the run"
        + (f"; the resumed run then raised: {str(error)[:300]}" if error else ""),
        yours=f"fields saved: {sorted({k.split('/')[0] for k in leaves})}",
        expected=f"fields saved: {sorted(FIELDS)}",
        hint=f"save_state must save the whole state: {', '.join(missing)} "
        f"{'is' if len(missing) == 1 else 'are'} part of what a restart needs to continue "
        "the same run")


def resumed_run(killed: dict, restored: int, what: str) -> dict:
    """Run B's report: what the checkpoint it resumed from lacks is named first (the
    cause of an error in B as well), then B's own error, if it raised."""
    fields_not_saved(killed, restored, what, killed.get("resumed_error"))
    if "resumed_error" in killed:
        raise killed["resumed_error"]
    return killed["resumed"]


def on_step_shift(report: dict) -> int:
    """How far every step number the uninterrupted run gave on_step is from the step
    taken (0 when right; stage3 names it in uninterrupted_run_trains): a resumed run's
    first number is judged with the same shift, so the one mistake fails once."""
    steps = report.get("steps") or []
    shift = steps[0] - 1 if steps else 0
    return shift if steps == [s + shift for s in range(1, len(steps) + 1)] else 0


def check_resumed(report: dict, restored: int | None, what: str,
                  saved: int | None = None, shift: int = 0) -> None:
    """The resumed run's first step follows the newest finished checkpoint. ``saved``:
    the step inside that checkpoint as read here: one other than its own number puts the
    fault in the save (a state saved before its update), not in the restore. ``shift``:
    the uninterrupted run's on_step numbers over the steps taken."""
    first = report.get("first_step")
    if restored is None or first == restored + 1 + shift:
        return
    hint = ("restore_latest must restore manager.latest_step() and train must start from "
            "the restored state (step, key, data_pos and all)")
    if saved is not None and saved != restored:
        hint = (f"the checkpoint of step {restored} holds a state whose step is {saved} "
                f"(read here from disk), and the resumed run went on from there: the state "
                f"was saved {'before its update' if saved == restored - 1 else 'as another step'}"
                ". Save the state after the step that makes its step a multiple of "
                "save_every, under that step")
    elif isinstance(first, int) and first <= shift + 1:
        hint = (f"the resumed run started over from step {first - shift} instead of "
                f"continuing after step {restored}: train must resume from the newest "
                "finished checkpoint when there is one")
    fail_unless(False, f"{what}: the fresh process did not continue from the newest "
                f"finished checkpoint (step {restored})",
                yours=f"first step reported: {first}",
                expected=f"first step reported: {restored + 1 + shift}", hint=hint)


def resumed_apart(resumed: dict, full: dict, hint: str) -> str:
    """The hint for a resumed run whose final state differs from the uninterrupted one's,
    by what the two final states show: the data position, the key, else ``hint``."""
    pos, want = resumed.get("final_data_pos"), full.get("final_data_pos")
    if pos != want:
        return (f"the resumed run ended at data_pos {pos}, the uninterrupted one at {want}: "
                "the data position did not continue from the checkpoint (restore it, and "
                "take each batch from the state's data_pos)")
    a, b = resumed["final"].get("['key']"), full["final"].get("['key']")
    if a is not None and b is not None and np.asarray(a).tobytes() != np.asarray(b).tobytes():
        return ("the final keys differ while the data position agrees: the resumed run's "
                "key is not the one saved (a key re-made from the seed repeats the noise "
                "of the first steps); save and restore the typed key itself")
    return hint


def normalised(name: str) -> str:
    """A leaf name without its container syntax (``['opt_state'][0].trace['b1']`` and
    ``['opt_state'][0]['trace']['b1']`` are both ``opt_state/0/trace/b1``)."""
    return "/".join(re.findall(r"\w+", name))


def checkpoint_on_disk(folder: Path) -> dict:
    """The checkpoint in ``folder`` (one step's), read by this process with Orbax, as
    {normalised leaf name: numpy array} (typed keys as key data)."""
    import orbax.checkpoint as ocp
    try:
        restored = ocp.StandardCheckpointer().restore((folder / "default").resolve())
    except Exception as err:  # noqa: BLE001 - an unreadable checkpoint is named
        raise CheckFailed(f"the checkpoint in {folder.name} cannot be read with "
                          f"Orbax: {type(err).__name__}: {str(err)[:200]}",
                          hint="save the state as a standard Orbax checkpoint through the "
                          "manager, under its step") from None
    return {normalised(k): v for k, v in flat(restored).items()}


@checker.check(3)
def state_roundtrip(impl, ctx):
    import orbax.checkpoint  # noqa: F401 - imported here so stages 1, 2, 4 skip it

    mesh, config, state, step = learner_training(impl, ctx, "roundtrip")
    n = int(ctx.rng("roundtrip-n").integers(2, 5))
    data = ref_data(config)
    for i in range(n):
        state, _ = run_step(impl, step, state,
                            call(impl, "place_batch", ref_batch(data, config, i), mesh))
    directory = ctx.learner_dir("roundtrip") / "ckpt"
    for name in ("make_checkpoint_manager", "restore_latest", "save_state"):
        learner_fn(impl, name)
    manager = impl.make_checkpoint_manager(str(directory), 3)
    empty = call(impl, "restore_latest", manager, state)
    fail_unless(empty.type == "NoneType", "restore_latest on an empty folder must return "
                "None", yours=empty.type, expected=None)
    call(impl, "save_state", manager, state)
    ask(impl, "manager_finish", manager)
    fail_unless(n in trainruns.finalized_steps(directory), f"no finished checkpoint of step {n} in "
                "the folder", yours=sorted(p.name for p in directory.iterdir()),
                expected=[str(n)], hint="save as step int(state['step']); a save that "
                "returned may still be running: wait_until_finished")
    want = hosts(state.leaves)
    on_disk = checkpoint_on_disk(directory / str(n))
    saved = {normalised(k): v for k, v in want.items()}
    missing = missing_fields(on_disk)
    fail_unless(not missing, f"the checkpoint on disk holds no {', '.join(missing)}",
                yours=f"fields saved: {sorted({k.split('/')[0] for k in on_disk})}",
                expected=f"fields saved: {sorted(FIELDS)}",
                hint=f"save_state must save the whole state: {', '.join(missing)} "
                f"{'is' if len(missing) == 1 else 'are'} part of what a restart needs to "
                "continue the same run")
    for field in ("params", "step", "data_pos", "key"):
        got = {k: v for k, v in on_disk.items() if k.split("/")[0] == field}
        exp = {k: v for k, v in saved.items() if k.split("/")[0] == field}
        compare_trees(got, exp, f"the checkpoint on disk: {field}", bitwise=True,
                      hint="save the whole state, as it is, at its own step")
    fresh = learner_state(impl, config, mesh)
    manager = impl.make_checkpoint_manager(str(directory), 3)
    try:
        restored = call(impl, "restore_latest", manager, fresh)
    finally:
        ask(impl, "manager_close", manager)
    fail_unless(restored.type == "dict", "restore_latest must return the state dict",
                yours=restored.type, expected="dict")
    got_all = hosts(restored.leaves)
    missing = [f for f in FIELDS if f not in (restored.keys or [])]
    fail_unless(not missing, f"the restored state has no {', '.join(missing)}",
                yours=restored.keys, expected=sorted(FIELDS),
                hint="restore_latest returns the whole state the checkpoint holds (every "
                "field saved, as saved): a restart continues the run only with all of them")
    for field, hint in (("key", "save and restore the typed PRNG key itself; a key "
                         "re-made from the seed repeats the noise of the first steps"),
                        ("data_pos", "restore the data position: starting the data order "
                         "over feeds the model batches it has already seen"),
                        ("step", "restore the step counter"),
                        ("opt_state", "the optimizer's momentum is part of the state"),
                        ("params", "restore the parameters")):
        if field == "key":
            key = restored.leaves.get("['key']")
            fail_unless(is_key(key), "the restored key is not a typed key",
                        yours=getattr(key, "dtype", None), expected="key<fry>", hint=hint)
        got = {k: v for k, v in got_all.items() if k.startswith(f"['{field}']")}
        exp = {k: v for k, v in want.items() if k.startswith(f"['{field}']")}
        compare_trees(got, exp, f"restored {field}", bitwise=True, hint=hint)
    expect_on_mesh(restored.placement, "restored {name} is not on the mesh",
                   "the restored leaves live where `like`'s do (its shardings, on this "
                   "run's mesh), whatever mesh saved them")


def reference_run(impl, config: dict, data: dict | None = None) -> tuple[dict, list, str]:
    """(final params, losses, what it is) of ``config['steps']`` steps on the checker's
    own data order (``ref_batch``): the instructor's single-device step where the course
    holds it; in a learner's copy, the learner's own stage-1 state and step, run by the
    checker in the learner process (stage 1 checks that step against stored outputs), so
    what is checked here is ``train``'s loop: the order, the key, one step per batch.
    ``data``: another dataset than ``config``'s, taken in ``config``'s order."""
    data = ref_data(config) if data is None else data
    batches = [ref_batch(data, config, i) for i in range(config["steps"])]
    if available():
        ref, losses = ref_train(config, config["steps"], batches)
        return flat(ref["params"]), losses, "the checker's single-device run"
    mesh = learner_mesh(impl)[0]
    state, step, losses = learner_state(impl, config, mesh), learner_step(impl, config), []
    for b in batches:
        state, loss = run_step(impl, step, state, call(impl, "place_batch", b, mesh))
        losses.append(float(host(loss)))
    return hosts(state.field("params")), losses, ("your stage-1 step run on the same "
                                                  "batches in order")


# Three short runs in the learner process, one after the other, of the stage's config
# (stage3_config) cut to a few steps with no save (save_every past the last step): the
# same programs as its driver runs (the params' seed, lr, noise, number of examples), so
# the compiles are shared through the run's compilation cache, and no Orbax save (the
# third call's n_examples costs one more compile, of its dataset; its steps are the same).
SECOND_RUN_STEPS = 3


@checker.check(3)
def second_train_follows_its_config(impl, ctx):
    """train called again in the same process trains each call's own config: a second
    call with another data_seed, then a third with the first call's data_seed but another
    spread and more examples (a dataset kept by data_seed alone shows only there).
    Nothing of an earlier call's carries over."""
    require_written(impl, "train")
    mesh, _ = learner_mesh(impl)
    first = dict(stage3_config(ctx), steps=SECOND_RUN_STEPS, save_every=SECOND_RUN_STEPS + 1)
    second = dict(first, data_seed=int(ctx.rng("train-call-2").integers(0, 2**30)))
    if second["data_seed"] == first["data_seed"]:
        second["data_seed"] += 1
    # Another spread and one more batch of rows (n stays odd): its first batches reach
    # rows the first call's dataset does not hold.
    third = dict(first, spread=first["spread"] + 1.0,
                 n_examples=first["n_examples"] + first["batch"])
    configs, params = [first, second, third], []
    for i, config in enumerate(configs, 1):
        try:
            state = call(impl, "train", config,
                         str(ctx.learner_dir(f"train-call-{i}") / "ckpt"), mesh)
        except LearnerCodeError as e:
            raise past_first_rows(e, first, config) from e
        fail_unless(state.type == "dict", "train must return the final state dict",
                    yours=state.type, expected="dict")
        params.append({f"['params']{k}": v for k, v in hosts(state.field("params")).items()})
        if i == 1:
            continue
        ref, _, what = reference_run(impl, config)
        change = (f"data_seed {second['data_seed']} after {first['data_seed']} (the rest "
                  "of the config the same)" if i == 2 else
                  f"the first call's data_seed {first['data_seed']}, spread "
                  f"{third['spread']} and n_examples {third['n_examples']} after "
                  f"{first['spread']} and {first['n_examples']}")
        what = (f"train call {i} in the same process, with {change}, {SECOND_RUN_STEPS} "
                f"steps: final params vs {what}")
        # the hint's reference runs only for a run that is off
        hint = "" if close_params(params[-1], ref) else \
            later_run_apart(impl, first, config, params)
        compare_trees(params[-1], {f"['params']{k}": v for k, v in ref.items()}, what,
                      hint=hint)


def past_first_rows(error: Exception, first: dict, config: dict) -> Exception:
    """A call that raised on rows past the first call's dataset, named so; any other
    error as it was."""
    if config["n_examples"] <= first["n_examples"] or \
            f"size {first['n_examples']}" not in str(error):
        return error
    return CheckFailed(
        f"train with n_examples {config['n_examples']} (the first call's data_seed, after "
        f"a call with n_examples {first['n_examples']}) raised",
        yours=str(error).strip().splitlines()[-1][:300],
        expected="the run of this call's config",
        hint=f"the error names a size of {first['n_examples']}, the first call's "
        f"n_examples, not this call's {config['n_examples']}: this call indexed a "
        "dataset made for the earlier call (state carried from an earlier call in the "
        "process). Each call trains on make_data of the config it is given")


def later_run_apart(impl, first: dict, config: dict, params: list) -> str:
    """The hint for a later run that ended elsewhere than its config's run, by what the
    runs show (computed only then, each a reference run of a few steps): the first
    call's dataset in this call's order (for the same data_seed: its spread, grown to
    this call's rows, which make_dataset keeps as a prefix), the first call itself
    wrong, else something kept."""
    earlier = ref_data(first) if config["data_seed"] != first["data_seed"] else \
        ref_data(dict(config, spread=first["spread"]))
    kept, _, _ = reference_run(impl, config, data=earlier)
    if close_params(params[-1], kept):
        made = (f"data_seed {first['data_seed']}, not {config['data_seed']}"
                if config["data_seed"] != first["data_seed"] else
                f"spread {first['spread']}, not {config['spread']}, at the same data_seed")
        return (f"your run ended where a run of its own config on the first call's "
                f"dataset ({made}) ends: it trained on data made for the earlier call "
                "(state carried from an earlier call in the process). Each call trains "
                "on make_data of the config it is given")
    ref, _, _ = reference_run(impl, first)
    if not close_params(params[0], ref):
        return "the first call's run is wrong already: " + run_apart_hint(
            impl, first, None, params[0])
    return ("the first call trained its config's run and this one did not: something "
            "the first call made was used again in this call; each call builds its run "
            "from the config it is given")


RUN_HINT = ("batches from batch_at(data, config, data_pos), noise from the state's key, "
            "one update per step")


def run_apart_hint(impl, config: dict, losses: list | None, params: dict | None) -> str:
    """What a run that ended apart from its config's shows, where a reference run of a
    variant ends where it did (computed only then): the same run without the input
    noise (blind-b7: train built its step without config['noise'])."""
    if float(config.get("noise") or 0.0) == 0.0:
        return RUN_HINT
    quiet_params, quiet_losses, _ = reference_run(impl, dict(config, noise=0.0))
    quiet = close_params(params, quiet_params) if params is not None else \
        np.allclose(losses, quiet_losses, rtol=RTOL, atol=ATOL)
    if quiet:
        return (f"your run ends where the same run without input noise ends (noise 0 "
                f"where the config asks {config['noise']:.4g}): the config's noise never "
                "reached the step train takes")
    return RUN_HINT


def close_params(yours: dict, ref: dict) -> bool:
    """{'['params']...': array} against a reference run's params, within the stage's
    tolerance."""
    want = {f"['params']{k}": v for k, v in ref.items()}
    return sorted(yours) == sorted(want) and all(
        np.shape(yours[k]) == np.shape(want[k]) and
        np.allclose(yours[k], want[k], rtol=RTOL, atol=ATOL) for k in want)


@checker.check(3)
def uninterrupted_run_trains(impl, ctx):
    require_written(impl, "train")  # before the driver process starts
    report = uninterrupted(ctx)
    config = stage3_config(ctx)
    steps_reported(report, config["steps"])
    ref_params, ref_losses, what = reference_run(impl, config)
    fail_unless(np.allclose(report["losses"], ref_losses, rtol=RTOL, atol=ATOL),
                f"the losses of the run differ from {what}",
                yours=np.array(report["losses"]), expected=np.array(ref_losses),
                hint=run_apart_hint(impl, config, report["losses"], None))
    final = report["final"]
    compare_trees({k: v for k, v in final.items() if k.startswith("['params']")},
                  {f"['params']{k}": v for k, v in ref_params.items()},
                  f"final params vs {what}")
    fail_unless(report["final_step"] == config["steps"] and
                report["final_data_pos"] == config["steps"],
                "the final state's step or data_pos is wrong",
                yours=(report["final_step"], report["final_data_pos"]),
                expected=(config["steps"], config["steps"]))
    saved = list(range(config["save_every"], config["steps"] + 1, config["save_every"]))
    kept = saved[-config["max_to_keep"]:]
    ckpt = ctx.subdir("run-F") / "ckpt"
    finished = trainruns.finalized_steps(ckpt)
    last = config["steps"]
    unfinished_when_returned(report.get("at_return"), kept, finished,
                             trainruns.tmp_folders(ckpt))
    if finished != kept and last not in finished and finished == saved[-len(kept) - 1:-1]:
        raise CheckFailed(f"no checkpoint of the last step ({last}, a multiple of save_every)",
                          yours=finished, expected=kept,
                          hint="the checkpoints finished are each one save_every behind "
                          "the steps asked: the state was saved before the step that makes "
                          "its step a multiple of save_every, so the last state was never "
                          "saved")
    hint = ("save when the step is a multiple of save_every; the manager keeps the "
            "newest max_to_keep")
    if finished and finished == saved[-len(finished):]:  # the newest saves, too many/few
        hint = (f"the saves are right, but the folder keeps the newest {len(finished)} of "
                f"them where the config asks for {config['max_to_keep']}: the manager "
                "keeps another number than config['max_to_keep']")
    fail_unless(finished == kept, "the finished checkpoints on disk are not the newest "
                f"{config['max_to_keep']} saves of a save every {config['save_every']} steps",
                yours=finished, expected=kept, hint=hint)


def steps_reported(report: dict, steps: int) -> None:
    """``on_step`` was given 1, 2, ..., ``steps``: the new state's step after each step.
    A run whose every number is off by the same amount is named so (the step before the
    one just taken, a loop index from 0)."""
    kinds = report.get("on_step_types")
    fail_unless(kinds in (None, ["int", "float"]), "on_step was not given the step as an "
                "int and the loss as a float", yours=kinds, expected=["int", "float"],
                hint=(f"the loss was handed over as {kinds[1]}, not a float: the contract "
                      "gives on_step a number the caller can log or write as JSON")
                if isinstance(kinds, list) and kinds[1:] != ["float"] else
                "on_step(step, loss) with the new step as an int")
    got, want = report["steps"], list(range(1, steps + 1))
    if got == want:
        return
    shift = got[0] - 1 if got else 0
    hint = ("call on_step once after every step taken, with the new state's step and "
            "its loss")
    if got[:len(want)] == want and len(got) > len(want):
        hint = (f"the run asked for {steps} steps and on_step reported {len(got)}: the steps "
                f"after {steps} ({got[len(want):][:3]}) were taken too; a run of N steps "
                "stops when the state's step reaches N")
    elif got and got == want[:len(got)]:
        hint = (f"the run asked for {steps} steps and on_step reported {len(got)}, the last "
                f"step {got[-1]}: {steps - len(got)} step(s) short of N")
    elif got and shift and got == [s + shift for s in want]:
        hint = (f"every step number on_step was given is {abs(shift)} "
                f"{'below' if shift < 0 else 'above'} the step just taken (the first step "
                f"taken was reported as {got[0]}): on_step gets the step count of the new "
                "state, which the first step of a fresh run makes 1")
    fail_unless(False, "on_step was not called once per step with the new step, in order",
                yours=got[:8] + (["..."] if len(got) > 8 else []),
                expected=want[:8] + (["..."] if len(want) > 8 else []), hint=hint)


def step_of(folder: str) -> int | None:
    """The step an Orbax folder name stands for (``28``, ``28.orbax-checkpoint-tmp-1``)."""
    digits = re.match(r"\d+", folder)
    return int(digits.group()) if digits else None


def unfinished_when_returned(at_return, kept: list, finished: list, temporary: list) -> None:
    """Fails when a save of the run was not finished on disk the moment ``train``
    returned (``at_return``, read by the driver then): started (its temporary folder was
    there, or is now) or finished only after the return, at the process's exit or never;
    then when a checkpoint manager it opened was still open then."""
    if not isinstance(at_return, dict) or not isinstance(at_return.get("finished"), list):
        return
    done = at_return["finished"]
    started = {step_of(f) for f in [*at_return.get("temporary", []), *temporary]}
    late = [s for s in kept if s not in done and (s in started or s in finished)]
    fail_unless(not late, f"the checkpoint of step {late[0] if late else ''} was not on disk "
                "when train returned: its save had started but not finished",
                yours={"finished when train returned": done,
                       "temporary folders then": at_return.get("temporary", []),
                       "finished after the process ended": finished},
                expected={"finished when train returned": kept},
                hint="a save that returned may still be being written (Orbax saves "
                "asynchronously): train returns only once every save it started has "
                "reached the disk, so wait for the manager's outstanding saves (and close "
                "it) before returning")
    left = at_return.get("managers_open")
    fail_unless(not left, f"train returned with {left} checkpoint manager(s) it opened "
                "still open (never closed)", yours=f"{left} open when train returned",
                expected="0: every manager train opens is closed before it returns",
                hint="a manager holds threads and files until it is closed (and in a "
                "multi-process run one with a save in flight can hold its process past the "
                "end): close each one train opens before train returns")


@checker.check(3)
def resume_after_sigkill_bitwise(impl, ctx):
    require_written(impl, "train")
    killed = killed_mid_run(ctx)
    fail_unless(killed["finalized"], f"no finished checkpoint before the kill (the run had "
                f"reported steps up to {killed['steps'][-1:]})",
                yours={"finished": [], "temporary": killed["temporary"]},
                expected=f"checkpoints of steps {stage3_config(ctx)['save_every']}, ...",
                hint="save every save_every steps; a save that returned may still be "
                "running, but the next save waits for it")
    restored = max(killed["finalized"])
    resumed = resumed_run(killed, restored, "after the SIGKILL")
    check_resumed(resumed, restored, "after the SIGKILL", saved_step(killed, restored),
                  on_step_shift(killed["full"]))
    compare_trees(resumed["final"], killed["full"]["final"],
                  f"SIGKILLed, resumed in a fresh process from step {restored}, vs never "
                  "interrupted (same mesh)", bitwise=True,
                  hint=resumed_apart(resumed, killed["full"], "same mesh, same inputs, "
                                     "same order gives the same bits: restore the "
                                     "optimizer state and params exactly as saved"))


@checker.check(3)
def kill_during_save_falls_back(impl, ctx):
    require_written(impl, "train")
    killed = killed_mid_run(ctx)
    save_at = killed["save_at"]
    fail_unless("blocked_in_save" in killed["marker"], "the run was not stopped inside a "
                "save", yours=killed["marker"], expected={"blocked_in_save": save_at})
    fail_unless(save_at not in killed["finalized"] and killed["temporary"],
                f"the save of step {save_at} was not left half-written by the kill",
                yours={"finished": killed["finalized"], "temporary": killed["temporary"]},
                expected=f"a temporary folder for step {save_at}")
    fail_unless(killed["finalized"], "no earlier finished checkpoint to fall back to",
                yours={"finished": [], "temporary": killed["temporary"]},
                expected=f"checkpoints before step {save_at}")
    restored = max(killed["finalized"])
    what = f"after a kill during the save of step {save_at}"
    resumed = resumed_run(killed, restored, what)
    check_resumed(resumed, restored, what, saved_step(killed, restored),
                  on_step_shift(killed["full"]))
    compare_trees(resumed["final"], killed["full"]["final"],
                  f"killed while saving step {save_at}, resumed from {restored}",
                  bitwise=True, hint=resumed_apart(
                      resumed, killed["full"], "the resumed run started after the newest "
                      "finished checkpoint but ended elsewhere: restore that checkpoint's "
                      "state exactly as saved (optimizer state and params included)"))


@checker.check(3)
def restore_on_other_device_count(impl, ctx):
    require_written(impl, "train")
    killed = killed_mid_run(ctx)
    full = killed["full"]
    restored = max(killed["finalized"]) if killed["finalized"] else None
    saved = saved_step(killed, restored)  # read before this run resumes in the copy
    fields_not_saved(killed, restored, "on 4 devices")
    try:
        resumed = driver_run(ctx, "D", stage3_config(ctx), killed["copy"],
                             "the run resumed on 4 devices", devices=4)
    except LearnerCodeError as err:
        # what a restore onto the checkpoint's own layout raises (Orbax: "Topology
        # mismatch ... provide a target tree"); any other error keeps its own hint
        if "topology" in str(err).lower():
            err.hint = ("the checkpoint was written by 8 devices and this run has 4: its "
                        "restore followed the checkpoint's own layout (8 devices' "
                        "shardings), which 4 devices cannot hold, where the state must "
                        "come back onto this run's mesh: the restore target carries the "
                        "shardings it is restored onto")
        raise
    fail_unless(resumed.get("device_count") == 4, "the resumed run did not see 4 devices",
                yours=resumed.get("device_count"), expected=4)
    check_resumed(resumed, restored, "on 4 devices", saved, on_step_shift(full))
    compare_trees(resumed["final"], full["final"], "resumed on 4 devices vs 8 devices",
                  hint=resumed_apart(resumed, full, "the resumed run continued from the "
                                     "right step and data position but ended elsewhere: "
                                     "restore every field as saved, onto the shardings of "
                                     "a state made on this run's mesh"))


@checker.check(3)
def distributed_timeouts_set(impl, ctx):
    require_written(impl, "initialize_distributed")  # before two processes start
    result = two_processes(ctx)
    kwargs = [r.get("init_kwargs") for r in result["reports"]]
    if not any(kwargs):
        failure = two_process_failure(result)
        if failure:
            raise failure
        raise CheckFailed("initialize_distributed did not call jax.distributed.initialize",
                          hint="initialize_distributed must start JAX's distributed runtime "
                          "with the coordinator, process count and id it is given")
    for i, kw in enumerate(kwargs):
        if kw is None:
            failure = two_process_failure(result)
            raise CheckFailed(f"process {i} never reached jax.distributed.initialize",
                              yours=procgroup.describe(result["procs"], result["limit"]),
                              expected="both processes call initialize_distributed first",
                              hint=str(failure) if failure else "")
        for name in DISTRIBUTED_TIMEOUTS:
            value = kw.get(name)
            fail_unless(type(value) in (int, float) and value == result["timeout_s"],
                        f"process {i}: {name} is not the timeout_s it was given",
                        yours=value, expected=f"{result['timeout_s']} (timeout_s)",
                        hint=timeout_hint(name, value, result["timeout_s"]))


# jax.distributed.initialize's three timeouts (seconds), and their defaults
DISTRIBUTED_TIMEOUTS = {"initialization_timeout": 300, "heartbeat_timeout_seconds": 100,
                        "shutdown_timeout_seconds": 300}


def timeout_hint(name: str, value, given: int) -> str:
    """What a timeout other than the one given is, by its value."""
    if value is None or value == DISTRIBUTED_TIMEOUTS[name]:
        return (f"{name} was left at its default ({DISTRIBUTED_TIMEOUTS[name]} s): the "
                "defaults (300 s, 100 s, 300 s) turn one crashed process into minutes of "
                "every process hanging; set all three to timeout_s")
    if type(value) in (int, float) and value == 1000 * given:
        return (f"yours is 1000x the timeout_s given ({given}): jax.distributed's timeouts "
                "are in seconds, not milliseconds")
    return (f"yours is not the timeout_s given to initialize_distributed ({given} this "
            "run): each of the three timeouts is set to timeout_s, not a number of its own")


@checker.check(3)
def two_processes_match_one(impl, ctx):
    require_written(impl, "train")
    result = two_processes(ctx)
    failure = two_process_failure(result)
    if failure:
        raise failure
    full = uninterrupted(ctx)
    counts = [(r.get("process_count"), r.get("device_count")) for r in result["reports"]]
    fail_unless(all(c == (2, N_DEVICES) for c in counts), "each process must see 2 "
                f"processes and {N_DEVICES} devices in all", yours=counts,
                expected=[(2, N_DEVICES)] * 2)
    a, b = result["finals"]
    compare_trees(a, b, "process 0 vs process 1 final state", bitwise=True,
                  hint="both processes hold the same replicated state")
    compare_trees(a, full["final"], "2 processes x 4 devices vs 1 process x 8 devices",
                  hint="each process places only its own devices' rows of the same "
                  "global batch, on a mesh over every process's devices")
