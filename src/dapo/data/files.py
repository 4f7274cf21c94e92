"""Which files an entry of ``data.train_files`` / ``data.eval_files`` names.

An entry is a data file (.parquet, .jsonl, .json), a ``datasets`` directory
(``save_to_disk``), a glob (``/data/shards/*.parquet``), or a directory of data files such as a
Hugging Face Hub snapshot (``hf download ... --local-dir``). A directory's files
are read in sorted path order; where their names or folders carry split names, as the Hub's
layout does (``data/train-00000-of-00002.parquet``, ``test/aime.jsonl``), only the split's are
read, with the split words ``datasets`` uses for them. A glob whose matches name both splits
leaves out the other split's files too.
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
_SPLIT_WORD = re.compile(r"(?:^|[-._ 0-9])(" + "|".join(sorted(_SPLIT_OF_WORD, key=len, reverse=True))
                         + r")(?=[-._ 0-9]|$)", re.IGNORECASE)
_GLOB_CHARS = re.compile(r"[*?\[]")
_SHARD_SUFFIX = re.compile(r"-\d+-of-\d+$")  # train-00000-of-00002, as `datasets` names shards


def is_datasets_directory(path: Path) -> bool:
    """A directory ``Dataset.save_to_disk`` (state.json) or ``DatasetDict.save_to_disk``
    (dataset_dict.json) wrote."""
    return (path / "state.json").is_file() or (path / "dataset_dict.json").is_file()


def data_files(entry: str, split: str, notes: list[str] | None = None) -> list[str]:
    """The files (or the one ``datasets`` directory) ``entry`` names for ``split``, in reading
    order; a DataError when it names none. ``notes`` gets a line naming the data files a split
    layout leaves out (their names name no split)."""
    path = Path(entry).expanduser()
    if not path.exists() and _GLOB_CHARS.search(entry):
        matches = sorted(m for m in glob.glob(str(path), recursive=True) if Path(m).is_file())
        if not matches:
            raise DataError(f"{entry}: the pattern matches no file")
        return _split_of_glob(entry, path, matches, split, notes)
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
        unnamed = [p.relative_to(path) for p in files if splits[p] is None]
        files = [p for p in files if splits[p] == split]
        if not files:
            found = sorted({s for s in splits.values() if s})
            raise DataError(f"{entry}: holds files of the {' and '.join(found)} split(s) only, none of the "
                            f"{split} split (its file or folder names hold one of {SPLIT_WORDS[split]} as a word); "
                            "to read one of them anyway, name the file")
        if unnamed and notes is not None:
            notes.append(f"{entry}: left out {len(unnamed)} file(s) whose names name no split, e.g. {unnamed[0]} "
                         "(name them in data.*_files to read them)")
    return [str(p) for p in files]


def _split_of_glob(entry: str, pattern: Path, matches: list[str], split: str, notes: list[str] | None) -> list[str]:
    """A glob's matches for ``split``: all of them, unless they name both splits (``snapshot/**/*.parquet``
    over a Hub snapshot's train and test shards), when another split's are left out, with a note:
    the held-out problems must not be trained on. Split words are read below the pattern's fixed
    folders (``/tmp/test_run/*.jsonl`` names no split)."""
    fixed = Path(*next((pattern.parts[:i] for i, part in enumerate(pattern.parts) if _GLOB_CHARS.search(part)),
                       pattern.parts))
    splits = {match: _split_named(Path(match).relative_to(fixed)) for match in matches}
    if len(set(splits.values()) - {None}) < 2:
        return matches
    other = [match for match in matches if splits[match] not in (split, None)]
    if notes is not None:
        notes.append(f"{entry}: left out {len(other)} file(s) of another split than {split}, e.g. "
                     f"{Path(other[0]).relative_to(fixed)} (name them in data.*_files to read them)")
    return [match for match in matches if match not in other]


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
    """The split a file's path names: in the first folder or file name holding a split word
    between separators (- . _ space or digits), as `datasets` reads a Hub repo: ``test/``,
    ``train-00000-of-00002``, ``gsm8k_test.parquet``, ``math-validation.jsonl``; not ``contest``."""
    for part in relative.parts:
        word = _SPLIT_WORD.search(part)
        if word is not None:
            return _SPLIT_OF_WORD[word.group(1).lower()]
    return None
