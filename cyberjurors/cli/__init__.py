"""The ``cyberjurors`` command: one module per command group, as faust's ``cli/`` has them;
``base.py`` holds the root command, the shared options and the checks several commands make first."""

# each module registers its commands on import, in this order in the help: run, topics, people, data
from . import worker, streams, console, precedents, jury, evaluation, media, erase, schemas  # noqa: I001
from .base import app

__all__ = ["app", "console", "erase", "evaluation", "jury", "media", "precedents", "schemas", "streams", "worker"]
