"""The third-party versions the tests were written against, read from requirements.txt (one home for the
pins), and a guard for assertions that document a third-party library's own behaviour.

Such an assertion holds for the pinned version. With exactly that version a failure fails the test, as
any other; with another version installed the test is skipped with a message naming both versions and
what differs, so a user with other packages learns what changed upstream instead of seeing fp4sim fail.
"""

import contextlib
import pathlib
from importlib import metadata

import pytest

REQUIREMENTS = pathlib.Path(__file__).resolve().parent.parent / "requirements.txt"


def pinned_version(package):
    for line in REQUIREMENTS.read_text().splitlines():
        requirement = line.split("#", 1)[0].strip()
        if requirement and requirement.split("==")[0].lower() == package.lower():
            return requirement.split("==")[1]
    raise LookupError(f"{package} is not pinned in {REQUIREMENTS}")


@contextlib.contextmanager
def upstream_behaviour(package, what):
    """Runs the block's assertions about `package`'s behaviour `what` (e.g. "D4: e8m0 ties")."""
    pinned, installed = pinned_version(package), metadata.version(package)
    try:
        yield
    except AssertionError as error:
        if installed == pinned:
            raise
        pytest.skip(f"{what} is documented for {package}=={pinned}; the installed {package} {installed} "
                    f"behaves otherwise here: {error}")
