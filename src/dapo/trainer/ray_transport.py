"""Log-probs on their way from a policy rank to the driver: one flat float32 array and the rows'
lengths, not a list of Python floats per response.

Ray pickles a list of floats float by float (at the DAPO reference scale, 512 responses of up to
10k tokens a step, seconds to pickle on the rank and more to unpickle on the driver); a numpy
array goes as one out-of-band buffer. The driver turns it into the lists its samples hold, one
``ndarray.tolist`` a row (:meth:`LogprobRows.rows`): a Python float per token is still made there,
but no longer pickled on the rank nor unpickled on the driver."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from dapo.trainer.policy import split_rows


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

    def rows(self) -> list[list[float]]:
        """The rows as lists of Python floats, the float32 values exactly (as a sample holds them)."""
        return split_rows(self.values, self.lengths.tolist())
