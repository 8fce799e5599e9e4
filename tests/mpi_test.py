"""`mpirun -np N fp4sim replay|sweep` (docs/replay.md "Many processes") against one process.

The outputs of 2 and 3 ranks (oversubscribed on small machines) equal one process's byte for byte: CSV and
HDF5 whole, JSON but for the run metadata ("seconds", "shares"); on traces/trace_a.h5 and on generated
traces with fewer layers than ranks and more. Bad data in any rank's share fails the run with one
process's message and exit code and writes nothing; a rank killed mid-run ends the run with an error
within a time limit, not a hang; SIGTERM while rank 0 writes the outputs (to mpirun or to every rank)
stops the plot child and leaves neither temporaries nor partial outputs.

Needs FP4SIM_BINARY and FP4SIM_MPIEXEC (CMake sets both; FP4SIM_MPIEXEC is empty when fp4sim was built
without MPI, and every test here is skipped). OpenMPI refuses to run as root without
OMPI_ALLOW_RUN_AS_ROOT(_CONFIRM), which CI needs; this file sets them for the runs it starts.
"""

import os
import re
import signal
import subprocess
from pathlib import Path

import h5py
import numpy as np
import pytest

from events import PlotStandIn

BINARY = os.environ.get("FP4SIM_BINARY", "fp4sim")
MPIEXEC = os.environ.get("FP4SIM_MPIEXEC", "")
TRACE_A = Path(__file__).resolve().parent.parent / "traces" / "trace_a.h5"

pytestmark = pytest.mark.skipif(not MPIEXEC, reason="fp4sim was built without MPI")

# Ranks share the machine's cores: one OpenMP thread each; more ranks than cores are allowed. mpirun stops
# its ranks with SIGCONT, then SIGTERM, then SIGKILL, odls_base_sigkill_timeout seconds apart (default 1),
# which a loaded machine can spend before a rank is scheduled at all: the tests give the ranks 10 s for
# their clean-up (docs/replay.md "Interrupts" says so for users). Each mpirun-ended run takes 2 x 10 s.
ENV = dict(os.environ, OMP_NUM_THREADS="1", OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_rmaps_base_oversubscribe="1", OMPI_MCA_odls_base_sigkill_timeout="10")
TIMEOUT = 600

RUN_METADATA = re.compile(rb'"seconds":[^,]*,"shares":([0-9]+),')


def fp4sim(ranks, *args, cwd=None):
    """fp4sim ARGS on `ranks` MPI processes (0: a plain process, no mpirun)."""
    command = [BINARY, *map(str, args)]
    if ranks:
        command = [MPIEXEC, "-np", str(ranks), *command]
    return subprocess.run(command, capture_output=True, env=ENV, timeout=TIMEOUT, cwd=cwd)


def outputs(tmp_path, ranks, *args, kinds=("json", "csv", "h5")):
    """Runs fp4sim ARGS on `ranks` ranks writing each output kind; returns {kind: bytes}."""
    out = tmp_path / f"np{ranks}"
    out.mkdir()
    paths = {kind: out / f"result.{kind}" for kind in kinds}
    args = [*args, "-q"]
    for kind, path in paths.items():
        args += [f"--{kind}", path]
    r = fp4sim(ranks, *args)
    assert r.returncode == 0, (ranks, r.returncode, r.stderr.decode())
    # replay writes one CSV per kind of entry (result_tensors.csv, ...), sweep the one named.
    read = {kind: path.read_bytes() for kind, path in paths.items() if kind != "csv"}
    if "csv" in paths:
        tables = sorted(out.glob("result*.csv"))
        assert tables, list(out.iterdir())
        read["csv"] = b"".join(t.name.encode() + b"\n" + t.read_bytes() for t in tables)
    return read


def assert_same_as_one_process(tmp_path, *args, kinds=("json", "csv", "h5")):
    one = outputs(tmp_path, 0, *args, kinds=kinds)
    assert RUN_METADATA.search(one["json"]).group(1) == b"1"
    for ranks in (2, 3):
        many = outputs(tmp_path, ranks, *args, kinds=kinds)
        assert RUN_METADATA.search(many["json"]).group(1) == str(ranks).encode()
        # The run metadata is the only difference: the JSON without it is byte for byte one process's.
        assert RUN_METADATA.sub(b"", many["json"]) == RUN_METADATA.sub(b"", one["json"]), ranks
        for kind in kinds:
            if kind != "json":
                assert many[kind] == one[kind], (ranks, kind)


