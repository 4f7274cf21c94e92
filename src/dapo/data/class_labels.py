"""A `datasets` ClassLabel column read as its names, not its indices.

A Hugging Face dataset may hold a column as ``ClassLabel(names=[...])`` (MMLU's ``answer``:
A, B, C, D): its rows keep the index (0..3), and the names live in the dataset's features,
which ``save_to_disk`` writes to dataset_info.json (and each .arrow file's schema) and
``to_parquet``, ``push_to_hub`` and the Hub's parquet conversion write to the parquet schema's
``huggingface`` metadata. Read without them, the ground truth "2" is scored against a response's
"C": every sample wrong, unsaid. Such a column, at the top of a row or in a struct (a dotted key,
``reward_model.ground_truth``), reads as its names, as ``ClassLabel.int2str`` gives them, for the
answer, the data source and the extra fields alike; an index of -1 (``datasets``' "no label"),
or one past the names, reads as null. A list of labels (``Sequence(ClassLabel(...))``, a
multi-label column a reward function reads among the extra fields) reads as a list of names.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Union

import pyarrow as pa
import pyarrow.compute as pc

# column -> its names; a struct column -> its fields'; a list column -> its items'
LabelNames = dict[str, Union[list[str], "LabelNames", "Items"]]
_LISTS = ("List", "LargeList", "Sequence")  # datasets' list features (Sequence before datasets 4)


@dataclass(frozen=True)
class Items:
    """The names of a list column's items: ``names`` as a column's own (a label's, a struct's, a list's)."""

    names: list[str] | LabelNames | Items


def label_names(features: dict[str, Any]) -> LabelNames:
    """The names of each ClassLabel column in ``features`` (``Features.to_dict()``'s form: a struct
    is a dict of its fields' features, without a ``_type``)."""
    names: LabelNames = {}
    for column, feature in features.items():
        if (found := _feature_names(feature)) is not None:
            names[column] = found
    return names


def _feature_names(feature: Any) -> list[str] | LabelNames | Items | None:
    """The names one feature holds (None where it holds no ClassLabel)."""
    if not isinstance(feature, dict):
        return None
    if feature.get("_type") == "ClassLabel" and isinstance(feature.get("names"), list):
        return [str(name) for name in feature["names"]]
    if feature.get("_type") in _LISTS:
        item = feature.get("feature")
        if feature["_type"] == "Sequence" and isinstance(item, dict) and "_type" not in item:
            # (datasets < 4's Sequence of a dict is a dict of lists: each field a list of its items)
            fields = {field: Items(names) for field, names in label_names(item).items()}
            return fields or None
        inner = _feature_names(item)
        return None if inner is None else Items(inner)
    return (label_names(feature) or None) if "_type" not in feature else None


def parquet_label_names(schema: pa.Schema) -> LabelNames:
    """The ClassLabel columns the ``huggingface`` metadata of a parquet file's schema names; none
    where it has none, or one this cannot read (a file not written by ``datasets``)."""
    raw = (schema.metadata or {}).get(b"huggingface")
    try:
        features = json.loads(raw)["info"]["features"] if raw else {}
    except (ValueError, KeyError, TypeError):
        return {}
    return label_names(features) if isinstance(features, dict) else {}


def named_batch(batch: pa.RecordBatch, names: LabelNames) -> pa.RecordBatch:
    """``batch`` with each of its ClassLabel columns (index integers) as the labels' names."""
    if not names:
        return batch
    columns = [_named_array(batch.column(i), names[name]) if name in names else batch.column(i)
               for i, name in enumerate(batch.schema.names)]
    return pa.RecordBatch.from_arrays(columns, names=batch.schema.names)


def _named_array(array: pa.Array, names: list[str] | LabelNames | Items) -> pa.Array:
    if isinstance(names, Items):
        if not (pa.types.is_list(array.type) or pa.types.is_large_list(array.type)):
            return array
        if array.offset and array.null_count:
            array = pa.concat_arrays([array])  # (from_arrays takes a slice's nulls at offset 0 only)
        return type(array).from_arrays(array.offsets, _named_array(array.values, names.names),
                                       mask=array.is_null() if array.null_count else None)
    if isinstance(names, dict):
        if not pa.types.is_struct(array.type):
            return array
        fields = [array.type.field(i) for i in range(array.type.num_fields)]
        children = [_named_array(child, names[field.name]) if field.name in names else child
                    for field, child in zip(fields, array.flatten())]
        return pa.StructArray.from_arrays(children, fields=[pa.field(f.name, c.type) for f, c in zip(fields, children)],
                                          mask=array.is_null() if array.null_count else None)
    if not pa.types.is_integer(array.type):
        return array
    in_range = pc.and_(pc.greater_equal(array, 0), pc.less(array, len(names)))
    return pc.take(pa.array(names, pa.string()), pc.if_else(in_range, array, pa.scalar(None, array.type)))


def named_row(row: dict[str, Any], names: LabelNames) -> dict[str, Any]:
    """``row`` (a dict, changed in place) with each ClassLabel value as its label's name."""
    for column, column_names in names.items():
        if column in row:
            row[column] = _named_value(row[column], column_names)
    return row


def _named_value(value: Any, names: list[str] | LabelNames | Items) -> Any:
    if isinstance(names, Items):
        return [_named_value(item, names.names) for item in value] if isinstance(value, list) else value
    if isinstance(names, dict):
        return named_row(value, names) if isinstance(value, dict) else value
    if isinstance(value, int) and not isinstance(value, bool):
        return names[value] if 0 <= value < len(names) else None
    return value
