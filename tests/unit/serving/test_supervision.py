"""The model server's side of supervision (runner.serving.supervision): what it says when it stops."""

from __future__ import annotations

import asyncio
import logging

from runner.serving import supervision


def test_requests_cancelled_at_shutdown_are_counted_not_logged_with_tracebacks():
    dropped = supervision.DroppedAtShutdown()

    def record(message: str, error: BaseException | None) -> logging.LogRecord:
        info = (type(error), error, None) if error is not None else None
        return logging.LogRecord("uvicorn.error", logging.ERROR, "h11_impl.py", 1, message, None, info)

    assert dropped.said() is None
    assert not dropped.filter(record("Exception in ASGI application\n", asyncio.CancelledError()))
    assert not dropped.filter(record("Exception in ASGI application\n", asyncio.CancelledError()))
    assert dropped.filter(record("Exception in ASGI application\n", ValueError("a real error stays")))
    assert dropped.filter(record("Shutting down", None))
    lifespan = "Traceback (most recent call last):\n  File ..., in lifespan\nasyncio.exceptions.CancelledError\n"
    assert not dropped.filter(record(lifespan, None))  # Starlette's lifespan, as text: noise, not a request
    assert not dropped.filter(record("Exception in 'lifespan' protocol\n", asyncio.CancelledError()))
    assert dropped.filter(record("Traceback (most recent call last):\nValueError: kept\n", None))
    assert dropped.said() == "tftrain-serve: 2 requests still arriving when the server stopped were dropped unanswered"
