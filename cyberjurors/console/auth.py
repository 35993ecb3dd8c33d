"""Who is asking, proven, and what their roles let them do.

Three ways in, each naming a person the console can stand behind:

- **a password** (``console_users``: name -> argon2 hash) checked on the sign-in page, which opens a
  session: a random id in an HttpOnly, SameSite=Strict cookie (``__Host-`` and Secure when the
  console is served over TLS, its own or a proxy's), kept in the store only as its sha256, ended by
  sign-out, ``console_signin.session_ttl_s`` after sign-in or ``console_signin.session_idle_s`` unused;
- **single sign-on**: the header a trusted proxy sets (oauth2-proxy's ``X-Forwarded-User`` and
  ``X-Forwarded-Groups``), believed only from ``console_proxy.trusted``, or on ``console_socket``
  (a Unix socket only the proxy beside the console reaches); from anywhere else the header is
  refused and audited;
- **the service token** (``Authorization: Bearer``), for scripts: it acts as ``service``, never as a
  named person.

Roles (``viewer``, ``reviewer``, ``supervisor``, ``operator``) come from ``console_user_roles`` and
the SSO groups' ``console_group_roles``; a person with none is a viewer. Every POST form carries the
session's own CSRF token (a form from another session, or another site, is refused); the sign-in
form, before any session, carries a double-submit cookie.
"""

from __future__ import annotations

import hmac
import ipaddress
import secrets
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from ..config import ConsoleRole, Settings
from ..errors import CyberJurorsError
from .sessions import Session, Sessions

CSRF_FIELD = "csrf"
LOGIN_CSRF_COOKIE = "cj_signin"
Action = Literal["read", "decide", "override", "replay", "audit"]
# which roles allow each action; every role reads
ALLOWED: dict[Action, frozenset[ConsoleRole]] = {
    "read": frozenset({"viewer", "reviewer", "supervisor", "operator"}),
    "decide": frozenset({"reviewer", "supervisor"}),
    "override": frozenset({"supervisor"}),  # another person's standing decision
    "replay": frozenset({"operator"}),
    "audit": frozenset({"supervisor", "operator"}),
}
SAID: dict[Action, str] = {
    "read": "read the console",
    "decide": "publish a decision",
    "override": "override another person's decision",
    "replay": "replay a dead letter",
    "audit": "read the audit log",
}
HASHER = PasswordHasher()
# verified against when the name is unknown, so a wrong name takes as long as a wrong password
_NOBODY = HASHER.hash(secrets.token_urlsafe(16))


def hash_password(password: str) -> str:
    return HASHER.hash(password)


def password_ok(stored: str | None, given: str) -> bool:
    try:
        return HASHER.verify(stored or _NOBODY, given) and stored is not None
    except (VerifyMismatchError, VerificationError, InvalidHashError):
        return False


def _same(given: str, expected: str) -> bool:
    return hmac.compare_digest(given.encode(), expected.encode())


@dataclass(frozen=True)
class Person:
    name: str
    roles: frozenset[ConsoleRole]
    via: Literal["password", "sso", "token"]
    session: Session | None = None
    groups: tuple[str, ...] = ()

    def may(self, action: Action) -> bool:
        return bool(self.roles & ALLOWED[action])

    @property
    def shown_roles(self) -> str:
        return ", ".join(r for r in ("viewer", "reviewer", "supervisor", "operator") if r in self.roles)


class Refused(CyberJurorsError, HTTPException):
    """A request the console will not serve (an HTTP status), with what the audit log should say about it."""

    kind = "console_refused"

    def __init__(self, status: int, detail: str, audit: str | None = None, headers: dict[str, str] | None = None):
        HTTPException.__init__(self, status, detail, headers=headers)
        self.audit = audit


def address(request: Request) -> str:
    return request.client.host if request.client else "unknown"


