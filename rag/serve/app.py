"""The web app of ``rag serve``: the page (static files, no build step, nothing fetched from elsewhere) and the
JSON API it uses, which scripts can use too (docs/guides/web.md).

    GET  /api/info                    configurations, artifacts, example questions, limits
    POST /api/ask                     {"question", "config"?, "artifact"?, "history"?} -> the prediction and its trace
    POST /api/stream                  the same body; the answer as server-sent events, one per step (the page uses it)
    GET  /api/stream?question=&config=&artifact=&history=   the same, the history as URL-encoded JSON
    GET  /api/chunk?id=               a passage: text, title, source, part n of m of its document
    GET  /api/recording?question=&config=   a recorded run of the question, to play back (rag.serve.recordings)
    GET  /api/runs                    the eval runs found; /api/runs/{name} one run in detail
    GET  /api/metrics?run=A&run=B     the metric table across runs
    GET  /api/plots/{kind}.png?run=A  a rag.report.plots figure (metrics, latency, steps)
    GET  /api/artifacts               compiled artifacts: scores before/after, instructions and demos
    GET  /api/review                  rag serve --review FILE: its items, their review state, the counts (goldenview)
    GET  /api/review/item?id=         one item with its passages and the model's proposal
    POST /api/review/decide           {"id", "decision", "version", "question"?, "reference_answer"?}: written to FILE
    POST /api/keep                    rag serve --keep-sql FILE: {"question", "sql", "written"?, "route"?, "answer"?}
                                      run again through the guard and kept in FILE as a labelled example (keeping)

Every error is JSON ``{"error": "..."}`` with one line that says what to fix. Request bodies are capped at
``rag.serve.guard.MAX_BODY`` bytes. ``history`` is a follow-up's conversation, its earlier turns oldest first (``[{"question",
"answer"}]``), at most ``MAX_HISTORY_TURNS`` turns and ``MAX_HISTORY_CHARS`` characters; the agent condenses the
follow-up from the last ``history_turns`` of them (rag.agent.conversation). The server keeps no conversation: each
request brings its own. Everything the page shows of documents, questions and model output is inserted as text.
Only the page itself and clients on this machine may use the API: ``rag.serve.guard`` refuses other hosts (421),
other origins (403) and POST bodies that are not JSON (415). A review decision on a golden file that changed since its
item was shown is refused (409), never written over the change. A question whose client hangs up (the page's Stop
aborts its request) is dropped (``Runner.drop``), whether it waits in the queue or runs: it leaves the queue, or gives
its worker slot to the next question and stops at its next node.
"""

from __future__ import annotations

import asyncio
import json
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, Response, StreamingResponse
from fastapi.staticfiles import StaticFiles
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from rag.agent.module import MAX_QUESTION_CHARS
from rag.curate.review import FileChanged
from rag.errors import BadRequest, NotFound, SieveError
from rag.serve.evalview import RunBrowser
from rag.serve.goldenview import DECISION_SHAPE, GoldenReview
from rag.serve.guard import BodyLimit, Guard, SecurityHeaders, error
from rag.serve.keeping import KeptQueries
from rag.serve.programs import AUTO, Programs
from rag.serve.recordings import find, recording
from rag.serve.stream import Job, QueueFull, Runner, sse

