"""A run's JSON-lines logs as a resume cuts them back (dapo.trainer.jsonl_log)."""

import json
import tracemalloc

import pytest

from dapo.trainer.jsonl_log import count_lines, cut_after
from dapo.trainer.metrics import MetricsLogger


def _lines(*rows: dict) -> str:
    return "".join(json.dumps(row) + "\n" for row in rows)


def test_a_resume_keeps_the_checkpointed_head_and_says_what_it_dropped(tmp_path):
    path = tmp_path / "metrics.jsonl"
    head = _lines({"step": 0, "eval/avg@4": 0.4}, {"step": 1, "a": 1.0}, {"step": 2, "a": 2.0})
    # the checkpoint of step 2 counted 3 lines; the final evaluation of step 2 and step 3 came later
    path.write_text(head + _lines({"step": 2, "eval/avg@4": 0.6}, {"step": 3, "a": 3.0}))
    cut = cut_after(path, 2, 3)
    assert path.read_text() == head
    assert (cut.kept, cut.dropped_steps, cut.last_step_rows) == (3, [2, 3], [{"step": 2, "a": 2.0}])
    assert count_lines(path) == 3
    # no recorded count (an older checkpoint): the steps decide
    path.write_text(head + _lines({"step": 3, "a": 3.0}))
    assert cut_after(path, 1, None).dropped_steps == [2, 3]
    assert path.read_text() == _lines({"step": 0, "eval/avg@4": 0.4}, {"step": 1, "a": 1.0})


def test_a_torn_line_is_cut_with_what_followed_and_a_missing_newline_is_restored(tmp_path):
    path = tmp_path / "completions.jsonl"
    path.write_text(_lines({"step": 1, "response": "a"}) + '{"step": 2, "response": "b"}')  # killed before "\n"
    assert cut_after(path, 2, None).kept == 2
    assert path.read_text() == _lines({"step": 1, "response": "a"}, {"step": 2, "response": "b"})
    path.write_text(_lines({"step": 1, "response": "a"}) + '{"st')  # killed mid-write
    assert cut_after(path, 2, None).kept == 1 and path.read_text() == _lines({"step": 1, "response": "a"})
    # torn after its head, in the step cut after: no row (it was kept as one, and its rows' parse crashed)
    path.write_text(_lines({"step": 1, "response": "a"}, {"step": 2, "response": "b"}) + '{"step": 2, "resp')
    cut = cut_after(path, 2, None)
    assert (cut.kept, cut.last_step_rows) == (2, [{"step": 2, "response": "b"}])
    assert path.read_text() == _lines({"step": 1, "response": "a"}, {"step": 2, "response": "b"})


def test_a_torn_line_among_kept_rows_is_dropped_with_a_warning(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_bytes(b'{"step": 1}\n{"ste\n\xff\xfe\n{"step": 2}\n{"step": 3}\n')
    with pytest.warns(UserWarning, match=r"dropped 2 unreadable line\(s\) \[2, 3\]"):
        cut = cut_after(path, 2, None)
    assert path.read_text() == '{"step": 1}\n{"step": 2}\n' and cut.kept == 2 and cut.dropped_steps == [3]


def test_a_large_log_is_not_read_whole(tmp_path):
    """completions.jsonl holds every logged prompt and response: a resume read it whole (and
    rewrote it), gigabytes at DAPO's response lengths."""
    path = tmp_path / "completions.jsonl"
    lines = [_lines({"step": step, "response": "x" * 20_000}) for step in range(1, 1001) for _ in range(2)]
    with path.open("w") as handle:
        handle.writelines(lines)
    size = path.stat().st_size  # 40 MB
    (tmp_path / "metrics.jsonl").write_text(_lines(*({"step": step} for step in range(1001))))
    tracemalloc.start()
    try:
        logger = MetricsLogger(tmp_path, tensorboard=False, wandb=False, wandb_project="p", config={})
        assert logger.line_counts() == [1001, 2000]
        logger.truncate_after(900, [901, 1850])  # a resume from step 900's checkpoint
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert logger.line_counts() == [901, 1800]
    assert path.stat().st_size == sum(map(len, lines[:1800]))
    assert peak < size / 10, f"peak {peak / 1e6:.1f} MB of Python memory for a {size / 1e6:.0f} MB file"
