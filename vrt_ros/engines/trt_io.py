"""The I/O of a deserialised TensorRT engine: which tensors, their shapes at the chosen input size and batch, their
dtypes, and the execution context that holds those shapes (split out of :mod:`vrt_ros.engines.tensorrt`).

The pipeline needs one image input (NCHW) and at least one output, linear formats, output shapes fixed by the input
shape, and dtypes it can hold (:data:`~vrt_ros.engines.trt_build.DTYPES`).
"""

from __future__ import annotations

from dataclasses import dataclass

from vrt_ros.engines.trt_build import DTYPES
from vrt_ros.engines.trt_logging import LogRouter, enum_name
from vrt_ros.engines.trt_runtime import Handles
from vrt_ros.errors import ConfigError, ModelError
from vrt_ros.types import TensorInfo


@dataclass
class BoundIo:
    """What :func:`bind_io` resolved.

    Attributes:
        inputs, outputs: :class:`~vrt_ros.types.TensorInfo`; dim 0 is -1 for a dynamic batch the pipeline runs at
            several sizes.
        io_names: the input's name, then the outputs' names, in the order ``enqueue`` takes pointers.
        input_dims: the input shape set on the context (batch, channels, height, width).
        batch_now: the batch of that shape (0 when the input has no dynamic dimension).
    """

    inputs: list[TensorInfo]
    outputs: list[TensorInfo]
    io_names: list[str]
    input_dims: tuple[int, ...]
    batch_now: int


def tensor_dtype(engine, name: str, where: str) -> str:
    """The numpy dtype name of tensor ``name`` ("float32", "float16", ...).

    Raises:
        ModelError: a dtype the pipeline cannot hold (names ``where`` and the supported ones).
    """
    dt = enum_name(engine.get_tensor_dtype(name))
    if dt not in DTYPES:
        raise ModelError(f"{where}: tensor {name!r} has dtype {dt}, which the pipeline cannot hold "
                         f"(supported: {sorted(DTYPES)})")
    return DTYPES[dt]


def bind_io(h: Handles, trt, router: LogRouter, where: str, *, max_batch: int,
            input_size: tuple[int, int] | None) -> BoundIo:
    """Create ``h.context`` for ``h.engine`` and resolve its I/O.

    Args:
        h: the engine's handles (``h.engine`` set); the context is stored there at once, so that a failure below
            still releases it in order.
        trt: the TensorRT module in use (the 11.4 lean runtime has no ``TensorFormat``).
        router: the engine's log router (TensorRT's errors quoted in the exceptions).
        where: "engine <path>", for messages.
        max_batch: a dynamic batch dim is bound at min(max_batch, profile max) (the outputs' shapes are read there).
        input_size: (width, height) for a dynamic spatial input, or None for the profile's optimum.

    Raises:
        ModelError: not one input or no output, vectorised formats, no execution context (out of device memory?),
            data-dependent output shapes, unsupported dtypes.
        ConfigError: the input size is outside the optimisation profile, or TensorRT refused it.
    """
    engine = h.engine
    names = [engine.get_tensor_name(i) for i in range(engine.num_io_tensors)]
    inputs = [n for n in names if enum_name(engine.get_tensor_mode(n)) == "INPUT"]
    outputs = [n for n in names if enum_name(engine.get_tensor_mode(n)) == "OUTPUT"]
    if len(inputs) != 1 or not outputs:
        raise ModelError(f"{where} has inputs {inputs} and outputs {outputs}: the detector pipeline needs one image "
                         "input and at least one output")
    # The 11.4 lean runtime has get_tensor_format but no TensorFormat binding (calling it raises TypeError).
    fmt = getattr(engine, "get_tensor_format", None) if hasattr(trt, "TensorFormat") else None
    for n in names:
        if fmt is not None and enum_name(fmt(n)) != "LINEAR":
            raise ModelError(f"{where}: tensor {n!r} uses the vectorised format {enum_name(fmt(n))}; "
                             "rebuild with linear (default) I/O formats")
    mark = router.mark()
    h.context = engine.create_execution_context()
    if h.context is None:
        raise ModelError(f"{where}: TensorRT could not create an execution context "
                         f"({router.quote(mark, 'out of device memory?')})")
    ctx = h.context
    name = inputs[0]
    dims = tuple(int(d) for d in engine.get_tensor_shape(name))
    batched = False  # a dynamic batch the pipeline runs at several sizes (enqueue's batch)
    batch_now = 0
    if any(d < 0 for d in dims):
        lo, opt, hi = (tuple(int(d) for d in s) for s in engine.get_tensor_profile_shape(name, 0))
        shape = list(opt)
        batched = dims[0] < 0 and max_batch > 1 and hi[0] > 1
        if dims[0] < 0:  # the largest batch the pipeline runs (the outputs' shapes are read at it)
            shape[0] = max(lo[0], min(max_batch, hi[0]))
        if input_size is not None and len(shape) == 4:
            shape[0] = max(shape[0], 1)
            shape[3], shape[2] = int(input_size[0]), int(input_size[1])
        if not all(a <= b <= c for a, b, c in zip(lo, shape, hi)):
            raise ConfigError(f"model.input_width/height: input {name!r} shape {tuple(shape)} is outside the engine's "
                              f"optimisation profile {lo}..{hi}; choose a size inside it or rebuild the engine")
        mark = router.mark()
        if not ctx.set_input_shape(name, tuple(shape)):
            raise ConfigError(f"{where}: set_input_shape({name!r}, {tuple(shape)}) was refused by TensorRT "
                              f"({router.quote(mark)})")
        dims = tuple(shape)
        batch_now = dims[0]
    # a batched dynamic batch stays -1 in what the pipeline sees (it runs several batch sizes, see enqueue)
    ins = [TensorInfo(name, ((-1, *dims[1:]) if batched else dims), tensor_dtype(engine, name, where))]
    outs = []
    for n in outputs:
        shape = tuple(int(d) for d in ctx.get_tensor_shape(n))
        if any(d < 0 for d in shape):
            raise ModelError(f"{where}: output {n!r} has a data-dependent shape {shape}; the pipeline needs output "
                             "shapes fixed by the input shape")
        outs.append(TensorInfo(n, (-1, *shape[1:]) if batched else shape, tensor_dtype(engine, n, where)))
    return BoundIo(ins, outs, [name, *outputs], dims, batch_now)
