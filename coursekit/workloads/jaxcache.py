"""A persistent compilation cache shared by the processes of one check or experiment.

Restart experiments start many fresh processes that compile the same programs; on a
loaded 2-core machine each compile costs seconds. With a cache folder every process
after the first loads the compiled executables instead (what that saves a training
process: docs/checkers/sharded-training.md, "Cost"). By default JAX caches only compiles
longer than 1 s; here every compile is cached.

    env = enable_compilation_cache(folder)   # this process, from now on
    subprocess.run(cmd, env={**os.environ, **env})   # and the children

The cache key covers the program, the devices and the compiler flags, so a hit runs the
same executable a fresh compile would build: bitwise results do not change.
"""

from __future__ import annotations

import os
from pathlib import Path

ENV = {
    "JAX_COMPILATION_CACHE_DIR": None,  # filled in with the folder
    "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
    "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "0",
}


def cache_env(directory: str | Path) -> dict:
    """Environment variables that make a child process use ``directory``."""
    env = dict(ENV)
    env["JAX_COMPILATION_CACHE_DIR"] = str(Path(directory).resolve())
    return env


def enable_compilation_cache(directory: str | Path) -> dict:
    """Use ``directory`` as this process's compilation cache (works after jax is
    imported, before or after backends start) and return ``cache_env(directory)``."""
    import jax

    directory = Path(directory).resolve()
    directory.mkdir(parents=True, exist_ok=True)
    jax.config.update("jax_compilation_cache_dir", str(directory))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    env = cache_env(directory)
    os.environ.update(env)  # children started without an explicit env inherit it
    return env
