"""The run directory's checks (:func:`dapo.preflight.check_run` asks them, `dapo eval` too for its
save directory): it can be created and written, and has room for a checkpoint of the model, whose
size is read from the weight files' headers, not by loading them."""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
import warnings
from pathlib import Path

from dapo.config import DAPOConfig
from dapo.config.schema import DTYPE_BYTES
from dapo.context_checks import is_builtin

BIN_WEIGHTS = "pytorch_model*.bin"  # the weight files of torch.save's format (dapo.preflight.WEIGHT_PATTERNS)


def output_problems(run_dir: Path, checkpoint_bytes: int, keep_last: int = 1, key: str = "output_dir") -> list[str]:
    """The run directory (the setting ``key`` names) can be created and written, and has room for
    one checkpoint of ``checkpoint_bytes`` (a warning when not for the ``keep_last + 1`` that
    coexist while the oldest is rotated out)."""
    if run_dir.is_file():
        return [f"{key}={str(run_dir)!r} is a file, not a directory"]
    for path in (run_dir, *run_dir.parents):  # (the run's own mkdir stops at one: a file exists there)
        if path.is_symlink() and not path.exists():
            return [f"{key}={str(run_dir)!r} cannot be made: {path} is a symbolic link to {os.readlink(path)}, "
                    "which does not exist"]
    # made to be tried, then removed: a run (or dapo eval) that stops before it writes anything
    # leaves no empty directory behind
    # where the OS puts it: "link/../run" is beside the link's target, and in "a/b/../c" a missing
    # a/b is none of the folders it makes
    absolute = Path(os.path.realpath(run_dir))
    made = [path for path in (absolute, *absolute.parents) if not path.exists()]
    try:
        absolute.mkdir(parents=True, exist_ok=True)
        # the checkpoints' folder too where a run made it: one made read-only stopped the run at its
        # first checkpoint, the steps before it trained for nothing
        for folder in (absolute, *[sub for sub in (absolute / "checkpoints",) if sub.is_dir()]):
            with tempfile.NamedTemporaryFile(dir=folder, prefix=".write-test-"):
                pass
        free = shutil.disk_usage(absolute).free
    except OSError as error:
        where = f" ({Path(error.filename).parent})" if error.filename and Path(error.filename).parent != absolute else ""
        return [f"{key}={str(run_dir)!r} cannot be written{where}: {error.strerror or error}"]
    finally:
        for path in made:  # deepest first; one another process has written into since stays
            try:
                path.rmdir()
            except OSError:
                break
    if checkpoint_bytes > free:
        return [f"{key}={str(run_dir)!r} has {_size(free)} free, and one checkpoint of this model "
                f"(weights + optimizer state) needs about {_size(checkpoint_bytes)}"]
    if checkpoint_bytes * (keep_last + 1) > free:
        warnings.warn(f"{key}={str(run_dir)!r} has {_size(free)} free: room for one checkpoint of "
                      f"{_size(checkpoint_bytes)}, not the {keep_last + 1} that coexist while the oldest "
                      "is rotated out (checkpoint.keep_last, and checkpoint.keep_best's when set)", stacklevel=1)  # one place: shown once
    return []


def _size(count: int) -> str:
    """``1.5 GiB``, or in MiB below a GiB (a small model's checkpoint read "0.0 GiB")."""
    return f"{count / 2**30:.1f} GiB" if count >= 2**30 else f"{count / 2**20:.1f} MiB"


def checkpoint_bytes(cfg: DAPOConfig) -> int:
    """Bytes of one checkpoint: the weights in the trained dtype (``model.dtype``, whatever dtype
    the files store) plus AdamW's two moments of the same dtype (and the export of a multi-rank
    run; with LoRA, the merged weights alone: the adapters and their AdamW state are small); 0 when
    the model is not a local directory of weights."""
    if is_builtin(cfg.model.path) or not (model_dir := Path(cfg.model.path).expanduser()).is_dir():
        return 0
    # several ranks: their shards, plus (checkpoint.hf_export=every) the gathered Hugging Face export
    copies = 4 if cfg.resources.world_size > 1 and cfg.checkpoint.hf_export == "every" else 3
    if cfg.model.lora_rank > 0:
        copies = 1
    return copies * _parameter_count(model_dir) * DTYPE_BYTES[cfg.model.dtype]


def _loaded_safetensors(model_dir: Path) -> list[Path]:
    """The safetensors files ``from_pretrained`` reads: those of model.safetensors.index.json's
    weight_map, else model.safetensors, else (a directory of another layout) every one."""
    index = model_dir / "model.safetensors.index.json"
    try:
        return [model_dir / name for name in sorted(set(json.loads(index.read_text())["weight_map"].values()))]
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        pass  # none, or not an index: loading the model names a broken one
    single = model_dir / "model.safetensors"
    return [single] if single.is_file() else sorted(model_dir.glob("*.safetensors"))


def _parameter_count(model_dir: Path) -> int:
    """Parameters in the model's weight files: from the safetensors headers, or for .bin files
    from their size and the dtype config.json gives (float32 when it names none). A directory
    holding both (many Hub repositories ship the weights twice) is counted once, by its
    safetensors, which transformers loads in preference; and of those, the files transformers
    loads (the index's shards, or model.safetensors), not a second copy beside them (Mistral's
    consolidated.safetensors)."""
    count = 0
    safetensors = _loaded_safetensors(model_dir)
    for path in safetensors:
        try:
            with open(path, "rb") as handle:  # the format: 8-byte header size, then a JSON header
                header = json.loads(handle.read(int.from_bytes(handle.read(8), "little")))
            count += sum(math.prod(t["shape"]) for name, t in header.items() if name != "__metadata__")
        except (OSError, ValueError, TypeError, KeyError, AttributeError):
            pass  # not a safetensors file: loading the model names that
    if safetensors:
        return count
    bin_bytes = sum(path.stat().st_size for path in model_dir.glob(BIN_WEIGHTS))
    if bin_bytes:
        config = json.loads((model_dir / "config.json").read_text()) if (model_dir / "config.json").is_file() else {}
        count += bin_bytes // DTYPE_BYTES.get(str(config.get("torch_dtype") or config.get("dtype")), 4)
    return count
