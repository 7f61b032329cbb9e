"""The one error type of `cachelab.analysis`."""

from cachelab.errors import UserError


class AnalysisError(UserError, ValueError):
    """Input a model cannot take (an unstable queue, an unbalanced design, a negative rate).

    A `ValueError` because it is a bad argument to a pure function, and a `UserError` because
    the argument usually comes straight from the user's command line or file, so the CLI can
    print the message as one line without a traceback.
    """
