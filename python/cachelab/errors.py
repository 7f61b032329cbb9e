"""Errors a user can fix: the CLI prints them as one line and exits with status 1."""


class UserError(Exception):
    """A mistake in the user's input or environment, with a message that says what to do."""
