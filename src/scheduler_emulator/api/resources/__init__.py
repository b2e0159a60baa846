"""The Microsoft.Resources front door (docs/reference/front-door.md): resource groups, providers and template
deployments, on the same port as the Scheduler's own paths."""

from scheduler_emulator.api.resources import deployments, groups, providers

routers = (groups.router, providers.router, deployments.router, groups.inert_router)  # the catch-all last
