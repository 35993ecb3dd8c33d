"""The console's web application (Starlette, Jinja2 with autoescaping, htmx for the small
interactions). Pages: the case list, a case, the review queue, the dead letters."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import jinja2
from aiokafka.errors import KafkaError
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..config import Settings
from ..jury.rounds import Jury
from ..media import MediaUnreadable
from ..schemas import CATEGORIES
from ..streams.clients import Placed, original_digest, replay, replay_state, replayed_originals
from .auth import CSRF_FIELD, Auth, check_form, csrf_token, keep_csrf
from .evidence import FrameCache, NoSuchEvidence, media_item, photo
from .feed import Feed
from .plots import social_graph, vote_shift
from .review import BadDecision, Reviews, proposed
from .store import CaseFilter, Store, StoredLetter, stamp
from .views import instance_view, juror_names, jury_size

log = logging.getLogger("cyberjurors.console")
HERE = Path(__file__).parent
# no inline script or style, no eval: party text that slipped through as markup could not run
SECURITY_HEADERS = [
    (
        b"content-security-policy",
        b"default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; "
        b"object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'",
    ),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
]


class SecurityHeaders:
    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = list(message.get("headers", [])) + SECURITY_HEADERS
            await send(message)

        await self.app(scope, receive, sending if scope["type"] == "http" else send)


@dataclass
class Console:
    settings: Settings
    store: Store
    auth: Auth
    reviews: Reviews
    frames: FrameCache
    feed: Feed
    templates: Jinja2Templates


def console_of(request: Request) -> Console:
    return request.app.state.console


def templates() -> Jinja2Templates:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(HERE / "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["domid"] = lambda text: "x" + hashlib.sha256(str(text).encode()).hexdigest()[:12]
    env.filters["when"] = lambda at: at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S") if at else ""
    env.filters["stamp_when"] = lambda s: s[:19].replace("T", " ") if s else ""
    env.filters["pct"] = lambda x: f"{x:.0%}"
    return Jinja2Templates(env=env)


def page(request: Request, name: str, context: dict[str, Any], status: int = 200) -> Response:
    console = console_of(request)
    token = csrf_token(request)
    user = console.auth.user(request)
    response = console.templates.TemplateResponse(
        request,
        name,
        context | {"csrf": token, "csrf_field": CSRF_FIELD, "user": user, "auth_configured": console.auth.configured},
        status_code=status,
    )
    return keep_csrf(response, token)


# --- the case list --------------------------------------------------------------------------------


def _day(text: str | None, plus: int = 0) -> str | None:
    if not text:
        return None
    try:
        day = date.fromisoformat(text)
    except ValueError as err:
        raise HTTPException(400, f"{text!r} is not a date (YYYY-MM-DD)") from err
    return stamp(datetime.combine(day + timedelta(days=plus), datetime.min.time(), UTC))


def case_filter(query: Any) -> CaseFilter:
    escalated = {"yes": True, "no": False}.get(query.get("escalated", ""))
    return CaseFilter(
        category=query.get("category") or None,
        winner=query.get("winner") or None,
        escalated=escalated,
        since=_day(query.get("from")),
        until=_day(query.get("to"), plus=1),
        case=(query.get("q") or "").strip() or None,
    )


async def cases_page(request: Request) -> Response:
    console = console_of(request)
    console.auth.may_read(request)
    rows, total = console.store.verdict_rows(case_filter(request.query_params))
    return page(
        request,
        "cases.html",
        {
            "rows": rows,
            "total": total,
            "query": request.query_params,
            "categories": sorted(set(CATEGORIES) | set(console.store.categories())),
            "reasons": lambda row: json.loads(row["reasons"]),
        },
    )


# --- a case ---------------------------------------------------------------------------------------


async def case_page(request: Request) -> Response:
    console = console_of(request)
    console.auth.may_read(request)
    case_id = request.path_params["case_id"]
    verdicts = console.store.verdicts_of(case_id)
    if not verdicts:
        raise HTTPException(404, "no verdict for this case has been read")
    views = [await instance_view(console.store, console.settings, console.frames, v) for v in verdicts]
    return page(
        request, "case.html", {"case_id": case_id, "views": views, "outcomes": console.store.outcomes_of(case_id)}
    )


def _record(request: Request) -> tuple[Console, Any]:
    console = console_of(request)
    console.auth.may_read(request)
    found = console.store.record(request.path_params["case_id"], request.path_params["instance"])
    if found is None:
        raise HTTPException(404, "no record of this case has been read")
    return console, found[0]


async def votes_svg(request: Request) -> Response:
    _, record = _record(request)
    svg = await asyncio.to_thread(vote_shift, record.rounds)
    return Response(svg, media_type="image/svg+xml", headers={"cache-control": "private, max-age=60"})


async def graph_svg(request: Request) -> Response:
    console, record = _record(request)
    jury = Jury.from_settings(console.settings, jury_size(record))
    svg = await asyncio.to_thread(social_graph, record.rounds, jury.graph, juror_names(record, console.settings))
    return Response(svg, media_type="image/svg+xml", headers={"cache-control": "private, max-age=60"})


def _jpeg(data: bytes) -> Response:
    return Response(data, media_type="image/jpeg", headers={"cache-control": "private, max-age=3600"})


async def media_photo(request: Request) -> Response:
    console, record = _record(request)
    try:
        item = media_item(record, request.path_params["evidence_id"])
        if item.kind != "image":
            raise NoSuchEvidence("not a photo")
        return _jpeg(await photo(item, console.settings))
    except NoSuchEvidence as err:
        raise HTTPException(404, err.detail) from err
    except MediaUnreadable as err:  # outside media_root, not on the allow-list, missing, corrupt, over a cap
        raise HTTPException(404, f"the photo cannot be shown ({err.reason})") from err


async def media_frame(request: Request) -> Response:
    console, record = _record(request)
    try:
        item = media_item(record, request.path_params["evidence_id"])
        if item.kind != "video":
            raise NoSuchEvidence("not a video")
        frames = await console.frames.frames(record, request.path_params["instance"], item, console.settings)
    except NoSuchEvidence as err:
        raise HTTPException(404, err.detail) from err
    except MediaUnreadable as err:
        raise HTTPException(404, f"the video cannot be shown ({err.reason})") from err
    frame = next((f for f in frames if f.index == request.path_params["n"]), None)
    if frame is None:
        raise HTTPException(404, "no such sampled frame")
    return _jpeg(frame.image.data)


# --- the review queue -----------------------------------------------------------------------------


def review_card(console: Console, escalation_id: str) -> dict[str, Any]:
    escalation = console.store.escalation(escalation_id)
    if escalation is None:
        raise HTTPException(404, "no such escalation")
    return {"e": escalation, "decisions": console.store.decisions(escalation_id)}


async def review_page(request: Request) -> Response:
    console = console_of(request)
    console.auth.may_read(request)
    show = request.query_params.get("show", "pending")
    reviewed = {"pending": False, "reviewed": True}.get(show)
    cards = [review_card(console, e) for e in console.store.escalation_ids(reviewed)]
    return page(request, "review.html", {"cards": cards, "show": show})


async def review_post(request: Request) -> Response:
    console = console_of(request)
    form = await request.form()
    card = review_card(console, request.path_params["escalation_id"])
    headers = None
    try:
        # the form's values are str: an UploadFile would come only from a file input, and it has none
        check_form(request, form.get(CSRF_FIELD))  # type: ignore[arg-type]
        reviewer = console.auth.require(request)
        choice = proposed(*(form.get(k) for k in ("winner", "buyer", "seller", "rationale")))  # type: ignore[arg-type]
        done = await console.reviews.decide(
            card["e"].escalation_id, card["e"].case_id, choice, reviewer, override=form.get("override") == "on"
        )
        message, status = done.message, {"refused": 409}.get(done.status, 200)
    except HTTPException as err:  # not signed in, a stale or foreign form
        message, status, headers = err.detail, err.status_code, err.headers
    except BadDecision as err:
        message, status = err.detail, 400
    except (KafkaError, OSError) as err:  # recorded, not published: the same decision again publishes it
        message, status = f"recorded but not published ({err}): submit the same decision again", 503
    return _card(request, console, card, message, status, headers)


def _card(
    request: Request,
    console: Console,
    card: dict[str, Any],
    message: str,
    status: int,
    headers: Mapping[str, str] | None = None,
) -> Response:
    if "hx-request" not in request.headers:  # a plain form post: back to the queue
        if status >= 400:
            raise HTTPException(status, message, headers=headers)
        return RedirectResponse(f"/review?show=all#{card['e'].escalation_id}", status_code=303)
    fresh = review_card(console, card["e"].escalation_id)
    response = page(request, "_review_card.html", fresh | {"message": message, "failed": status >= 400}, status)
    response.headers.update(headers or {})
    return response


# --- dead letters ---------------------------------------------------------------------------------


def _placed(stored: StoredLetter) -> Placed:
    return Placed(stored.letter, stored.topic, stored.partition, stored.offset, stored.headers)


def letter_rows(console: Console) -> list[dict[str, Any]]:
    done = console.store.replay_notes()
    originals = replayed_originals(done)
    return [{"l": s, "state": replay_state(_placed(s), done, originals)} for s in console.store.letters()]


async def dlq_page(request: Request) -> Response:
    console = console_of(request)
    console.auth.may_read(request)
    return page(request, "dlq.html", {"rows": letter_rows(console)})


async def dlq_replay(request: Request) -> Response:
    console = console_of(request)
    form = await request.form()
    check_form(request, form.get(CSRF_FIELD))  # type: ignore[arg-type]  # a str: see review_post
    console.auth.require(request)
    stored = console.store.letter(str(form.get("letter", "")))
    if stored is None:
        raise HTTPException(404, "no such dead letter")
    result = await replay(console.settings, [_placed(stored)], again=form.get("again") == "on")
    if result.sent:  # as disputes.dlq-replayed now says; the feed reads the same note back
        note = {"topic": stored.letter.topic, "original": original_digest(stored.letter), "case": stored.letter.key}
        console.store.note_replay(stored.id, json.dumps(note).encode())
    said = (
        "replayed"
        if result.sent
        else "replayed before"
        if result.already
        else "held back: failed again after a replay"
        if result.failed_again
        else f"not replayed: {result.failed[0][1]}"
        if result.failed
        else "final: not replayed"
    )
    if "hx-request" not in request.headers:
        return RedirectResponse("/dlq", status_code=303)
    row = next(r for r in letter_rows(console) if r["l"].id == stored.id)
    return page(request, "_letter_row.html", {"r": row, "message": said})


# --- the rest ------------------------------------------------------------------------------------


async def login(request: Request) -> Response:
    """Asks the browser for credentials (basic auth) and goes back where the person came from."""
    console_of(request).auth.require(request)
    back = request.query_params.get("next", "/review")
    return RedirectResponse(back if back.startswith("/") and not back.startswith("//") else "/review", 303)


async def health(request: Request) -> Response:
    console = console_of(request)
    status = console.feed.status
    return JSONResponse(
        {
            "feed": {"connected": status.connected, "error": status.error, "read": status.read, "lag": status.lag},
            "stored": console.store.counts(),
        }
    )


async def home(request: Request) -> Response:
    return RedirectResponse("/cases", 303)


async def no_icon(request: Request) -> Response:
    return Response(status_code=204)


ROUTES = [
    Route("/", home),
    Route("/cases", cases_page),
    Route("/cases/{case_id}", case_page),
    Route("/cases/{case_id}/{instance:int}/votes.svg", votes_svg),
    Route("/cases/{case_id}/{instance:int}/graph.svg", graph_svg),
    Route("/media/{case_id}/{instance:int}/{evidence_id}", media_photo),
    Route("/media/{case_id}/{instance:int}/{evidence_id}/frames/{n:int}", media_frame),
    Route("/review", review_page),
    Route("/review/{escalation_id}", review_post, methods=["POST"]),
    Route("/dlq", dlq_page),
    Route("/dlq/replay", dlq_replay, methods=["POST"]),
    Route("/login", login),
    Route("/healthz", health),
    Route("/favicon.ico", no_icon),
    Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
]


def create_app(
    settings: Settings,
    store: Store | None = None,
    *,
    token: str | None = None,
    public_pages: bool | None = None,
    follow: bool = True,
) -> Starlette:
    """The console over ``store`` (``console_db`` when not given). ``token`` stands in for
    ``console_token`` (the command's generated one); ``follow`` starts the feed with the app."""
    store = store or Store(Path(settings.console_db))
    auth = Auth(
        token or settings.console_token,
        dict(settings.console_users),
        settings.console_public_pages if public_pages is None else public_pages,
    )
    console = Console(settings, store, auth, Reviews(settings, store), FrameCache(), Feed(settings, store), templates())

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        task = asyncio.create_task(console.feed.run()) if follow else None
        try:
            yield
        finally:
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task

    app = Starlette(routes=ROUTES, lifespan=lifespan, middleware=[Middleware(SecurityHeaders)])
    app.state.console = console
    return app
