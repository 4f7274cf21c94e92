"""The base of errors that are the user's to fix (a config value, a busy run directory): the
``dapo`` command prints them as one line, ``dapo <command>: error: ...``, with no traceback."""


class UserError(Exception):
    """A problem the user can fix; the message says what and how."""


class NonFiniteError(UserError, RuntimeError):
    """The policy's numbers stopped being finite (NaN or inf logits: diverged weights, a float16
    overflow). A RuntimeError too, as before; a UserError so that the command says it in one line."""


class DamagedWeightsError(UserError):
    """A model's weights file that cannot be read (a truncated download or copy)."""


class DamagedCheckpointError(DamagedWeightsError):
    """A checkpoint file that cannot be read (a copy cut short, a disk error); ``checkpoint``: its directory."""

    def __init__(self, message: str, checkpoint: object) -> None:
        super().__init__(message)
        self.checkpoint = checkpoint

    def __reduce__(self) -> tuple:  # (a policy rank's, sent to the driver by Ray, unpickles whole)
        return type(self), (str(self), self.checkpoint)
