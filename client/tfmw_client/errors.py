"""Errors a user can act on: what happened, and how to fix it; and the exit codes (kubectl's)."""

from __future__ import annotations

from typing import Final

EXIT_OK: Final = 0
EXIT_ERROR: Final = 1
EXIT_TIMEOUT: Final = 2  # tfmw wait: the timeout passed before the job got there


class TfmwError(Exception):
    """Printed as `error: <message>` on stderr, then the fix, and the command exits `exit_code`."""

    def __init__(self, message: str, fix: str = "", exit_code: int = EXIT_ERROR) -> None:
        super().__init__(message)
        self.message = message
        self.fix = fix
        self.exit_code = exit_code

    def __str__(self) -> str:
        return f"{self.message}\n{self.fix}" if self.fix else self.message


class ApiError(TfmwError):
    """The API server answered with an error status (its Status object's reason and message).
    `type_missing`: a 404 for the resource type itself (its API not served), not the object."""

    def __init__(
        self, status: int, reason: str, message: str, fix: str = "", type_missing: bool = False
    ) -> None:
        super().__init__(message or reason or f"HTTP {status}", fix)
        self.status = status
        self.reason = reason
        self.type_missing = type_missing

    @property
    def not_found(self) -> bool:
        """The object is not there (a 404 for a resource type that is served)."""
        return self.status == 404 and not self.type_missing

    @property
    def forbidden(self) -> bool:
        return self.status == 403

    @property
    def conflict(self) -> bool:
        return self.status == 409
