"""Log-probs on their way from a policy rank to the driver: one flat float32 array and the rows'
lengths, not a list of Python floats per response.

Ray pickles a list of floats float by float (at the DAPO reference scale, 512 responses of up to
10k tokens a step, seconds to pickle on the rank and more to unpickle on the driver); a numpy
array goes as one out-of-band buffer. The driver cuts it into the float32 arrays its samples hold
(:meth:`LogprobRows.rows`): no Python float per token is made on either side."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from dapo.trainer.batch import split_rows


@dataclass
class LogprobRows:
    """Rows of log-probs, back to back in ``values`` (float32), ``lengths[i]`` values for row i."""

    values: np.ndarray
    lengths: np.ndarray

    @classmethod
    def of(cls, flat: torch.Tensor, lengths: list[int]) -> LogprobRows:
        """From a CPU tensor of the rows back to back (no copy of its values)."""
        if flat.numel() != sum(lengths):
            raise ValueError(f"{flat.numel()} log-probs for rows of {sum(lengths)} tokens")
        return cls(flat.detach().to(torch.float32).numpy(), np.asarray(lengths, dtype=np.int64))

    def rows(self) -> list[np.ndarray]:
        """The rows as float32 arrays of their own (as a sample holds them; none keeps ``values``)."""
        return split_rows(self.values, self.lengths.tolist())
