"""Builds the FastAPI application and its lifespan (store opened and migrated on start, closed on stop)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import APIRouter, FastAPI

from scheduler_emulator import __version__, stepping
from scheduler_emulator.api import clock as clock_api
from scheduler_emulator.api import dashboard, emulator, history, job_collections, jobs, overview, roles, root
from scheduler_emulator.api import resources as resources_api
from scheduler_emulator.api.access import Authenticator, HostGuard
from scheduler_emulator.api.authorization import Authorizer
from scheduler_emulator.api.classic.certificates import ManagementCertificates
from scheduler_emulator.api.classic.routes import ClassicRoute
from scheduler_emulator.api.direct import DirectRoutes
from scheduler_emulator.api.identity import token_service
from scheduler_emulator.api.identity.routes import IdentityRoute
from scheduler_emulator.api.permissions import PermissionCheck, RouteRules
from scheduler_emulator.api.pipeline import ArmPipeline, install_error_handlers
from scheduler_emulator.api.preview import HeavyWork
from scheduler_emulator.at_rest import secret_key
from scheduler_emulator.collector import tune_garbage_collector
from scheduler_emulator.config import Settings
from scheduler_emulator.dispatcher.here import DispatcherHere, connection_bounds
from scheduler_emulator.dispatcher.host import DispatcherHost
from scheduler_emulator.dispatcher.loop import Pacing
from scheduler_emulator.domain.clock import Clock, WallClock
from scheduler_emulator.metrics import Metrics
from scheduler_emulator.store.database import Database
from scheduler_emulator.store.secrets import SecretBox
from scheduler_emulator.virtual_clock import VirtualClock

ROLE_MODES = ("issued", "jwt")  # the auth modes whose tokens name a principal that roles are assigned to


async def stop_deployment_runs(runs: set[asyncio.Task[None]]) -> None:
    """Stop the template deployments still running here; each records that the emulator stopped it."""
    for task in list(runs):
        task.cancel()
    await asyncio.gather(*runs, return_exceptions=True)


def create_app(
    settings: Settings, clock: Clock | None = None, *, dispatcher_host: DispatcherHost | None = None
) -> FastAPI:
    """The service: ARM routes behind the ARM pipeline, over the store ``settings`` name. ``clock``: the clock
    of ``--clock real`` (default the wall clock; tests may set one); ``--clock virtual`` builds its own.
    ``dispatcher_host``: where the dispatcher runs when not here (serving.py's child process, dispatcher/child.py);
    None: with ``settings.dispatcher``, on this app's event loop (dispatcher/here.py)."""

    box = SecretBox(secret_key(settings.store))
    virtual = VirtualClock(settings.clock_start) if settings.clock == "virtual" else None
    clock = virtual or clock or WallClock()
    pacing = stepping.PACING if virtual is not None else Pacing.of(settings.dispatch)  # the virtual clock's is stepped

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        database = Database(settings.store.url, box, connection_bounds(settings.store))
        database.migrate()
        database.prepare_secrets()
        app.state.database = database
        if virtual is not None:
            await virtual.load(database)
        host = dispatcher_host
        if host is None and settings.dispatcher:
            here = DispatcherHere(
                database,
                dispatch=settings.dispatch,
                outbound=settings.outbound,
                clock=clock,
                metrics=app.state.metrics,
                pacing=pacing,
                watch_file=not settings.api,
            )
            await here.start()
            if virtual is not None:  # the virtual clock's stepping has the dispatcher claim (stepping.py)
                app.state.stepper = stepping.ClockStepper(virtual, here.dispatcher)
            host = here
        elif host is not None:
            await host.start()
        app.state.dispatcher = host
        tune_garbage_collector()
        try:
            yield
        finally:
            if host is not None:
                await host.stop(settings.shutdown_grace)
            await stop_deployment_runs(app.state.deployment_runs)
            await database.dispose_on_loop()
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
    app.state.dispatcher = None  # its DispatcherHost once started (none with --no-dispatcher)
    app.state.stepper = None  # a stepping.ClockStepper under --clock virtual with a dispatcher (POST /_emulator/clock)
    app.state.metrics = Metrics()
    app.state.heavy_work = HeavyWork(settings.max_heavy_requests)
    app.state.identity = identity = token_service(settings.identity)
    # the classic surface's credentials (docs/classic-api.md#management-certificates)
    app.state.management_certificates = ManagementCertificates(settings.security)
    # who may touch what (docs/reference/authorization.md): the caller's tenant, subscriptions and roles
    app.state.authorizer = Authorizer(settings.security, settings.identity, identity.principals)
    deployment_runs: set[asyncio.Task[None]] = set()  # template deployments running here (api.resources.deployments)
    app.state.deployment_runs = deployment_runs
    routers: list[APIRouter] = []  # in the order they are included (api/permissions.py looks routes up the same way)
    if settings.api:
        arm_routers = (job_collections.router, jobs.router, history.router, *resources_api.routers)
        # the Scheduler's, then the Microsoft.Resources front door's (docs/reference/front-door.md)
        for router in arm_routers:
            app.include_router(router)
        routers += arm_routers
        # The same routes, served first and without FastAPI's per-request routing and dependency work.
        app.router.routes.insert(0, DirectRoutes(arm_routers))
        app.include_router(roles.router)  # Microsoft.Authorization (docs/reference/authorization.md#the-endpoints)
        routers.append(roles.router)
        # The token service and the account endpoints az calls (they claim only their own path shapes).
        app.router.routes.append(IdentityRoute())
        app.router.routes.append(ClassicRoute())  # the classic 2014 surface (after ARM: it claims only its paths)
    # a browser at / is led to the dashboard (root)
    extensions = (emulator.router, clock_api.router, dashboard.router, root.router, overview.router)
    for router in (*extensions, emulator.metrics_router):
        app.include_router(router)
        routers.append(router)
    install_error_handlers(app)
    # Every route's ARM action, enforced where roles exist (--auth issued, --auth-jwks; docs/reference/authorization.md)
    rules = RouteRules.of(routers, app.router.routes)
    permissions = PermissionCheck(rules, app.state.authorizer) if settings.security.mode in ROLE_MODES else None
    app.add_middleware(
        ArmPipeline,
        hosts=HostGuard(settings.server),
        auth=Authenticator(settings.security, identity),
        max_body_bytes=settings.max_body_bytes,
        clock=clock,
        permissions=permissions,
    )
    return app
