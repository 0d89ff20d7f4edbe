"""A small float64 interpreter of ONNX graphs, with reverse-mode gradients.

The reference of the training tests: it knows nothing of partc. Forward
runs the graph's nodes in numpy; `gradients` differentiates a scalar loss
written on top of the outputs by keeping a tape of the nodes' vector-Jacobian
products. Only the ops the tests use are here.
"""
import math

import numpy as np
from onnx import numpy_helper


def attr(node, name, default=None):
    for a in node.attribute:
        if a.name == name:
            if a.type == a.INT:
                return a.i
            if a.type == a.FLOAT:
                return a.f
            if a.type == a.INTS:
                return list(a.ints)
            if a.type == a.STRING:
                return a.s.decode()
            if a.type == a.TENSOR:
                return a.t
    return default


def unbroadcast(g, shape):
    while g.ndim > len(shape):
        g = g.sum(0)
    for d, n in enumerate(shape):
        if n == 1 and g.shape[d] != 1:
            g = g.sum(d, keepdims=True)
    return g.reshape(shape)


def softmax(x, axis):
    e = np.exp(x - x.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


def reduce_axes(node, x, ins):
    axes = attr(node, "axes")
    if len(ins) > 1:  # ReduceSum-13 takes its axes as an input
        axes = [int(a) for a in ins[1]]
    if axes is None:
        axes = list(range(x.ndim))
    return tuple(a % x.ndim for a in axes), bool(attr(node, "keepdims", 1))


def philox4x32(c, key):
    """Philox4x32-10 (Salmon et al., SC'11) of counters c (4 uint32 arrays)
    and a key (2 uint32): four uint32 arrays."""
    mask = np.uint64(0xFFFFFFFF)
    c = [np.asarray(w, np.uint64) for w in c]
    k0, k1 = np.uint64(key[0]), np.uint64(key[1])
    for _ in range(10):
        p0 = np.uint64(0xD2511F53) * c[0]
        p1 = np.uint64(0xCD9E8D57) * c[2]
        c = [(p1 >> np.uint64(32)) ^ c[1] ^ k0, p1 & mask,
             (p0 >> np.uint64(32)) ^ c[3] ^ k1, p0 & mask]
        k0 = (k0 + np.uint64(0x9E3779B9)) & mask
        k1 = (k1 + np.uint64(0xBB67AE85)) & mask
    return c


def dropout_mask(shape, ratio, stream, step, seed):
    """partc's dropout mask (graph.dropout): element i kept when word i % 4
    of Philox for counter (i / 4, stream, step) and key seed, shifted to 24
    bits, is at least ratio * 2^24."""
    n = int(np.prod(shape))
    groups = np.arange((n + 3) // 4, dtype=np.uint64)
    u64 = lambda v: int(v) & 0xFFFFFFFFFFFFFFFF  # noqa: E731
    words = philox4x32(
        [groups, np.full_like(groups, stream & 0xFFFFFFFF),
         np.full_like(groups, u64(step) & 0xFFFFFFFF),
         np.full_like(groups, u64(step) >> 32)],
        (u64(seed) & 0xFFFFFFFF, u64(seed) >> 32))
    flat = np.stack(words, axis=1).reshape(-1)[:n]
    return ((flat >> np.uint64(8)) >= np.uint64(int(ratio * 16777216.0))
            ).reshape(shape)


def forward_node(node, ins, rng=None):
    """The node's outputs and a function from output gradient to input
    gradients. `rng` is (stream, step, seed) for a training-mode Dropout."""
    op = node.op_type
    if op == "Dropout":
        ratio = float(ins[1]) if len(ins) > 1 else 0.5
        training = len(ins) > 2 and bool(np.asarray(ins[2]).any())
        if not training or ratio == 0:
            return ins[0], lambda g: [g]
        # Scaled as partc does, in float32 for float32 models.
        keep = dropout_mask(ins[0].shape, ratio, *rng)
        scale = 1.0 / (1.0 - ratio)
        return np.where(keep, ins[0] * scale, 0.0), \
            lambda g: [np.where(keep, g * scale, 0.0)]
    if op == "Gemm":
        a, b = ins[0], ins[1]
        ta, tb = attr(node, "transA", 0), attr(node, "transB", 0)
        alpha, beta = attr(node, "alpha", 1.0), attr(node, "beta", 1.0)
        A, B = (a.T if ta else a), (b.T if tb else b)
        y = alpha * A @ B + (beta * ins[2] if len(ins) > 2 else 0)

        def vjp(g):
            dA, dB = alpha * g @ B.T, alpha * A.T @ g
            out = [dA.T if ta else dA, dB.T if tb else dB]
            if len(ins) > 2:
                out.append(unbroadcast(beta * g, ins[2].shape))
            return out
        return y, vjp
    if op == "MatMul":
        a, b = ins
        y = a @ b
        return y, lambda g: [unbroadcast(g @ np.swapaxes(b, -1, -2), a.shape),
                             unbroadcast(np.swapaxes(a, -1, -2) @ g, b.shape)]
    binary = {"Add": (lambda a, b: a + b, lambda g, a, b: (g, g)),
              "Sub": (lambda a, b: a - b, lambda g, a, b: (g, -g)),
              "Mul": (lambda a, b: a * b, lambda g, a, b: (g * b, g * a)),
              "Div": (lambda a, b: a / b,
                      lambda g, a, b: (g / b, -g * a / (b * b))),
              # Ties split the gradient in halves, as PyTorch's maximum.
              "Max": (np.maximum,
                      lambda g, a, b: (g * ((a > b) + 0.5 * (a == b)),
                                       g * ((b > a) + 0.5 * (a == b)))),
              "Min": (np.minimum,
                      lambda g, a, b: (g * ((a < b) + 0.5 * (a == b)),
                                       g * ((b < a) + 0.5 * (a == b))))}
    if op in binary:
        f, d = binary[op]
        a, b = ins
        y = f(a, b)

        def vjp(g):
            ga, gb = d(g, a, b)
            return [unbroadcast(ga, a.shape), unbroadcast(gb, b.shape)]
        return y, vjp
    if op == "Constant":
        return numpy_helper.to_array(attr(node, "value")), lambda g: []
    if op == "Pow":
        a, b = ins
        y = a ** b

        def vjp(g):
            with np.errstate(invalid="ignore", divide="ignore"):
                return [unbroadcast(g * b * a ** (b - 1), a.shape),
                        unbroadcast(g * y * np.log(a), b.shape)]
        return y, vjp
    if op == "Where":
        c, a, b = ins
        y = np.where(c, a, b)
        return y, lambda g: [None, unbroadcast(np.where(c, g, 0), a.shape),
                             unbroadcast(np.where(c, 0, g), b.shape)]
    if op == "Gather":
        data, idx = ins
        axis = attr(node, "axis", 0) % data.ndim
        idx = idx.astype(np.int64)
        # data[..., idx, ...] along `axis`; negative indices count from the
        # end, as numpy's do.
        where = (slice(None),) * axis + (idx,)

        def vjp(g):
            dx = np.zeros_like(data)
            np.add.at(dx, where, g)
            return [dx, None]
        return data[where], vjp
    if op == "LayerNormalization":
        return layer_norm(node, ins)
    if op == "RMSNormalization":
        return rms_norm(node, ins)
    if op == "GatherElements":
        data, idx = ins
        axis = attr(node, "axis", 0) % data.ndim
        idx = idx.astype(np.int64) % data.shape[axis]

        def vjp(g):
            return [scatter_along(g, idx, axis, data.shape), None]
        return np.take_along_axis(data, idx, axis), vjp
    if op == "TopK":
        x, k = ins[0], int(ins[1].reshape(-1)[0])
        axis = attr(node, "axis", -1) % x.ndim
        largest = attr(node, "largest", 1)
        # Stable: equal values keep the order of their indices.
        idx = np.argsort(-x if largest else x, axis=axis, kind="stable")
        idx = np.take(idx, range(k), axis)
        values = np.take_along_axis(x, idx, axis)
        return (values, idx), \
            lambda g: [scatter_along(g, idx, axis, x.shape), None]
    if op == "CumSum":
        x, axis = ins[0], int(np.asarray(ins[1]).reshape(-1)[0])
        exclusive, reverse = attr(node, "exclusive", 0), attr(node, "reverse", 0)
        return cum_sum(x, axis, exclusive, reverse), \
            lambda g: [cum_sum(g, axis, exclusive, 1 - reverse), None]
    if op == "Resize":
        return resize(node, ins)
    x = ins[0]
    unary = {
        "Relu": (lambda x: np.maximum(x, 0), lambda g, x, y: g * (x > 0)),
        "Tanh": (np.tanh, lambda g, x, y: g * (1 - y * y)),
        "Sigmoid": (lambda x: 1 / (1 + np.exp(-x)),
                    lambda g, x, y: g * y * (1 - y)),
        "Exp": (np.exp, lambda g, x, y: g * y),
        "Log": (np.log, lambda g, x, y: g / x),
        "Sqrt": (np.sqrt, lambda g, x, y: g / (2 * y)),
        "Neg": (lambda x: -x, lambda g, x, y: -g),
        "Abs": (np.abs, lambda g, x, y: g * np.sign(x)),
        "Softplus": (lambda x: np.log1p(np.exp(x)),
                     lambda g, x, y: g / (1 + np.exp(-x))),
        "Identity": (lambda x: x, lambda g, x, y: g),
        "Erf": (np.vectorize(math.erf),
                lambda g, x, y: g * 2 / np.sqrt(np.pi) * np.exp(-x * x)),
        "Reciprocal": (lambda x: 1 / x, lambda g, x, y: -g * y * y),
        "Floor": (np.floor, lambda g, x, y: 0 * g),
        "Ceil": (np.ceil, lambda g, x, y: 0 * g),
        "Round": (np.round, lambda g, x, y: 0 * g),
        "Sign": (np.sign, lambda g, x, y: 0 * g),
        "Sin": (np.sin, lambda g, x, y: g * np.cos(x)),
        "Cos": (np.cos, lambda g, x, y: -g * np.sin(x)),
        "Tan": (np.tan, lambda g, x, y: g * (1 + y * y)),
        "Asin": (np.arcsin, lambda g, x, y: g / np.sqrt(1 - x * x)),
        "Acos": (np.arccos, lambda g, x, y: -g / np.sqrt(1 - x * x)),
        "Atan": (np.arctan, lambda g, x, y: g / (1 + x * x)),
        "Sinh": (np.sinh, lambda g, x, y: g * np.cosh(x)),
        "Cosh": (np.cosh, lambda g, x, y: g * np.sinh(x)),
        "Asinh": (np.arcsinh, lambda g, x, y: g / np.sqrt(x * x + 1)),
        "Acosh": (np.arccosh, lambda g, x, y: g / np.sqrt(x * x - 1)),
        "Atanh": (np.arctanh, lambda g, x, y: g / (1 - x * x)),
        "Softsign": (lambda x: x / (1 + np.abs(x)),
                     lambda g, x, y: g / (1 + np.abs(x)) ** 2),
        "HardSwish": (lambda x: x * np.clip(x / 6 + 0.5, 0, 1),
                      lambda g, x, y: g * np.where(
                          x < -3, 0, np.where(x > 3, 1, x / 3 + 0.5))),
        "Mish": (lambda x: x * np.tanh(np.log1p(np.exp(x))),
                 lambda g, x, y: g * (
                     np.tanh(np.log1p(np.exp(x))) + x / (1 + np.exp(-x)) *
                     (1 - np.tanh(np.log1p(np.exp(x))) ** 2))),
    }
    alpha = attr(node, "alpha", None)
    if op == "LeakyRelu":
        a = 0.01 if alpha is None else alpha
        unary[op] = (lambda x: np.where(x >= 0, x, a * x),
                     lambda g, x, y: g * np.where(x > 0, 1, a))
    if op == "Elu":
        a = 1.0 if alpha is None else alpha
        unary[op] = (lambda x: np.where(x >= 0, x, a * np.expm1(x)),
                     lambda g, x, y: g * np.where(x > 0, 1, a * np.exp(x)))
    if op == "Celu":
        a = 1.0 if alpha is None else alpha
        unary[op] = (lambda x: np.maximum(x, 0) +
                     np.minimum(0, a * np.expm1(x / a)),
                     lambda g, x, y: g * np.where(x > 0, 1, np.exp(x / a)))
    if op == "Selu":
        a = 1.67326319217681884765625 if alpha is None else alpha
        gamma = attr(node, "gamma", 1.05070102214813232421875)
        unary[op] = (lambda x: gamma * np.where(x > 0, x, a * np.expm1(x)),
                     lambda g, x, y: g * gamma * np.where(x > 0, 1,
                                                          a * np.exp(x)))
    if op == "HardSigmoid":
        a = 0.2 if alpha is None else alpha
        beta = attr(node, "beta", 0.5)
        unary[op] = (lambda x: np.clip(a * x + beta, 0, 1),
                     lambda g, x, y: g * a * ((a * x + beta > 0) &
                                              (a * x + beta < 1)))
    if op == "Shrink":
        lambd, bias = attr(node, "lambd", 0.5), attr(node, "bias", 0.0)
        unary[op] = (lambda x: np.where(x < -lambd, x + bias,
                                        np.where(x > lambd, x - bias, 0)),
                     lambda g, x, y: g * ((x < -lambd) | (x > lambd)))
    if op == "ThresholdedRelu":
        a = 1.0 if alpha is None else alpha
        unary[op] = (lambda x: np.where(x > a, x, 0),
                     lambda g, x, y: g * (x > a))
    if op == "Clip":
        lo, hi = ins[1], ins[2]
        y = np.clip(x, lo, hi)
        # Inside the bounds only, as PyTorch's hardtanh (ReLU6).
        return y, lambda g: [g * ((x > lo) & (x < hi)), None, None]
    if op in unary:
        f, d = unary[op]
        y = f(x)
        return y, lambda g: [d(g, x, y)]
    if op == "Softmax":
        axis = attr(node, "axis", -1)
        y = softmax(x, axis)
        return y, lambda g: [y * (g - (g * y).sum(axis, keepdims=True))]
    if op == "LogSoftmax":
        axis = attr(node, "axis", -1)
        y = np.log(softmax(x, axis))
        return y, lambda g: [g - np.exp(y) * g.sum(axis, keepdims=True)]
    if op in ("ReduceMax", "ReduceMin"):
        axes, keep = reduce_axes(node, x, ins)
        y = (x.max if op == "ReduceMax" else x.min)(axes, keepdims=True)

        def vjp(g):
            # Ties share the gradient evenly, as PyTorch's amax does.
            mask = (x == y).astype(x.dtype)
            g = g if keep else np.expand_dims(g, axes)
            return [mask * g / mask.sum(axes, keepdims=True)] + \
                [None] * (len(ins) - 1)
        return (y if keep else np.squeeze(y, axes)), vjp
    if op == "ReduceProd":
        axes, keep = reduce_axes(node, x, ins)
        y = x.prod(axes, keepdims=True)

        def vjp(g):
            # The product of the others, element by element.
            g = g if keep else np.expand_dims(g, axes)
            others = np.empty_like(x)
            for idx in np.ndindex(x.shape):
                rest = x.copy()
                rest[idx] = 1
                block = tuple(slice(None) if d in axes else slice(i, i + 1)
                              for d, i in enumerate(idx))
                others[idx] = rest[block].prod()
            return [others * g] + [None] * (len(ins) - 1)
        return (y if keep else np.squeeze(y, axes)), vjp
    if op in ("ReduceSum", "ReduceMean"):
        axes, keep = reduce_axes(node, x, ins)
        y = x.sum(axes, keepdims=keep)
        count = np.prod([x.shape[a] for a in axes])
        if op == "ReduceMean":
            y = y / count

        def vjp(g):
            if not keep:
                g = np.expand_dims(g, axes)
            g = np.broadcast_to(g, x.shape)
            return [g / count if op == "ReduceMean" else g.copy(), None]
        return y, vjp
    if op == "Transpose":
        perm = attr(node, "perm")
        return np.transpose(x, perm), lambda g: [np.transpose(g, np.argsort(perm))]
    if op == "Reshape":
        shape = ins[1].astype(np.int64)
        y = x.reshape([x.shape[i] if s == 0 else s for i, s in enumerate(shape)])
        return y, lambda g: [g.reshape(x.shape), None]
    if op == "Conv":
        return conv(node, ins)
    if op in ("MaxPool", "AveragePool"):
        return pool(node, x)
    if op == "GlobalMaxPool":
        axes = tuple(range(2, x.ndim))
        y = x.max(axes, keepdims=True)
        mask = (x == y).astype(x.dtype)
        return y, lambda g: [mask * g / mask.sum(axes, keepdims=True)]
    if op == "GlobalAveragePool":
        axes = tuple(range(2, x.ndim))
        count = np.prod(x.shape[2:])
        return x.mean(axes, keepdims=True), \
            lambda g: [np.broadcast_to(g / count, x.shape).copy()]
    if op == "BatchNormalization":
        return batch_norm(node, ins)
    if op == "Flatten":
        axis = attr(node, "axis", 1)
        y = x.reshape(int(np.prod(x.shape[:axis])), -1)
        return y, lambda g: [g.reshape(x.shape)]
    if op == "Concat":
        axis = attr(node, "axis")
        bounds = np.cumsum([0] + [a.shape[axis] for a in ins])
        y = np.concatenate(ins, axis)
        return y, lambda g: [np.take(g, range(b, e), axis)
                             for b, e in zip(bounds[:-1], bounds[1:])]
    if op == "Slice":
        starts, ends, axes = ins[1], ins[2], ins[3]
        steps = ins[4] if len(ins) > 4 else [1] * len(axes)
        index = [slice(None)] * x.ndim
        # Python's slices clamp and count from the end as ONNX's do.
        for s, e, a, st in zip(starts, ends, axes, steps):
            index[int(a)] = slice(int(s), int(e), int(st))
        index = tuple(index)

        def vjp(g):
            dx = np.zeros_like(x)
            dx[index] = g
            return [dx] + [None] * (len(ins) - 1)
        return x[index], vjp
    if op == "Expand":
        y = x * np.ones([int(d) for d in ins[1]])
        return y, lambda g: [unbroadcast(g, x.shape), None]
    raise NotImplementedError(op)


def scatter_along(g, idx, axis, shape):
    """The gradient of take_along_axis(data, idx, axis): g added where
    each element was read from."""
    where = list(np.indices(idx.shape, sparse=True))
    where[axis] = idx
    dx = np.zeros(shape)
    np.add.at(dx, tuple(where), g)
    return dx


def cum_sum(x, axis, exclusive, reverse):
    if reverse:
        x = np.flip(x, axis)
    y = np.cumsum(x, axis)
    if exclusive:
        y = y - x
    return np.flip(y, axis) if reverse else y


def resize_matrix(n_in, n_out, scale, mode, coordinates, rounding):
    """The [n_out, n_in] matrix of one dimension's resampling, from ONNX's
    definition of Resize."""
    m = np.zeros((n_out, n_in))
    for x in range(n_out):
        if coordinates == "half_pixel":
            c = (x + 0.5) / scale - 0.5
        elif coordinates == "pytorch_half_pixel":
            c = (x + 0.5) / scale - 0.5 if n_in * scale > 1 else 0.0
        elif coordinates == "align_corners":
            c = x * (n_in - 1) / (n_in * scale - 1) if n_in * scale > 1 else 0.0
        else:  # asymmetric
            c = x / scale
        if mode == "nearest":
            f = np.floor(c)
            if rounding == "floor":
                i = f
            elif rounding == "ceil":
                i = np.ceil(c)
            elif c - f == 0.5:
                i = f + (rounding == "round_prefer_ceil")
            else:
                i = np.floor(c + 0.5)
            m[x, int(min(max(i, 0), n_in - 1))] = 1
        else:
            f = np.floor(c)
            lo, hi = (int(min(max(j, 0), n_in - 1)) for j in (f, f + 1))
            m[x, lo] += 1 - (c - f)
            m[x, hi] += c - f
    return m


def resize(node, ins):
    """Resize 13 (X, roi, scales[, sizes]), nearest or linear, as
    one resampling matrix per dimension."""
    x = ins[0]
    scales = ins[2] if len(ins) > 2 and ins[2] is not None and ins[2].size \
        else None
    if scales is None:
        sizes = ins[3].astype(np.int64)
        scales = sizes / np.array(x.shape)
    else:
        sizes = np.floor(np.array(x.shape) * scales).astype(np.int64)
    mode = attr(node, "mode", "nearest")
    coords = attr(node, "coordinate_transformation_mode", "half_pixel")
    rounding = attr(node, "nearest_mode", "round_prefer_floor")
    mats = [resize_matrix(n, int(o), s, mode, coords, rounding)
            for n, o, s in zip(x.shape, sizes, scales)]

    def apply(v, transpose):
        for d, m in enumerate(mats):
            v = np.moveaxis(np.tensordot(m.T if transpose else m, v,
                                         axes=([1], [d])), 0, d)
        return v
    return apply(x, False), lambda g: [apply(g, True)] + [None] * (len(ins) - 1)


def rms_norm(node, ins):
    x, scale = ins
    axis = attr(node, "axis", -1) % x.ndim
    eps = attr(node, "epsilon", 1e-5)
    axes = tuple(range(axis, x.ndim))
    r = 1 / np.sqrt((x * x).mean(axes, keepdims=True) + eps)

    def vjp(g):
        gs = g * scale
        dx = r * gs - x * r ** 3 * (gs * x).mean(axes, keepdims=True)
        return [dx, unbroadcast(g * x * r, scale.shape)]
    return x * r * scale, vjp


def layer_norm(node, ins):
    x, scale = ins[0], ins[1]
    bias = ins[2] if len(ins) > 2 else 0
    axis = attr(node, "axis", -1) % x.ndim
    axes = tuple(range(axis, x.ndim))
    mean = x.mean(axes, keepdims=True)
    rstd = 1 / np.sqrt(((x - mean) ** 2).mean(axes, keepdims=True)
                       + attr(node, "epsilon", 1e-5))
    xhat = (x - mean) * rstd
    lead = tuple(range(axis))

    def vjp(g):
        gs = g * scale
        dx = rstd * (gs - gs.mean(axes, keepdims=True)
                     - xhat * (gs * xhat).mean(axes, keepdims=True))
        out = [dx, (g * xhat).sum(lead)]
        if len(ins) > 2:
            out.append(g.sum(lead))
        return out
    return xhat * scale + bias, vjp


def window_patches(x, kernel, strides, pads, dilations, fill):
    """Yields, per kernel offset, the [N, C, out...] view of the padded
    input that offset reads, with the padded input and the view's index."""
    nd = len(kernel)
    width = [(0, 0), (0, 0)] + [(pads[i], pads[i + nd]) for i in range(nd)]
    xp = np.pad(x, width, constant_values=fill)
    out = [(xp.shape[2 + i] - dilations[i] * (kernel[i] - 1) - 1) // strides[i]
           + 1 for i in range(nd)]
    for offset in np.ndindex(*kernel):
        index = (slice(None), slice(None)) + tuple(
            slice(offset[i] * dilations[i],
                  offset[i] * dilations[i] + strides[i] * (out[i] - 1) + 1,
                  strides[i]) for i in range(nd))
        yield offset, xp, index


def unpad(xp, pads):
    nd = xp.ndim - 2
    return xp[(slice(None), slice(None)) + tuple(
        slice(pads[i], xp.shape[2 + i] - pads[i + nd]) for i in range(nd))]


def window_attrs(node, kernel):
    nd = len(kernel)
    return (attr(node, "strides", [1] * nd), attr(node, "pads", [0] * 2 * nd),
            attr(node, "dilations", [1] * nd))


def conv(node, ins):
    x, w = ins[0], ins[1]
    group = attr(node, "group", 1)
    kernel = w.shape[2:]
    strides, pads, dilations = window_attrs(node, kernel)
    cg, mg = x.shape[1] // group, w.shape[0] // group
    patches = list(window_patches(x, kernel, strides, pads, dilations, 0.0))
    y = 0
    for offset, xp, index in patches:
        patch = xp[index]
        part = [np.einsum("nc...,mc->nm...", patch[:, g * cg:(g + 1) * cg],
                          w[g * mg:(g + 1) * mg, :][(slice(None),) * 2 + offset])
                for g in range(group)]
        y = y + np.concatenate(part, 1)
    if len(ins) > 2:
        y = y + ins[2].reshape((1, -1) + (1,) * len(kernel))

    def vjp(g):
        dxp = np.zeros_like(patches[0][1])
        dw = np.zeros_like(w)
        for offset, xp, index in patches:
            patch = xp[index]
            for k in range(group):
                cs, ms = slice(k * cg, (k + 1) * cg), slice(k * mg, (k + 1) * mg)
                wk = w[ms][(slice(None),) * 2 + offset]
                dxp[index][:, cs] += np.einsum("nm...,mc->nc...", g[:, ms], wk)
                summed = [0] + list(range(2, g.ndim))
                dw[ms][(slice(None),) * 2 + offset] += np.tensordot(
                    g[:, ms], patch[:, cs], (summed, summed))
        out = [unpad(dxp, pads), dw]
        if len(ins) > 2:
            out.append(g.sum((0,) + tuple(range(2, g.ndim))))
        return out
    return y, vjp


def pool(node, x):
    kernel = attr(node, "kernel_shape")
    strides, pads, dilations = window_attrs(node, kernel)
    is_max = node.op_type == "MaxPool"
    patches = list(window_patches(x, kernel, strides, pads, dilations,
                                  -np.inf if is_max else 0.0))
    stack = np.stack([xp[index] for _, xp, index in patches])
    if is_max:
        y = stack.max(0)
        first = stack.argmax(0)  # the first maximum, as PyTorch

        def vjp(g):
            dxp = np.zeros_like(patches[0][1])
            for k, (_, _, index) in enumerate(patches):
                dxp[index] += g * (first == k)
            return [unpad(dxp, pads)]
        return y, vjp
    if attr(node, "count_include_pad", 0):
        divisor = len(patches)
    else:
        ones = list(window_patches(np.ones_like(x), kernel, strides, pads,
                                   dilations, 0.0))
        divisor = np.stack([xp[index] for _, xp, index in ones]).sum(0)
    y = stack.sum(0) / divisor

    def vjp(g):
        dxp = np.zeros_like(patches[0][1])
        for _, _, index in patches:
            dxp[index] += g / divisor
        return [unpad(dxp, pads)]
    return y, vjp


# Batch statistics of the last forward pass, by the running statistic's
# initializer name: what PyTorch's BatchNorm in training mode blends into
# its running mean and (unbiased) variance.
batch_statistics = {}


def batch_norm(node, ins):
    """Training mode, as partc trains it: the batch's own statistics."""
    x, scale, bias = ins[0], ins[1], ins[2]
    eps = attr(node, "epsilon", 1e-5)
    axes = (0,) + tuple(range(2, x.ndim))
    shape = (1, -1) + (1,) * (x.ndim - 2)
    mean = x.mean(axes)
    var = x.var(axes)
    count = x.size // x.shape[1]
    batch_statistics[node.input[3]] = mean
    batch_statistics[node.input[4]] = var * count / (count - 1)
    inv_std = 1 / np.sqrt(var + eps)
    xhat = (x - mean.reshape(shape)) * inv_std.reshape(shape)
    y = xhat * scale.reshape(shape) + bias.reshape(shape)

    def vjp(g):
        dbias = g.sum(axes)
        dscale = (g * xhat).sum(axes)
        dx = (scale * inv_std).reshape(shape) * (
            g - (dbias / count).reshape(shape)
            - xhat * (dscale / count).reshape(shape))
        return [dx, dscale, dbias, None, None]
    return y, vjp


def running_statistics(model):
    """Names of the initializers BatchNormalization keeps running."""
    return {n.input[i] for n in model.graph.node
            if n.op_type == "BatchNormalization" for i in (3, 4)}


class Graph:
    def __init__(self, model):
        self.model = model
        self.params = {t.name: numpy_helper.to_array(t).astype(np.float64)
                       for t in model.graph.initializer}
        # Dropout's step counter and seed, as partc's state.
        self.step, self.seed = 0, 0

    def run(self, feeds, params=None):
        """Outputs, and the tape for `backward`."""
        values = dict(self.params if params is None else params)
        values.update({k: np.asarray(v, np.float64) for k, v in feeds.items()})
        tape = []
        streams = 0
        for node in self.model.graph.node:
            ins = [values[n] if n else None for n in node.input]
            rng = None
            if node.op_type == "Dropout":
                rng = (streams, self.step, self.seed)
                streams += 1
            y, vjp = forward_node(node, ins, rng)
            # Extra outputs (TopK's indices) carry no gradient.
            if isinstance(y, tuple):
                for name, value in zip(node.output[1:], y[1:]):
                    values[name] = value
                y = y[0]
            values[node.output[0]] = y
            tape.append((node, vjp))
        return values, tape

    def backward(self, tape, seeds):
        grads = dict(seeds)
        for node, vjp in reversed(tape):
            g = grads.get(node.output[0])
            if g is None:
                continue
            for name, gi in zip(node.input, vjp(g)):
                if gi is not None:
                    grads[name] = grads.get(name, 0) + gi
        return grads


def loss_and_grad(kind, y, labels):
    """PyTorch's mean losses and their gradient with respect to y."""
    n = y.size
    if kind == "mse":
        return ((y - labels) ** 2).mean(), 2 * (y - labels) / n
    if kind == "l1":
        return np.abs(y - labels).mean(), np.sign(y - labels) / n
    if kind == "bce-with-logits":
        loss = (np.maximum(y, 0) - y * labels + np.log1p(np.exp(-np.abs(y))))
        return loss.mean(), (1 / (1 + np.exp(-y)) - labels) / n
    if kind == "cross-entropy":
        rows = y.reshape(-1, y.shape[-1])
        lab = labels.reshape(-1)
        p = softmax(rows, -1)
        loss = -np.log(p[np.arange(len(lab)), lab]).mean()
        g = p.copy()
        g[np.arange(len(lab)), lab] -= 1
        return loss, (g / len(lab)).reshape(y.shape)
    raise ValueError(kind)


class Optimizer:
    """torch.optim.SGD (dampening 0) and AdamW, in float64."""

    def __init__(self, kind, lr, momentum=0.0, weight_decay=None,
                 betas=(0.9, 0.999), eps=1e-8):
        self.kind, self.lr, self.momentum = kind, lr, momentum
        self.wd = (0.01 if kind == "adamw" else 0.0) if weight_decay is None \
            else weight_decay
        self.betas, self.eps, self.state, self.t = betas, eps, {}, 0

    def step(self, params, grads):
        self.t += 1
        for name, p in params.items():
            g = grads.get(name)
            if g is None:  # running statistics
                continue
            if self.kind == "sgd":
                g = g + self.wd * p
                if self.momentum:
                    buf = self.state.get(name)
                    buf = g if buf is None else self.momentum * buf + g
                    self.state[name] = buf
                    g = buf
                params[name] = p - self.lr * g
                continue
            b1, b2 = self.betas
            m, v = self.state.get(name, (np.zeros_like(p), np.zeros_like(p)))
            p = p * (1 - self.lr * self.wd)
            m = b1 * m + (1 - b1) * g
            v = b2 * v + (1 - b2) * g * g
            self.state[name] = (m, v)
            denom = np.sqrt(v) / np.sqrt(1 - b2 ** self.t) + self.eps
            params[name] = p - self.lr / (1 - b1 ** self.t) * m / denom
