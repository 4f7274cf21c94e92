"""The base of errors that are the user's to fix (a config value, a busy run directory): the
``dapo`` command prints them as one line, ``dapo <command>: error: ...``, with no traceback."""


class UserError(Exception):
    """A problem the user can fix; the message says what and how."""
