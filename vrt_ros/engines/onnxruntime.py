"""ONNX Runtime engine on the CPU: the reference path and the fallback when there is no GPU."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from vrt_ros.errors import ModelError
from vrt_ros.model.model_file import check_model_file, model_format
from vrt_ros.model.model_setup import check_single_input
from vrt_ros.types import TensorInfo

_ORT_DTYPES = {"tensor(float)": "float32", "tensor(float16)": "float16", "tensor(double)": "float64",
               "tensor(int64)": "int64", "tensor(int32)": "int32", "tensor(uint8)": "uint8"}


def _info(arg) -> TensorInfo:
    shape = tuple(d if isinstance(d, int) and d >= 0 else -1 for d in arg.shape)
    return TensorInfo(arg.name, shape, _ORT_DTYPES.get(arg.type, arg.type))


class OnnxRuntimeEngine:
    """An ONNX model run by ONNX Runtime's CPU execution provider.

    Args:
        path: .onnx file.
        threads: intra-op threads (0: ONNX Runtime's default).

    Attributes:
        inputs: the single image input, shape (1, 3, H, W) (-1 for dynamic dims).
        outputs: output tensors in model order.
        metadata: the model's custom metadata (e.g. Ultralytics writes ``task``), a hint for ``model.head: auto``.

    Raises:
        ModelError: missing, empty, truncated or non-ONNX file, or a model without exactly one 4-D float input.
    """

    def __init__(self, path: str | Path, threads: int = 0) -> None:
        import onnxruntime as ort

        p = check_model_file(path)
        fmt = model_format(p)  # by content: an ONNX model named .engine is loaded as ONNX
        if fmt == "tensorrt":
            raise ModelError(f"model file {p} is a TensorRT engine: it needs backend 'cuda' with TensorRT; the CPU path needs the .onnx model")
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = int(threads)
        opts.log_severity_level = 3
        try:
            self._session = ort.InferenceSession(str(p), sess_options=opts, providers=["CPUExecutionProvider"])
        except Exception as e:  # onnxruntime raises its own Fail/InvalidProtobuf/InvalidGraph types
            what = "could not be loaded as an ONNX model" if fmt == "onnx" else (
                f"is neither an ONNX model nor a TensorRT engine by its content (first bytes "
                f"{p.read_bytes()[:8].hex(' ')}) and could not be loaded as ONNX")
            raise ModelError(
                f"model file {p} {what} ({type(e).__name__}: {str(e).strip()[:300]}); "
                "expected a complete .onnx file: re-export or re-download it"
            ) from e
        self.inputs = [_info(a) for a in self._session.get_inputs()]
        self.outputs = [_info(a) for a in self._session.get_outputs()]
        check_single_input(f"model file {p}", self.inputs)
        if len(self.inputs) != 1 or len(self.inputs[0].shape) != 4 or self.inputs[0].dtype not in ("float32", "float16"):
            raise ModelError(f"model file {p} must have one float NCHW image input, found {self.inputs}")
        try:
            self.metadata: dict[str, str] = dict(self._session.get_modelmeta().custom_metadata_map)
        except Exception:  # metadata is a hint only (e.g. Ultralytics' task: pose|detect)
            self.metadata = {}
        self._input_name = self.inputs[0].name
        self._input_dtype = np.dtype(self.inputs[0].dtype)
        self._output_names = [o.name for o in self.outputs]

    def run(self, x: np.ndarray) -> list[np.ndarray]:
        """Run the model.

        Args:
            x: (1, 3, H, W) float32 input tensor (cast to the model's input dtype when it is float16).

        Returns:
            The outputs in model order, float32.
        """
        if x.dtype != self._input_dtype:
            x = x.astype(self._input_dtype)
        outs = self._session.run(self._output_names, {self._input_name: x})
        return [o if o.dtype == np.float32 else o.astype(np.float32) for o in outs]
