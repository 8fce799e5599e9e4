"""fp4sim.capture: record the GEMM operands of a PyTorch model's linear layers as an fp4sim trace
(docs/trace-format.md, version 2), for ``fp4sim replay``, ``fp4sim sweep`` and ``fp4sim verify``.

    from fp4sim.capture import TraceCapture, window

    with TraceCapture(model, "trace.h5", steps=window(1, 50) | {200}, rows=128) as cap:
        for step in range(1, n_steps + 1):          # one-based optimizer steps
            with cap.step(step, lr=lr) as s:
                for micro in micro_batches:         # several forwards per step: one call group each
                    loss = model(micro).loss
                    loss.backward()
                s.set(loss=loss.item())
            opt.step(); opt.zero_grad()

Hooked: ``torch.nn.Linear`` and its subclasses (torchao's Float8Linear and MXLinear among them),
TransformerEngine's ``Linear``, ``LayerNormLinear`` and ``LayerNormMLP`` (recognised by class name and
parameters: they do not derive from nn.Linear), and :class:`fp4sim.torch.Linear`, whose quantized operands
(codes, scales, tensor scalars, seed) and GEMM outputs are recorded too, so that :func:`verify` runs
``fp4sim verify`` on them. Under ``torch.distributed`` each rank writes its own file
(``trace.rank00001.h5``).

Needs PyTorch and h5py; the rest of fp4sim does not.
"""

try:
    import torch as _torch  # noqa: F401
    import h5py as _h5py  # noqa: F401
except ImportError as _e:  # pragma: no cover - exercised by the test without torch
    raise ImportError(
        "fp4sim.capture needs PyTorch and h5py, and %s is not installed (pip install -r requirements-torch.txt "
        "and h5py from requirements.txt); the rest of fp4sim works without them" % _e.name) from _e

from .capture import TraceCapture, rank_path, window
from .trace_file import SCHEMA, SCHEMA_VERSION
from .verify import VerifyCommand, verify, verify_commands

__all__ = ["TraceCapture", "window", "rank_path", "SCHEMA", "SCHEMA_VERSION", "VerifyCommand", "verify",
           "verify_commands"]
