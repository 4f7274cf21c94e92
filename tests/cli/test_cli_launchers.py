"""`dapo train` under torchrun: dapo-rl starts its own policy ranks (on Ray), so N copies started
by torchrun ran N independent one-rank runs that fought over output_dir's lock ("in use by another
dapo train"), never saying what was wrong. Each copy now refuses at once, in one line."""

from __future__ import annotations

import pytest

from dapo.cli import main as cli

TORCHRUN_2 = {"WORLD_SIZE": "2", "RANK": "1", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2", "GROUP_RANK": "0",
              "TORCHELASTIC_RUN_ID": "none", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}


@pytest.fixture
def no_training(monkeypatch):
    """cmd_train/cmd_eval replaced: records that the command ran, and trains nothing."""
    ran: list[str] = []
    monkeypatch.setattr(cli, "cmd_train", lambda ns: ran.append("train") or 0)
    monkeypatch.setattr(cli, "cmd_eval", lambda ns: ran.append("eval") or 0)
    for name in (*TORCHRUN_2, "TORCHELASTIC_RESTART_COUNT"):
        monkeypatch.delenv(name, raising=False)
    return ran


@pytest.mark.parametrize("command", [["train", "trainer.total_steps=1"], ["eval", "builtin"]])
def test_a_copy_started_by_torchrun_refuses_at_once_in_one_line(monkeypatch, capsys, no_training, command):
    for name, value in TORCHRUN_2.items():
        monkeypatch.setenv(name, value)
    assert cli.main(command) == 2
    assert no_training == []
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1, err
    assert err.startswith(f"dapo {command[0]}: error: started by torchrun as one of WORLD_SIZE=2 processes")
    assert "starts its own policy ranks" in err and "resources.devices_per_node=N" in err
    assert "resources.ray_address=auto" in err and "without torchrun" in err


def test_another_torch_distributed_launcher_is_refused_too(monkeypatch, capsys, no_training):
    """(accelerate, deepspeed and `python -m torch.distributed.launch` set RANK / LOCAL_RANK, not TORCHELASTIC_*)"""
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("LOCAL_RANK", "0")
    assert cli.main(["train"]) == 2 and no_training == []
    assert "a torch.distributed launcher (torchrun?) as one of WORLD_SIZE=4" in capsys.readouterr().err


@pytest.mark.parametrize("env", [
    {"WORLD_SIZE": "1", "RANK": "0", "LOCAL_RANK": "0", "TORCHELASTIC_RUN_ID": "none"},  # torchrun --nproc_per_node 1
    {"WORLD_SIZE": "8"},  # no launcher's variable beside it: someone's own export
    {"WORLD_SIZE": "two", "LOCAL_RANK": "0"},
    {},
])
def test_one_process_and_a_stray_world_size_run(monkeypatch, no_training, env):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert cli.main(["train"]) == 0 and no_training == ["train"]


def test_commands_that_load_no_model_run_under_torchrun(monkeypatch, capsys):
    for name, value in TORCHRUN_2.items():
        monkeypatch.setenv(name, value)
    assert cli.main(["config", "trainer.lr=5e-7"]) == 0
    assert "lr: 5.0e-07" in capsys.readouterr().out
