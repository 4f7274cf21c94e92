"""Base-model weights shipped with the package, so the embedded default starts in seconds.

Building the default recipe's base model takes about 9 minutes on 2 CPU cores (1200 SFT steps,
519 s measured; more on a loaded machine).
Its result ships in ``dapo/builtin/weights/base-model-<recipe hash>.safetensors``, listed in
``SHIPPED`` with its SHA-256. :func:`dapo.builtin.ensure_base_model` installs it into the cache
(tokenizer and model config are rebuilt by code, the weights file is checked against its
checksum) instead of building; a recipe without shipped weights, or a file whose checksum does not
match, is built as before.

The shipped file is the recipe's own output, and anyone can rebuild it and compare:

    python -m dapo.builtin.shipped --check     # rebuild the recipe (minutes), compare with the shipped file
    python -m dapo.builtin.shipped --write     # rebuild and replace the shipped file (maintainers)

The build is deterministic for a recipe on one machine (deterministic algorithms, fixed seeds);
across CPUs, float rounding in matmuls may differ in the last bits, which ``--check`` reports as
the largest absolute weight difference.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import tempfile
from pathlib import Path

WEIGHTS_DIR = Path(__file__).resolve().parent / "weights"
# recipe cache key -> SHA-256 of its shipped model.safetensors ("addition"'s file was named by its
# earlier key, 4cc14e387ad4, until the key came to digest every SFT problem: the same build inputs,
# the generator then and now giving the same 20,000 problems)
SHIPPED: dict[str, str] = {
    "7ed3ebb69e44": "84cf3561c4895375e71c909d8cd7c402137673aa421159c918e3d8836200429a",  # "addition", the default
}


def shipped_weights(cache_key: str) -> Path | None:
    """The shipped weights file of a recipe, or None when none ships (or it is missing)."""
    path = WEIGHTS_DIR / f"base-model-{cache_key}.safetensors"
    return path if cache_key in SHIPPED and path.is_file() else None


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def checksum_ok(cache_key: str, path: Path) -> bool:
    return sha256_of(path) == SHIPPED[cache_key]


def main(argv: list[str] | None = None) -> int:
    from safetensors.torch import load_file

    from dapo.builtin.base_model import build_base_model
    from dapo.builtin.recipes import BUILTIN_RECIPES

    parser = argparse.ArgumentParser(description="rebuild the shipped base model and compare, or replace it")
    parser.add_argument("--recipe", default="addition", choices=sorted(BUILTIN_RECIPES))
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--check", action="store_true", help="rebuild and compare with the shipped weights")
    action.add_argument("--write", action="store_true", help="rebuild and replace the shipped weights")
    args = parser.parse_args(argv)
    recipe = BUILTIN_RECIPES[args.recipe]
    key = recipe.cache_key()
    with tempfile.TemporaryDirectory() as out:
        build_base_model(recipe, Path(out))
        built = Path(out) / "model.safetensors"
        digest = sha256_of(built)
        if args.write:
            target = WEIGHTS_DIR / f"base-model-{key}.safetensors"
            target.write_bytes(built.read_bytes())
            print(f"wrote {target}; set SHIPPED[{key!r}] = {digest!r} in {__file__}")
            return 0
        shipped = shipped_weights(key)
        if shipped is None:
            print(f"recipe {args.recipe} ({key}) ships no weights", file=sys.stderr)
            return 1
        if digest == SHIPPED[key]:
            print(f"rebuilt {args.recipe} ({key}): bit for bit the shipped weights (sha256 {digest})")
            return 0
        ours, theirs = load_file(str(built)), load_file(str(shipped))
        diff = max(float((ours[name] - theirs[name]).abs().max()) for name in theirs)
        print(f"rebuilt {args.recipe} ({key}): sha256 {digest} differs from the shipped {SHIPPED[key]}; "
              f"largest weight difference {diff:.3g} (float rounding of this CPU)")
        return 1


if __name__ == "__main__":
    sys.exit(main())
