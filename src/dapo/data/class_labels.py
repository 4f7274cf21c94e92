"""A `datasets` ClassLabel column read as its names, not its indices.

A Hugging Face dataset may hold a column as ``ClassLabel(names=[...])`` (MMLU's ``answer``:
A, B, C, D): its rows keep the index (0..3), and the names live in the dataset's features,
which ``save_to_disk`` writes to dataset_info.json (and each .arrow file's schema) and
``to_parquet``, ``push_to_hub`` and the Hub's parquet conversion write to the parquet schema's
``huggingface`` metadata. Read without them, the ground truth "2" is scored against a response's
"C": every sample wrong, unsaid. Such a column, at the top of a row or in a struct (a dotted key,
``reward_model.ground_truth``), reads as its names, as ``ClassLabel.int2str`` gives them, for the
answer, the data source and the extra fields alike; an index of -1 (``datasets``' "no label"),
or one past the names, reads as null.
"""

from __future__ import annotations

import json
from typing import Any, Union

import pyarrow as pa
import pyarrow.compute as pc

LabelNames = dict[str, Union[list[str], "LabelNames"]]  # column -> its names; a struct column -> its fields'


def label_names(features: dict[str, Any]) -> LabelNames:
    """The names of each ClassLabel column in ``features`` (``Features.to_dict()``'s form: a struct
    is a dict of its fields' features, without a ``_type``); lists of labels are left as indices."""
    names: LabelNames = {}
    for column, feature in features.items():
        if not isinstance(feature, dict):
            continue
        if feature.get("_type") == "ClassLabel" and isinstance(feature.get("names"), list):
            names[column] = [str(name) for name in feature["names"]]
        elif "_type" not in feature and (nested := label_names(feature)):
            names[column] = nested
    return names


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


def _named_array(array: pa.Array, names: list[str] | LabelNames) -> pa.Array:
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
        value = row.get(column)
        if isinstance(column_names, dict):
            if isinstance(value, dict):
                named_row(value, column_names)
        elif isinstance(value, int) and not isinstance(value, bool):
            row[column] = column_names[value] if 0 <= value < len(column_names) else None
    return row
