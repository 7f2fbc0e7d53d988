"""The CI recipes of docs/ci.md run as written: every ``headroom`` command, read from the page.

For each recipe (the GitHub Actions workflow, the GitLab CI job and the
plain-shell script) the fenced YAML (or sh) block under its heading is parsed, the shell of its steps
(``run:``) or its ``script:`` items is joined at line continuations, and
every command that starts with ``headroom`` is run by bash, in order, in an
empty folder, with the recipe's variables pointing at three real nginx
servers on loopback: two copies of a baseline (proxy with upstream
keep-alive) and a candidate without it (about 2x the proxy's CPU per
request, a real regression).  Only the recipe's ramp length is shortened
(``--step-duration 1s --concurrency 1:7:3``), and the GitHub and GitLab
recipes' ramps, word for word the plain-shell recipe's, are recorded once (by the shell recipe) and
copied: their compare and gating report run as written.

Checked independently of the code under test: every ramp writes the folders
the later commands read (``--noise-from`` patterns match what the recipe
wrote, by Python's glob); compare exits 0, 1 or 3 and writes its JSON; the
gating report exits with the exit code compare's JSON gives, writes the HTML,
and its page states that verdict and exit code; a 2x CPU regression is never
passed.  Skipped without nginx or hey, failed under HEADROOM_REQUIRE_TOOLS=1.
"""

from __future__ import annotations

import glob
import html
import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import ROOT, need_tool

DOC = ROOT / "docs" / "ci.md"
SHORT = {"--step-duration": "1s", "--concurrency": "1:7:3"}


def recipe_block(heading: str) -> dict:
    """The YAML of the first fenced ``yaml`` block under ``## heading`` in docs/ci.md."""
    text = DOC.read_text()
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    section = text[start : end if end > 0 else len(text)]
    m = re.search(r"```yaml\n(.*?)```", section, re.S)
    assert m, f"docs/ci.md: no yaml block under '## {heading}'"
    return yaml.safe_load(m.group(1))


def shell_lines(script: str) -> list[str]:
    """The logical lines of a shell text: continuation lines (ending in a backslash) joined."""
    out, cur = [], ""
    for line in script.splitlines():
        if line.rstrip().endswith("\\"):
            cur += line.rstrip()[:-1] + " "
            continue
        out.append((cur + line).strip())
        cur = ""
    return [ln for ln in out if ln]


def headroom_commands(shell: list[str]) -> list[str]:
    return [ln for ln in shell if ln.startswith("headroom ")]


def github_commands() -> tuple[list[str], dict]:
    doc = recipe_block("GitHub Actions")
    job = next(iter(doc["jobs"].values()))
    shell = [ln for step in job["steps"] if "run" in step for ln in shell_lines(step["run"])]
    return headroom_commands(shell), dict(job.get("env", {}))


def gitlab_commands() -> tuple[list[str], dict]:
    doc = recipe_block("GitLab CI")
    job = next(iter(doc.values()))
    shell = [ln for item in job["script"] for ln in shell_lines(item)]
    return headroom_commands(shell), dict(job.get("variables", {}))


def shell_commands() -> tuple[list[str], dict]:
    """The plain-shell recipe: the first fenced ``sh`` block under its heading."""
    text = DOC.read_text()
    start = text.index("\n## Any other CI (plain shell)\n")
    end = text.find("\n## ", start + 1)
    m = re.search(r"```sh\n(.*?)```", text[start : end if end > 0 else len(text)], re.S)
    assert m, "docs/ci.md: no sh block under '## Any other CI (plain shell)'"
    cmds = [re.sub(r"\s*\|\| exit 2$", "", c) for c in headroom_commands(shell_lines(m.group(1)))]
    return cmds, {}


def shortened(cmd: str) -> str:
    """The command with the ramp's steps and levels replaced by SHORT (nothing else changes)."""
    for flag, value in SHORT.items():
        cmd = re.sub(rf"{flag}\s+\S+", f"{flag} {value}", cmd)
    return cmd


def test_the_recipes_are_found_and_use_the_deciding_design():
    """The page's text holds both recipes; each records interleaved steps and gates on the verdict."""
    for commands, _ in (github_commands(), gitlab_commands(), shell_commands()):
        ramps = [c for c in commands if c.startswith("headroom ramp ")]
        assert ramps and all("--interleave steps" in c for c in ramps), ramps
        gates = [c for c in commands if c.startswith("headroom report ") and "--exit-code" in c]
        assert len(gates) == 1, commands
        assert any(c.startswith("headroom compare ") and "--json" in c for c in commands)
        # compare and the gating report are given the same runs and options
        cmp = next(c for c in commands if c.startswith("headroom compare "))
        for flag in ("--noise-from", "--objective", "--threshold"):
            assert _after(cmp, flag) == _after(gates[0], flag), flag


def _after(cmd: str, flag: str) -> list[str]:
    """The words that follow ``flag`` up to the next option."""
    words = shlex.split(cmd)
    if flag not in words:
        return []
    out = []
    for w in words[words.index(flag) + 1 :]:
        if w.startswith("--") or w == "-o":
            break
        out.append(w)
    return out


@pytest.fixture(scope="module")
def servers():
    """Three nginx pairs (proxy in front of a backend): baseline, a copy of it, and the candidate."""
    need_tool("nginx")
    need_tool("hey")
    sys.path.insert(0, str(ROOT / "scripts"))
    import record_calibration as rc

    work = Path(__import__("tempfile").mkdtemp(prefix="headroom-ci-recipe-"))
    started = []
    try:
        for variant in ("keepalive", "keepalive", "no-keepalive"):
            started.append(rc.Pair(variant, work).start())
        yield dict(zip(("BASELINE", "BASELINE2", "CANDIDATE"), started))
    finally:
        for pair in started:
            pair.stop()
        shutil.rmtree(work, ignore_errors=True)


def _env(servers, variables: dict) -> dict:
    import os

    env = {**os.environ, **{k: str(v) for k, v in variables.items()}}
    for name, pair in servers.items():
        env[f"{name}_URL"] = pair.url
        env[f"{name}_PID"] = ",".join(map(str, pair.pids))  # every process of that side's server
    env["GITHUB_REF_NAME"] = env["CI_COMMIT_REF_NAME"] = "recipe-test"
    return env


def _same(cmd: str) -> str:
    """A command with its whitespace normalised (the recipes indent continuation lines differently)."""
    return " ".join(shlex.split(cmd))


def run_recipe(
    commands: list[str], variables: dict, servers, work: Path, recorded: Path | None = None
) -> list[tuple[str, int, str]]:
    """Each command through bash in ``work``, ``headroom`` being this checkout's; (command, exit, stderr).
    ``recorded``: the folder where the plain-shell recipe ran; a ramp command word for word the shell
    recipe's is not recorded again, its folders are copied from there (the ramps are most of a recipe's
    minute, and the same command records the same design)."""
    env = _env(servers, variables)
    shell_ramps = {_same(shortened(c)) for c in shell_commands()[0] if c.startswith("headroom ramp ")}
    done = []
    for cmd in commands:
        cmd = shortened(cmd).removesuffix("|| true").strip()
        if recorded is not None and cmd.startswith("headroom ramp ") and _same(cmd) in shell_ramps:
            folder = _after(cmd, "-o")[0]
            shutil.copytree(recorded / folder, work / folder)
            done.append((cmd, 0, ""))
            continue
        script = f'headroom() {{ "{sys.executable}" -m headroom "$@"; }}\n{cmd}\n'
        p = subprocess.run(
            ["bash", "-c", script], cwd=work, env=env, capture_output=True, text=True, timeout=600
        )
        done.append((cmd, p.returncode, p.stderr))
        if cmd.startswith("headroom ramp "):
            assert p.returncode == 0, (cmd, p.stderr[-3000:])
            out = Path(work) / _after(cmd, "-o")[0]
            assert (out / "a-01" / "metadata.yml").is_file() and (out / "b-01" / "metadata.yml").is_file()
        for pattern in _after(cmd, "--noise-from"):  # the folders the recipe wrote, by Python's glob
            assert glob.glob(str(work / pattern)), f"{pattern}: nothing the recipe wrote matches it"
    return done


def _stated(page: str) -> tuple[str, int]:
    """The verdict and exit code the report's opening sentences state."""
    text = html.unescape(re.sub(r"<[^>]+>", " ", page))
    m = re.search(r"\b(REGRESSED|IMPROVED|NO CHANGE|NO REGRESSION|INCONCLUSIVE) \(exit (\d)\)", text)
    assert m, "the report states no verdict"
    return m.group(1).lower(), int(m.group(2))


@pytest.fixture(scope="module")
def shell_run(servers, tmp_path_factory):
    """The plain-shell recipe, every command run (its ramps are reused by the other two recipes)."""
    work = tmp_path_factory.mktemp("shell-recipe")
    commands, variables = shell_commands()
    return work, run_recipe(commands, variables, servers, work)


@pytest.mark.parametrize("recipe", ["shell", "github", "gitlab"])
def test_the_recipe_runs_as_written(recipe, servers, shell_run, tmp_path):
    if recipe == "shell":
        tmp_path, done = shell_run
    else:
        commands, variables = {"github": github_commands, "gitlab": gitlab_commands}[recipe]()
        done = run_recipe(commands, variables, servers, tmp_path, recorded=shell_run[0])
    assert (tmp_path / "verdict.json").is_file(), [(c[:60], code, err[-600:]) for c, code, err in done]
    verdict = json.loads((tmp_path / "verdict.json").read_text())
    for cmd, code, err in done:
        if cmd.startswith("headroom compare "):
            assert code in (0, 1, 3) and code == verdict["exit_code"], (cmd, code, err[-2000:])
        if cmd.startswith("headroom report "):
            out = tmp_path / _after(cmd, "-o")[0]
            assert out.is_file(), err[-2000:]
            # the gate: the report's exit code and its page say what compare says for the same runs
            assert code == verdict["exit_code"], (code, verdict["verdict"], err[-2000:])
            assert _stated(out.read_text()) == (verdict["verdict"], verdict["exit_code"])
            assert f"headroom: verdict: {verdict['verdict'].upper()} (exit {code})" in err
    # the candidate costs about twice the baseline's CPU per request: never passed
    assert verdict["verdict"] in ("regressed", "inconclusive"), verdict["reason"]
    assert verdict["settings"]["design"] == "interleaved steps"
