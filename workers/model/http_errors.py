"""What can go wrong between gaffer and an endpoint, as the retry logic reads it
(workers/model/faults.py): a status with the server's message, a connection that failed
or timed out, an error inside a stream. The SDK's own exceptions are turned into these
(workers/model/endpoint.py)."""

from __future__ import annotations


class APIError(Exception):
    """The endpoint said no, or an error came inside a stream."""

    def __init__(self, message: str, body: object = None) -> None:
        super().__init__(message)
        self.message = message
        self.body = body


class StatusError(APIError):
    """An HTTP status of 300 or more, with the server's message."""

    def __init__(
        self, status_code: int, message: str, headers: dict[str, str], body: object
    ) -> None:
        super().__init__(f"Error code: {status_code} - {message}", body)
        self.status_code = status_code
        self.headers = headers
        """Lower-cased names (`retry-after`)."""


class ConnectionFailed(APIError):
    """No answer: never connected (`connected` False), or the connection broke."""

    def __init__(self, message: str, *, connected: bool) -> None:
        super().__init__(message)
        self.connected = connected


class TimedOut(ConnectionFailed):
    """Nothing came within the socket's timeout."""
