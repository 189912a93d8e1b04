"""Small ONNX models built with onnx.helper, as a model exported from PyTorch (NCHW float32) or
from Keras (NHWC) would be: a strided convolution and a max pool, (n, 3, 16, 16) -> (n, 5, 4, 4),
or (n, 16, 16, 3) -> (n, 4, 4, 5) channels-last."""

from __future__ import annotations

import numpy as np


def conv_pool(
    path, *, channels_last: bool = False, size: int | str = 16, dtype: str = "float", batch: int | str = "n"
) -> str:
    """Write the model to `path` and return it as str. `size` an int fixes the spatial axes; a
    name leaves them free; so does `batch` for the batch axis (exporters fix it at 1 unless told
    otherwise). `dtype` "float16" makes the input and weights half floats."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    np_type = np.float16 if dtype == "float16" else np.float32
    elem = TensorProto.FLOAT16 if dtype == "float16" else TensorProto.FLOAT
    weights = rng.standard_normal((5, 3, 3, 3)).astype(np_type)
    bias = rng.standard_normal(5).astype(np_type)
    nodes = []
    first = "x"
    if channels_last:
        nodes.append(helper.make_node("Transpose", ["x"], ["x_nchw"], perm=[0, 3, 1, 2]))
        first = "x_nchw"
    nodes += [
        helper.make_node("Conv", [first, "W", "B"], ["c"], strides=[2, 2], pads=[1, 1, 1, 1]),
        helper.make_node(
            "MaxPool", ["c"], ["p" if channels_last else "y"], kernel_shape=[2, 2], strides=[2, 2]
        ),
    ]
    if channels_last:  # and channels-last out, as a Keras model's
        nodes.append(helper.make_node("Transpose", ["p"], ["y"], perm=[0, 2, 3, 1]))
    shape = [batch, size, size, 3] if channels_last else [batch, 3, size, size]
    out_shape = [batch, "h", "w", 5] if channels_last else [batch, 5, "h", "w"]
    graph = helper.make_graph(
        nodes,
        "conv_pool",
        [helper.make_tensor_value_info("x", elem, shape)],
        [helper.make_tensor_value_info("y", elem, out_shape)],
        [numpy_helper.from_array(weights, "W"), numpy_helper.from_array(bias, "B")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9  # what onnxruntime 1.32 reads
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return str(path)
