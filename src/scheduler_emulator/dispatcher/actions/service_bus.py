"""ServiceBusQueue and ServiceBusTopic actions (being built: see issue 4)."""

from __future__ import annotations

from scheduler_emulator.dispatcher.actions import FireContext, Outcome
from scheduler_emulator.schemas.job import ServiceBusQueueMessage, ServiceBusTopicMessage


class ServiceBusAction:
    """Sends the job's message to a Service Bus queue or topic."""

    def __init__(self, endpoints: dict[str, str], timeout: float) -> None:
        self.endpoints = endpoints
        self.timeout = timeout

    async def execute(self, message: ServiceBusQueueMessage | ServiceBusTopicMessage, context: FireContext) -> Outcome:
        kind = "ServiceBusQueue" if isinstance(message, ServiceBusQueueMessage) else "ServiceBusTopic"
        return Outcome(False, f"{kind} Action - this action type is not supported by this emulator yet")

    async def close(self) -> None:
        pass
