"""Which files an entry of ``data.train_files`` / ``data.eval_files`` names.

An entry is a data file, a ``datasets`` directory (``save_to_disk``), a glob
(``/data/shards/*.parquet``), or a directory of data files such as a Hugging Face Hub snapshot
(``hf download ... --local-dir``). Data files are .parquet, .jsonl (or .ndjson, its other name),
.json, .csv and .tsv, plain or compressed (.gz, .bz2, .xz: ``train-00001-of-00002.jsonl.gz``),
the suffix in any case.

A directory's files are read in sorted path order; where their names or folders carry split
names, as the Hub's layout does (``data/train-00000-of-00002.parquet``, ``test/aime.jsonl``),
only the split's are read, with the split words ``datasets`` uses for them. A glob whose matches
name both splits leaves out the other split's files too. Nothing that holds data is left out
unsaid: a directory's files of the split that hold rows of a type dapo does not read (.arrow,
.txt, .jsonl.zst, ...) stop the load, named; a file or a glob's match of a type not read stops it
too (:func:`dapo.data.readers.rows_of`). What a repo holds beside its rows (:func:`not_data`: its
card, licence, git and ``datasets`` metadata, loading script, lock files, images) is skipped by a
directory or a glob, and counted in a note the load's summary shows; a directory also skips (and
counts) files of any other type that holds no rows (a .bin, say), where a glob's match stops the load.
"""

from __future__ import annotations

import glob
import json
import re
from pathlib import Path

from dapo.data.records import DataError

# the types read (readers.rows_of), each also compressed with one of COMPRESSIONS
DATA_SUFFIXES = (".parquet", ".jsonl", ".ndjson", ".json", ".csv", ".tsv")
COMPRESSIONS = (".gz", ".bz2", ".xz")
READ_TYPES_SAID = ".parquet, .jsonl, .json, .csv, .tsv (plain or compressed .gz, .bz2, .xz) and .ndjson (as .jsonl)"
# types of files that hold rows (`datasets` reads most of them) which dapo does not read, and the
# compressions and archives it does not open: a directory's such files of the split stop the load
_OTHER_DATA_SUFFIXES = (".arrow", ".txt", ".xml", ".h5", ".hdf5", ".tar", ".tgz", ".lance",
                        ".geoparquet", ".gpq", ".conll", ".conllu", ".feather", ".orc", ".avro", ".xlsx", ".xls")
_OTHER_COMPRESSIONS = (".zst", ".zstd", ".lz4", ".zip", ".7z")
# files of a dataset that are not its rows: its card, licence and the like, and `datasets`' metadata
_NOT_DATA_STEMS = ("readme", "license", "licence", "notice", "copying", "citation", "changelog", "authors")
_NOT_DATA_NAMES = ("dataset_infos.json", "dataset_info.json", "dataset_dict.json", "state.json")
# the types of what else a dataset repo holds beside its rows (a card, a loading script, a
# filelock's train.jsonl.lock, the card's images, config): never rows, to `datasets` either
_NOT_DATA_SUFFIXES = (".md", ".rst", ".html", ".pdf", ".cff", ".bib", ".py", ".ipynb", ".sh", ".lock", ".yaml", ".yml",
                      ".toml", ".cfg", ".ini", ".png", ".jpg", ".jpeg", ".gif", ".svg", ".webp")
# the words a file or folder name starts with that say its split (as `datasets` reads a Hub repo)
SPLIT_WORDS = {
    "train": ("train", "training"),
    "eval": ("test", "testing", "eval", "evaluation", "validation", "valid", "val", "dev"),
}
_SPLIT_OF_WORD = {word: split for split, words in SPLIT_WORDS.items() for word in words}
_SPLIT_WORD = re.compile(r"(?:^|[-._ 0-9])(" + "|".join(sorted(_SPLIT_OF_WORD, key=len, reverse=True))
                         + r")(?=[-._ 0-9]|$)", re.IGNORECASE)
_TRAIN_OR_TEST = ("train", "training", "test", "testing")
_GLOB_CHARS = re.compile(r"[*?\[]")
_SHARD_SUFFIX = re.compile(r"-\d+-of-\d+$")  # train-00000-of-00002, as `datasets` names shards


def is_datasets_directory(path: Path) -> bool:
    """A directory ``Dataset.save_to_disk`` (state.json) or ``DatasetDict.save_to_disk``
    (dataset_dict.json) wrote."""
    return (path / "state.json").is_file() or (path / "dataset_dict.json").is_file()


# the splits of a DatasetDict read as each split, in order of preference
DATASET_DICT_SPLITS = {"train": ("train",), "eval": ("test", "validation", "eval", "valid")}


def data_files(entry: str, split: str, notes: list[str] | None = None) -> list[str]:
    """The files (or the one ``datasets`` directory) ``entry`` names for ``split``, in reading
    order; a DataError when it names none. ``notes`` gets a line naming the data files a split
    layout leaves out (their names name no split), and one counting the files skipped as not data."""
    path = Path(entry).expanduser()
    if not path.exists() and _GLOB_CHARS.search(entry):
        return _glob_files(entry, path, split, notes)
    if not path.exists():
        hint = f" (several files are a list: [{entry.replace(',', ', ')}])" if "," in entry else ""
        raise DataError(f"{entry}: file not found{hint}")
    if path.is_file() or is_datasets_directory(path):
        if split == "eval" and notes is not None:
            _note_other_eval_splits(entry, path, notes)
        return [str(path)]
    return _directory_files(entry, path, split, notes)