STATIC = Path(__file__).parent / "static"
MAX_HISTORY_TURNS = 20  # a conversation sent with a follow-up; the agent reads only the last history_turns of them
MAX_HISTORY_CHARS = 20_000  # the questions and answers of those turns, together
HISTORY_SHAPE = 'a JSON list of {"question": str, "answer": str} turns, oldest first'
HEARTBEAT_S = 1.0
DISCONNECT_POLL_S = 0.25  # how often a waiting /api/ask checks that its client is still there
def text_field(name: str, value: str) -> str:
    """``value`` if it can be sent on as UTF-8; a lone surrogate (a JSON ``\\ud800`` escape without its pair) is a
    BadRequest naming the field and the character, refused before the question queues."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise BadRequest(f"{name}: character {exc.start + 1} is U+{ord(value[exc.start]):04X}, a lone surrogate, "
                         "which is not text; send valid UTF-8 (a \\ud800-\\udfff escape must be half of a pair)") from None
    return value


def history_field(value: Any) -> list[dict[str, str]]:
    """The ``history`` parameter as the agent takes it: ``[{"question", "answer"}]``, oldest first (``[]`` when
    absent). A JSON string is parsed first (the GET stream's URL parameter). Anything else, a turn of another shape,
    or one over ``MAX_HISTORY_TURNS`` turns or ``MAX_HISTORY_CHARS`` characters is a BadRequest naming the field and
    the fix, refused before the question queues."""
    if value is None or value == "":
        return []
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError as exc:
            raise BadRequest(f"history: not JSON ({exc}); send {HISTORY_SHAPE}") from None
    if not isinstance(value, list):
        raise BadRequest(f"history: got a JSON {type(value).__name__}; send {HISTORY_SHAPE}")
    if len(value) > MAX_HISTORY_TURNS:
        raise BadRequest(f"history: {len(value)} turns, at most {MAX_HISTORY_TURNS}; send only the last ones "
                         "(the agent reads the last few, setting history_turns)")
    turns = []
    for i, turn in enumerate(value):
        where = f"history[{i}]"
        if not isinstance(turn, dict) or set(turn) != {"question", "answer"}:
            got = sorted(turn) if isinstance(turn, dict) else type(turn).__name__
            raise BadRequest(f"{where}: each turn is {{\"question\": str, \"answer\": str}}, got {got}; send "
                             f"{HISTORY_SHAPE}")
        for name in ("question", "answer"):
            if not isinstance(turn[name], str):
                raise BadRequest(f"{where}.{name}: must be a string, got {type(turn[name]).__name__}")
            text_field(f"{where}.{name}", turn[name])
        if not turn["question"].strip():
            raise BadRequest(f"{where}.question: empty; each turn is a question asked and the answer it got")
        turns.append({"question": turn["question"], "answer": turn["answer"]})
    chars = sum(len(t["question"]) + len(t["answer"]) for t in turns)
    if chars > MAX_HISTORY_CHARS:
        raise BadRequest(f"history: {chars:,} characters in its turns, at most {MAX_HISTORY_CHARS:,}; send fewer "
                         "turns or shorter answers (the agent reads at most history_chars of them)")
    return turns


def connected(request: Request, loop: asyncio.AbstractEventLoop, timeout: float = 2.0) -> bool:
    """From a worker thread: is the client of ``request`` still there? The server knows as soon as the connection
    closes; the request itself notices only when it next looks (DISCONNECT_POLL_S, HEARTBEAT_S)."""
    return not asyncio.run_coroutine_threadsafe(request.is_disconnected(), loop).result(timeout)


def create_app(programs: Programs, browser: RunBrowser, *, examples: list[dict[str, Any]] | None = None,
               workers: int = 1, max_waiting: int = 8, host: str = "127.0.0.1",
               review: GoldenReview | None = None, keep: KeptQueries | None = None) -> FastAPI:
    """The app; ``host`` is the address ``rag serve`` listens on (``--host``): the Host names it answers for;
    ``review`` the golden file of ``rag serve --review`` (without it the review endpoints answer 404); ``keep`` the
    examples file of ``rag serve --keep-sql`` (without it /api/keep answers 404)."""
    runner = Runner(programs, workers=workers, max_waiting=max_waiting)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        yield
        runner.shutdown()

    app = FastAPI(title="Sieve", docs_url=None, redoc_url=None, openapi_url=None, lifespan=lifespan)
    app.state.runner = runner
    app.add_middleware(BodyLimit)
    app.add_middleware(Guard, host=host)  # outside BodyLimit: a refused request's body is never read
    app.add_middleware(SecurityHeaders)  # outermost: on every response, refusals too

    @app.exception_handler(SieveError)
    async def sieve_error(request: Request, exc: SieveError) -> JSONResponse:
        return error(400, str(exc))

    @app.exception_handler(NotFound)
    async def not_found(request: Request, exc: NotFound) -> JSONResponse:
        return error(404, str(exc))

    @app.exception_handler(FileChanged)
    async def changed(request: Request, exc: FileChanged) -> JSONResponse:
        return error(409, str(exc))

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0]
        return error(400, f"{'.'.join(str(p) for p in first.get('loc', ()))}: {first.get('msg')}")

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return error(exc.status_code, str(exc.detail))

    # ---------------------------------------------------------------- the page
    @app.get("/", include_in_schema=False)
    def page() -> FileResponse:
        return FileResponse(STATIC / "index.html", media_type="text/html")

    app.mount("/static", StaticFiles(directory=STATIC), name="static")

    # ---------------------------------------------------------------- ask
    def recorded(shown: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The examples, each with what its recording is (date, configuration, models) or None: the page offers it
        while the model loads, without asking for recordings that are not there."""
        found = find(browser.folders(), [e["question"] for e in shown], programs.default_config, full=False)
        return [{**e, "recording": found.get(e["question"].strip())} for e in shown]

    @app.get("/api/info")
    def info() -> dict[str, Any]:
        return {"configs": programs.configs(), "default_config": programs.default_config,
                "artifacts": programs.artifacts(), "examples": recorded(examples or []), "runs_dir": str(browser.root),
                "max_question_chars": MAX_QUESTION_CHARS, "max_waiting": max_waiting,
                "max_history_turns": MAX_HISTORY_TURNS, "max_history_chars": MAX_HISTORY_CHARS,
                "review": review.info() if review else None, "keep_sql": keep.info() if keep else None}

    def job_for(request: Request, question: Any, config: Any, artifact: Any, history: Any = None) -> Job:
        if not isinstance(question, str) or not question.strip():
            raise BadRequest("question: required, a non-empty string")
        text_field("question", question)
        if len(question) > MAX_QUESTION_CHARS:
            raise BadRequest(f"question: {len(question)} characters, at most {MAX_QUESTION_CHARS}")
        config = programs.default_config if config in (None, "") else config
        artifact = AUTO if artifact in (None, "") else artifact
        if not isinstance(config, str) or not isinstance(artifact, str):
            raise BadRequest("config and artifact must be strings")
        turns = history_field(history)
        programs.choice(config, artifact)  # InputError (400) for an unknown one, before the job queues
        loop = asyncio.get_running_loop()
        job = Job(question=question, config=config, artifact=artifact, loop=loop, history=turns,
                  alive=lambda: connected(request, loop))
        runner.submit(job)
        return job

    @app.exception_handler(QueueFull)
    async def busy(request: Request, exc: QueueFull) -> JSONResponse:
        return error(503, str(exc), headers={"retry-after": str(exc.retry_after)})

    @app.exception_handler(BadRequest)
    async def bad(request: Request, exc: BadRequest) -> JSONResponse:
        return error(400, str(exc))

    async def body_job(request: Request) -> Job:
        """The job a POST's JSON body asks for (BadRequest for a body that is not a JSON object)."""
        try:
            body = json.loads(await request.body() or b"null")
        except (ValueError, UnicodeDecodeError) as exc:
            raise BadRequest(f"the body is not JSON ({exc}); send {{\"question\": \"...\"}}") from None
        if not isinstance(body, dict):
            raise BadRequest('the body must be a JSON object, e.g. {"question": "What does pass do?"}')
        return job_for(request, body.get("question"), body.get("config"), body.get("artifact"), body.get("history"))

    @app.post("/api/ask")
    async def ask(request: Request) -> JSONResponse:
        job = await body_job(request)
        getter = None  # one pending get() at a time (see stream below)
        try:
            while True:
                getter = getter or asyncio.ensure_future(job.events.get())
                done, _ = await asyncio.wait({getter}, timeout=DISCONNECT_POLL_S)
                if not done:
                    if await request.is_disconnected():  # nobody will read the answer: free its place now
                        return error(499, "the client closed the connection; the question was dropped")
                    continue
                (kind, data), getter = getter.result(), None
                if kind == "done":
                    return JSONResponse(data)
                if kind == "error":
                    return error(400 if not data["message"].startswith("internal error") else 500, data["message"])
        finally:
            if getter is not None:
                getter.cancel()
            runner.drop(job)

    def event_stream(job: Job) -> StreamingResponse:
        async def events():
            # One pending get() at a time, never cancelled on a heartbeat: asyncio.wait_for(queue.get()) can drop an
            # event that arrives just as it times out (Python 3.11).
            getter = None
            try:  # the first event is the job's progress as it was accepted (Runner.submit): queued, how many ahead
                while True:
                    getter = getter or asyncio.ensure_future(job.events.get())
                    done, _ = await asyncio.wait({getter}, timeout=HEARTBEAT_S)
                    if not done:
                        yield sse("progress", job.progress(runner.ahead(job)))
                        continue
                    (kind, data), getter = getter.result(), None
                    yield sse(kind, data)
                    if kind in ("done", "error"):
                        return
            finally:
                if getter is not None:
                    getter.cancel()
                runner.drop(job)  # a job still queued when its page went away leaves the queue; a running one stops

        return StreamingResponse(events(), media_type="text/event-stream",
                                 headers={"cache-control": "no-store", "x-accel-buffering": "no"})

    @app.get("/api/stream")
    async def stream(request: Request, question: str = Query(...), config: str | None = None,
                     artifact: str | None = None, history: str | None = None) -> StreamingResponse:
        return event_stream(job_for(request, question, config, artifact, history))

    @app.post("/api/stream")
    async def stream_post(request: Request) -> StreamingResponse:
        """As GET /api/stream, the parameters in a JSON body: a conversation does not have to fit in a URL."""
        return event_stream(await body_job(request))

    @app.get("/api/recording")
    def recorded_run(question: str = Query(..., max_length=MAX_QUESTION_CHARS),
                     config: str | None = Query(None, max_length=200)) -> dict[str, Any]:
        """A recorded run of ``question`` (an eval run's record), ``config``'s first; 404 when there is none."""
        if not text_field("question", question).strip():
            raise BadRequest("question: required, a non-empty string")
        found = recording(browser.folders(), question, config or None)
        if found is None:
            raise NotFound(f"no recorded run of this question among the eval runs under {browser.root}; rag eval "
                           "records the golden questions it answers")
        return found

    @app.get("/api/chunk")
    def chunk(id: str = Query(..., max_length=1000)) -> dict[str, Any]:
        return programs.chunk(id)

    # ---------------------------------------------------------------- evaluation browser
    @app.get("/api/runs")
    def runs() -> dict[str, Any]:
        return {"root": str(browser.root), "runs": browser.listing()}

    @app.get("/api/runs/{name}")
    def run(name: str) -> dict[str, Any]:
        return browser.run(name)

    @app.get("/api/metrics")
    def metrics(run: list[str] = Query(...)) -> dict[str, Any]:
        return browser.metrics(run)

    @app.get("/api/plots/{kind}.png")
    def plot(kind: str, run: list[str] = Query(...)) -> Response:
        return Response(browser.plot(kind, run), media_type="image/png")

    @app.get("/api/artifacts")
    def artifacts() -> dict[str, Any]:
        return {"artifacts": browser.artifacts()}

    # ---------------------------------------------------------------- the review of a golden set (--review FILE)
    def reviewed() -> GoldenReview:
        if review is None:
            raise NotFound("no golden set to review here: start the server with rag serve --review FILE")
        return review

    @app.get("/api/review")
    def review_listing() -> dict[str, Any]:
        return reviewed().listing()

    @app.get("/api/review/item")
    def review_item(id: str = Query(..., max_length=1000)) -> dict[str, Any]:
        return reviewed().item(id)

    @app.post("/api/review/decide")
    async def review_decide(request: Request) -> dict[str, Any]:
        golden = reviewed()  # 404 before the body is read
        try:
            body = json.loads(await request.body() or b"null")
        except (ValueError, UnicodeDecodeError) as exc:
            raise BadRequest(f"the body is not JSON ({exc}); send {DECISION_SHAPE}") from None
        return await run_in_threadpool(golden.decide, body)

    # ---------------------------------------------------------------- rag serve --keep-sql FILE
    @app.post("/api/keep")
    async def keep_query(request: Request) -> dict[str, Any]:
        if keep is None:
            raise NotFound("nothing is kept here: start the server with rag serve --keep-sql FILE")
        try:
            body = json.loads(await request.body() or b"null")
        except (ValueError, UnicodeDecodeError) as exc:
            raise BadRequest(f"the body is not JSON ({exc}); send {{\"question\": ..., \"sql\": ...}}") from None
        return await run_in_threadpool(keep.keep, body)

    return app

