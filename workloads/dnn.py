"""DNN training profiles for the iteration emulation, and a summary of its iteration traces.

A :class:`Profile` is what one data-parallel training iteration of a model looks like to the
network: a forward compute time, then the gradient buckets in the order backward produces
them (last layers first), each with the backward compute that precedes it. The worker
(:meth:`workloads.worker.Worker.run_dnn`) replays it: forward, then per bucket its backward
compute followed by an asynchronous All-Reduce of that bucket, overlapping with the next
bucket's compute as PyTorch DDP does.

How the numbers are built
-------------------------
Each model is a list of parameter *layers* in forward order, with a parameter count and a
relative compute weight (multiply-accumulates per sample). Parameter counts follow the
published architectures and add up to the usual totals; they are computed from the layer
shapes below, not copied:

* ``resnet50``: torchvision ResNet-50 (v1.5, stride on the 3x3 conv), 224x224 input,
  25,557,032 parameters (≈ 25.6 M); compute weight = conv/fc MACs (≈ 4.1 GMAC per image).
* ``gnmt``: GNMT v2 as in MLPerf / NVIDIA DeepLearningExamples: 4-layer LSTM encoder (first
  layer bidirectional), 4-layer LSTM decoder with normalized Bahdanau attention, hidden 1024,
  32,320-token shared BPE vocabulary (one embedding shared by encoder and decoder), output
  classifier: ≈ 160.7 M parameters (published as ≈ 160 M). Compute weight = dense MACs per
  token (LSTM / attention / classifier matrices); embedding look-ups are nearly free.
* ``dlrm``: MLPerf DLRM on Criteo Terabyte: bottom MLP 13-512-256-128, 26 embedding tables
  of dimension 128, dot interaction (479 features), top MLP 479-1024-1024-512-256-1:
  ≈ 2.37 M dense parameters. **Only the dense MLPs are data parallel and all-reduced**; the
  embedding tables (tens of GB) are model parallel and exchanged by all-to-all, which this
  profile does not model.
* ``bert-large`` (alias ``transformer``): BERT-large, 24 layers, hidden 1024, FFN 4096,
  30,522-token vocabulary, 512 positions, MLM decoder tied to the word embedding, pooler and
  NSP head: ≈ 336 M parameters (published as ≈ 340 M). Compute weight = dense MACs per token.

Compute times are round, approximate public figures for one V100-class GPU (order of
magnitude, not measurements); backward is taken as ≈ 2x forward (it computes gradients for
activations and weights), and split over the layers in proportion to their compute weight:

* ResNet-50, batch 32, FP32: ≈ 0.1 s forward+backward (≈ 320-400 images/s is the commonly
  reported FP32 V100 training throughput) -> forward 0.033 s, backward 0.067 s.
* GNMT, batch 128 sentences: ≈ 0.3 s per step (tens of thousands of tokens/s is the
  commonly reported V100 figure) -> forward 0.1 s, backward 0.2 s.
* DLRM, batch 2048 per GPU: ≈ 15 ms per step, dominated by embedding look-ups and the MLPs
  -> forward 0.005 s, backward 0.010 s (only the dense part's backward is split over buckets).
* BERT-large, batch 32 x 128 tokens, mixed precision: ≈ 6 x 336 M x 4096 ≈ 8 TFLOP per step
  at ≈ 27 TFLOP/s effective ≈ 0.3 s -> forward 0.1 s, backward 0.2 s.

Bucketing
---------
DDP packs gradients, in backward order, into buckets of at most ``bucket_cap_mb`` (25 MB by
default, as DDP's ``bucket_cap_mb``). Here a bucket is closed before a layer would overflow
it; a layer larger than the cap by itself (GNMT's and BERT's embeddings, ResNet-50's last
convolutions are below it) is split into cap-sized buckets so every bucket is at most the cap
(DDP would give such a tensor one oversized bucket: pass ``split_oversized=False`` for that).
DDP's small first bucket (1 MiB) is not modelled.

``bucket_cap_mb=0`` is no bucketing: one gradient message per layer (*variable*), in backward
order, as TensorFlow's parameter-server training sends them, one RPC per variable. Every
bucket records its variables' global indices (a layer's position in backward order, the
numbering of the ``ps`` collective), so a ``ps`` job places each variable on the server a
parameter server would, whatever the bucketing.

Scaling
-------
Emulated links run at tens of Mbit/s, far below a real fabric, so ``scale`` shrinks every
bucket's bytes (rounded to whole float32 elements, at least one) while keeping the bucket
structure of the full model; ``compute_scale`` shrinks the compute times the same way
(0 = no compute, communication only). E.g. ResNet-50 has ≈ 102 MB of gradients; at
``scale=0.01`` a 4-rank ring All-Reduce of its 1 MB at 50 Mbit/s takes ≈ 0.25 s.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

import numpy as np
from pydantic import field_validator

from testbed.core.experiment import DEFAULT_BUCKET_CAP_MB
from testbed.core.experiment import DnnWorkload as DnnSpec

BYTES_PER_PARAM = 4  # float32 gradients


@dataclass(frozen=True)
class Layer:
    """A group of parameters produced together: count and compute weight (MACs per sample)."""

    name: str
    params: int
    work: float


@dataclass(frozen=True)
class Bucket:
    """One gradient bucket: bytes to All-Reduce, and the backward compute that precedes it.

    ``params`` is the (unscaled) number of parameters of the full-size bucket, ``layers`` the
    names of the layers it holds, in backward order.
    """

    bytes: int
    backward_s: float
    params: int = 0
    layers: tuple[str, ...] = ()
    # (global variable index, unscaled parameters of it in this bucket), in bucket order
    variables: tuple[tuple[int, int], ...] = ()

    def variable_bounds(self, count: int) -> list[tuple[int, int, int]]:
        """(global variable index, first, end element) of each variable in a ``count``-element
        buffer of this bucket (a variable may get no element at a small scale)."""
        cuts = split_bounds(count, [n for _, n in self.variables])
        return [(v, lo, hi) for (v, _), (lo, hi) in zip(self.variables, cuts, strict=True)]


@dataclass(frozen=True)
class Profile:
    """One training iteration of ``name``: forward time, then buckets in backward order."""

    name: str
    forward_s: float
    buckets: tuple[Bucket, ...]
    params: int = 0  # of the full model's all-reduced part
    scale: float = 1.0
    compute_scale: float = 1.0
    cap_bytes: int = 0  # of the full-size buckets (0: unbucketed, one per layer)

    @property
    def total_bytes(self) -> int:
        return sum(b.bytes for b in self.buckets)

    @property
    def backward_s(self) -> float:
        return sum(b.backward_s for b in self.buckets)

    @property
    def compute_s(self) -> float:
        return self.forward_s + self.backward_s


# ---------------------------------------------------------------- layer tables


def _resnet50() -> list[Layer]:
    def conv(name: str, k: int, cin: int, cout: int, hw: int) -> Layer:
        weights = k * k * cin * cout
        return Layer(name, weights + 2 * cout, float(weights * hw * hw))  # + batch norm

    layers = [conv("conv1", 7, 3, 64, 112)]
    cin = 64
    for stage, (blocks, mid, out, hw) in enumerate(
        [(3, 64, 256, 56), (4, 128, 512, 28), (6, 256, 1024, 14), (3, 512, 2048, 7)], start=1
    ):
        for b in range(blocks):
            p = f"layer{stage}.{b}"
            layers.append(conv(f"{p}.conv1", 1, cin, mid, hw if b or stage == 1 else 2 * hw))
            layers.append(conv(f"{p}.conv2", 3, mid, mid, hw))
            layers.append(conv(f"{p}.conv3", 1, mid, out, hw))
            if b == 0:
                layers.append(conv(f"{p}.downsample", 1, cin, out, hw))
            cin = out
    layers.append(Layer("fc", 2048 * 1000 + 1000, 2048.0 * 1000))
    return layers


def _lstm(name: str, inp: int, hidden: int) -> Layer:
    params = 4 * (hidden * (inp + hidden) + 2 * hidden)  # PyTorch: two bias vectors
    return Layer(name, params, float(4 * hidden * (inp + hidden)))


def _linear(name: str, inp: int, out: int) -> Layer:
    return Layer(name, inp * out + out, float(inp * out))


def _embedding(name: str, rows: int, dim: int) -> Layer:
    # A look-up (and a scatter-add in backward): a small nominal weight, never zero.
    return Layer(name, rows * dim, float(dim) * 64)


def _gnmt() -> list[Layer]:
    vocab, h = 32320, 1024
    return [
        _embedding("embedding.shared", vocab, h),  # encoder and decoder: ready last
        _lstm("encoder.lstm0.fwd", h, h), _lstm("encoder.lstm0.bwd", h, h),
        _lstm("encoder.lstm1", 2 * h, h), _lstm("encoder.lstm2", h, h),
        _lstm("encoder.lstm3", h, h),
        _lstm("decoder.lstm0", h, h),
        Layer("decoder.attention", 2 * h * h + 2 * h + 1, float(2 * h * h)),
        _lstm("decoder.lstm1", 2 * h, h), _lstm("decoder.lstm2", 2 * h, h),
        _lstm("decoder.lstm3", 2 * h, h),
        _linear("classifier", h, vocab),
    ]


def _dlrm() -> list[Layer]:
    layers = []
    for part, widths in (("bottom", [13, 512, 256, 128]),
                         ("top", [479, 1024, 1024, 512, 256, 1])):
        for i, (a, b) in enumerate(itertools.pairwise(widths)):
            layers.append(_linear(f"{part}_mlp.{i}", a, b))
    return layers


def _bert_large() -> list[Layer]:
    vocab, h, ffn, n_layers = 30522, 1024, 4096, 24
    layers = [
        _embedding("embeddings.word", vocab, h),  # tied with the MLM decoder: ready last
        _embedding("embeddings.position", 512, h),
        _embedding("embeddings.token_type", 2, h),
        Layer("embeddings.norm", 2 * h, float(h)),
    ]
    for i in range(n_layers):
        p = f"encoder.{i}"
        layers += [
            _linear(f"{p}.qkv", h, 3 * h), _linear(f"{p}.attn_out", h, h),
            Layer(f"{p}.attn_norm", 2 * h, float(h)),
            _linear(f"{p}.ffn_in", h, ffn), _linear(f"{p}.ffn_out", ffn, h),
            Layer(f"{p}.ffn_norm", 2 * h, float(h)),
        ]
    layers += [
        _linear("pooler", h, h),
        _linear("mlm.transform", h, h), Layer("mlm.norm", 2 * h, float(h)),
        Layer("mlm.decoder_bias", vocab, float(vocab)),  # weights tied to embeddings.word
        _linear("nsp", h, 2),
    ]
    return layers


@dataclass(frozen=True)
class _Model:
    layers: tuple[Layer, ...]
    forward_s: float
    backward_s: float


# Compute times: see the module docstring for the figures and their sources.
MODELS: dict[str, _Model] = {
    "resnet50": _Model(tuple(_resnet50()), 0.033, 0.067),
    "gnmt": _Model(tuple(_gnmt()), 0.1, 0.2),
    "dlrm": _Model(tuple(_dlrm()), 0.005, 0.010),
    "bert-large": _Model(tuple(_bert_large()), 0.1, 0.2),
}
ALIASES = {"transformer": "bert-large", "bert": "bert-large", "resnet-50": "resnet50",
           "resnet": "resnet50"}


def model_names() -> list[str]:
    return sorted(MODELS)


def canonical(name: str) -> str:
    """The model's canonical name (aliases and case folded); ValueError for unknown ones."""
    key = name.strip().lower()
    key = ALIASES.get(key, key)
    if key not in MODELS:
        raise ValueError(f"unknown model {name!r}; known: {', '.join(model_names())} "
                         f"(aliases: {', '.join(sorted(ALIASES))})")
    return key