def dataset_dict_split(available: list[str], split: str) -> str | None:
    """The split of a ``DatasetDict`` read as ``split``: by its name (the first of train, or of
    test, validation, eval, valid), never another split's; None when it has none."""
    return next((name for name in DATASET_DICT_SPLITS[split] if name in available), None)


def _note_other_eval_splits(entry: str, path: Path, notes: list[str]) -> None:
    """A line for ``notes`` naming a ``DatasetDict``'s evaluation splits other than the one read."""
    try:
        available = json.loads((path / "dataset_dict.json").read_text())["splits"]
    except (OSError, ValueError, KeyError, TypeError):  # (not a DatasetDict, or one datasets refuses: said then)
        return
    read = dataset_dict_split(available, "eval")
    others = [name for name in available if name != read and name in DATASET_DICT_SPLITS["eval"]]
    if read is not None and others:
        notes.append(f"{entry}: evaluating on its {read!r} split, not its {' and '.join(map(repr, others))} "
                     f"(name {path / others[0]} in data.eval_files to evaluate on it too)")


def _glob_files(entry: str, pattern: Path, split: str, notes: list[str] | None) -> list[str]:
    """A glob's matches, less those that are not data (``data/**`` over a repo checkout matches
    its README.md): skipped, counted in ``notes``. A match of another type stays, for the reader to
    stop at (a pattern is the user's own choice of files: one not read is theirs to name)."""
    matches = sorted(m for m in glob.glob(str(pattern), recursive=True) if Path(m).is_file())
    if not matches:
        raise DataError(f"{entry}: the pattern matches no file")
    root = _pattern_root(pattern)
    skipped = [str(Path(m).relative_to(root)) for m in matches if not_data(Path(m).name)]
    kept = [m for m in matches if not not_data(Path(m).name)]
    if not kept:
        raise DataError(f"{entry}: the pattern matches no data file, only {len(skipped)} file(s) that are not data: "
                        f"{said_briefly(skipped)}")
    _note_skipped(entry, skipped, notes)
    return _split_of_glob(entry, pattern, kept, split, notes)


def _directory_files(entry: str, path: Path, split: str, notes: list[str] | None) -> list[str]:
    """A directory's data files of ``split`` (:func:`holds_data`; see the module's docstring).
    What lies under a hidden folder (.git/, the download's .cache/) is tool state, not the
    dataset's: passed over unsaid; the other files that hold no data are counted in ``notes``."""
    found = sorted(p for p in path.rglob("*") if p.is_file()
                   and not any(part.startswith(".") for part in p.relative_to(path).parent.parts))
    files = [p for p in found if holds_data(p.name)]
    if not files:
        raise DataError(f"{entry}: a directory with no data files ({READ_TYPES_SAID}) and not a `datasets` "
                        "directory (save_to_disk)")
    splits = {p: _split_named(p.relative_to(path)) for p in files}
    of_split = ""
    if any(splits.values()):  # a split layout: the split's files, and none of another split's
        unnamed = [p.relative_to(path) for p in files if splits[p] is None]
        files = [p for p in files if splits[p] == split]
        if not files:
            found_splits = sorted({s for s in splits.values() if s})
            raise DataError(f"{entry}: holds files of the {' and '.join(found_splits)} split(s) only, none of the "
                            f"{split} split (its file or folder names hold one of {SPLIT_WORDS[split]} as a word); "
                            "to read one of them anyway, name the file")
        if unnamed and notes is not None:
            notes.append(f"{entry}: left out {len(unnamed)} file(s) whose names name no split, e.g. {unnamed[0]} "
                         "(name them in data.*_files to read them)")
        of_split = f" of the {split} split"
    unread = [str(p.relative_to(path)) for p in files if not readable(p.name)]
    if unread:  # left out, they would be rows lost unsaid (a shard of the split: half of it)
        raise DataError(f"{entry}: holds {len(unread)} data file(s){of_split} of a type dapo does not read: "
                        f"{said_briefly(unread)}; dapo reads {READ_TYPES_SAID}: convert them, or name the files to read "
                        "in data.*_files")
    _note_skipped(entry, [str(p.relative_to(path)) for p in found if not holds_data(p.name)], notes)
    return [str(p) for p in files]


def _note_skipped(entry: str, skipped: list[str], notes: list[str] | None) -> None:
    """Count and name the files of ``entry`` skipped as not data: a file the user took for data
    (a shard named README*, say) is then in the summary, not gone unsaid."""
    if skipped and notes is not None:
        notes.append(f"{entry}: skipped {len(skipped)} file(s) that are not data: {said_briefly(skipped)}")


def said_briefly(names: list[str]) -> str:
    """The first three of ``names``, and how many more: a message stays one readable line."""
    return ", ".join(names[:3]) + (f", ... ({len(names) - 3} more)" if len(names) > 3 else "")


