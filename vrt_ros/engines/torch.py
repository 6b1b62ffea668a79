"""PyTorch GPU engine: runs a model on the pipeline's CUDA stream, reading and writing its device buffers in place.

This module and :mod:`vrt_ros.engines.torch_convert` are the only importers of ``torch`` (that one also of
``onnx2torch`` / ``onnx``, for a conversion), imported lazily by the CUDA backend. Models:

- ``.onnx``: converted with onnx2torch (``pip install onnx2torch``) and traced to TorchScript
  (:mod:`vrt_ros.engines.torch_convert`: static shapes folded, shape constants on the host, no host reads left),
  then kept in the engine cache (:mod:`vrt_ros.engines.torch_cache`): a later start loads the TorchScript archive
  without onnx, onnx2torch or the conversion (issue 27's warm start). A model that cannot be traced runs as
  converted and is converted at every start;
- ``.pt2``: a ``torch.export`` program; ``.pt`` / ``.ts``: TorchScript.

No host synchronisation happens inside :meth:`TorchEngine.enqueue`: work is queued on the pipeline's stream
through ``torch.cuda.ExternalStream``, and the engine's input/output device buffers are wrapped as tensors once.

Batches (issue 21): a model of fixed batch N runs at N. A dynamic-batch ONNX model (input ``[batch, 3, H, W]``,
e.g. from ``python -m vrt_ros.tools.batch_model --batch dynamic``) is specialised at each prepared batch size
(1 and ``max_batch``): the input dim fixed (:func:`vrt_ros.model.onnx_batch.fix_batch`), its ``Shape`` nodes folded as
for a static model, and converted once per size, each with its own CUDA graph; ``enqueue(..., batch=b)`` picks
the size. The cost is one conversion, one set of weights and one graph capture per prepared size.

FP16 (``engine.fp16``): the model is converted by :func:`vrt_ros.engines.torch_half.to_half`: BatchNorm layers are
folded into their convolutions in FP32 first (as TensorRT does; unfused BatchNorm statistics can overflow FP16,
e.g. CenterFace's), layers that cannot be folded or hold values beyond FP16's range run in FP32, the rest in FP16.
The engine keeps FP32 inputs and outputs, the contract of an FP16 TensorRT engine: the input is cast into a reused
FP16 buffer and the outputs are cast back while being copied into the caller's buffers, all inside the captured CUDA
graph. Results differ from FP32 by FP16 rounding (about 1e-3 relative).
"""

from __future__ import annotations

import gc
import logging
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import torch

from vrt_ros.engines.engine_cache import EngineCache, cache_dir as engine_cache_dir, file_sha256
from vrt_ros.engines.torch_cache import Converted, TorchKey, load_or_convert
from vrt_ros.engines.torch_convert import convert_onnx, describe, load_sizes, tensors_of, trace_sizes
from vrt_ros.engines.torch_half import to_half
from vrt_ros.errors import BackendUnavailable, ModelError
from vrt_ros.model.model_file import is_onnx_model
from vrt_ros.types import TensorInfo

logger = logging.getLogger(__name__)

_TORCH_DTYPES = {"float32": torch.float32, "float16": torch.float16}


class _DeviceArray:
    """``__cuda_array_interface__`` over a raw device pointer (no stream key: torch will not synchronise)."""

    def __init__(self, ptr: int, shape: tuple[int, ...], dtype: str) -> None:
        self.__cuda_array_interface__ = {
            "shape": tuple(shape),
            "typestr": np.dtype(dtype).str,
            "data": (int(ptr), False),
            "version": 2,
            "strides": None,
        }


