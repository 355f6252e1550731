"""The benchmarks' errors: each is printed as one line, never a traceback."""


class BenchError(Exception):
    """A user-facing error: printed as one line, no traceback (exit status 2)."""


class ServerFailure(BenchError):
    """One server misbehaved (did not start, failed the answer check, died): it is dropped
    from later rounds and reported, the others are still measured."""
