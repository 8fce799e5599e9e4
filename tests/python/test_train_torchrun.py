"""tools/train.py under `torchrun --nproc_per_node 2` on the CPU (gloo): two ranks of a tiny model train a
few steps with DistributedDataParallel, rank 0 alone prints, and the loss it prints is the mean over the
ranks.

Skipped without PyTorch (ctest reports it skipped)."""

import math
import os
import re
import signal
import subprocess
import sys

import pytest

pytest.importorskip("torch", reason="fp4sim.torch tests need PyTorch (not installed)")

TRAIN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "train.py")
TINY = ["--width", "64", "--layers", "1", "--heads", "1", "--ffn", "128", "--seq", "64", "--batch", "1",
        "--steps", "3", "--every", "1", "--device", "cpu", "--recipe", "ue5m3"]


def test_train_py_under_torchrun_on_two_cpu_ranks(tmp_path):
    # --standalone: a rendezvous on a free local port. A session of its own, so that a hang takes the ranks
    # down with torchrun.
    import fp4sim  # the ranks import the package this test imports
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.dirname(os.path.dirname(fp4sim.__file__)),
                                                       os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node",
                             "2", TRAIN, *TINY], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=env, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"torchrun hung:\n{out}{err}")
    assert proc.returncode == 0, out + err
    assert "1x64 tokens per step on each of 2 ranks" in out, out
    losses = [float(m) for m in re.findall(r"^step +\d+ +loss ([0-9.]+)", out, re.M)]
    assert len(losses) == 3 and all(math.isfinite(v) and 0 < v < 10 for v in losses), out  # rank 0 alone
