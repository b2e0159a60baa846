"""Builds the FastAPI application and its lifespan (store opened and migrated on start, closed on stop)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

from fastapi import FastAPI

from scheduler_emulator import __version__, stepping
from scheduler_emulator.api import clock as clock_api
from scheduler_emulator.api import dashboard, emulator, history, job_collections, jobs, overview, root
from scheduler_emulator.api import resources as resources_api
from scheduler_emulator.api.access import Authenticator, HostGuard
from scheduler_emulator.api.classic.routes import ClassicRoute
from scheduler_emulator.api.direct import DirectRoutes
from scheduler_emulator.api.identity import token_service
from scheduler_emulator.api.identity.routes import IdentityRoute
from scheduler_emulator.api.pipeline import ArmPipeline, install_error_handlers
from scheduler_emulator.api.preview import HeavyWork
from scheduler_emulator.at_rest import secret_key
from scheduler_emulator.collector import tune_garbage_collector
from scheduler_emulator.config import Settings
from scheduler_emulator.dispatcher.action_process import ACTION_ANSWER_MARGIN, ActionProcess, RemoteActions
from scheduler_emulator.dispatcher.firing import Actions, ActionSender
from scheduler_emulator.dispatcher.loop import Dispatcher, Pacing
from scheduler_emulator.dispatcher.own_loop import DispatcherThread
from scheduler_emulator.dispatcher.own_process import DispatcherProcess
from scheduler_emulator.domain.clock import Clock, WallClock
from scheduler_emulator.metrics import Metrics
from scheduler_emulator.store.database import ConnectionBounds, Database
from scheduler_emulator.store.secrets import SecretBox
from scheduler_emulator.virtual_clock import VirtualClock


def connection_bounds(settings: Settings) -> ConnectionBounds:
    """The time bounds of the process's PostgreSQL connections: the flags given, the rest from the lease."""
    return ConnectionBounds.for_lease(
        settings.lease_seconds,
        statement=settings.db_statement_timeout,
        lock=settings.db_lock_timeout,
        idle_in_transaction=settings.db_idle_in_transaction_timeout,
        keepalive=settings.db_keepalive,
    )


async def build_dispatcher(
    settings: Settings,
    database: Database,
    clock: Clock,
    metrics: Metrics,
    action_process: ActionProcess | None,
    pacing: Pacing | None = None,
) -> tuple[Dispatcher, ActionSender]:
    """A dispatcher over ``database`` (not started) and its action sender: ``action_process``'s while it runs,
    else this process's own (firing.Actions)."""
    local = Actions(settings)
    actions: ActionSender = local
    if action_process is not None:  # the same actions, sent from the action process while it runs
        remote = RemoteActions(
            action_process,
            local,
            up=metrics.action_process.set,
            patience=settings.action_timeout + ACTION_ANSWER_MARGIN,
        )
        await remote.start()
        actions = remote
    pacing = pacing or Pacing.of(settings)
    built = Dispatcher(database, clock=clock, settings=settings, actions=actions, metrics=metrics, pacing=pacing)
    return built, actions


async def stop_deployment_runs(runs: set[asyncio.Task[None]]) -> None:
    """Stop the template deployments still running here; each records that the emulator stopped it."""
    for task in list(runs):
        task.cancel()
    await asyncio.gather(*runs, return_exceptions=True)


def create_app(
    settings: Settings,
    clock: Clock | None = None,
    *,
    action_process: ActionProcess | None = None,
    dispatcher_process: DispatcherProcess | None = None,
) -> FastAPI:
    """The service: ARM routes behind the ARM pipeline, over the store ``settings`` name. ``clock``: the clock
    of ``--clock real`` (default the wall clock; tests may set one); ``--clock virtual`` builds its own.
    ``action_process``: the process serving.serve forked to send the actions (none: they are sent from this
    process). ``dispatcher_process``: the process serving.serve forked to run the dispatcher
    (dispatcher.own_process; none: it runs in this process)."""

    box = SecretBox(secret_key(settings.store))
    virtual = VirtualClock(settings.clock_start) if settings.clock == "virtual" else None
    clock = virtual or clock or WallClock()
    pacing = stepping.PACING if virtual is not None else Pacing.of(settings)  # the virtual clock's is stepped

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        database = Database(settings.store.url, box, connection_bounds(settings))
        database.migrate()
        database.prepare_secrets()
        app.state.database = database
        if virtual is not None:
            await virtual.load(database)
        dispatcher: Dispatcher | DispatcherThread | DispatcherProcess | None = None
        stop_dispatcher: Callable[[float], Awaitable[None]] | None = None
        if settings.dispatcher:

            async def build() -> tuple[Dispatcher, ActionSender]:
                return await build_dispatcher(
                    settings, database, clock, app.state.metrics, action_process, pacing=pacing
                )

            if dispatcher_process is not None:  # in a process of its own; here if that fails
                await dispatcher_process.start(lambda: DispatcherThread(build))
                dispatcher = dispatcher_process
                stop_dispatcher = dispatcher_process.stop
            elif virtual is None:  # on a loop of its own (dispatcher.own_loop)
                dispatcher = DispatcherThread(build)
                await dispatcher.start()
                stop_dispatcher = dispatcher.stop
            else:  # the virtual clock's stepping runs the dispatcher's tasks from this loop
                on_this_loop, actions = await build()
                on_this_loop.start()
                app.state.stepper = stepping.ClockStepper(virtual, on_this_loop)
                dispatcher = on_this_loop

                async def stop_here(grace: float) -> None:
                    await on_this_loop.stop(grace)
                    await actions.close()

                stop_dispatcher = stop_here
        app.state.dispatcher = dispatcher
        tune_garbage_collector()
        try:
            yield
        finally:
            if stop_dispatcher is not None:
                await stop_dispatcher(settings.shutdown_grace)
            await stop_deployment_runs(app.state.deployment_runs)
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
    app.state.clock = clock
    app.state.dispatcher = None  # this process's Dispatcher once started (none with --no-dispatcher)
    app.state.stepper = None  # a stepping.ClockStepper under --clock virtual with a dispatcher (POST /_emulator/clock)
    app.state.metrics = Metrics()
    app.state.heavy_work = HeavyWork(settings.max_heavy_requests)
    app.state.identity = identity = token_service(settings.identity)
    deployment_runs: set[asyncio.Task[None]] = set()  # template deployments running here (api.resources.deployments)
    app.state.deployment_runs = deployment_runs
    if settings.api:
        arm_routers = (job_collections.router, jobs.router, history.router, *resources_api.routers)
        # the Scheduler's, then the Microsoft.Resources front door's (docs/reference/front-door.md)
        for router in arm_routers:
            app.include_router(router)
        # The same routes, served first and without FastAPI's per-request routing and dependency work.
        app.router.routes.insert(0, DirectRoutes(arm_routers))
        # The token service and the account endpoints az calls (they claim only their own path shapes).
        app.router.routes.append(IdentityRoute())
        app.router.routes.append(ClassicRoute())  # the classic 2014 surface (after ARM: it claims only its paths)
    app.include_router(emulator.router)
    app.include_router(clock_api.router)
    app.include_router(dashboard.router)
    app.include_router(root.router)  # a browser at / is led to the dashboard
    app.include_router(overview.router)
    app.include_router(emulator.metrics_router)
    install_error_handlers(app)
    app.add_middleware(
        ArmPipeline,
        hosts=HostGuard(settings.server),
        auth=Authenticator(settings.security, identity),
        max_body_bytes=settings.max_body_bytes,
        clock=clock,
    )
    return app
