"""The fingerprint of a base model's weight files (dapo.trainer.base_weights): the same weights
anywhere give the same one, other weights another, large files read in sampled pieces."""

from __future__ import annotations

import shutil

import pytest

from dapo.trainer import base_weights
from dapo.trainer.base_weights import weights_fingerprint


def _model_dir(path, data: bytes):
    path.mkdir()
    (path / "model-00001-of-00002.safetensors").write_bytes(data)
    (path / "model-00002-of-00002.safetensors").write_bytes(data[::-1])
    (path / "config.json").write_text("{}")
    return path


@pytest.mark.parametrize("whole_file_bytes", [1 << 20, 1000], ids=["read-whole", "sampled"])
def test_the_fingerprint_is_of_the_weights_not_the_path(tmp_path, monkeypatch, whole_file_bytes):
    monkeypatch.setattr(base_weights, "WHOLE_FILE_BYTES", whole_file_bytes)
    monkeypatch.setattr(base_weights, "SAMPLE_BYTES", 16)
    data = bytes(range(256)) * 40  # 10240 bytes: 4 samples of 16 cover its first, last and two inner pieces
    monkeypatch.setattr(base_weights, "SAMPLES", 4)
    model = _model_dir(tmp_path / "model", data)
    fingerprint = weights_fingerprint(model)
    assert fingerprint is not None and len(fingerprint) == 64
    assert weights_fingerprint(shutil.copytree(model, tmp_path / "moved")) == fingerprint
    (model / "config.json").write_text('{"edited": true}')  # not a weight file
    assert weights_fingerprint(model) == fingerprint
    # a byte changed inside the last piece read (sampled: pieces at 0, 3408, 6816 and 10224)
    changed = bytearray(data)
    changed[10230] ^= 1
    assert weights_fingerprint(_model_dir(tmp_path / "changed", bytes(changed))) != fingerprint
    assert weights_fingerprint(_model_dir(tmp_path / "longer", data + b"\0")) != fingerprint


def test_a_change_between_the_pieces_is_seen_only_when_the_file_is_read_whole(tmp_path, monkeypatch):
    monkeypatch.setattr(base_weights, "SAMPLE_BYTES", 16)
    monkeypatch.setattr(base_weights, "SAMPLES", 4)
    data = bytes(range(256)) * 40
    changed = bytearray(data)
    changed[5000] ^= 1  # between the pieces at 3408 and 6816
    fingerprints = [weights_fingerprint(_model_dir(tmp_path / name, bytes(body)))
                    for name, body in (("a", data), ("b", changed))]
    assert fingerprints[0] != fingerprints[1]  # 10 KiB: read whole
    monkeypatch.setattr(base_weights, "WHOLE_FILE_BYTES", 1000)
    fingerprints = [weights_fingerprint(tmp_path / name) for name in ("a", "b")]
    assert fingerprints[0] == fingerprints[1]  # the documented limit of sampling


def test_a_directory_without_weight_files_has_none(tmp_path):
    assert weights_fingerprint(tmp_path) is None
    assert weights_fingerprint(tmp_path / "gone") is None
