"""Planted bugs by the batch: every planted file of a project checked by one checker
process (``coursekit.checking.planted``), each in its own learner process, so a test file
can afford three planted bugs per learner-facing function.

    BATCH = PlantedBatch("performance-audit", PLANTED)   # {name: (stage, check_id, repl)}
    @pytest.fixture(scope="module")
    def planted(tmp_path_factory): return BATCH.run(tmp_path_factory.mktemp("planted"))
    @pytest.mark.parametrize("bug", BATCH.names)
    def test_planted(bug, planted): BATCH.assert_fails_only(bug, planted)
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from helpers import plant

from coursekit.facts import ROOT


class PlantedBatch:
    def __init__(self, project: str, planted: dict, seed: int = 20261201):
        self.project, self.planted, self.seed = project, planted, seed
        self.names = sorted(planted)

    def run(self, folder: Path, timeout: float = 1800) -> dict:
        runs = []
        for name in self.names:
            stage, check_id, replacements = self.planted[name][:3]
            impl = plant(folder, self.project, name, replacements)
            runs.append({"name": name, "impl": str(impl), "stage": stage,
                         "only": [check_id]})
        spec, out = folder / "spec.json", folder / "out.json"
        spec.write_text(json.dumps({"project": self.project, "seed": self.seed,
                                    "runs": runs}))
        done = subprocess.run([sys.executable, "-m", "coursekit.checking.planted", str(spec),
                               str(out)], capture_output=True, text=True, timeout=timeout,
                              cwd=ROOT)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        return json.loads(out.read_text())

    def assert_fails_only(self, name: str, results: dict) -> None:
        """The check the bug is aimed at fails (by verdict, not by a crash of the checker),
        and its FAIL line is printed."""
        stage, check_id = self.planted[name][:2]
        got = results[name]
        assert got["status"] == {check_id: "fail"}, (got["status"], got["stdout"])
        assert f"FAIL stage {stage} · {check_id}" in got["stdout"]
