"""The console's web application (Starlette, Jinja2 with autoescaping, htmx for the small
interactions). Pages: the case list, a case, the review queue, the dead letters, the audit log,
sign-in. Who may do what is auth.py's; every action and every refusal is audited (audit.py)."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import jinja2
from aiokafka.errors import KafkaError
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..config import Settings
from ..evidence import signing
from ..evidence.media import MediaUnreadable
from ..jury.rounds import Jury
from ..schemas import CATEGORIES, CaseFile, EvidenceItem
from ..tooling.clients import Placed, original_digest, replay, replay_state, replayed_originals
from .audit import Audit
from .auth import (
    CSRF_FIELD,
    LOGIN_CSRF_COOKIE,
    Auth,
    Person,
    Refused,
    address,
    check_form,
    check_login_csrf,
    login_csrf,
    password_ok,
)
from .evidence import FrameCache, NoSuchEvidence, media_item, photo
from .feed import Feed
from .plots import social_graph, vote_shift
from .review import BadDecision, Reviews, proposed
from .sessions import Sessions
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


class BodyCap:
    """Refuses a request body over ``limit`` bytes (413) before the application reads it: by its
    Content-Length when it gives one, else as it streams in."""

    def __init__(self, app: ASGIApp, limit: int):
        self.app, self.limit = app, limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        said = dict(scope["headers"]).get(b"content-length")
        if said is not None and (not said.isdigit() or int(said) > self.limit):
            await self.refuse(scope, receive, send)
            return
        seen = 0

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.limit:
                raise Refused(413, f"a request body is at most {self.limit} bytes", audit="refused_body_too_large")
            return message

        await self.app(scope, counted, send)

    async def refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        console = getattr(request.app.state, "console", None) if "app" in scope else None
        if console is not None:
            console.audit.record("anonymous", "", "refused_body_too_large", "refused", address(request), scope["path"])
        response = PlainTextResponse(f"a request body is at most {self.limit} bytes", status_code=413)
        await response(scope, receive, send)


@dataclass
class Console:
    settings: Settings
    store: Store
    auth: Auth
    sessions: Sessions
    audit: Audit
    reviews: Reviews
    frames: FrameCache
    feed: Feed
    templates: Jinja2Templates
    checking: asyncio.Semaphore = field(default_factory=lambda: asyncio.Semaphore(2))  # password checks at once

    def note(
        self, request: Request, person: Person | None, action: str, result: str, target: str = "", detail: str = ""
    ):
        """An audit entry for what ``person`` (or an unproven caller) did or tried."""
        return self.audit.record(
            person.name if person else "anonymous",
            person.shown_roles if person else "",
            action,
            result,
            address(request),
            target,
            detail,
        )


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
    # every id that enters a URL: a "/" or ".." in it stays inside its path segment
    env.filters["seg"] = lambda text: quote(str(text), safe="")
    return Jinja2Templates(env=env)


def page(request: Request, name: str, context: dict[str, Any], status: int = 200) -> Response:
    """A page for the person asking: their session's CSRF token in its forms. A person the SSO proxy
    vouches for gets a console session (for that token) on their first page."""
    console = console_of(request)
    try:
        person = console.auth.identify(request)
    except Refused:
        person = None
    fresh = None
    if person is not None and person.via == "sso" and person.session is None:
        fresh = console.sessions.start(person.name, "sso", replacing=request.cookies.get(console.auth.session_cookie))
        person = Person(person.name, person.roles, "sso", fresh, person.groups)
    response = console.templates.TemplateResponse(
        request,
        name,
        context
        | {
            "csrf": person.session.csrf if person and person.session else "",
            "csrf_field": CSRF_FIELD,
            "person": person,
            "auth_configured": console.auth.configured,
        },
        status_code=status,
    )
    if fresh is not None:
        console.auth.keep_session(response, fresh)
    # what a person saw signed in is not shown again from the cache after they sign out
    response.headers["cache-control"] = "no-store"
    return response


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


@contextlib.contextmanager
def _shown_media(record: CaseFile, request: Request, kind: str, noun: str) -> Iterator[EvidenceItem]:
    """The record's photo or video that the path names; no such item, or one that cannot be read
    inside the block, is a 404 saying why."""
    try:
        item = media_item(record, request.path_params["evidence_id"])
        if item.kind != kind:
            raise NoSuchEvidence(f"not a {noun}")
        yield item
    except NoSuchEvidence as err:
        raise HTTPException(404, err.detail) from err
    except MediaUnreadable as err:  # outside media_root, not on the allow-list, missing, corrupt, over a cap
        raise HTTPException(404, f"the {noun} cannot be shown ({err.reason})") from err


async def media_photo(request: Request) -> Response:
    console, record = _record(request)
    with _shown_media(record, request, "image", "photo") as item:
        return _jpeg(await photo(item, console.settings))


async def media_frame(request: Request) -> Response:
    console, record = _record(request)
    with _shown_media(record, request, "video", "video") as item:
        frames = await console.frames.frames(record, request.path_params["instance"], item, console.settings)
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
    person = console.auth.require(request, "decide")  # before the body is read
    form = await request.form()
    check_form(request, person, form.get(CSRF_FIELD))
    card = review_card(console, str(form.get("escalation") or ""))
    escalation, case_id = card["e"].escalation_id, card["e"].case_id
    try:
        # the form's values are str: an UploadFile would come only from a file input, and it has none
        choice = proposed(*(form.get(k) for k in ("winner", "buyer", "seller", "rationale")))  # type: ignore[arg-type]
        done = await console.reviews.decide(escalation, case_id, choice, person, override=form.get("override") == "on")
        message, status = done.message, {"refused": 409}.get(done.status, 200)
        if done.status == "published":
            d = done.decision
            action = "override" if d.override_of else "decide"
            detail = f"{d.winner} {d.buyer}:{d.seller} as {d.role}; event {d.event_id}"
            console.note(request, person, action, "done", escalation, detail)
    except Refused as err:  # another's decision without the supervisor's role; no signing key
        message, status = err.detail, err.status_code
        console.note(request, person, err.audit or "refused", "refused", escalation, err.detail)
    except BadDecision as err:
        message, status = err.detail, 400
    except (KafkaError, OSError) as err:  # recorded, not published: the same decision again publishes it
        message, status = f"recorded but not published ({err}): submit the same decision again", 503
    return _card(request, console, card, message, status)


def _card(request: Request, console: Console, card: dict[str, Any], message: str, status: int) -> Response:
    if "hx-request" not in request.headers:  # a plain form post: back to the queue
        if status >= 400:
            raise HTTPException(status, message)
        return RedirectResponse(f"/review?show=all#{quote(card['e'].escalation_id, safe='')}", status_code=303)
    fresh = review_card(console, card["e"].escalation_id)
    return page(request, "_review_card.html", fresh | {"message": message, "failed": status >= 400}, status)


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
    person = console.auth.require(request, "replay")  # before the body is read
    form = await request.form()
    check_form(request, person, form.get(CSRF_FIELD))
    stored = console.store.letter(str(form.get("letter", "")))
    if stored is None:
        raise HTTPException(404, "no such dead letter")
    row = next(r for r in letter_rows(console) if r["l"].id == stored.id)
    why = str(form.get("reason") or "").strip()[:500]
    if row["state"] == "final" and not why:
        raise Refused(
            400,
            "a final letter is replayed only with a reason (what changed since it failed)",
            audit="refused_replay_final",
        )
    result = await replay(
        console.settings,
        [_placed(stored)],
        again=form.get("again") == "on",
        final=row["state"] == "final",
        by=person.name,
        why=why or None,
    )
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
    action = "replay_final" if row["state"] == "final" else "replay"
    console.note(request, person, action, "done" if result.sent else said, stored.id, why)
    if "hx-request" not in request.headers:
        return RedirectResponse("/dlq", status_code=303)
    row = next(r for r in letter_rows(console) if r["l"].id == stored.id)
    return page(request, "_letter_row.html", {"r": row, "message": said})


# --- signing in, the audit log --------------------------------------------------------------------


def _next(request: Request, given: object) -> str:
    back = given if isinstance(given, str) else "/review"
    return back if back.startswith("/") and not back.startswith("//") and "\\" not in back else "/review"


def login_page(request: Request, message: str = "", status: int = 200, name: str = "", back: object = None) -> Response:
    console = console_of(request)
    token = login_csrf(request)
    response = console.templates.TemplateResponse(
        request,
        "login.html",
        {
            "csrf": token,
            "csrf_field": CSRF_FIELD,
            "person": None,
            "auth_configured": console.auth.configured,
            "passwords": bool(console.auth.users),
            "next": _next(request, request.query_params.get("next") if back is None else back),
            "message": message,
            "name": name,
        },
        status_code=status,
    )
    response.set_cookie(
        LOGIN_CSRF_COOKIE, token, httponly=True, samesite="strict", secure=console.auth.secure_cookies, path="/"
    )
    response.headers["cache-control"] = "no-store"
    return response


async def login(request: Request) -> Response:
    console = console_of(request)
    person = console.auth.identify(request)
    if person is not None and person.via != "token":
        return RedirectResponse(_next(request, request.query_params.get("next")), 303)
    return login_page(request)


async def login_post(request: Request) -> Response:
    console = console_of(request)
    form = await request.form()
    check_login_csrf(request, form.get(CSRF_FIELD))
    name = str(form.get("user") or "").strip()[:128]
    where = address(request)
    attempt = console.sessions.attempt(name, where)  # counted before the check: concurrent guesses meet the limit
    if attempt is None:
        console.audit.record(name or "anonymous", "", "sign_in", "refused", where, "", "locked: too many failures")
        return login_page(request, "too many failed sign-ins: try again later", 429, name, form.get("next"))
    async with console.checking:  # each check holds argon2's 64 MiB: a flood of sign-ins is bounded in memory
        ok = await asyncio.to_thread(password_ok, console.auth.users.get(name), str(form.get("password") or ""))
    if not ok:
        console.sessions.failed(attempt)
        console.audit.record(name or "anonymous", "", "sign_in", "refused", where, "", "wrong name or password")
        return login_page(request, "wrong name or password", 401, name, form.get("next"))
    console.sessions.succeeded(attempt, name)
    session = console.sessions.start(name, "password", replacing=request.cookies.get(console.auth.session_cookie))
    person = Person(name, console.auth.roles_of(name), "password", session)
    console.note(request, person, "sign_in", "done")
    response = RedirectResponse(_next(request, form.get("next")), 303)
    console.auth.keep_session(response, session)
    response.delete_cookie(LOGIN_CSRF_COOKIE, path="/")
    return response


async def logout(request: Request) -> Response:
    console = console_of(request)
    person = console.auth.identify(request)
    if person is None or person.via == "token":
        return RedirectResponse("/login", 303)
    form = await request.form()
    check_form(request, person, form.get(CSRF_FIELD))
    console.sessions.end(request.cookies.get(console.auth.session_cookie))
    console.note(request, person, "sign_out", "done")
    response = RedirectResponse("/login", 303)
    console.auth.end_session(response)
    return response


async def audit_page(request: Request) -> Response:
    console = console_of(request)
    console.auth.require(request, "audit")
    return page(request, "audit.html", {"entries": console.audit.entries()})


# --- the rest ------------------------------------------------------------------------------------


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
    Route("/review/decide", review_post, methods=["POST"]),
    Route("/dlq", dlq_page),
    Route("/dlq/replay", dlq_replay, methods=["POST"]),
    Route("/audit", audit_page),
    Route("/login", login),
    Route("/login", login_post, methods=["POST"]),
    Route("/logout", logout, methods=["POST"]),
    Route("/healthz", health),
    Route("/favicon.ico", no_icon),
    Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
]


async def refused(request: Request, err: Exception) -> Response:
    """A refusal, audited when it refuses an action. A page asked for without signing in goes to the
    sign-in page; an htmx request is told where to go, or gets the reason beside what it acted on."""
    assert isinstance(err, HTTPException)
    console = console_of(request)
    if isinstance(err, Refused) and (err.audit or request.method == "POST"):
        try:
            person = console.auth.identify(request)
        except Refused:
            person = None
        console.note(request, person, err.audit or "refused_unauthenticated", "refused", request.url.path, err.detail)
    htmx = "hx-request" in request.headers
    if err.status_code == 401:
        back = request.url.path if request.method == "GET" else urlsplit(request.headers.get("hx-current-url", "")).path
        to = "/login?next=" + quote(_next(request, back or "/review"), safe="/")
        if htmx:
            return PlainTextResponse(err.detail, status_code=401, headers={"HX-Redirect": to})
        if request.method == "GET":
            return RedirectResponse(to, 303)
    if htmx:
        fragment = console.templates.get_template("_refused.html").render(message=err.detail)
        return HTMLResponse(fragment, status_code=err.status_code, headers={"HX-Reswap": "beforeend"})
    return PlainTextResponse(err.detail, status_code=err.status_code, headers=err.headers)


def create_app(
    settings: Settings,
    store: Store | None = None,
    *,
    users: dict[str, str] | None = None,
    public_pages: bool | None = None,
    follow: bool = True,
) -> Starlette:
    """The console over ``store`` (``console_db`` when not given). ``users`` stands in for
    ``console_users`` (the command's user for one run); ``follow`` starts the feed and the audit
    log's publishing with the app."""
    store = store or Store(Path(settings.console_db))
    store.verified = lambda outcome: signing.check(outcome, settings).ok
    sessions = Sessions(store, settings)
    auth = Auth(
        settings,
        sessions,
        dict(settings.console_users if users is None else users),
        settings.console_public_pages if public_pages is None else public_pages,
        settings.console_token,
    )
    console = Console(
        settings,
        store,
        auth,
        sessions,
        Audit(settings, store),
        Reviews(settings, store),
        FrameCache(),
        Feed(settings, store),
        templates(),
    )

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        tasks = [asyncio.create_task(console.feed.run()), asyncio.create_task(console.audit.run())] if follow else []
        try:
            yield
        finally:
            for task in tasks:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task

    app = Starlette(
        routes=ROUTES,
        lifespan=lifespan,
        middleware=[Middleware(SecurityHeaders), Middleware(BodyCap, limit=settings.console_max_body_bytes)],
        exception_handlers={HTTPException: refused},
    )
    app.state.console = console
    return app