def parameters(name: str) -> int:
    """The all-reduced parameter count of the full model."""
    return sum(layer.params for layer in MODELS[canonical(name)].layers)


# ---------------------------------------------------------------- bucketing


def split_bounds(count: int, weights: list[int] | tuple[int, ...]) -> list[tuple[int, int]]:
    """A ``count``-element buffer cut into consecutive ranges in proportion to ``weights``."""
    total = sum(weights)
    cuts = [round(count * c / total) for c in itertools.accumulate(weights, initial=0)]
    return list(itertools.pairwise(cuts))


def _bucket_layers(layers: Iterable[Layer], cap_params: int, split_oversized: bool
                   ) -> list[list[tuple[Layer, int]]]:
    """Pack (layer, parameters taken from it) in backward order into buckets of ≤ cap."""
    buckets: list[list[tuple[Layer, int]]] = []
    current: list[tuple[Layer, int]] = []
    size = 0
    for layer in reversed(list(layers)):
        if current and size + layer.params > cap_params:
            buckets.append(current)
            current, size = [], 0
        if layer.params > cap_params:
            if not split_oversized:
                buckets.append([(layer, layer.params)])
                continue
            left = layer.params
            while left > cap_params:
                buckets.append([(layer, cap_params)])
                left -= cap_params
            current, size = [(layer, left)], left
            continue
        current.append((layer, layer.params))
        size += layer.params
    if current:
        buckets.append(current)
    return buckets


