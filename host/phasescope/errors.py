"""User-facing errors: one line on stderr and a non-zero exit, never a traceback."""


class PhasescopeError(Exception):
    """An error the user can act on. ``exit_code`` is 2 for bad input, 1 for runtime failures."""

    def __init__(self, message: str, exit_code: int = 1):
        super().__init__(message)
        self.exit_code = exit_code


class InputError(PhasescopeError):
    """Malformed file or invalid option (exit code 2)."""

    def __init__(self, message: str):
        super().__init__(message, exit_code=2)
