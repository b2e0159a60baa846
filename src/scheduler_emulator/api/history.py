"""Job history: ``{root}/jobCollections/{jc}/jobs/{job}/history``, newest first."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from sqlalchemy.orm import Session

from scheduler_emulator.api.context import in_read_session
from scheduler_emulator.api.jobs import JOB, collection_ref
from scheduler_emulator.api.paging import equality_filter, list_body, page_of
from scheduler_emulator.api.rendering import history_to_wire
from scheduler_emulator.service import collections, jobs

router = APIRouter()


@router.get(JOB + "/history")
async def list_job_history(
    request: Request, subscription_id: str, resource_group: str, collection_name: str, job_name: str
) -> Response:
    page = page_of(request)
    status = equality_filter(request, "status", jobs.HISTORY_STATUSES)
    ref = collection_ref(subscription_id, resource_group, collection_name)

    def work(session: Session) -> dict[str, Any]:
        collection = collections.get(session, ref)
        job, rows = jobs.history_page(session, collection, job_name, status=status, skip=page.skip, limit=page.top + 1)
        items = [history_to_wire(collection, job, entry) for entry in rows[: page.top]]
        return list_body(request, items, page, has_more=len(rows) > page.top)

    return JSONResponse(await in_read_session(request, work))
