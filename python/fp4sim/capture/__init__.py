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

Capturing needs PyTorch and h5py; checking a trace (:func:`verify`, ``python3 -m fp4sim.capture.verify``)
needs h5py only; the rest of fp4sim needs neither.
"""

try:
    import h5py as _h5py  # noqa: F401
except ImportError as _e:  # pragma: no cover - exercised by the test without h5py
    raise ImportError("fp4sim.capture needs h5py, and it is not installed (pip install h5py, as in "
                      "requirements.txt); the rest of fp4sim works without it") from _e

import importlib as _importlib

# Each public name and its module, imported on first use: the capturing half needs PyTorch, and
# ``python3 -m fp4sim.capture.verify`` runs that module as __main__, which it must not be imported before.
_HOME = {"TraceCapture": "capture", "rank_path": "capture", "window": "capture", "SCHEMA": "trace_file",
         "SCHEMA_VERSION": "trace_file", "VerifyCommand": "verify", "verify": "verify", "verify_commands": "verify"}


def __getattr__(name):
    home = _HOME.get(name)
    if home is None:
        raise AttributeError("module 'fp4sim.capture' has no attribute %r" % name)
    if home == "capture":
        try:
            import torch  # noqa: F401
        except ImportError as e:
            raise ImportError("fp4sim.capture needs PyTorch and h5py, and %s is not installed (pip install -r "
                              "requirements-torch.txt and h5py from requirements.txt); the rest of fp4sim works "
                              "without them" % e.name) from e
    module = _importlib.import_module("." + home, __name__)
    # the names, not the submodules (fp4sim.capture.verify is the function, as before)
    globals().update({n: getattr(module, n) for n, h in _HOME.items() if h == home})
    return globals()[name]


__all__ = list(_HOME)
