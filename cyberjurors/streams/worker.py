"""Running a Faust worker for the jury pipeline."""

from __future__ import annotations

import asyncio
import logging

import faust

from .. import metrics
from ..config import Settings
from .app import create_app
from .kafka import ensure_topics


def run_worker(settings: Settings, loglevel: str = "info") -> None:
    created = asyncio.run(ensure_topics(settings))
    asyncio.set_event_loop(asyncio.new_event_loop())  # asyncio.run closed its loop; Faust needs one
    settings.datadir.mkdir(parents=True, exist_ok=True)
    app = create_app(settings)
    if created:
        logging.getLogger("cyberjurors").info("created topics: %s", ", ".join(created))
    if settings.metrics_port:
        # one endpoint for both: our metrics and Faust's sensor share the default registry
        metrics.instrument_faust(app)
        metrics.serve(settings.metrics_port, settings.metrics_host)
    faust.Worker(app, loglevel=loglevel, quiet=True).execute_from_commandline()
