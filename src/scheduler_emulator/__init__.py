"""azure-scheduler-emulator: the Azure Scheduler (Microsoft.Scheduler) API, self-hosted, really running jobs."""

__version__ = "0.1.0"
