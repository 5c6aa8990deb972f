"""Structured logs on stderr, as text for people or one JSON object per line for
log collectors, with per-reconcile context.

Workers bind the job key into structlog's context variables, and every task has its
own copy of them, so each log line of a reconcile names its job without passing a
logger around. The format defaults to text on a terminal (someone is reading) and to
JSON otherwise (a container's output goes to a collector).
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import structlog

FORMATS = ("text", "json")


def default_format() -> str:
    return "text" if sys.stderr.isatty() else "json"


def configure(level: str = "info", fmt: str | None = None) -> None:
    fmt = fmt or default_format()
    if fmt not in FORMATS:
        raise ValueError(f"log format {fmt!r} is not one of {', '.join(FORMATS)}")
    renderer: Any = (
        structlog.processors.JSONRenderer()
        if fmt == "json"
        else structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            *([structlog.processors.format_exc_info] if fmt == "json" else []),
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(
            logging.getLevelNamesMapping()[level.upper()]
        ),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )
