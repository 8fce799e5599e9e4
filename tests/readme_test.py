"""README.md's examples, run as written.

Every ```console block's `$ ` commands (with their backslash-continued lines) run with bash, in README order,
in one scratch directory that holds links to the repository's traces/ and tools/ and no other file, with the built
fp4sim first on PATH. Each command's standard output must equal the lines the README shows under it, up
to the next `$ ` line; a line holding only `...` stands for any number of lines (the README's marked
elisions), and whitespace at line ends is ignored (Markdown does not show it). A command must exit 0, or
with the N of a trailing `# exits N` comment. A ```python block must run without error with the built
module (skipped, saying so, when the module was not built), unless its fence names a file
(```` ```python file=NAME ````): that block is a file the README's later commands use, written to NAME. A
fence's `requires=A,B` names the packages the block imports besides fp4sim and numpy (PyTorch, pandas); where
one is not installed, the block is skipped, saying which.

The binary is $FP4SIM_BINARY, the module's directory $FP4SIM_PYTHON_DIR (ctest sets both); without the
binary the console blocks are skipped, and the Python blocks run with whatever fp4sim Python imports (an
installed wheel: tools/build_wheel.sh).
"""

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FP4SIM = os.environ.get("FP4SIM_BINARY")
PYTHON_DIR = os.environ.get("FP4SIM_PYTHON_DIR", "")

HAVE_BINARY = bool(FP4SIM) and os.path.exists(FP4SIM)


def readme_blocks(text):
    """(language, section heading, body, file name or None, required packages) of every ```console and ```python
    block, in order."""
    blocks, heading = [], "README"
    fence = re.compile(r"^```(\w*)([^\n]*)\n(.*?)^```$", re.S | re.M)
    pos = 0
    for m in fence.finditer(text):
        for h in re.findall(r"^#+ (.+)$", text[pos:m.start()], re.M):
            heading = h
        pos = m.end()
        if m.group(1) in ("console", "python"):
            file = re.search(r"\bfile=(\S+)", m.group(2))
            requires = re.search(r"\brequires=(\S+)", m.group(2))
            blocks.append((m.group(1), heading, m.group(3), file.group(1) if file else None,
                           requires.group(1).split(",") if requires else []))
    return blocks


def console_commands(body):
    """(command, expected output lines) pairs of one console block."""
    commands, lines, i = [], body.splitlines(), 0
    while i < len(lines):
        assert lines[i].startswith("$ "), "console block line outside a command's output: %r" % lines[i]
        command = [lines[i][2:]]
        while command[-1].endswith("\\"):
            i += 1
            command.append(lines[i])
        i += 1
        expected = []
        while i < len(lines) and not lines[i].startswith("$ "):
            expected.append(lines[i])
            i += 1
        commands.append(("\n".join(command), expected))
    return commands


def matches(expected, actual):
    """Whether the actual lines are the expected ones, a `...` line standing for any number of lines."""
    pattern = "".join(r"(?:[^\n]*\n)*?" if line.strip() == "..." else re.escape(line.rstrip()) + r"\n"
                      for line in expected)
    text = "".join(line.rstrip() + "\n" for line in actual)
    return re.fullmatch(pattern, text) is not None


BLOCKS = readme_blocks((ROOT / "README.md").read_text())


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    d = tmp_path_factory.mktemp("readme")
    for folder in ("traces", "tools"):
        (d / folder).symlink_to(ROOT / folder)
    return d


def test_readme_has_examples():
    kinds = [b[0] for b in BLOCKS]
    assert kinds.count("console") >= 12 and "python" in kinds


def test_elision_matching():
    assert matches(["a", "...", "d"], ["a", "b", "c", "d"])
    assert matches(["a", "...", "d"], ["a", "d"])
    assert matches(["a  ", "b"], ["a", "b   "])
    assert not matches(["a", "...", "d"], ["a", "b", "c"])
    assert not matches(["a", "b"], ["a", "b", "c"])
    assert not matches(["a", "b"], ["a", "x"])


@pytest.mark.parametrize("index", range(len(BLOCKS)),
                         ids=["%d-%s-%s" % (i, b[0], re.sub(r"\W+", "_", b[1]).strip("_"))
                              for i, b in enumerate(BLOCKS)])
def test_readme_example(index, workdir):
    language, heading, body, file, requires = BLOCKS[index]
    if file is not None:
        (workdir / file).write_text(body)
        return
    if language == "console" and not HAVE_BINARY:
        pytest.skip("FP4SIM_BINARY does not name a built fp4sim binary")
    path = [str(Path(FP4SIM).resolve().parent)] if HAVE_BINARY else []
    env = dict(os.environ, PATH=os.pathsep.join(path + [os.environ["PATH"]]), PYTHONDONTWRITEBYTECODE="1")
    if language == "python":
        missing = [name for name in requires if importlib.util.find_spec(name) is None]
        if missing:
            pytest.skip("this block needs %s, not installed" % ", ".join(missing))
        env["PYTHONPATH"] = PYTHON_DIR
        probe = subprocess.run([sys.executable, "-c", "import fp4sim"], env=env, capture_output=True, cwd=workdir)
        if probe.returncode != 0:
            pytest.skip("the fp4sim Python module was not built (%s)" % probe.stderr.decode().strip().splitlines()[-1])
        r = subprocess.run([sys.executable, "-c", body], env=env, capture_output=True, text=True, cwd=workdir,
                           timeout=600)
        assert r.returncode == 0, "%s: python block failed:\n%s" % (heading, r.stderr)
        return
    for command, expected in console_commands(body):
        status = re.search(r"#.*\bexits (\d+)\s*$", command)
        r = subprocess.run(["bash", "-c", command], env=env, capture_output=True, text=True, cwd=workdir,
                           timeout=600)
        assert r.returncode == (int(status.group(1)) if status else 0), (
            "%s: `%s` exited %d:\n%s" % (heading, command, r.returncode, r.stderr))
        actual = r.stdout.splitlines()
        assert matches(expected, actual), "%s: `%s` printed\n%s\nwhere the README shows\n%s\n(stderr: %s)" % (
            heading, command, "\n".join(actual), "\n".join(expected), r.stderr)
