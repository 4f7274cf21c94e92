"""What each policy rank is handed: absolute paths (a rank on another node does not run in the
driver's directory), a rendezvous port rank 0 already holds, and the GPU Ray gave it."""

from __future__ import annotations

import socket

import pytest
import torch
import torch.distributed as dist

from dapo.trainer.ray_policy import PolicyRank, rank_device

pytest.importorskip("ray")


def test_the_ranks_get_absolute_paths_a_rank_on_another_node_can_follow(tmp_path, monkeypatch):
    """(a rank of a cluster does not run in the driver's directory: a relative output_dir made it
    write its checkpoint shards somewhere the driver never looked). The run's saved config is
    written the same way, so that `dapo eval CHECKPOINT` finds its files from any directory."""
    from dapo.config import load_config
    from dapo.config.loading import config_to_dict, with_absolute_paths

    (tmp_path / "models" / "mine").mkdir(parents=True)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "a.parquet").write_text("")
    (tmp_path / "algo.py").write_text("")
    (tmp_path / "rewards.py").write_text("")
    monkeypatch.chdir(tmp_path)
    cfg = config_to_dict(load_config([], [
        "output_dir=runs/x", "model.path=models/mine", "algorithm.plugins=[algo.py]",
        "data.train_files=[data/*.parquet, builtin:arithmetic]", "data.eval_files=[data/a.parquet]",
        "reward.functions=[{path: rewards.py:fn}, {path: my_module:fn}]"]))
    ranks = with_absolute_paths(cfg)
    assert ranks["output_dir"] == str(tmp_path / "runs" / "x") and ranks["model"]["path"] == str(tmp_path / "models/mine")
    assert ranks["algorithm"]["plugins"] == [str(tmp_path / "algo.py")] and cfg["output_dir"] == "runs/x"
    assert ranks["data"]["train_files"] == [str(tmp_path / "data" / "*.parquet"), "builtin:arithmetic"]
    assert ranks["data"]["eval_files"] == [str(tmp_path / "data" / "a.parquet")]
    assert [f["path"] for f in ranks["reward"]["functions"]] == [f"{tmp_path / 'rewards.py'}:fn", "my_module:fn"]
    builtin = with_absolute_paths(config_to_dict(load_config([], [])))
    assert builtin["model"]["path"] == "builtin" and builtin["model"]["tokenizer_path"] is None


def test_rank_zero_holds_the_rendezvous_port_from_the_moment_it_names_it():
    """The port the driver hands to the other ranks is already bound by rank 0's store: no other
    process on the node can take it before they join (a port found free, then closed, could be)."""
    rank0 = PolicyRank({}, rank=0, world_size=2)
    host, port = rank0.rendezvous_address()
    with socket.socket() as other, pytest.raises(OSError):
        other.bind(("", port))
    joining = dist.TCPStore(host, port, 2, is_master=False)  # where rank 1 joins
    joining.set("seen", "yes")
    assert rank0.store.get("seen") == b"yes"


def test_a_rank_uses_the_gpu_ray_gave_it_whatever_index_trainer_device_names():
    """Ray shows each rank actor one GPU, as cuda:0: trainer.device=cuda:3 (a GPU of the
    one-process trainer) would be an invalid ordinal inside the actor."""
    assert rank_device(torch.device("cuda", 3)) == torch.device("cuda", 0)
    assert rank_device(torch.device("cuda")) == torch.device("cuda", 0)
    assert rank_device(torch.device("cpu")) == torch.device("cpu")
