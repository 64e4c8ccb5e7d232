"""A stand-in for Ray's Jobs REST API (`/api/jobs/`), for RayJob tests on the simulated
runtime, where no Ray runs: an aiohttp server on 127.0.0.1 (a free port) that the test drives.

It answers what the operator asks: GET a job by submission id (404 when unknown), POST a
submission (400 "already exists" for a taken id, as Ray answers), POST a stop. The test plays
Ray's part: `finish(id, "SUCCEEDED")`, `start(id)` for a job a submitter "submitted".
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web


@dataclass
class JobsApiStandIn:
    jobs: dict[str, dict[str, Any]] = field(default_factory=dict)
    submissions: list[dict[str, Any]] = field(default_factory=list)
    stops: list[str] = field(default_factory=list)
    gets: int = 0
    url: str = ""
    #: Called with each new submission's body before it is taken: a test looks at the world
    #: at the moment the operator submits.
    on_submit: Callable[[dict[str, Any]], Awaitable[None]] | None = None
    _runner: web.AppRunner | None = None

    async def start(self, port: int = 0) -> JobsApiStandIn:
        """Serve on ``port`` (0: a free one); a stopped stand-in started again on its old
        port is a dashboard that came up late."""
        app = web.Application()
        app.router.add_get("/api/jobs/{id}", self._get)
        app.router.add_post("/api/jobs/", self._submit)
        app.router.add_post("/api/jobs/{id}/stop", self._stop)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", port)
        await site.start()
        server = site._server
        assert server is not None
        port = server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    # -- Ray's part ---------------------------------------------------------------------

    def start_job(self, job_id: str, status: str = "RUNNING") -> None:
        now = int(time.time() * 1000)
        self.jobs[job_id] = {
            "submission_id": job_id,
            "status": status,
            "message": f"Job {job_id} is {status.lower()}.",
            "start_time": now,
            "end_time": 0,
        }

    def finish(self, job_id: str, status: str, message: str = "") -> None:
        job = self.jobs[job_id]
        job.update(status=status, end_time=int(time.time() * 1000))
        job["message"] = message or f"Job {job_id} {status.lower()}."

    # -- the API ------------------------------------------------------------------------

    async def _get(self, request: web.Request) -> web.Response:
        self.gets += 1
        job = self.jobs.get(request.match_info["id"])
        if job is None:
            return web.json_response({"detail": "not found"}, status=404)
        return web.json_response(job)

    async def _submit(self, request: web.Request) -> web.Response:
        body = await request.json()
        job_id = str(body.get("submission_id"))
        if job_id in self.jobs:
            return web.Response(status=400, text=f"Job with submission_id {job_id} already exists")
        if self.on_submit is not None:
            await self.on_submit(body)
        self.submissions.append(body)
        self.start_job(job_id)
        return web.json_response({"submission_id": job_id, "job_id": job_id})

    async def _stop(self, request: web.Request) -> web.Response:
        job_id = request.match_info["id"]
        self.stops.append(job_id)
        if job_id in self.jobs and self.jobs[job_id]["status"] in ("PENDING", "RUNNING"):
            self.finish(job_id, "STOPPED")
        return web.json_response({"stopped": True})
