"""pyproject.toml and environment.yml must pin the same packages to the same versions,
and every installed package must be the pinned version."""

import re
import tomllib
from importlib.metadata import PackageNotFoundError, version

from coursekit.facts import ROOT  # noqa: E402


def pyproject_pins() -> dict[str, str]:
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    pins = {}
    for dep in deps:
        name, _, ver = dep.partition("==")
        assert ver, f"pyproject dependency {dep!r} is not pinned with =="
        pins[name.strip().lower()] = ver.strip()
    return pins


def environment_pins() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "environment.yml").read_text().splitlines():
        match = re.match(r"^\s*-\s*([A-Za-z0-9_.\-\[\]]+)==([^\s#]+)", line)
        if match:
            pins[match[1].lower()] = match[2]
    return pins


def test_environment_yml_matches_pyproject():
    assert environment_pins() == pyproject_pins()


def test_environment_python_matches_requires_python():
    text = (ROOT / "environment.yml").read_text()
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    assert requires == ">=3.12" and re.search(r"-\s*python=3\.12\b", text)


def test_installed_versions_are_the_pinned_ones():
    wrong = {}
    for name, pinned in pyproject_pins().items():
        try:
            installed = version(name)
        except PackageNotFoundError:
            installed = None
        if installed != pinned:
            wrong[name] = (pinned, installed)
    assert not wrong, f"installed versions differ from the pins (pinned, installed): {wrong}"
