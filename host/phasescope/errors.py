"""User-facing errors: one line on stderr and a non-zero exit, never a traceback; the exit codes."""

#: 0 normal end; 1 the target exited non-zero or a runtime failure; 2 bad input; 3 the target was
#: killed or crashed; 130 a second stop signal, or Ctrl-C before the run started
EXIT_OK, EXIT_FAILED, EXIT_INPUT, EXIT_KILLED, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


class PhasescopeError(Exception):
    """An error the user can act on. ``exit_code`` is 2 for bad input, 1 for runtime failures."""

    def __init__(self, message: str, exit_code: int = 1):
        super().__init__(message)
        self.exit_code = exit_code


class InputError(PhasescopeError):
    """Malformed file or invalid option (exit code 2)."""

    def __init__(self, message: str):
        super().__init__(message, exit_code=2)
