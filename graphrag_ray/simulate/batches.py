"""OpenAI's Files and Batches endpoints, as its API reference documents them, for the simulator: a JSONL file of
requests is uploaded (`POST /v1/files`, purpose `batch`), a batch is created from it (`POST /v1/batches`) and goes
validating -> in_progress -> finalizing -> completed (or expired / cancelled), with `request_counts`; its answers are
an output file (one line per request: custom_id, response.status_code, response.body) and an error file (failed
lines, and the lines an expired batch never reached, `batch_expired`).

Each line is answered by the simulator's own chat endpoint (posted to itself over loopback, marked as a batch's): the
same answers, token counts, prompt cache and faults as a synchronous request, counted apart (`batch_served`,
`sync_chat`). `batch_line_submissions` counts every request line ever submitted by its body, so a test sees a
request sent twice. Knobs: `batch_latency` (seconds a batch takes, besides its answers), `batch_fail_every` (every
n-th line fails with a 500 in the error file), `batch_expire_after` (a batch answers this many lines, then expires),
`no_batches` (404: a provider without a Batch API)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
import uuid
from collections import Counter

import aiohttp
from aiohttp import web

BATCH_HEADER = "X-Simulator-Batch"
ENDPOINTS = ("/v1/chat/completions", "/v1/embeddings")


class BatchService:
    def __init__(self, config, counts: Counter):
        self.config = config
        self.counts = counts
        self.files: dict[str, dict] = {}  # id -> {"data": bytes, "purpose": str, "filename": str}
        self.batches: dict[str, dict] = {}
        self.line_submissions: Counter = Counter()
        self._tasks: set[asyncio.Task] = set()

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/files", self.upload)
        app.router.add_get("/v1/files/{file_id}", self.file_object)
        app.router.add_get("/v1/files/{file_id}/content", self.file_content)
        app.router.add_post("/v1/batches", self.create)
        app.router.add_get("/v1/batches", self.listed)
        app.router.add_get("/v1/batches/{batch_id}", self.retrieve)
        app.router.add_post("/v1/batches/{batch_id}/cancel", self.cancel)

    def stats(self) -> dict:
        return {"max_batch_submissions_of_one_request": max(self.line_submissions.values(), default=0)}

    def reset(self) -> None:
        self.line_submissions.clear()

    # -- files --------------------------------------------------------------------------------------------
    async def upload(self, request: web.Request) -> web.Response:
        if self.config.no_batches:
            return _not_found("/v1/files")
        purpose, data, filename = "", b"", "upload.jsonl"
        reader = await request.multipart()
        async for part in reader:
            if part.name == "purpose":
                purpose = (await part.read()).decode()
            elif part.name == "file":
                filename, data = part.filename or filename, await part.read()
        if purpose != "batch" or not data:
            return _invalid("a file with purpose 'batch' is expected")
        file_id = f"file-{uuid.uuid4().hex[:24]}"
        self.files[file_id] = {"data": data, "purpose": purpose, "filename": filename}
        self.counts["batch_files_uploaded"] += 1
        return web.json_response(self._file_object(file_id))

    def _file_object(self, file_id: str) -> dict:
        f = self.files[file_id]
        return {
            "id": file_id,
            "object": "file",
            "bytes": len(f["data"]),
            "created_at": int(time.time()),
            "filename": f["filename"],
            "purpose": f["purpose"],
        }

    async def file_object(self, request: web.Request) -> web.Response:
        file_id = request.match_info["file_id"]
        if file_id not in self.files:
            return _not_found(f"file {file_id}")
        return web.json_response(self._file_object(file_id))

    async def file_content(self, request: web.Request) -> web.Response:
        file_id = request.match_info["file_id"]
        if file_id not in self.files:
            return _not_found(f"file {file_id}")
        return web.Response(body=self.files[file_id]["data"], content_type="application/octet-stream")

    # -- batches ------------------------------------------------------------------------------------------
    async def create(self, request: web.Request) -> web.Response:
        if self.config.no_batches:
            return _not_found("/v1/batches")
        body = await request.json()
        input_id, endpoint = body.get("input_file_id"), body.get("endpoint")
        if input_id not in self.files or endpoint not in ENDPOINTS or body.get("completion_window") != "24h":
            return _invalid("input_file_id, endpoint and completion_window '24h' are required")
        lines = [json.loads(line) for line in self.files[input_id]["data"].decode().splitlines() if line.strip()]
        for line in lines:
            self.line_submissions[hashlib.sha256(json.dumps(line["body"], sort_keys=True).encode()).hexdigest()] += 1
        batch_id = f"batch_{uuid.uuid4().hex[:24]}"
        now = int(time.time())
        self.batches[batch_id] = {
            "id": batch_id,
            "object": "batch",
            "endpoint": endpoint,
            "errors": None,
            "input_file_id": input_id,
            "completion_window": "24h",
            "status": "validating",
            "output_file_id": None,
            "error_file_id": None,
            "created_at": now,
            "in_progress_at": None,
            "expires_at": now + 86_400,
            "finalizing_at": None,
            "completed_at": None,
            "failed_at": None,
            "expired_at": None,
            "cancelling_at": None,
            "cancelled_at": None,
            "request_counts": {"total": len(lines), "completed": 0, "failed": 0},
            "metadata": body.get("metadata"),
        }
        self.counts["batches_created"] += 1
        task = asyncio.ensure_future(self._process(batch_id, lines, str(request.url.origin()), endpoint))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return web.json_response(self.batches[batch_id])

    async def listed(self, request: web.Request) -> web.Response:
        """Every batch, newest first (one page: the simulator's are few)."""
        if self.config.no_batches:
            return _not_found("/v1/batches")
        data = sorted(self.batches.values(), key=lambda b: b["created_at"], reverse=True)
        first, last = (data[0]["id"], data[-1]["id"]) if data else (None, None)
        return web.json_response(
            {"object": "list", "data": data, "first_id": first, "last_id": last, "has_more": False}
        )

    async def retrieve(self, request: web.Request) -> web.Response:
        batch = self.batches.get(request.match_info["batch_id"])
        return web.json_response(batch) if batch is not None else _not_found("batch")

    async def cancel(self, request: web.Request) -> web.Response:
        batch = self.batches.get(request.match_info["batch_id"])
        if batch is None:
            return _not_found("batch")
        if batch["status"] in ("validating", "in_progress"):
            batch["status"], batch["cancelling_at"] = "cancelling", int(time.time())
        return web.json_response(batch)

    async def _process(self, batch_id: str, lines: list[dict], origin: str, endpoint: str) -> None:
        batch = self.batches[batch_id]
        step = self.config.batch_latency / 3
        await asyncio.sleep(step)
        batch["status"], batch["in_progress_at"] = "in_progress", int(time.time())
        outputs, errors = [], []
        counts = batch["request_counts"]
        async with aiohttp.ClientSession() as session:
            for n, line in enumerate(lines, 1):
                if batch["status"] == "cancelling" or (
                    self.config.batch_expire_after and n > self.config.batch_expire_after
                ):
                    code = "batch_cancelled" if batch["status"] == "cancelling" else "batch_expired"
                    errors += [
                        _error_line(rest, code, f"the batch {code[6:]} before this request ran")
                        for rest in lines[n - 1 :]
                    ]
                    break
                if self.config.batch_fail_every and n % self.config.batch_fail_every == 0:
                    errors.append(_error_line(line, "server_error", "The server had an error processing it."))
                    counts["failed"] += 1
                    continue
                async with session.post(origin + endpoint, json=line["body"], headers={BATCH_HEADER: "1"}) as reply:
                    answer = await reply.json(content_type=None)
                    status = reply.status
                record = {
                    "id": f"batch_req_{uuid.uuid4().hex[:24]}",
                    "custom_id": line["custom_id"],
                    "response": {"status_code": status, "request_id": uuid.uuid4().hex, "body": answer},
                    "error": None,
                }
                (outputs if status == 200 else errors).append(record)
                counts["completed" if status == 200 else "failed"] += 1
        await asyncio.sleep(step)
        batch["status"], batch["finalizing_at"] = "finalizing", int(time.time())
        await asyncio.sleep(step)
        for name, records in (("output_file_id", outputs), ("error_file_id", errors)):
            if records:
                file_id = f"file-{uuid.uuid4().hex[:24]}"
                data = "".join(json.dumps(r) + "\n" for r in records).encode()
                self.files[file_id] = {"data": data, "purpose": "batch_output", "filename": f"{batch_id}.jsonl"}
                batch[name] = file_id
        now = int(time.time())
        if batch["status"] == "cancelling":
            batch["status"], batch["cancelled_at"] = "cancelled", now
        elif self.config.batch_expire_after and len(lines) > self.config.batch_expire_after:
            batch["status"], batch["expired_at"] = "expired", now
        else:
            batch["status"], batch["completed_at"] = "completed", now


def _error_line(line: dict, code: str, message: str) -> dict:
    return {
        "id": f"batch_req_{uuid.uuid4().hex[:24]}",
        "custom_id": line["custom_id"],
        "response": None,
        "error": {"code": code, "message": message},
    }


def _not_found(what: str) -> web.Response:
    return web.json_response(
        {"error": {"message": f"{what}: not found", "type": "invalid_request_error", "code": "not_found"}}, status=404
    )


def _invalid(message: str) -> web.Response:
    return web.json_response({"error": {"message": message, "type": "invalid_request_error", "code": None}}, status=400)
