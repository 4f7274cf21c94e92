"""The policy's AdamW against verl's (torch.optim.AdamW over every parameter, weight decay on all):
trainer.decay_biases_and_norms=true makes the same update; false leaves biases and norm weights
undecayed, and only them."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from dapo.config import TrainerConfig
from dapo.trainer.optim import build_optimizer


def _one_step(model: nn.Module, optimizer: torch.optim.Optimizer, grads: list[torch.Tensor]) -> dict[str, torch.Tensor]:
    for param, grad in zip(model.parameters(), grads):
        param.grad = grad.clone()
    optimizer.step()
    return {name: param.detach().clone() for name, param in model.named_parameters()}


@pytest.mark.parametrize("decay_all", [True, False])
def test_adamw_decays_biases_and_norms_as_verl_does_only_when_asked(decay_all: bool):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 5), nn.LayerNorm(5), nn.Linear(5, 3, bias=False))
    with torch.no_grad():  # (a new LayerNorm's bias is 0, which no decay moves)
        for param in model.parameters():
            param.normal_()
    grads = [torch.randn_like(p) for p in model.parameters()]
    cfg = TrainerConfig(lr=1e-2, weight_decay=0.5, betas=[0.9, 0.99], decay_biases_and_norms=decay_all)
    verl_model = copy.deepcopy(model)
    verl = torch.optim.AdamW(verl_model.parameters(), lr=1e-2, betas=(0.9, 0.99), weight_decay=0.5)
    before = {name: param.detach().clone() for name, param in model.named_parameters()}
    ours = _one_step(model, build_optimizer(model, cfg), grads)
    reference = _one_step(verl_model, verl, grads)
    for name, value in ours.items():
        vector = before[name].dim() < 2  # a bias or a norm weight
        if decay_all or not vector:
            torch.testing.assert_close(value, reference[name], rtol=0, atol=1e-7, msg=name)
        else:  # verl's also shrank it by lr x weight_decay (decoupled decay): the only difference
            torch.testing.assert_close(value - before[name] * 1e-2 * 0.5, reference[name], rtol=0, atol=1e-6, msg=name)
            assert (value - reference[name]).abs().max() > 1e-4, name
