"""Fused bf16 decode kernels for x86 CPUs with AVX512-BF16, in C, compiled on first use (with the
training forward's, which need AVX-512 F, BW and VL only).

Why: a decode step's attention is B*Hkv tiny matrix products (G query heads against a pair's
keys, then its values), which oneDNN's batched bf16 matmuls run at a few percent of the machine's
peak, with the softmax, the scores' bias, RoPE and the cache write as more passes; each folded
RMSNorm is three more ops. At 128 rows of the built-in model they took a third of the decode.
``kernels/decode_bf16.c`` computes, per decode step and layer, for each (row, KV head) pair:
RoPE on its query heads and its key, the key and value written into the cache, and for each
query head, over the filled slots s,

    out = sum_s softmax_s(scale * q . k_s + bias_s) v_s

in one pass over the pair's cache (bf16 products summed in float32, as oneDNN's bf16 matmul;
softmax and the weighted sum in float32; rounded once to bf16 where the torch path rounds after
every op), reading the filled slots only (the torch path attends over every allocated one); and
the folded RMSNorm ``x / hypot(||x||, floor)`` per row in one pass.

The C compiler ($CC, else ``cc``) builds them, with the training forward's kernels
(``kernels/train_fused.c``, ``kernels/train_attention.c``, :mod:`dapo.trainer.fused_cpu_ops`), into one library in
``~/.cache/dapo-rl/kernels`` (keyed by the sources, the flags and the compiler's version; about a
second; a new build removes others unused for a week; :func:`cpu_kernel_library`; on a CPU without
AVX512-BF16, without the decode kernels, the training ones rounding to bf16 in integer ops), ctypes loads it,
and a self-test against float64 must pass (the training kernels run their own). Where any of that
fails (another CPU, no compiler, a build error), :func:`cpu_decode_kernels` returns None with the
reason in :func:`unavailable_reason` (a warning on a CPU they are for) and the decoder runs its
torch ops. ``rollout.native_cpu_kernels=false``
opts out.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import platform
import shlex
import shutil
import subprocess
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import torch

from dapo.rollout.decode_case import random_decode_case

_KERNELS = Path(__file__).with_name("kernels")
# decode_bf16.c: these decode kernels; train_fused.c, train_attention.c: the training forward's (dapo.trainer.fused_cpu_ops)
_SOURCES = [_KERNELS / "decode_bf16.c", _KERNELS / "train_fused.c", _KERNELS / "train_attention.c"]
_HEADERS = [_KERNELS / "vector_math.h"]
_STALE_AFTER_SECONDS = 7 * 24 * 3600  # another build unused this long is removed by a new build
_LIBRARY_NAMES = ("cpu_kernels-", "decode_bf16-", "decode_attention-")  # its file name before the key; older ones
# -ffp-contract=off: a*b + c*d stays two roundings and an add, as torch computes it (no implicit FMA)
_FLAGS = ["-O3", "-mavx512f", "-mavx512bw", "-mavx512vl", "-ffp-contract=off", "-fopenmp", "-shared", "-fPIC"]
_CPU_FLAGS = ("avx512f", "avx512bw", "avx512vl")  # every kernel's (the CPU flags of /proc/cpuinfo)
# AVX512-BF16: the decode kernels' vdpbf16ps, built in only where the CPU has it; without it the
# training kernels round to bf16 in integer ops, bit for bit (vector_math.h's f32_to_bf16x16)
_BF16_CPU_FLAG, _BF16_FLAG = "avx512_bf16", "-mavx512bf16"
MAX_GROUPS = 16  # MAX_GROUPS and MAX_HEAD_DIM of the C source: query heads per KV head
MAX_HEAD_DIM = 256


class CpuDecodeKernels:
    """The loaded kernels: ``attention`` (RoPE, the new slot's K and V, attention) and ``rms_scale``."""

    def __init__(self, library: ctypes.CDLL) -> None:
        pointer, size = ctypes.c_void_p, ctypes.c_long
        self._attention = library.dapo_decode_attention_bf16
        self._attention.argtypes = [pointer, pointer, size, pointer, size, pointer, pointer, pointer, size, size,
                                    size, ctypes.c_int, ctypes.c_int, ctypes.c_float, pointer, pointer, ctypes.c_int]
        self._attention.restype = ctypes.c_int
        self._rms_scale = library.dapo_rms_scale_bf16
        self._rms_scale.argtypes = [pointer, size, size, ctypes.c_float, pointer, ctypes.c_int]
        self._rms_scale.restype = None

    @staticmethod
    def supports(groups: int, head_dim: int) -> bool:
        """Whether the attention kernel computes this head layout (vdpbf16ps reads 32 dims at a time)."""
        return head_dim % 32 == 0 and head_dim <= MAX_HEAD_DIM and 1 <= groups <= MAX_GROUPS

    def attention(self, qkv: torch.Tensor, rope: torch.Tensor, positions: torch.Tensor, keys: torch.Tensor,
                  values: torch.Tensor, bias: torch.Tensor, slot: int, scale: float) -> torch.Tensor:
        """One decode step's attention for one layer, all bf16 on the CPU but ``positions`` (int64).

        ``qkv`` (B, Hkv, G+2, d): each (row, KV head) pair's G query heads, key and value, before
        RoPE; ``rope`` (positions, 2, G+2, d): cos and sign-folded sin (the decoder's table);
        ``positions`` (B,): each row's position in it; ``keys``/``values`` (B*Hkv, capacity, d):
        the layer's cache, slot ``slot`` written with the rotated key and the value; ``bias``
        (B*Hkv, capacity), added to the scaled scores. Attends over slots [0, slot]; returns
        (B*Hkv, G, d)."""
        return self.attention_step(len(qkv), rope, positions, keys, values, bias, slot, scale)(qkv, keys, values)

    def attention_step(self, rows: int, rope: torch.Tensor, positions: torch.Tensor, keys: torch.Tensor,
                       values: torch.Tensor, bias: torch.Tensor, slot: int, scale: float) -> DecodeStep:
        """:meth:`attention`'s arguments checked once for a decode step (``keys``/``values``: one
        layer's cache, standing for every layer's), and the call for each layer:
        ``step(qkv, keys, values)``. The decoder calls it once per step, not once per layer."""
        pairs, capacity, head_dim = keys.shape
        heads = rope.shape[2] if rope.dim() == 4 else 0
        tensors = (rope, keys, values, bias, positions)
        if (any(t.device.type != "cpu" or not t.is_contiguous() for t in tensors) or positions.dtype != torch.int64
                or any(t.dtype != torch.bfloat16 for t in tensors[:-1])):
            raise TypeError("cpu decode attention: qkv, rope, keys, values, bias must be contiguous bfloat16 and "
                            "positions contiguous int64, on the CPU")
        if (rows < 1 or pairs % rows or values.shape != keys.shape or bias.shape != (pairs, capacity)
                or rope.shape[1:] != (2, heads, head_dim) or positions.shape != (rows,)):
            raise ValueError(f"cpu decode attention: shapes rope {tuple(rope.shape)}, positions {tuple(positions.shape)}, "
                             f"keys {tuple(keys.shape)}, values {tuple(values.shape)}, bias {tuple(bias.shape)} "
                             f"do not fit together and {rows} rows")
        if not (0 <= slot < capacity and self.supports(heads - 2, head_dim)):
            raise ValueError(f"cpu decode attention: slot {slot} of capacity {capacity}, {heads - 2} query heads per "
                             f"KV head, head_dim {head_dim} unsupported")
        return DecodeStep(self._attention, rope, positions, bias, slot, scale, (rows, pairs // rows, heads, head_dim),
                          keys.shape)

    def rms_scale(self, hidden: torch.Tensor, norm_floor: float) -> torch.Tensor:
        """``hidden / hypot(||hidden||, norm_floor)`` per row (the decoder's folded RMSNorm), a new
        bf16 tensor; ``hidden`` contiguous bf16 (rows, n) with n a multiple of 16."""
        if (hidden.dtype != torch.bfloat16 or hidden.device.type != "cpu" or not hidden.is_contiguous()
                or hidden.dim() != 2 or hidden.shape[1] % 16):
            raise ValueError(f"cpu rms_scale: needs contiguous bfloat16 (rows, n) on the CPU, n % 16 == 0: got "
                             f"{hidden.dtype} {tuple(hidden.shape)} on {hidden.device}")
        out = torch.empty_like(hidden)
        self._rms_scale(hidden.data_ptr(), hidden.shape[0], hidden.shape[1], norm_floor, out.data_ptr(),
                        torch.get_num_threads())
        return out


class DecodeStep:
    """One decode step's attention call for each layer (:meth:`CpuDecodeKernels.attention_step`):
    the step's arguments checked, its scratch allocated once; a layer's call checks only that its
    tensors have the step's shapes. Each call returns a new (B*Hkv, G, d) tensor."""

    def __init__(self, function: Callable[..., int], rope: torch.Tensor, positions: torch.Tensor, bias: torch.Tensor,
                 slot: int, scale: float, qkv_shape: tuple[int, ...], cache_shape: torch.Size) -> None:
        self.function, self.rope, self.positions, self.bias, self.slot, self.scale = function, rope, positions, bias, slot, scale
        self.qkv_shape, self.cache_shape = qkv_shape, cache_shape
        rows, self.kv_heads, heads, self.head_dim = qkv_shape
        self.groups, self.pairs = heads - 2, rows * self.kv_heads
        self.threads = torch.get_num_threads()
        self.scratch = torch.empty(self.threads * self.groups * (-(-(slot + 1) // 16) * 16), dtype=torch.float32)

    def __call__(self, qkv: torch.Tensor, keys: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
        if not (qkv.dtype == keys.dtype == values.dtype == torch.bfloat16 and qkv.device.type == "cpu"
                and qkv.is_contiguous() and keys.is_contiguous() and values.is_contiguous()):
            raise TypeError("cpu decode attention: qkv, keys and values must be contiguous bfloat16 on the CPU")
        if qkv.shape != self.qkv_shape or keys.shape != self.cache_shape or values.shape != self.cache_shape:
            raise ValueError(f"cpu decode attention: qkv {tuple(qkv.shape)}, keys {tuple(keys.shape)}, values "
                             f"{tuple(values.shape)} do not fit together: the step's are {self.qkv_shape} and "
                             f"{tuple(self.cache_shape)}")
        out = torch.empty(self.pairs, self.groups, self.head_dim, dtype=torch.bfloat16)
        status = self.function(qkv.data_ptr(), self.rope.data_ptr(), len(self.rope), self.positions.data_ptr(),
                               self.kv_heads, keys.data_ptr(), values.data_ptr(), self.bias.data_ptr(),
                               self.cache_shape[1], self.slot, self.pairs, self.groups, self.head_dim, self.scale,
                               out.data_ptr(), self.scratch.data_ptr(), self.threads)
        if status != 0:
            raise ValueError(f"cpu decode attention: a position in {self.positions.tolist()[:8]} is outside the RoPE "
                             f"table's {len(self.rope)} positions")
        return out


def cpu_decode_kernels() -> CpuDecodeKernels | None:
    """The decode kernels, bound and self-tested once per process; None where they cannot run here
    (a warning says why, once, on a CPU they are for: with AVX512-BF16)."""
    loaded = _kernels_or_reason()
    if isinstance(loaded, CpuDecodeKernels):
        return loaded
    _warn_once(loaded, decode=True)
    return None


def cpu_kernel_library() -> ctypes.CDLL | None:
    """The compiled library of every CPU kernel (decode and training: the training forward binds and
    self-tests its own, :mod:`dapo.trainer.fused_cpu_ops`), built and loaded once per process; None
    where it cannot be (a warning says why, once, on a CPU it is for)."""
    loaded = _library_or_reason()
    if isinstance(loaded, str):
        _warn_once(loaded)
        return None
    return loaded


def _warn_once(reason: str, decode: bool = False) -> None:
    global _warned
    if not _warned and platform_reason(decode) is None:
        _warned = True  # first: a warning filter that raises must not make every later call raise
        warnings.warn(f"the fused CPU kernels are not used: {reason} (torch's ops decode and train instead, slower; "
                      "rollout.native_cpu_kernels=false and trainer.native_cpu_kernels=false silence this)",
                      stacklevel=4)


def unavailable_reason(decode: bool = True) -> str | None:
    """Why :func:`cpu_decode_kernels` returns None (``decode``), or :func:`cpu_kernel_library`
    (not ``decode``: the library the training kernels bind), or None when it returns them."""
    loaded = _kernels_or_reason() if decode else _library_or_reason()
    return loaded if isinstance(loaded, str) else None


_warned = False


@functools.cache
def _kernels_or_reason() -> CpuDecodeKernels | str:
    try:
        return _load()
    except _Unavailable as error:
        return str(error)
    except Exception as error:  # noqa: BLE001 - anything else in building or loading them: decode without
        return f"building or loading them failed unexpectedly ({error!r})"


@functools.cache
def _library_or_reason() -> ctypes.CDLL | str:
    try:
        if (reason := platform_reason()) is not None:
            return reason
        library = _build()
        try:
            return ctypes.CDLL(str(library))
        except OSError as error:
            return f"loading {library} failed: {error}"
    except _Unavailable as error:
        return str(error)
    except Exception as error:  # noqa: BLE001 - anything else in building or loading it: run without
        return f"building or loading them failed unexpectedly ({error!r})"


class _Unavailable(Exception):
    pass


def platform_reason(decode: bool = False) -> str | None:
    """Why this machine is not one the kernels are for, or None: an x86-64 Linux CPU with AVX-512
    F, BW and VL (the training kernels), and AVX512-BF16 too (``decode``: the bf16 decode kernels)."""
    if platform.machine().lower() not in ("x86_64", "amd64") or platform.system() != "Linux":
        return f"not an x86-64 Linux machine ({platform.system()} {platform.machine()})"
    missing = [flag for flag in (*_CPU_FLAGS, *([_BF16_CPU_FLAG] if decode else [])) if flag not in _cpu_flags()]
    return f"the CPU lacks {', '.join(missing)}" if missing else None


def _compiler_flags() -> list[str]:
    return [*_FLAGS, _BF16_FLAG] if _BF16_CPU_FLAG in _cpu_flags() else _FLAGS


def _load() -> CpuDecodeKernels:
    if (reason := platform_reason(decode=True)) is not None:
        raise _Unavailable(reason)
    library = _library_or_reason()
    if isinstance(library, str):
        raise _Unavailable(library)
    try:
        kernels = CpuDecodeKernels(library)
    except AttributeError as error:
        raise _Unavailable(f"binding the decode kernels failed: {error}") from error
    if (error := _self_test(kernels)) is not None:
        raise _Unavailable(f"the built kernels failed their self-test ({error})")
    return kernels


@functools.cache
def _cpu_flags() -> frozenset[str]:
    """The CPU flags of /proc/cpuinfo (read once: a process's CPU does not change)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return frozenset()
    line = next((line for line in text.splitlines() if line.startswith("flags")), "")
    return frozenset(line.partition(":")[2].split())


def _build() -> Path:
    """The compiled library, from the cache or compiled now (written under a temporary name and
    renamed, so that processes building it at once never load a half-written file)."""
    compiler = shlex.split(os.environ.get("CC") or "cc")  # "ccache gcc" too
    if not compiler or shutil.which(compiler[0]) is None:
        raise _Unavailable(f"no C compiler ({os.environ.get('CC') or 'cc'}) on PATH")
    try:
        version = subprocess.run([*compiler, "--version"], capture_output=True, text=True, timeout=30).stdout
        text = b"".join(path.read_bytes() for path in [*_SOURCES, *_HEADERS])
        flags = _compiler_flags()
        key = hashlib.sha256(text + " ".join(flags).encode() + version.encode()).hexdigest()[:16]
        directory = _cache_directory()
        library = directory / f"{_LIBRARY_NAMES[0]}{key}.so"
        if library.exists():
            os.utime(library)  # in use: _STALE_AFTER_SECONDS counts from the last use
            return library
        handle, name = tempfile.mkstemp(dir=directory, prefix=f".{library.stem}.", suffix=".tmp")
        os.close(handle)
    except (OSError, subprocess.SubprocessError) as error:
        raise _Unavailable(f"preparing the build failed: {error}") from error
    partial = Path(name)
    try:
        result = subprocess.run([*compiler, *flags, *map(str, _SOURCES), "-o", str(partial)],
                                capture_output=True, text=True, timeout=300)
        if result.returncode != 0:
            last = (result.stderr.strip().splitlines() or ["no message"])[-1]
            raise _Unavailable(f"compiling {_KERNELS} failed ({' '.join(compiler)}: {last})")
        os.replace(partial, library)
        # builds of other sources, flags or compilers that no process has loaded for a week (another
        # dapo-rl version's in use now, in another environment, is kept: deleting it between its
        # check and its load would turn its kernels off)
        for stale in directory.glob("*.so"):
            if (stale != library and stale.name.startswith(_LIBRARY_NAMES)
                    and time.time() - stale.stat().st_mtime > _STALE_AFTER_SECONDS):
                stale.unlink(missing_ok=True)
    except (OSError, subprocess.SubprocessError) as error:
        raise _Unavailable(f"compiling {_KERNELS} failed: {error}") from error
    finally:
        partial.unlink(missing_ok=True)
    return library


def _cache_directory() -> Path:
    """$XDG_CACHE_HOME/dapo-rl/kernels (~/.cache when unset or empty); where that cannot be made,
    a directory of this user's own under the temporary directory, mode 0700: a library loaded
    from a directory another user can write could be theirs."""
    directory = Path(os.environ.get("XDG_CACHE_HOME") or "~/.cache").expanduser() / "dapo-rl" / "kernels"
    try:
        directory.mkdir(parents=True, exist_ok=True)
        return directory
    except OSError:
        directory = Path(tempfile.gettempdir()) / f"dapo-rl-kernels-{os.getuid()}"
    directory.mkdir(mode=0o700, exist_ok=True)
    status = directory.stat()
    if status.st_uid != os.getuid() or status.st_mode & 0o022:
        raise _Unavailable(f"{directory} belongs to another user or others can write it")
    return directory


def _self_test(kernels: CpuDecodeKernels) -> str | None:
    """None if the kernels match float64 on a small random case (left padding masked, a length
    that is not a multiple of 16, slots past it), else what differed."""
    case = random_decode_case(rows=2, kv_heads=2, groups=2, head_dim=64, capacity=24, slot=18)
    out = kernels.attention(*case.arguments()).double()
    errors = {"attention": (out - case.reference()).abs().max().item(),
              "cached key": (case.keys[:, case.slot].double() - case.rotated_key()).abs().max().item()}
    hidden = torch.randn(3, 64, generator=torch.Generator().manual_seed(0)).bfloat16()
    exact = hidden.double() / torch.linalg.vector_norm(hidden.double(), dim=-1, keepdim=True).hypot(torch.tensor(0.5))
    errors["rms_scale"] = (kernels.rms_scale(hidden, 0.5).double() - exact).abs().max().item()
    failed = {name: error for name, error in errors.items() if not error < 2e-2}
    return ", ".join(f"{name}: max error {error:.3g} against float64" for name, error in failed.items()) or None