def file_type(name: str) -> tuple[str, str]:
    """A file name's type and compression suffixes, lower-cased: (".jsonl", ".gz") for
    ``train-00001-of-00002.JSONL.gz``, (".parquet", "") for ``a.parquet``, ("", ".zst") for ``a.zst``."""
    lower = name.lower()
    compression = next((c for c in COMPRESSIONS + _OTHER_COMPRESSIONS if lower.endswith(c)), "")
    return Path(lower[: len(lower) - len(compression)]).suffix, compression


def readable(name: str) -> bool:
    """Whether a file of this name is of a type dapo reads (:func:`dapo.data.readers.rows_of`)."""
    suffix, compression = file_type(name)
    return suffix in DATA_SUFFIXES and compression in ("", *COMPRESSIONS)


def not_data(name: str) -> bool:
    """Whether a file of this name is what a dataset repo holds beside its rows, never rows: a
    hidden file (.gitattributes), a card, licence or citation (README*, LICENSE*, ...), `datasets`'
    metadata (dataset_infos.json: a .json that is not rows), or of a type in _NOT_DATA_SUFFIXES
    (README.md, a loading script hub.py, train.jsonl.lock)."""
    lower = name.lower()
    return (lower.startswith(".") or lower in _NOT_DATA_NAMES or lower.split(".")[0] in _NOT_DATA_STEMS
            or file_type(lower)[0] in _NOT_DATA_SUFFIXES)


def holds_data(name: str) -> bool:
    """Whether a directory's file of this name holds rows, read or not: of a data type (plain or
    compressed) or an archive, and not what a repo holds beside its rows (:func:`not_data`)."""
    suffix, compression = file_type(name)
    if not_data(name):
        return False
    return suffix in DATA_SUFFIXES + _OTHER_DATA_SUFFIXES or compression in (".zip", ".7z")


def _split_of_glob(entry: str, pattern: Path, matches: list[str], split: str, notes: list[str] | None) -> list[str]:
    """A glob's matches for ``split``: all of them, unless they name both splits (``snapshot/**/*.parquet``
    over a Hub snapshot's train and test shards), when another split's are left out, with a note:
    the held-out problems must not be trained on. Split words are read below the pattern's fixed
    folders (``/tmp/test_run/*.jsonl`` names no split)."""
    fixed = _pattern_root(pattern)
    splits = {match: _split_named(Path(match).relative_to(fixed)) for match in matches}
    if len(set(splits.values()) - {None}) < 2:
        return matches
    other = [match for match in matches if splits[match] not in (split, None)]
    if notes is not None:
        notes.append(f"{entry}: left out {len(other)} file(s) of another split than {split}, e.g. "
                     f"{Path(other[0]).relative_to(fixed)} (name them in data.*_files to read them)")
    return [match for match in matches if match not in other]


def _pattern_root(pattern: Path) -> Path:
    """The folder a glob's fixed part names (``/data/shards`` of ``/data/shards/**/*.parquet``),
    which its matches are named relative to."""
    return Path(*next((pattern.parts[:i] for i, part in enumerate(pattern.parts) if _GLOB_CHARS.search(part)),
                      pattern.parts))


def default_data_source(file: str, entry: str) -> str:
    """The data_source of a row that has none: its file's stem without a shard suffix
    (``aime.jsonl`` -> "aime"); when that is only a split word (a Hub snapshot's
    ``data/test-00000-of-00002.parquet``), the name of the directory the entry names (or else of
    the file's folder; of the folder above one named for a split, a ``datasets`` directory
    ``gsm8k/test``), so that one dataset's shards are one source in eval/<data_source>/. A data
    file of another split than train or test adds its word (``mmlu/data/validation-*.parquet``:
    "mmlu-validation"): a snapshot's validation and test problems are two sources, not one."""
    name = Path(file).name
    suffix, compression = file_type(name)
    stem = _SHARD_SUFFIX.sub("", name[: len(name) - len(suffix) - len(compression)] if suffix else Path(file).stem)
    if stem.lower() not in _SPLIT_OF_WORD:
        return stem
    entry_path = Path(entry).expanduser()
    folder = (entry_path if entry_path.is_dir() else Path(file).parent).resolve()
    while folder.name.lower() in _SPLIT_OF_WORD and folder.parent != folder:  # a datasets directory gsm8k/test
        folder = folder.parent
    other_split = bool(suffix) and stem.lower() not in _TRAIN_OR_TEST  # (a datasets directory's name is the user's)
    return f"{folder.name}-{stem.lower()}" if other_split else folder.name


def _split_named(relative: Path) -> str | None:
    """The split a file's path names: in the first folder or file name holding a split word
    between separators (- . _ space or digits), as `datasets` reads a Hub repo: ``test/``,
    ``train-00000-of-00002``, ``gsm8k_test.parquet``, ``math-validation.jsonl``; not ``contest``."""
    for part in relative.parts:
        word = _SPLIT_WORD.search(part)
        if word is not None:
            return _SPLIT_OF_WORD[word.group(1).lower()]
    return None