def write_trace(path, layers, steps=(1, 2, 3), tokens=48, width=64, seed=0):
    """A trace of `layers` linears (in = out = width, except every third layer has 2x out) over `steps`,
    gzip-chunked like captured traces, amaxes moving between steps."""
    rng = np.random.default_rng(seed)
    with h5py.File(path, "w") as f:
        f.attrs["schema"] = "fp4-trace"
        f.attrs["schema_version"] = np.int64(1)
        for step in steps:
            g = f.create_group(f"step_{step:06d}")
            g.attrs["step"] = np.int64(step)
            for i in range(layers):
                out = width * (2 if i % 3 == 2 else 1)
                layer = g.create_group(f"model.layers.{i}.proj")
                gain = 1.0 + 0.5 * step + 0.1 * i
                for name, shape, scale in (("x", (tokens, width), gain), ("w", (out, width), 0.02),
                                           ("dy", (tokens, out), 1e-5 * gain)):
                    data = (rng.standard_normal(shape) * scale).astype("<f4")
                    layer.create_dataset(name, data=data, chunks=(8, shape[1]), compression="gzip", shuffle=True)
    return path


def corrupt(path, dataset):
    """Overwrites the middle of the first compressed chunk of `dataset`: its metadata stays valid, reading
    its data fails."""
    with h5py.File(path, "r") as f:
        info = f[dataset].id.get_chunk_info(0)
    with open(path, "r+b") as raw:
        raw.seek(info.byte_offset + info.size // 4)
        raw.write(b"\xff" * (info.size // 2))


# --- the same figures as one process ------------------------------------------------------------------


def test_replay_trace_a(tmp_path):
    assert_same_as_one_process(tmp_path, "replay", TRACE_A)


def test_sweep_trace_a(tmp_path):
    assert_same_as_one_process(tmp_path, "sweep", TRACE_A, "--blocks", "16", "--tensor-scales", "current,periodic:50",
                               kinds=("json", "csv"))


def test_sweep_synthetic(tmp_path):
    assert_same_as_one_process(tmp_path, "sweep", "--rows", 64, "--cols", 256, kinds=("json", "csv"))


@pytest.mark.parametrize("layers", [2, 7], ids=["fewer_layers_than_ranks", "more_layers_than_ranks"])
@pytest.mark.parametrize("flags", [("--datapath", "f64"), ("--no-gemms", "--hold", "previous", "--slab-mib", "0.004")],
                         ids=["layer_units", "tensor_units"])
def test_replay_generated_trace(tmp_path, layers, flags):
    trace = write_trace(tmp_path / "trace.h5", layers)
    assert_same_as_one_process(tmp_path, "replay", trace, *flags)


def test_plain_process_is_one_share(tmp_path):
    one = outputs(tmp_path, 0, "replay", TRACE_A, "--steps", "1", "--no-gemms", kinds=("json",))
    assert RUN_METADATA.search(one["json"]).group(1) == b"1"


# --- failures -----------------------------------------------------------------------------------------


def error_lines(stderr):
    return [line for line in stderr.decode().splitlines() if line.startswith("fp4sim: error:")]


def assert_fails_like_one_process(tmp_path, trace, *flags, code):
    """The run fails on 1, 2 and 3 ranks with one process's message (once) and exit code, writing nothing."""
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    args = ["replay", trace, "-q", *flags, "--json", out / "r.json", "--csv", out / "r.csv", "--h5", out / "r.h5"]
    one = fp4sim(0, *args)
    assert one.returncode == code, one.stderr.decode()
    expected = error_lines(one.stderr)
    assert len(expected) == 1, one.stderr.decode()
    for ranks in (2, 3):
        r = fp4sim(ranks, *args)
        assert r.returncode == code, (ranks, r.stderr.decode())
        assert error_lines(r.stderr) == expected, (ranks, r.stderr.decode())
        assert list(out.iterdir()) == [], ranks
    return expected[0]


@pytest.mark.parametrize("flags", [(), ("--no-gemms",)], ids=["layer_units", "tensor_units"])
def test_bad_data_in_one_share_fails_the_run(tmp_path, flags):
    trace = write_trace(tmp_path / "bad.h5", layers=5)
    corrupt(trace, "step_000002/model.layers.3.proj/dy")
    message = assert_fails_like_one_process(tmp_path, trace, "--datapath", "f64", *flags, code=3)
    assert "model.layers.3.proj/dy" in message


def test_bad_data_in_several_shares_reports_the_first_one_process_meets(tmp_path):
    trace = write_trace(tmp_path / "bad.h5", layers=6)
    # Layers 4 and 5 are one rank's and layer 0 another's, on 2 ranks and on 3 (largest first: 2 and 5 have
    # twice the columns); one process meets step 2 before step 3 and layer 4 before layer 5.
    corrupt(trace, "step_000003/model.layers.0.proj/x")
    corrupt(trace, "step_000002/model.layers.4.proj/w")
    corrupt(trace, "step_000002/model.layers.5.proj/x")
    message = assert_fails_like_one_process(tmp_path, trace, "--datapath", "f64", code=3)
    assert "step_000002/model.layers.4.proj/w" in message


def test_usage_and_metadata_errors_fail_every_rank_alike(tmp_path):
    assert_fails_like_one_process(tmp_path, TRACE_A, "--layers", "no-such-layer", code=2)
    trace = write_trace(tmp_path / "meta.h5", layers=3)
    with h5py.File(trace, "r+") as f:
        del f["step_000002/model.layers.1.proj/w"]
    assert_fails_like_one_process(tmp_path, trace, code=3)


def children(pid):
    """The ids of the processes whose parent is `pid` (from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            # pid (comm) state ppid ...: comm may hold spaces, so split after its closing parenthesis.
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def fp4sim_children(pid):
    """The fp4sim processes that `pid` (mpirun) started: its ranks."""
    return [child for child in children(pid) if Path(f"/proc/{child}/exe").resolve() == Path(BINARY).resolve()]


def test_a_killed_rank_ends_the_run_with_an_error(tmp_path):
    # The run is provably unfinished when rank 1 is killed: rank 0 waits on its plot child (a stand-in that
    # never finishes) before it commits the outputs, and rank 1, its share sent, waits for rank 0 in
    # MPI_Finalize (OpenMPI's is a fence). mpirun must end the run with an error (not hang; ctest's
    # TIMEOUT bounds it), and rank 0, stopped by mpirun, must leave nothing.
    plot = PlotStandIn(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    command = [MPIEXEC, "-np", "2", BINARY, "replay", str(TRACE_A), "-q", "--steps", "1", "--json",
               str(out / "r.json"), "--plots", str(out / "plots")]
    mpirun = subprocess.Popen(command, env=plot.env(ENV), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        plot_pid, rank_zero = plot.wait_started(mpirun)
        others = [pid for pid in fp4sim_children(mpirun.pid) if pid != rank_zero]
        assert len(others) == 1 and alive(others[0]), "rank 1 ended before rank 0 committed the outputs"
        os.kill(others[0], signal.SIGKILL)
        _, stderr = mpirun.communicate()
    finally:
        if mpirun.poll() is None:
            mpirun.kill()
            mpirun.wait()
    assert mpirun.returncode != 0, stderr.decode()
    assert not alive(plot_pid), "the plot process was left running"
    assert list(out.iterdir()) == []


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(") ", 1)[1][0] != "Z"  # a zombie is gone for our purpose


INTERRUPTED = "fp4sim: interrupted (SIGTERM): no partial output left"


@pytest.mark.parametrize("target", ["mpirun", "ranks"])
def test_sigterm_while_the_outputs_are_written_leaves_nothing(tmp_path, target):
    # Rank 0 holds every output's temporary while the plot child runs (a stand-in that waits); SIGTERM,
    # to mpirun (which passes it on) or to every rank (as a batch system does), stops the child, removes
    # the temporaries and ends each rank it reaches with 143; the directory keeps only what it held
    # before. Which ranks get to print before mpirun ends the others is the scheduler's choice: every
    # rank that printed, printed the one line, and no rank left anything behind.
    plot = PlotStandIn(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    (out / "r.json").write_text("old")
    command = [MPIEXEC, "-np", "2", BINARY, "replay", str(TRACE_A), "-q", "--no-gemms", "--steps", "1",
               "--json", str(out / "r.json"), "--csv", str(out / "r.csv"), "--h5", str(out / "r.h5"),
               "--plots", str(out / "plots")]
    mpirun = subprocess.Popen(command, env=plot.env(ENV), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        plot_pid, _ = plot.wait_started(mpirun)
        assert any(".tmp." in name for name in os.listdir(out)), "the temporaries exist while the plots are drawn"
        ranks = fp4sim_children(mpirun.pid)
        assert len(ranks) == 2
        for pid in [mpirun.pid] if target == "mpirun" else ranks:
            os.kill(pid, signal.SIGTERM)
        _, stderr = mpirun.communicate()
    finally:
        if mpirun.poll() is None:
            mpirun.kill()
            mpirun.wait()
    stderr = stderr.decode()
    # mpirun passes on its ranks' 143 when they were signalled; signalled itself, OpenMPI's mpirun exits 1.
    assert mpirun.returncode == (143 if target == "ranks" else 1), (mpirun.returncode, stderr)
    said = [line for line in stderr.splitlines() if line.startswith("fp4sim:")]
    assert said and set(said) == {INTERRUPTED}, stderr
    assert not alive(plot_pid), "the plot process was left running"
    assert sorted(os.listdir(out)) == ["r.json"] and (out / "r.json").read_text() == "old"
