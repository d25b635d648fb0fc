"""Notebook 03 times its workloads with the learner's own ``time_fn``
(``coursekit.notebook.timed_by_yours``): the figure is the learner's record's median, the
faults per call are counted around the learner's call (a fresh 48 MiB output pays a fault
per page on every call, the same op written in place none), a donating function can be
timed again and again, a record without its samples is named, and a starter's
``NotImplementedError`` reaches the notebook's "not yet" guard."""

from __future__ import annotations

import statistics

import jax
import jax.numpy as jnp
import pytest

from coursekit.checking.learner import load_impl
from coursekit.facts import ROOT
from coursekit.measure.bandwidth import PAGE
from coursekit.notebook.timed_by_yours import threaded, timed_by_yours

PROJECT = ROOT / "projects" / "performance-audit"
NBYTES = 48 * 2**20  # above glibc's largest mmap threshold (32 MiB): fresh pages each call


@pytest.fixture(scope="module")
def solution():
    return load_impl(PROJECT / "solution" / "model.py")


def test_the_figure_is_your_records_median(solution):
    x = jnp.ones((256, 256), jnp.float32)
    timed = timed_by_yours(solution.time_fn, jax.jit(lambda a: a @ a), (x,), 3)
    assert timed["median_s"] == statistics.median(timed["record"]["samples_s"]) > 0
    assert timed["calls"] == 1 + 1 + 3 and timed["record"]["iters"] == 3


def test_a_fresh_output_pays_its_pages_and_in_place_pays_none(solution):
    n = NBYTES // 4
    fresh = timed_by_yours(solution.time_fn, jax.jit(lambda v: v * 2.0 + 1.0),
                           (jnp.ones((n,), jnp.float32),), 3)
    pages = NBYTES // PAGE
    assert 0.9 * pages <= fresh["faults_per_call"] <= 1.2 * pages, fresh["faults"]
    axpy = jax.jit(lambda a, b: a + 2.0 * b, donate_argnums=0)
    a, b = jnp.ones((n,), jnp.float32), jnp.ones((n,), jnp.float32)
    in_place = timed_by_yours(solution.time_fn, threaded(axpy, a), (b,), 3)
    assert in_place["faults_per_call"] < 0.01 * pages, in_place["faults"]
    assert a.is_deleted()  # it did donate: each call was given the previous output


def test_a_record_without_its_samples_is_named():
    def short(fn, *args, warmup, iters):
        jax.block_until_ready(fn(*args))
        return {"samples_s": [0.1]}
    with pytest.raises(ValueError, match="1 samples_s for iters=3"):
        timed_by_yours(short, jax.jit(lambda v: v + 1), (jnp.ones(4),), 3)


def test_a_starter_says_not_yet():
    starter = load_impl(PROJECT / "starter" / "model.py")
    with pytest.raises(NotImplementedError, match="stage 1: time_fn"):
        timed_by_yours(starter.time_fn, jax.jit(lambda v: v + 1), (jnp.ones(4),), 3)