def _scaled_bytes(params: int, scale: float) -> int:
    """``params`` float32 gradients shrunk by ``scale``: whole elements, at least one."""
    return max(1, round(params * scale)) * BYTES_PER_PARAM


def profile(name: str, scale: float = 1.0, compute_scale: float = 1.0,
            bucket_cap_mb: float = DEFAULT_BUCKET_CAP_MB, split_oversized: bool = True) -> Profile:
    """The iteration profile of model ``name`` (see the module docstring).

    ``scale`` (0 < scale ≤ 1) multiplies every bucket's bytes, ``compute_scale`` (≥ 0) every
    compute time; ``bucket_cap_mb`` (MB = 10^6 bytes, unscaled) is DDP's bucket cap, 0 for
    one bucket per layer (unbucketed).
    """
    if not 0 < scale <= 1:
        raise ValueError(f"scale must be in (0, 1], not {scale}")
    if compute_scale < 0:
        raise ValueError(f"compute_scale must be ≥ 0, not {compute_scale}")
    if bucket_cap_mb < 0:
        raise ValueError(f"bucket_cap_mb must be ≥ 0, not {bucket_cap_mb}")
    key = canonical(name)
    model = MODELS[key]
    cap_params = max(1, int(bucket_cap_mb * 1e6) // BYTES_PER_PARAM)
    total_work = sum(layer.work for layer in model.layers)
    index = {layer.name: i for i, layer in enumerate(reversed(model.layers))}
    packed = ([[(layer, layer.params)] for layer in reversed(model.layers)] if not bucket_cap_mb
              else _bucket_layers(model.layers, cap_params, split_oversized))
    buckets = []
    for members in packed:
        params = sum(n for _, n in members)
        # A split layer's compute goes with its pieces in proportion to their size.
        work = sum(layer.work * n / layer.params for layer, n in members)
        names = tuple(dict.fromkeys(layer.name for layer, _ in members))
        buckets.append(Bucket(
            bytes=_scaled_bytes(params, scale),
            backward_s=model.backward_s * work / total_work * compute_scale,
            params=params, layers=names,
            variables=tuple((index[layer.name], n) for layer, n in members),
        ))
    return Profile(
        name=key, forward_s=model.forward_s * compute_scale, buckets=tuple(buckets),
        params=sum(layer.params for layer in model.layers), scale=scale,
        compute_scale=compute_scale,
        cap_bytes=cap_params * BYTES_PER_PARAM if bucket_cap_mb else 0,
    )


# ---------------------------------------------------------------- worker config


class DnnWorkload(DnnSpec):
    """The spec's DNN workload (:class:`testbed.core.experiment.DnnWorkload`, whose fields and
    defaults it keeps) as a worker replays it: ``model`` may be an alias here, and
    :meth:`profile` gives the iteration (see :func:`profile`).

    ``compute`` is how compute time is spent: ``sleep`` (like a GPU: the CPU stays free for
    communication) or ``busy`` (spin on small numpy work, competing with the communication
    thread for the interpreter and a core: a stress mode).
    """

    kind: Literal["dnn"] = "dnn"
    model: str  # type: ignore[assignment]

    @field_validator("model")
    @classmethod
    def _known(cls, v: str) -> str:
        return canonical(v)

    def profile(self) -> Profile:
        return profile(self.model, self.scale, self.compute_scale, self.bucket_cap_mb)


# ---------------------------------------------------------------- summary


def _stats(values: list[float]) -> dict[str, float]:
    if not values:
        return {"mean": math.nan, "p50": math.nan, "p99": math.nan}
    arr = np.asarray(values, dtype=np.float64)
    return {"mean": float(arr.mean()), "p50": float(np.percentile(arr, 50)),
            "p99": float(np.percentile(arr, 99))}


def _as_rows(rows) -> list[Mapping]:
    if hasattr(rows, "to_pylist"):  # pyarrow Table
        return rows.to_pylist()
    if hasattr(rows, "to_dict"):  # pandas DataFrame
        return rows.to_dict("records")
    return list(rows)


def summarise_iterations(rows, include_warmup: bool = False) -> dict:
    """Mean / p50 / p99 of iteration time, exposed communication and compute share over the
    (rank, iteration) rows of an ``iterations`` table (a pyarrow Table, DataFrame or dicts);
    warm-up iterations are left out unless ``include_warmup``."""
    use = [r for r in _as_rows(rows) if include_warmup or not r["warmup"]]
    return {
        "models": sorted({str(r["model"]) for r in use}),
        "rows": len(use),
        "iterations": len({(r["job_id"], r["iteration"]) for r in use}),
        "time": _stats([float(r["time"]) for r in use]),
        "exposed_comm": _stats([float(r["exposed_comm"]) for r in use]),
        "compute_share": _stats([float(r["compute_share"]) for r in use]),
        "correct": all(bool(r["correct"]) for r in use),
    }
