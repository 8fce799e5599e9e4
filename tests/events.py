"""Waiting for another process by events, never by sleeping or polling against a clock.

The signal tests need fp4sim to be at a known point (its plot child running, the outputs' temporaries in
place) before they send a signal. The plot child fp4sim starts is a stand-in (FP4SIM_PLOT_SCRIPT) that
announces itself through a FIFO; the test blocks until that line arrives or fp4sim ends, whichever comes
first, however slowly a loaded machine schedules either process. A hang is bounded by ctest's TIMEOUT.
"""

import os
import selectors
import subprocess
from pathlib import Path

# The plot stand-in: writes "<its pid> <its parent's pid>" into the FIFO, then works "forever" (10 minutes),
# until fp4sim stops it. Its parent is the process that draws the plots (rank 0 under mpirun).
PLOT_STAND_IN = """
import os, time
with open(os.environ["FP4SIM_TEST_FIFO"], "w") as fifo:
    fifo.write(f"{os.getpid()} {os.getppid()}\\n")
time.sleep(600)
"""


class PlotStandIn:
    """The stand-in plot script and its FIFO under `directory`; `env` runs fp4sim with them."""

    def __init__(self, directory: Path):
        self.script = directory / "plot_stand_in.py"
        self.script.write_text(PLOT_STAND_IN)
        self.fifo = directory / "plot.fifo"
        os.mkfifo(self.fifo)
        # Opened before fp4sim starts, so the stand-in's open for writing never blocks; non-blocking, so
        # this open returns at once. Until a writer has opened it, Linux reports no event on it.
        self._reader = os.open(self.fifo, os.O_RDONLY | os.O_NONBLOCK)

    def env(self, base: dict) -> dict:
        return dict(base, FP4SIM_PLOT_SCRIPT=str(self.script), FP4SIM_TEST_FIFO=str(self.fifo))

    def wait_started(self, process: subprocess.Popen) -> tuple:
        """(the stand-in's pid, its parent's pid) once it runs; fails if `process` ends first."""
        line = b""
        pidfd = os.pidfd_open(process.pid)
        with selectors.DefaultSelector() as selector:
            selector.register(self._reader, selectors.EVENT_READ)
            selector.register(pidfd, selectors.EVENT_READ)
            try:
                while not line.endswith(b"\n"):
                    ready = {key.fd for key, _ in selector.select()}
                    if self._reader in ready:
                        chunk = os.read(self._reader, 64)
                        if not chunk:
                            raise AssertionError(f"the plot stand-in closed its FIFO after {line!r}")
                        line += chunk
                    elif pidfd in ready:
                        out, err = process.communicate()
                        raise AssertionError(f"fp4sim ended (exit {process.returncode}) before its plot child "
                                             f"started: {err!r}")
            finally:
                os.close(pidfd)
                os.close(self._reader)
        pid, parent = line.split()
        return int(pid), int(parent)
