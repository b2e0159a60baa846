"""Builds the FastAPI application and its lifespan (store opened and migrated on start, closed on stop)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from scheduler_emulator import __version__
from scheduler_emulator.api import emulator, history, job_collections, jobs
from scheduler_emulator.api.access import Authenticator, HostGuard
from scheduler_emulator.api.pipeline import ArmPipeline, install_error_handlers
from scheduler_emulator.api.preview import HeavyWork
from scheduler_emulator.at_rest import secret_key
from scheduler_emulator.config import Settings
from scheduler_emulator.dispatcher.firing import Actions
from scheduler_emulator.dispatcher.loop import Dispatcher
from scheduler_emulator.domain.clock import Clock
from scheduler_emulator.metrics import Metrics
from scheduler_emulator.store.database import Database
from scheduler_emulator.store.secrets import SecretBox


def create_app(settings: Settings, clock: Clock | None = None) -> FastAPI:
    """The service: ARM routes behind the ARM pipeline, over the store ``settings`` name."""

    box = SecretBox(secret_key(settings))

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        database = Database(settings.effective_database_url, box)
        database.migrate()
        database.prepare_secrets()
        app.state.database = database
        dispatcher = None
        if settings.dispatcher:
            actions = Actions(settings)
            dispatcher = Dispatcher(database, app.state.clock, settings, actions, app.state.metrics)
            dispatcher.start()
        app.state.dispatcher = dispatcher
        try:
            yield
        finally:
            if dispatcher is not None:
                await dispatcher.stop(settings.shutdown_grace)
                await actions.close()
            database.dispose()
            app.state.heavy_work.close()

    app = FastAPI(
        title="Azure Scheduler emulator",
        version=__version__,
        lifespan=lifespan,
        docs_url="/_emulator/docs",
        redoc_url=None,
        openapi_url="/_emulator/openapi.json",
    )
    app.state.settings = settings
    app.state.clock = clock or Clock()
    app.state.metrics = Metrics()
    app.state.heavy_work = HeavyWork(settings.max_heavy_requests)
    if settings.api:
        app.include_router(job_collections.router)
        app.include_router(jobs.router)
        app.include_router(history.router)
    app.include_router(emulator.router)
    app.include_router(emulator.metrics_router)
    install_error_handlers(app)
    app.add_middleware(
        ArmPipeline, hosts=HostGuard(settings), auth=Authenticator(settings), max_body_bytes=settings.max_body_bytes
    )
    return app
