"""What a killed run left in checkpoints/ is cleared by the next start, and nothing complete is
lost: half-written checkpoints removed, a half-swapped one put back or, once its replacement is in
place, removed; keep_best's half-made link removed."""

from __future__ import annotations

import pytest

from dapo.trainer.run_dir import remove_stale_checkpoint_temps


def test_a_set_aside_checkpoint_without_its_state_is_removed_not_put_back(tmp_path):
    """An .old-step-N-pid whose trainer_state.pt is gone (its deletion had begun) is no checkpoint
    to restore: it is removed and counted, and no step-N appears."""
    half = tmp_path / "checkpoints" / ".old-step-000004-123"
    half.mkdir(parents=True)
    (half / "model.safetensors").write_bytes(b"")
    with pytest.warns(UserWarning, match="removed 1 incomplete checkpoint"):
        assert remove_stale_checkpoint_temps(tmp_path) == 1
    assert list((tmp_path / "checkpoints").iterdir()) == []


def test_a_set_aside_checkpoint_whose_replacement_is_in_place_is_removed(tmp_path):
    """Killed after a re-saved step-N was renamed into place but before the .old-step-N-pid it
    replaced was deleted: the new step-N stays, the old one goes (no rename onto it at start)."""
    checkpoints = tmp_path / "checkpoints"
    for name, content in ((".old-step-000004-123", b"old"), ("step-000004", b"new")):
        (checkpoints / name).mkdir(parents=True)
        (checkpoints / name / "trainer_state.pt").write_bytes(content)
    with pytest.warns(UserWarning, match="removed 1 incomplete checkpoint"):
        assert remove_stale_checkpoint_temps(tmp_path) == 1
    assert [p.name for p in checkpoints.iterdir()] == ["step-000004"]
    assert (checkpoints / "step-000004" / "trainer_state.pt").read_bytes() == b"new"