@dataclass
class Auth:
    settings: Settings
    sessions: Sessions
    users: dict[str, str] = field(default_factory=dict)  # the configured ones, or this run's
    public_pages: bool = False
    token: str | None = None

    def __post_init__(self) -> None:
        self.proxies = [ipaddress.ip_network(p, strict=False) for p in self.settings.console_proxy.trusted]

    @property
    def configured(self) -> bool:
        return bool(self.users or self.token or self.proxies or self.settings.console_socket)

    @property
    def secure_cookies(self) -> bool:
        return bool(self.settings.console_tls.cert or self.settings.console_proxy.behind)

    @property
    def session_cookie(self) -> str:
        # __Host- holds the browser to a Secure, host-only, path=/ cookie, which only HTTPS can set
        return "__Host-cj_session" if self.secure_cookies else "cj_session"

    def roles_of(self, name: str, groups: Iterable[str] = ()) -> frozenset[ConsoleRole]:
        roles: set[ConsoleRole] = set(self.settings.console_user_roles.get(name, []))
        for group in groups:
            roles |= set(self.settings.console_group_roles.get(group, []))
        return frozenset(roles or {"viewer"})

    def trusted(self, request: Request) -> bool:
        """Whether the request comes from the single-sign-on proxy: from console_proxy.trusted, or,
        served on console_socket, over it (a Unix socket's peer has no address)."""
        if self.settings.console_socket is not None and request.client is None:
            return True
        try:
            at = ipaddress.ip_address(address(request))
        except ValueError:
            return False
        return any(at in net for net in self.proxies)

    def identify(self, request: Request) -> Person | None:
        """The person the request proves, or None. A sign-on header from an untrusted address is refused."""
        scheme, _, value = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and self.token and _same(value.strip(), self.token):
            return Person("service", frozenset(self.settings.console_token_roles), "token")
        sso_name = request.headers.get(self.settings.console_proxy.sso_user_header)
        if sso_name is not None:
            if not self.trusted(request):
                raise Refused(
                    403,
                    f"a {self.settings.console_proxy.sso_user_header} header from {address(request)}, "
                    "which is not a trusted proxy (console_proxy.trusted)",
                    audit="untrusted_sso_header",
                )
            groups = tuple(
                g.strip() for g in request.headers.get(self.settings.console_proxy.sso_groups_header, "").split(",")
            )
            groups = tuple(g for g in groups if g)
            name = sso_name.strip()[:128]
            if name:
                session = self.sessions.get(request.cookies.get(self.session_cookie))
                if session is not None and (session.user != name or session.via != "sso"):
                    session = None  # the proxy signed in someone else: their session is not this one
                return Person(name, self.roles_of(name, groups), "sso", session, groups)
        session = self.sessions.get(request.cookies.get(self.session_cookie))
        if session is None or session.via != "password" or session.user not in self.users:
            return None  # a user removed from the settings is signed out with it
        return Person(session.user, self.roles_of(session.user), "password", session)

    def require(self, request: Request, action: Action) -> Person:
        """The person, allowed ``action``; else 401 (nobody proven) or 403 (a role missing)."""
        if not self.configured:
            raise Refused(
                403, "no console_users, console_token or trusted SSO proxy is configured: the console is read-only"
            )
        person = self.identify(request)
        if person is None:
            raise Refused(401, f"sign in to {SAID[action]}")
        if not person.may(action):
            needs = " or ".join(sorted(ALLOWED[action]))
            raise Refused(
                403,
                f"{person.name} ({person.shown_roles}) may not {SAID[action]}: it needs {needs}",
                audit=f"refused_{action}",
            )
        return person

    def may_read(self, request: Request) -> Person | None:
        if self.public_pages:
            return self.identify(request)
        return self.require(request, "read")

    # --- cookies -----------------------------------------------------------------------------------

    def keep_session(self, response: Response, session: Session) -> None:
        response.set_cookie(
            self.session_cookie,
            session.id,
            max_age=int(self.settings.console_signin.session_ttl_s),
            httponly=True,
            samesite="strict",
            secure=self.secure_cookies,
            path="/",
        )

    def end_session(self, response: Response) -> None:
        response.delete_cookie(self.session_cookie, path="/", secure=self.secure_cookies, httponly=True)


def check_form(request: Request, person: Person, form_token: object) -> None:
    """403 unless the form comes from this site and carries the session's own CSRF token (scripts with
    the service token carry none: a browser never sends a bearer token by itself)."""
    if not same_origin(request):
        raise Refused(403, "a form from another site is refused", audit="refused_foreign_form")
    if person.via == "token":
        return
    expected = person.session.csrf if person.session else None
    if not expected or not isinstance(form_token, str) or not _same(form_token, expected):
        raise Refused(
            403,
            "the form's CSRF token is not this session's: reload the page and submit again",
            audit="refused_csrf",
        )


def same_origin(request: Request) -> bool:
    """Whether the request's Origin (when the browser sends one) is this console. Behind a proxy that
    serves HTTPS the console itself is reached over HTTP: the browser's origin is https then."""
    origin = request.headers.get("origin")
    if origin is None:
        return True
    console = request.app.state.console
    schemes = {request.url.scheme} | ({"https"} if console.settings.console_proxy.behind else set())
    return origin in {f"{scheme}://{request.headers.get('host', '')}" for scheme in schemes}


def login_csrf(request: Request) -> str:
    return request.cookies.get(LOGIN_CSRF_COOKIE) or secrets.token_urlsafe(32)


def check_login_csrf(request: Request, form_token: object) -> None:
    if not same_origin(request):
        raise Refused(403, "a sign-in form from another site is refused", audit="refused_foreign_form")
    cookie = request.cookies.get(LOGIN_CSRF_COOKIE)
    if not cookie or not isinstance(form_token, str) or not _same(form_token, cookie):
        raise Refused(403, "the sign-in form is stale: reload it and sign in again", audit="refused_csrf")
