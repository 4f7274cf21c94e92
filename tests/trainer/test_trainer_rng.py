import random
from pathlib import Path

import pytest
import torch

from dapo.trainer.rng import load_rank_rng, rng_state, save_rank_rng, set_rng_state
from dapo.trainer.run_dir import SHARDED_DIR


def test_a_resume_seeing_fewer_gpus_than_the_save_restores_those_it_sees(monkeypatch):
    restored = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "set_rng_state", lambda state, device: restored.append((int(state[0]), device)))
    saved = {"torch": torch.get_rng_state(), "python": __import__("random").getstate(),
             "cuda": [torch.tensor([7], dtype=torch.uint8)] * 8}  # saved with 8 GPUs visible
    set_rng_state(saved)
    assert restored == [(7, 0)]


@pytest.mark.parametrize("initialized", [True, False])
def test_cuda_generators_are_saved_only_by_a_process_that_used_cuda(monkeypatch, initialized):
    """The driver of policy ranks on Ray never initialises CUDA: reading every GPU's generator
    state would open a CUDA context (memory) on each GPU the ranks and vLLM use."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: initialized)
    read = []
    monkeypatch.setattr(torch.cuda, "get_rng_state_all", lambda: read.append(1) or [torch.tensor([7], dtype=torch.uint8)])
    state = rng_state()
    assert ("cuda" in state) == initialized and len(read) == int(initialized)


def test_a_policy_rank_resumes_its_own_random_streams(tmp_path: Path):
    """Each rank's generators (what its dropout draws) are saved with its shard and restored by
    rank: the numbers drawn after a resume are those drawn after the save."""
    (tmp_path / SHARDED_DIR).mkdir()
    python_state = random.getstate()
    with torch.random.fork_rng():  # the test's seeding stays in the test
        try:
            drawn = {}
            for rank in (0, 1):
                torch.manual_seed(100 + rank)
                random.seed(rank)
                save_rank_rng(tmp_path, rank)
                drawn[rank] = (torch.rand(4), random.random())
            torch.manual_seed(7)
            for rank in (1, 0):
                assert load_rank_rng(tmp_path, rank)
                after = (torch.rand(4), random.random())
                assert torch.equal(after[0], drawn[rank][0]) and after[1] == drawn[rank][1]
            state = torch.get_rng_state()
            assert not load_rank_rng(tmp_path, 2)  # a checkpoint of fewer ranks: the seeded state stays
            assert torch.equal(torch.get_rng_state(), state)
        finally:
            random.setstate(python_state)


def test_numpys_global_generator_resumes_where_it_was_saved(tmp_path: Path):
    """A user's plugin drawing from np.random draws, after a resume, what it would have drawn after
    the save; the state goes through torch.save and a weights_only load, as a checkpoint's does.
    A checkpoint without it (older ones) leaves NumPy as it is."""
    import numpy as np

    before = np.random.get_state()
    try:
        np.random.seed(5)
        np.random.standard_normal()  # a cached Gaussian in the state
        torch.save(rng_state(), tmp_path / "rng.pt")
        expected = np.random.standard_normal(4), np.random.randint(0, 2**31, 4)
        np.random.seed(6)
        set_rng_state(torch.load(tmp_path / "rng.pt", weights_only=True))
        got = np.random.standard_normal(4), np.random.randint(0, 2**31, 4)
        assert all((a == b).all() for a, b in zip(got, expected))
        older = {key: value for key, value in rng_state().items() if key != "numpy"}
        np.random.seed(7)
        drawn = np.random.get_state()[1].copy()
        set_rng_state(older)
        assert (np.random.get_state()[1] == drawn).all()
    finally:
        np.random.set_state(before)


def _draws() -> tuple[float, float, float]:
    import numpy as np

    return random.random(), float(np.random.standard_normal()), float(torch.rand(()))


def test_a_run_seeds_python_numpy_and_torch_from_its_seed(tiny_model_dir, reward_file, tmp_path):
    """A user's advantage or loss plugin drawing from Python's ``random`` or NumPy's global
    generator draws the same numbers in two runs of one config, whatever the process drew before;
    another seed draws others."""
    import numpy as np

    from dapo.trainer import Trainer
    from tests.trainer.conftest import tiny_config

    before = rng_state()
    try:
        runs = []
        for index, run_seed in enumerate([7, 7, 8]):
            random.seed(100 + index)  # what the process drew before the run differs each time
            np.random.seed(100 + index)
            torch.manual_seed(100 + index)
            Trainer(tiny_config(tiny_model_dir, tmp_path / f"run{index}", reward_file,
                                f"trainer.seed={run_seed}")).close()
            runs.append(_draws())
        assert runs[0] == runs[1]
        assert all(a != b for a, b in zip(runs[0], runs[2]))
    finally:
        set_rng_state(before)