class TorchEngine:
    """A PyTorch model on the GPU, enqueued on the caller's CUDA stream.

    Args:
        path: ``.onnx`` (converted with onnx2torch), ``.pt2`` (torch.export) or ``.pt``/``.ts`` (TorchScript).
        device_index: CUDA device ordinal (the pipeline's device).
        inputs, outputs: tensor descriptions; read from the ONNX file when it is one, required otherwise.
        allow_tf32: let cuDNN/cuBLAS use TF32 for float32 convolutions and matrix products (faster, ~1e-3
            relative error). Off by default so that results match the CPU reference; note this is torch's
            process-wide setting.
        cuda_graph: capture the model into a CUDA graph on the first :meth:`enqueue` for a given set of buffers
            and replay it afterwards (one launch instead of hundreds). The capture itself synchronises the device
            once (warm-up); if the model cannot be captured, the engine logs why and stays eager.
        fp16: run the model in half precision (FP32 inputs and outputs stay as declared; BatchNorm folded, overflowing
            layers in FP32, see :mod:`vrt_ros.engines.torch_half`). The model is tried once on
            zeros at start-up (one device synchronisation), so a model that cannot run in FP16 fails there.
        max_batch: the largest batch a dynamic-batch ONNX model is prepared for (prepared sizes: 1 and this).
        cache_dir: the ``engine.cache_dir`` parameter for an ONNX model's converted archive ("": the default folder,
            :func:`vrt_ros.engines.engine_cache.cache_dir`; None: no cache, converted at every start).
        log: callback for the cache's decisions (default: this module's logger).

    Attributes:
        inputs, outputs: :class:`~vrt_ros.types.TensorInfo` lists, as the model file declares them (FP32 for an
            FP32 model, also with ``fp16``); static but for dim 0 = -1 of a dynamic-batch model.
        batch_sizes: the batch sizes the model runs at (a fixed model: its own; dynamic: 1 and ``max_batch``).
        host_constants: how many shape constants were kept on the host (ONNX models).
        fp16: whether the model runs in half precision.
        fp16_folded, fp16_fp32_layers: (``fp16``) BatchNorm layers folded into their convolutions, and layers kept in
            FP32 (:func:`vrt_ros.engines.torch_half.to_half`).
        cache: (ONNX models) what the cache did, :class:`vrt_ros.engines.torch_cache.CacheOutcome`; None otherwise.

    Raises:
        BackendUnavailable: torch has no CUDA device, or onnx2torch is missing for an ONNX model.
        ModelError: the file is missing or cannot be loaded/converted, or (``fp16``) cannot run in half precision;
            the message names it.
    """

    def __init__(
        self,
        path: str | Path,
        device_index: int = 0,
        inputs: Sequence[TensorInfo] | None = None,
        outputs: Sequence[TensorInfo] | None = None,
        allow_tf32: bool = False,
        cuda_graph: bool = True,
        fp16: bool = False,
        max_batch: int = 1,
        cache_dir: str | None = "",
        log: Callable[[str], None] | None = None,
    ) -> None:
        path = Path(path)
        torch.backends.cudnn.allow_tf32 = allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = allow_tf32
        if not torch.cuda.is_available():
            raise BackendUnavailable("torch engine: torch.cuda.is_available() is False")
        if not path.is_file():
            raise ModelError(f"model file {path} does not exist (parameter model.path)")
        self.device = torch.device("cuda", device_index)
        self.host_constants = 0
        self.fp16 = bool(fp16)
        self.fp16_folded = self.fp16_fp32_layers = 0
        self._max_batch = max(1, int(max_batch))
        self._models: dict[int, torch.nn.Module] = {}  # by batch size
        self._say = log or (lambda line: logger.info("%s", line))
        self.cache = None
        if is_onnx_model(path):  # by content, not by name
            self._from_onnx(path, cache_dir)
        else:
            if inputs is None or outputs is None:
                raise ModelError(f"{path}: a TorchScript/exported model needs explicit input/output descriptions")
            try:
                if path.suffix == ".pt2":
                    self.model = torch.export.load(str(path)).module()
                else:
                    self.model = torch.jit.load(str(path), map_location=self.device)
            except Exception as exc:
                raise ModelError(f"cannot load torch model {path}: {exc}") from exc
            self.inputs, self.outputs = list(inputs), list(outputs)
            self.model = self.model.to(self.device)
            if self.fp16:
                self.model = self._to_half(self.model)
            self._models = {max(1, int(self.inputs[0].shape[0])): self.model}
        for m in self._models.values():
            m.eval()
        self.batch_sizes = tuple(sorted(self._models))
        self.model = self._models[self.batch_sizes[0]]
        self._streams: dict[int, torch.cuda.ExternalStream] = {}
        self._views: dict[tuple[int, ...], tuple[torch.Tensor, list[torch.Tensor], torch.Tensor | None]] = {}
        self._graphs: dict[tuple[int, ...], torch.cuda.CUDAGraph] = {}
        self.cuda_graph = cuda_graph
        self.graph_error: str | None = None
        # FP16 with an FP32 input: the input is cast into a half buffer made once per set of buffers (in _tensors)
        self._cast_input = self.fp16 and self.inputs[0].dtype != "float16"
        if self.fp16:
            self._check_fp16(path)
        precision = ", FP16" if self.fp16 else ""
        self.name = f"torch {torch.__version__} ({path.name}{precision}{', CUDA graph' if cuda_graph else ''})"

    def _from_onnx(self, path: Path, cache_dir: str | None) -> None:
        """Set the models, inputs and outputs from the cache's archive, else from a conversion (then cached)."""
        try:
            from importlib.metadata import PackageNotFoundError, version

            converter = version("onnx2torch")
        except PackageNotFoundError:
            converter = "absent"  # a miss then fails in convert_onnx with the install hint
        major, minor = torch.cuda.get_device_capability(self.device)
        key = TorchKey(file_sha256(path), torch.__version__, converter, "fp16" if self.fp16 else "fp32",
                       self._max_batch, torch.cuda.get_device_name(self.device), f"{major}.{minor}",
                       self.device.index, path.stem)
        dtype = torch.float16 if self.fp16 else torch.float32

        def convert() -> Converted:
            models, inputs, outputs, host = convert_onnx(path, self.device, self._max_batch,
                                                         self._to_half if self.fp16 else None)
            traced, archive, error = trace_sizes(models, inputs[0], dtype, self.device)
            if error:
                self._say(f"torch engine: {error}; running the converted model, not cached")
            meta = describe(inputs, outputs, models, host_constants=host, fp16_folded=self.fp16_folded,
                            fp16_fp32_layers=self.fp16_fp32_layers)
            return Converted(traced or models, meta, archive)

        cache = None if cache_dir is None else EngineCache(engine_cache_dir(cache_dir))
        self._models, meta, self.cache = load_or_convert(
            cache, key, convert, lambda p, m: load_sizes(p, self.device, m["batch_sizes"]), self._say)
        self.inputs, self.outputs = tensors_of(meta, "inputs"), tensors_of(meta, "outputs")
        self.host_constants = int(meta.get("host_constants", 0))
        self.fp16_folded = int(meta.get("fp16_folded", 0))
        self.fp16_fp32_layers = int(meta.get("fp16_fp32_layers", 0))
        what = "loaded from the cache" if self.cache.status == "hit" else "converted"
        self._say(f"torch engine: {path.name} {what} in {self.cache.seconds:.2f} s (batch "
                  f"{'/'.join(map(str, sorted(self._models)))}{', FP16' if self.fp16 else ''})")

    def _to_half(self, model: torch.nn.Module) -> torch.nn.Module:
        half = to_half(model)
        self.fp16_folded, self.fp16_fp32_layers = half.folded, half.kept_fp32
        logger.info("torch engine FP16: %d BatchNorm layers folded into their convolutions (FP32, before the cast), "
                 "%d layers kept in FP32", half.folded, half.kept_fp32)
        if half.overflow:
            logger.warning("torch engine FP16: %d tensors exceed FP16's range (65504) and became inf, results may be "
                        "wrong (set engine.fp16 false): %s", len(half.overflow), ", ".join(half.overflow[:10]))
        return half.model

    def _stream(self, stream) -> torch.cuda.ExternalStream:
        handle = int(stream.__cuda_stream__()[1]) if hasattr(stream, "__cuda_stream__") else int(stream)
        s = self._streams.get(handle)
        if s is None:
            s = self._streams[handle] = torch.cuda.ExternalStream(handle, device=self.device)
        return s

    def _tensors(self, input_ptr: int, output_ptrs: Sequence[int], batch: int):
        key = (batch, input_ptr, *output_ptrs)
        views = self._views.get(key)
        if views is None:
            def shape(t: TensorInfo) -> tuple[int, ...]:
                return (batch, *t.shape[1:]) if t.shape[0] < 0 else tuple(t.shape)

            inp = self.inputs[0]
            x = torch.as_tensor(_DeviceArray(input_ptr, shape(inp), inp.dtype), device=self.device)
            ys = [torch.as_tensor(_DeviceArray(p, shape(o), o.dtype), device=self.device)
                  for p, o in zip(output_ptrs, self.outputs)]
            xh = torch.empty(shape(inp), dtype=torch.float16, device=self.device) if self._cast_input else None
            views = self._views[key] = (x, ys, xh)
        return views

    def enqueue(self, stream, input_ptr: int, output_ptrs: Sequence[int], batch: int | None = None) -> None:
        """Queue one inference on ``stream`` (an object with ``__cuda_stream__`` or a raw handle); no host sync.

        Args:
            stream: the pipeline's stream.
            input_ptr: device address of the input tensor (shape/dtype of ``inputs[0]``, dim 0 = ``batch``).
            output_ptrs: device addresses of the outputs (shapes/dtypes of ``outputs``), written in place.
            batch: for a dynamic-batch model, one of :attr:`batch_sizes`; None: the model's own batch.

        Raises:
            ValueError: a batch the engine was not prepared for.
        """
        b = self.batch_sizes[0] if batch is None else int(batch)
        model = self._models.get(b)
        if model is None:
            raise ValueError(f"torch engine: batch {b} was not prepared (prepared: {list(self.batch_sizes)})")
        x, ys, xh = self._tensors(input_ptr, output_ptrs, b)
        s = self._stream(stream)
        key = (s.cuda_stream, b, input_ptr, *output_ptrs)
        graph = self._graphs.get(key)
        with torch.cuda.stream(s), torch.inference_mode():
            if graph is not None:
                graph.replay()
                return
            if self.cuda_graph and self.graph_error is None:
                graph = self._capture(s, x, ys, xh, model)
                if graph is not None:
                    self._graphs[key] = graph
                    graph.replay()
                    return
            self._forward(x, ys, xh, model)

    def _check_fp16(self, path: Path) -> None:
        """One forward pass on zeros in FP16 (start-up only; synchronises once), so an op without a half-precision
        kernel or a dtype mix inside the model fails here, with the parameter named, not on the first frame."""
        b = self.batch_sizes[0]

        def shape(t: TensorInfo) -> tuple[int, ...]:
            return (b, *t.shape[1:]) if t.shape[0] < 0 else tuple(t.shape)

        x = torch.zeros(shape(self.inputs[0]), dtype=_TORCH_DTYPES.get(self.inputs[0].dtype, torch.float32),
                        device=self.device)
        ys = [torch.empty(shape(o), dtype=_TORCH_DTYPES.get(o.dtype, torch.float32), device=self.device)
              for o in self.outputs]
        xh = torch.empty(x.shape, dtype=torch.float16, device=self.device) if self._cast_input else None
        try:
            with torch.inference_mode():
                self._forward(x, ys, xh, self._models[b])
            torch.cuda.synchronize(self.device)
        except Exception as exc:
            raise ModelError(f"engine.fp16: {path} cannot run in half precision with torch "
                             f"({type(exc).__name__}: {exc}); set engine.fp16 false") from exc

    def _forward(self, x: torch.Tensor, ys: list[torch.Tensor], xh: torch.Tensor | None = None,
                 model: torch.nn.Module | None = None) -> None:
        if xh is not None:
            xh.copy_(x)  # FP32 -> FP16 into the reused half buffer (no allocation inside the graph)
            x = xh
        # TorchScript (the cached archive) as traced: no profiling runs and re-optimised plans (fusion kernels
        # compiled on the 2nd or 3rd call, i.e. inside the CUDA-graph capture)
        with torch.jit.optimized_execution(False):
            out = (model if model is not None else self.model)(x)
        outs = out if isinstance(out, (list, tuple)) else (out,)
        for y, o in zip(ys, outs):
            y.copy_(o.reshape(y.shape))  # casts FP16 results back to the declared output dtype

    def _capture(self, stream, x: torch.Tensor, ys: list[torch.Tensor], xh: torch.Tensor | None = None,
                 model: torch.nn.Module | None = None):
        """Capture one forward into a CUDA graph (warm-up on a side stream first, as torch requires)."""
        try:
            side = torch.cuda.Stream(device=self.device)
            side.wait_stream(stream)
            with torch.cuda.stream(side):
                for _ in range(2):
                    self._forward(x, ys, xh, model)
            stream.wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            # thread_local: other executor threads (other cameras) may keep using CUDA during the capture
            with torch.cuda.graph(graph, stream=stream, capture_error_mode="thread_local"):
                self._forward(x, ys, xh, model)
            logger.info("torch engine: model captured into a CUDA graph (batch %d)", x.shape[0])
            return graph
        except Exception as exc:  # e.g. a host sync inside the model: stay eager, say why
            self.graph_error = f"{type(exc).__name__}: {exc}"
            logger.warning("torch engine: CUDA graph capture failed, running eagerly (%s)", self.graph_error)
            return None

    def close(self) -> None:
        """Drop the model, the CUDA graphs and the cached views, then give torch's unused cached device memory back
        to the driver: the caching allocator's free blocks (``torch.cuda.empty_cache``; blocks still in use
        elsewhere in the process stay) and the cuBLAS workspaces torch keeps per stream (re-made on the next
        matrix product). What stays is torch's CUDA state for the life of the process (``vrt_ros.bench.stages.gpu_memory``)."""
        self._graphs.clear()
        self._views.clear()
        self._streams.clear()
        self._models.clear()
        self.model = None
        gc.collect()  # the fx GraphModule holds reference cycles: its parameters are freed only by the collector
        clear_workspaces = getattr(torch._C, "_cuda_clearCublasWorkspaces", None)  # private, torch >= 1.13
        if clear_workspaces is not None:
            clear_workspaces()
        torch.cuda.empty_cache()
