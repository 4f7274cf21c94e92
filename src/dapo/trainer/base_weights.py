"""Which base weights a checkpoint's run started from (a LoRA checkpoint's adapters were trained on).

A LoRA checkpoint holds adapters only: resumed on other base weights they would train on, and
export, a model nobody trained, with no error. The path alone (model.path) does not tell: a base
model moved to other storage is the same weights at another path, and a directory refilled with
another revision is other weights at the same path. So each checkpoint records a fingerprint of
its base model's weight files in ``base_weights.json``, and a resume compares the weights: a LoRA
one always; one that trains every weight where model.path changed (a job that copies the model to
its node's local disk first resumes itself on a rerun, as it would at the same path).

The fingerprint hashes each weight file's name and size, and its bytes: all of a file up to
:data:`WHOLE_FILE_BYTES`, and :data:`SAMPLES` evenly spaced pieces of a larger one (a few MiB
read for a 70B model's files; a change confined to the bytes between the pieces goes unseen,
which no fine-tuned or re-released model is).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

BASE_WEIGHTS_FILE = "base_weights.json"  # in a LoRA checkpoint: {"path": ..., "fingerprint": ...}
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth")
WHOLE_FILE_BYTES = 64 << 20
SAMPLES = 64
SAMPLE_BYTES = 64 << 10


def weights_fingerprint(model_dir: str | Path) -> str | None:
    """A sha256 of the weight files of Hugging Face model directory ``model_dir`` (see the module's
    docstring), or None where it holds none or one cannot be read."""
    directory = Path(model_dir)
    try:
        files = sorted(path for path in directory.iterdir() if path.suffix in WEIGHT_SUFFIXES and path.is_file())
        if not files:
            return None
        digest = hashlib.sha256()
        for path in files:
            size = path.stat().st_size
            digest.update(f"{path.name}\0{size}\0".encode())
            with path.open("rb") as file:
                if size <= WHOLE_FILE_BYTES:
                    digest.update(file.read())
                    continue
                for index in range(SAMPLES):
                    file.seek((size - SAMPLE_BYTES) * index // (SAMPLES - 1))
                    digest.update(file.read(SAMPLE_BYTES))
        return digest.hexdigest()
    except OSError:
        return None


def write_base_weights(checkpoint: Path, model_dir: str, fingerprint: str) -> None:
    """Record in ``checkpoint`` that its adapters are of the weights in ``model_dir``."""
    (checkpoint / BASE_WEIGHTS_FILE).write_text(json.dumps({"path": model_dir, "fingerprint": fingerprint}) + "\n")


def saved_fingerprint(checkpoint: Path) -> str | None:
    """The base weights' fingerprint ``checkpoint`` recorded; None for a checkpoint without one
    (written before the file existed, or its base model built in or unreadable then)."""
    try:
        return json.loads((checkpoint / BASE_WEIGHTS_FILE).read_text())["fingerprint"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def base_weights_difference(checkpoint: Path, before: str, now: str) -> str | None:
    """Why the base model of a run resuming ``checkpoint`` is not the weights its run started from
    (a LoRA checkpoint's adapters were trained on), or None where it is. ``before``/``now``: model.path then and now, absolute.
    Compared by the weights where the checkpoint recorded them and ``now`` can be read, else by
    the path."""
    recorded = saved_fingerprint(checkpoint)
    current = weights_fingerprint(now) if recorded is not None and Path(now).is_dir() else None
    if current is None:
        return None if before == now else (f"model.path {before!r} (checkpoint) != {now!r} (this run): LoRA "
                                           "adapters resume on the base weights they were trained on")
    if current == recorded:
        return None
    where = (f"the weights in model.path {now!r} changed since the checkpoint" if before == now
             else f"model.path {now!r} holds other weights than {before!r} held for the checkpoint")
    return (f"{where} (fingerprint {current[:12]} != {recorded[:12]} in its {BASE_WEIGHTS_FILE}): LoRA "
            "adapters resume on the base weights they were trained on")
