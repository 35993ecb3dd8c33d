"""The console section: where it listens, who may sign in and how, and the signing of decisions."""

from __future__ import annotations

from pathlib import Path
from typing import Literal, get_args

from pydantic import BaseModel, Field, field_validator

from .fields import ConfigModel, nested

# what a person may do in the console: read; publish decisions; override another's decision; replay dead letters
ConsoleRole = Literal["viewer", "reviewer", "supervisor", "operator"]
CONSOLE_ROLES: tuple[ConsoleRole, ...] = get_args(ConsoleRole)
# what a worker never needs: who may sign in to the console, and how
CONSOLE_SECRETS = ("console_token", "console_users", "console_user_roles", "console_group_roles", "console_tls")


class ConsoleProxy(ConfigModel):
    """A single-sign-on proxy in front of the console (the setting ``console_proxy``): whom to believe,
    and the headers it sends."""

    trusted: list[str] = Field(
        default_factory=list,
        description="addresses or networks (CIDR) of the single-sign-on proxy in front of the console "
        "(oauth2-proxy, an ingress with OIDC): only from these is console_proxy.sso_user_header believed; "
        "empty = no SSO",
    )
    sso_user_header: str = Field(
        "X-Forwarded-User", description="the header in which the trusted proxy names the signed-in person"
    )
    sso_groups_header: str = Field(
        "X-Forwarded-Groups", description="the header with that person's groups, comma-separated"
    )
    behind: bool = Field(
        False,
        description="a proxy in front terminates TLS: cookies are Secure (__Host-), and a bind to a "
        "non-loopback address is allowed without console_tls_cert",
    )


class ConsoleTLS(ConfigModel):
    """The certificate the console serves HTTPS with (the setting ``console_tls``)."""

    cert: Path | None = Field(None, description="certificate (PEM) the console serves HTTPS with")
    key: Path | None = Field(None, description="its private key (PEM)")


class ConsoleSignin(ConfigModel):
    """How long a console session lasts and how sign-in is guarded (the setting ``console_signin``)."""

    session_ttl_s: float = Field(
        8 * 3600, gt=0, description="a console session ends this long after sign-in, whatever its use"
    )
    session_idle_s: float = Field(3600, gt=0, description="...or after this long unused")
    max_failures: int = Field(
        5,
        ge=1,
        description="wrong passwords for one user name (or 4x as many from one address) within "
        "console_signin_lockout_s before sign-in is locked for that long, the right password included",
    )
    lockout_s: float = Field(900, gt=0, description="the sign-in lockout's window and length")


class ConsoleSettings(BaseModel):
    """What ``console/`` needs; workers keep only ``outcome_signing_key`` and ``outcome_previous_keys``."""

    console_host: str = Field("127.0.0.1", description="address `cyberjurors console` listens on")
    console_port: int = Field(8080, ge=1, le=65535, description="its port")
    console_socket: Path | None = Field(
        None,
        description="serve on this Unix socket instead of console_host:console_port, for a single-sign-on "
        "proxy beside the console (oauth2-proxy in its pod: --upstream=unix://<path>) that reaches it there: "
        "console_sso_user_header is believed on it, and the console has no TCP port that `kubectl "
        "port-forward` (or anything else) could reach past the proxy",
    )
    console_db: Path = Field(
        Path("data/console.sqlite3"),
        description="the console's SQLite store: what it read from the topics, its offsets, the decisions made in it",
    )
    console_users: dict[str, str] = Field(
        default_factory=dict,
        description="people who sign in with a password: user name -> its argon2 hash "
        "(`cyberjurors console-password` makes one; a plain password is refused)",
    )
    console_user_roles: dict[str, list[ConsoleRole]] = Field(
        default_factory=dict,
        description="user name -> roles (viewer, reviewer, supervisor, operator); a signed-in "
        "person with none named here, and none from an SSO group, is a viewer",
    )
    console_group_roles: dict[str, list[ConsoleRole]] = Field(
        default_factory=dict, description="SSO group (from console_proxy.sso_groups_header) -> roles"
    )
    console_token: str | None = Field(
        None,
        description="a service token for scripts (Authorization: Bearer): it acts as itself "
        "(actor `service`), never as a named person, with console_token_roles",
    )
    console_token_roles: list[ConsoleRole] = Field(["viewer"], description="what the service token may do")
    console_proxy: ConsoleProxy = nested(
        ConsoleProxy,
        "a single-sign-on proxy in front of the console, any of these by itself "
        '(console_proxy={"behind": true}, CYBERJURORS_CONSOLE_PROXY__TRUSTED)',
    )
    console_tls: ConsoleTLS = nested(
        ConsoleTLS,
        'HTTPS, cert and key together (console_tls={"cert": "/tls/tls.crt", "key": "/tls/tls.key"}, '
        "CYBERJURORS_CONSOLE_TLS__CERT)",
        names=False,
    )
    console_signin: ConsoleSignin = nested(
        ConsoleSignin,
        'sessions and the sign-in lockout, any of these by itself (console_signin={"session_idle_s": '
        "900}, CYBERJURORS_CONSOLE_SIGNIN__LOCKOUT_S)",
    )
    console_max_body_bytes: int = Field(
        65_536, ge=1024, description="a request body over this is refused (413) before it is read"
    )
    console_public_pages: bool = Field(
        False,
        description="the pages that only show open without signing in (always with --embedded, "
        "which serves on loopback only); every action still needs a person with its role",
    )
    outcome_signing_key: str | None = Field(
        None,
        description="the key (32+ characters) the console signs human-panel decisions with and workers "
        "verify them by: a human-panel outcome without a valid signature is a dead letter and changes nothing",
    )
    outcome_previous_keys: list[str] = Field(
        default_factory=list, description="keys still accepted while a new outcome_signing_key rolls out"
    )

    @field_validator("console_users")
    @classmethod
    def _hashed(cls, users: dict[str, str]) -> dict[str, str]:
        plain = sorted(name for name, value in users.items() if not value.startswith("$argon2"))
        if plain:
            raise ValueError(
                f"console_users: {', '.join(plain)} has a plain password, not an argon2 hash: "
                "make one with `cyberjurors console-password` and set that instead"
            )
        return users

    @field_validator("outcome_signing_key", "outcome_previous_keys")
    @classmethod
    def _long_enough(cls, key: str | list[str] | None) -> str | list[str] | None:
        keys = [key] if isinstance(key, str) else key or []
        if any(len(k) < 32 for k in keys):
            raise ValueError("an outcome signing key has 32 characters at least (`openssl rand -base64 32`)")
        return key
