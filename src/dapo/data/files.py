"""Which files an entry of ``data.train_files`` / ``data.eval_files`` names.

An entry is a data file (.parquet, .jsonl, .json), a ``datasets`` directory
(``save_to_disk``), a glob (``/data/shards/*.parquet``), or a directory of data files such as a
Hugging Face Hub snapshot (``huggingface-cli download ... --local-dir``). A directory's files
are read in sorted path order; where their names or folders carry split names, as the Hub's
layout does (``data/train-00000-of-00002.parquet``, ``test/aime.jsonl``), only the split's are
read, with the split words ``datasets`` uses for them.
"""

from __future__ import annotations

import glob
import re
from pathlib import Path

from dapo.data.records import DataError

DATA_SUFFIXES = (".parquet", ".jsonl", ".json")
# the words a file or folder name starts with that say its split (as `datasets` reads a Hub repo)
SPLIT_WORDS = {
    "train": ("train", "training"),
    "eval": ("test", "testing", "eval", "evaluation", "validation", "valid", "val", "dev"),
}
_SPLIT_OF_WORD = {word: split for split, words in SPLIT_WORDS.items() for word in words}
_GLOB_CHARS = re.compile(r"[*?\[]")
_SHARD_SUFFIX = re.compile(r"-\d+-of-\d+$")  # train-00000-of-00002, as `datasets` names shards


def is_datasets_directory(path: Path) -> bool:
    """A directory ``Dataset.save_to_disk`` (state.json) or ``DatasetDict.save_to_disk``
    (dataset_dict.json) wrote."""
    return (path / "state.json").is_file() or (path / "dataset_dict.json").is_file()


def data_files(entry: str, split: str) -> list[str]:
    """The files (or the one ``datasets`` directory) ``entry`` names for ``split``, in reading
    order; a DataError when it names none."""
    path = Path(entry).expanduser()
    if not path.exists() and _GLOB_CHARS.search(entry):
        matches = sorted(m for m in glob.glob(str(path), recursive=True) if Path(m).is_file())
        if not matches:
            raise DataError(f"{entry}: the pattern matches no file")
        return matches
    if not path.exists():
        hint = f" (several files are a list: [{entry.replace(',', ', ')}])" if "," in entry else ""
        raise DataError(f"{entry}: file not found{hint}")
    if path.is_file() or is_datasets_directory(path):
        return [str(path)]
    files = sorted(
        p for p in path.rglob("*")
        if p.is_file() and p.name.endswith(DATA_SUFFIXES)
        and not any(part.startswith(".") for part in p.relative_to(path).parts)  # .cache/, .git/
    )
    if not files:
        raise DataError(f"{entry}: a directory with no {', '.join(DATA_SUFFIXES)} files and not a `datasets` "
                        "directory (save_to_disk)")
    splits = {p: _split_named(p.relative_to(path)) for p in files}
    if any(splits.values()):  # a split layout: the split's files, and none of another split's
        files = [p for p in files if splits[p] == split]
        if not files:
            found = sorted({s for s in splits.values() if s})
            raise DataError(f"{entry}: holds files of the {' and '.join(found)} split(s) only, none of the "
                            f"{split} split (its file or folder names start with one of {SPLIT_WORDS[split]})")
    return [str(p) for p in files]


def default_data_source(file: str, entry: str) -> str:
    """The data_source of a row that has none: its file's stem without a shard suffix
    (``aime.jsonl`` -> "aime"); when that is only a split word (a Hub snapshot's
    ``data/test-00000-of-00002.parquet``), the name of the directory the entry names (or else of
    the file's folder), so that one dataset's shards are one source in eval/<data_source>/."""
    stem = _SHARD_SUFFIX.sub("", Path(file).stem)
    if stem.lower() not in _SPLIT_OF_WORD:
        return stem
    entry_path = Path(entry).expanduser()
    return (entry_path if entry_path.is_dir() else Path(file).parent).resolve().name


def _split_named(relative: Path) -> str | None:
    """The split a file's path names: the first folder or file name (without suffix) that is a
    split word or starts with one followed by - _ or . (train-00000-of-00002, test_aime)."""
    for part in relative.parts:
        word = re.split(r"[-_.]", part, maxsplit=1)[0].lower()
        if word in _SPLIT_OF_WORD:
            return _SPLIT_OF_WORD[word]
    return None
