"""Ulysses' two all-to-alls (dapo.trainer.sequence_parallel) on two gloo processes, against the
whole tensor: each rank's tokens of every head become every token of its heads and back, and the
gradient goes back the same way. The default suite's check of the layout; the two-rank update
against one process is test_trainer_sequence_parallel.py's (slow suite)."""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from dapo.trainer.sequence_parallel import SequenceGroup, heads_to_sequence, sequence_to_heads

HEADS, TOKENS, DIM, SIZE = 4, 6, 2, 2  # H heads over S ranks; each rank holds N/S tokens


def _whole() -> torch.Tensor:
    """(1, H, N, d): value 100 h + 10 t + i at head h, token t, feature i, every entry apart."""
    h, t, i = torch.meshgrid(torch.arange(HEADS), torch.arange(TOKENS), torch.arange(DIM), indexing="ij")
    return (100 * h + 10 * t + i).double().unsqueeze(0)


def _rank(rank: int, init_file: str) -> None:
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=SIZE)
    try:
        sequence = SequenceGroup(dist.group.WORLD, rank, SIZE)
        heads = slice(rank * HEADS // SIZE, (rank + 1) * HEADS // SIZE)
        chunk = slice(rank * TOKENS // SIZE, (rank + 1) * TOKENS // SIZE)
        mine = _whole()[:, :, chunk].clone().requires_grad_(True)  # (1, H, N/S, d): its tokens, every head
        gathered = sequence_to_heads(mine, sequence)  # (1, H/S, N, d): every token, its heads
        assert torch.equal(gathered, _whole()[:, heads])
        whole_weights = torch.randn((1, HEADS, TOKENS, DIM), generator=torch.Generator().manual_seed(0),
                                    dtype=torch.float64)  # the same draws on both ranks
        (gathered * whole_weights[:, heads]).sum().backward()
        # d/d(mine) of sum(w * gathered) is w where each entry went: the whole weights at its own tokens
        assert torch.equal(mine.grad, whole_weights[:, :, chunk]), "the gradient went back elsewhere"
        back = heads_to_sequence(gathered.transpose(1, 2), sequence)  # (1, N/S, H, d): its tokens again
        assert torch.equal(back, mine.detach().transpose(1, 2))
    finally:
        dist.destroy_process_group()


def test_two_ranks_trade_tokens_for_heads_and_back_with_the_gradient(tmp_path):
    mp.spawn(_rank, args=(str(tmp_path / "init"),), nprocs=SIZE, join=True)
