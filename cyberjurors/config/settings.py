"""Settings: environment variables (prefix ``CYBERJURORS_``) or a TOML file, in sections.

``Settings`` is composed of one section per layer (``SECTIONS``): Kafka, LLM, jury, courts, precedents,
evidence, state, observability, console, each a pydantic model in this package. A section's
fields keep their flat names, so every environment variable and settings-file key is the field's
name; a function that needs one section is typed with it (``evidence.media`` takes
``EvidenceSettings``), and the type checker refuses a read of any other section's field there.

A few names follow their ecosystems' conventions and are read without the prefix too (see
``ECOSYSTEM_ENV``): ``KAFKA_BOOTSTRAP_SERVERS``, ``ANTHROPIC_API_KEY``, ``OPENAI_API_KEY``,
``OPENAI_BASE_URL``, ``ELASTICSEARCH_URL``, ``ELASTICSEARCH_API_KEY``, ``OTEL_EXPORTER_OTLP_ENDPOINT``.

Precedence, first found wins: values passed in code (a command's options), ``CYBERJURORS_*``
variables, the settings file, the ecosystem names, the defaults. So anything said to CyberJurors
by name beats a name other tools share: an exported ``KAFKA_BOOTSTRAP_SERVERS`` cannot redirect a
child worker whose parent hands it ``CYBERJURORS_KAFKA_BOOTSTRAP_SERVERS``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import warnings
from collections.abc import Mapping
from pathlib import Path
from types import UnionType
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel, PrivateAttr, TypeAdapter, ValidatorFunctionWrapHandler, model_validator
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from ..errors import install_extra
from . import deprecated, price_list
from .catalog import find
from .console import CONSOLE_SECRETS, ConsoleProxy, ConsoleSettings, ConsoleSignin, ConsoleTLS
from .courts import CourtSettings
from .evidence import EvidenceSettings, FrameSettings, IntakeLimits, PrivacySettings
from .fields import moved
from .jury import (
    DEPRECATED_EARLY_STOPPING,
    ConsistencySettings,
    GraphSettings,
    JurisSettings,
    JurySettings,
    PipelineOverrides,
    QualificationGate,
)
from .kafka import KafkaAuth, KafkaSettings, KafkaTimeouts
from .letters import LetterSettings
from .llm import DEPRECATED_ROLE_SETTINGS, BatchSettings, LLMSettings, split_model
from .observability import ObservabilitySettings
from .precedents import ElasticsearchSettings, EmbeddingSettings, PrecedentSettings
from .retention import DEPRECATED_RETENTION, RetentionSettings
from .state import EarlyEvidence, ErasureSettings, StateSettings

SETTINGS_FILE_ENV = "CYBERJURORS_SETTINGS_FILE"


ENV_PREFIX = "CYBERJURORS_"
# ecosystem variable -> setting, dotted into a nested one; read after CYBERJURORS_* and the settings
# file (see the module docstring)
ECOSYSTEM_ENV: dict[str, str] = {
    "KAFKA_BOOTSTRAP_SERVERS": "kafka_bootstrap_servers",
    "ANTHROPIC_API_KEY": "anthropic_api_key",
    "OPENAI_API_KEY": "openai_api_key",
    "OPENAI_BASE_URL": "openai_base_url",
    "ELASTICSEARCH_URL": "elasticsearch.url",
    "ELASTICSEARCH_API_KEY": "elasticsearch.api_key",
    "OTEL_EXPORTER_OTLP_ENDPOINT": "otlp_endpoint",
}


# where the ecosystem names' values wait for the model validator, which sets each where nothing else did
ECOSYSTEM_KEY = "__ecosystem__"


class EcosystemEnvSource(PydanticBaseSettingsSource):
    """The ecosystem names, as they are (no prefix, exact case); an empty one counts as unset. Set
    apart from the other sources' values (``ECOSYSTEM_KEY``): a removed name given anywhere else
    (``elasticsearch_url`` in the settings file) must beat them once it is moved to its replacement."""

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        given = {path: os.environ[env] for env, path in ECOSYSTEM_ENV.items() if os.environ.get(env)}
        return {ECOSYSTEM_KEY: given} if given else {}


class DeprecatedEnvSource(PydanticBaseSettingsSource):
    """``CYBERJURORS_<OLD NAME>`` variables of the settings this release removed, under their old
    names: the model validator maps them onto their replacements (config/deprecated.py)."""

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        return {old: self._decoded(old, value) for old, value in deprecated.from_env(ENV_PREFIX).items()}

    def _decoded(self, old: str, value: str) -> Any:
        """A list or mapping given by its old variable is JSON, as a current variable's is
        (``CYBERJURORS_CONSOLE_TRUSTED_PROXIES='["10.0.0.1"]'``); anything else stays the string the
        field parses. What is not JSON is left to the field's own error."""
        model: Any = self.settings_cls
        *heads, name = deprecated.replacement(old).split(".")
        for head in heads:
            field = getattr(model, "model_fields", {}).get(head)
            model = field and field.annotation
        field = getattr(model, "model_fields", {}).get(name)
        if field is None or not _complex(field.annotation):
            return value
        try:
            return json.loads(value)
        except ValueError:
            return value


def _complex(annotation: Any) -> bool:
    """Whether a field holds a list, set, tuple or mapping (through ``X | None``)."""
    origin = get_origin(annotation)
    if origin in (Union, UnionType):
        return any(_complex(arg) for arg in get_args(annotation) if arg is not type(None))
    return (origin or annotation) in (list, set, frozenset, tuple, dict)


deprecated.rename(DEPRECATED_EARLY_STOPPING, {"early_stopping": deprecated.early_stopping})
# the settings this release removed, old name -> replacement: per-role choices into llm_roles, the
# retentions into retention_period's overrides, and the settings moved into a nested one (the
# liveness timeouts into kafka_profile's kafka_timeouts, the ablation switches into pipeline's
# pipeline_overrides), each field under the prefix and its name unless named (config/fields.py)
for _table in (
    DEPRECATED_ROLE_SETTINGS,
    DEPRECATED_RETENTION,
    moved("intake_limits", IntakeLimits),
    moved("kafka_timeouts", KafkaTimeouts, fetch_max_wait_ms="kafka_fetch_max_wait_ms"),
    moved("pipeline_overrides", PipelineOverrides),
    moved("llm_batch", BatchSettings, "batch_"),
    moved("embedding", EmbeddingSettings, "embedding_"),
    moved("kafka_auth", KafkaAuth, "kafka_"),
    moved("privacy", PrivacySettings, "privacy_"),
    moved("elasticsearch", ElasticsearchSettings, "elasticsearch_"),
    moved("graph", GraphSettings, "graph_"),
    moved(
        "frames", FrameSettings, "frame_", per_video="frames_per_video", passive_per_video="passive_frames_per_video"
    ),
    moved("qualification_gate", QualificationGate, "qualification_"),
    moved("early_evidence", EarlyEvidence, "early_evidence_"),
    moved("console_tls", ConsoleTLS, "console_tls_"),
    moved("console_proxy", ConsoleProxy, "console_", trusted="console_trusted_proxies", behind="console_behind_proxy"),
    moved("consistency", ConsistencySettings, "consistency_"),
    moved(
        "console_signin",
        ConsoleSignin,
        "console_signin_",
        session_ttl_s="console_session_ttl_s",
        session_idle_s="console_session_idle_s",
    ),
    moved("juris", JurisSettings, "juris_"),
    moved("erasure", ErasureSettings, "erasure_"),
):
    deprecated.rename(_table)

# section name -> its model, in the order the reference lists them
SECTIONS: dict[str, type[BaseModel]] = {
    "kafka": KafkaSettings,
    "llm": LLMSettings,
    "jury": JurySettings,
    "letters": LetterSettings,
    "courts": CourtSettings,
    "precedents": PrecedentSettings,
    "evidence": EvidenceSettings,
    "state": StateSettings,
    "retention": RetentionSettings,
    "observability": ObservabilitySettings,
    "console": ConsoleSettings,
}


# the last base's fields come first (pydantic collects them in reverse method resolution order)
class Settings(
    BaseSettings,
    ConsoleSettings,
    ObservabilitySettings,
    RetentionSettings,
    StateSettings,
    EvidenceSettings,
    PrecedentSettings,
    LetterSettings,
    CourtSettings,
    JurySettings,
    LLMSettings,
    KafkaSettings,
):
    # a nested setting's field by itself: CYBERJURORS_INTAKE_LIMITS__MAX_EVENT_BYTES
    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, env_nested_delimiter="__", extra="forbid")

    _deprecations: list[str] = PrivateAttr(default_factory=list)

    @model_validator(mode="wrap")
    @classmethod
    def _renamed(cls, data: Any, handler: ValidatorFunctionWrapHandler) -> Settings:
        """Every removed setting still accepted for one release, onto its replacement, with a warning."""
        notes: list[str] = []
        if isinstance(data, dict):
            ecosystem = data.pop(ECOSYSTEM_KEY, {})
            data, notes = deprecated.translate(data)
            for text in notes:
                warnings.warn(text, DeprecationWarning, stacklevel=2)
            for path, value in ecosystem.items():
                deprecated.fill(data, path, value)
        settings: Settings = handler(data)
        settings._deprecations = notes
        return settings

    @property
    def deprecations(self) -> list[str]:
        """What was said of the removed settings these were given (a worker logs it at start)."""
        return list(self._deprecations)

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Settings:
        """As pydantic's, but a removed setting's name in ``update`` mapped onto its replacement (with
        its warning), a mapping given for a nested setting (``{"pipeline_overrides": {"verifier": True}}``)
        laid over its current value and validated, and a name that is no setting refused: pydantic's
        stores what it is given as it is, unchecked and, for a name that is no setting, unread."""
        if update:
            unknown = [k for k in update if k not in type(self).model_fields and k not in deprecated.RENAMED]
            if unknown:
                raise ValueError(f"no such setting: {', '.join(unknown)}")
            if any(k in deprecated.RENAMED for k in update):
                moved, notes = deprecated.translate(update)
                for text in notes:
                    warnings.warn(text, DeprecationWarning, stacklevel=2)
                fields = type(self).model_fields
                heads = {deprecated.RENAMED[k].split(".")[0] for k in update if k in deprecated.RENAMED}
                update = {
                    k: TypeAdapter[Any](fields[k].annotation).validate_python(  # type: ignore[arg-type]
                        deprecated.merged(getattr(self, k), v) if k not in update else v
                    )
                    if k in heads
                    else v
                    for k, v in moved.items()
                }
            update = {k: self._nested(k, v) for k, v in update.items()}
        return super().model_copy(update=update, deep=deep)

    def _nested(self, name: str, value: Any) -> Any:
        """A mapping for a nested setting's model, over its current value; anything else as given."""
        annotation = type(self).model_fields[name].annotation
        if isinstance(value, Mapping) and isinstance(annotation, type) and issubclass(annotation, BaseModel):
            return annotation.model_validate(deprecated.merged(getattr(self, name), value))
        return value

    def for_worker(self) -> Settings:
        """These settings without what only the console needs (who may sign in, and how): a worker
        child process is handed no one's password hash and no service token. It keeps
        outcome_signing_key, which it verifies human-panel decisions with."""
        return self.model_copy(
            update={
                name: Settings.model_fields[name].get_default(call_default_factory=True) for name in CONSOLE_SECRETS
            }
        )

    def model_specs(self) -> set[str]:
        """Every model a call may go to, the court policy's tiers' models included: they are checked
        (prices, provider keys) and routed like any other."""
        return super().model_specs() | {t.model for t in self.court_policy if t.model}

    @property
    def most_rounds(self) -> int:
        """The most rounds any court may hold: how far a case's stored rounds are probed."""
        return max([self.rounds, *(t.rounds for t in self.court_policy if t.rounds)])

    @model_validator(mode="after")
    def _backend(self) -> Settings:
        if self.llm_backend == "anthropic" and not self.anthropic_api_key:
            raise ValueError("llm_backend=anthropic needs ANTHROPIC_API_KEY")
        if self.precedent_backend == "elasticsearch" and not self.elasticsearch.url:
            raise ValueError("precedent_backend=elasticsearch needs ELASTICSEARCH_URL")
        if self.llm_backend == "openai" and not self.openai_base_url:
            raise ValueError("llm_backend=openai needs OPENAI_BASE_URL (an OpenAI-compatible endpoint)")
        named = self.providers_named()
        if "anthropic" in named and not self.anthropic_api_key:
            raise ValueError("a model named anthropic:... needs ANTHROPIC_API_KEY")
        if "openai" in named and not self.openai_base_url:
            raise ValueError("a model named openai:... needs OPENAI_BASE_URL (an OpenAI-compatible endpoint)")
        if self.media_retention < max(self.state_retention_s, self.dlq_retention_s):
            raise ValueError(
                "retention.media_s must be at least the state's and the dead letters' retention: a case or "
                "a dead letter would name media already deleted"
            )
        if self.media_encryption and len(self.case_key_secret or "") < 32:
            raise ValueError(
                "media_encryption needs case_key_secret, 32 characters at least (`openssl rand -base64 32`): "
                "the key store names each case's key by it"
            )
        if self.payload_encryption and not self.media_encryption:
            raise ValueError(
                "payload_encryption needs media_encryption: a dead letter's original too large to carry goes "
                "to the media store, and must be sealed there too"
            )
        if self.key_service.kind == "aws_kms" and not self.key_service.kms_key_id:
            raise ValueError("key_service.kind=aws_kms needs key_service.kms_key_id")
        self._check_thinking()
        self._check_cost_budget()
        self._check_extras()
        return self

    def _check_extras(self) -> None:
        """A configured feature whose extra is not installed: refused here in one line, not as an
        ImportError from deep inside a worker."""
        wanted = [
            ("table_store=rocksdb", self.table_store == "rocksdb", "rocksdict", "rocksdb"),
            (
                "precedent_backend=elasticsearch",
                self.precedent_backend == "elasticsearch",
                "elasticsearch",
                "elasticsearch",
            ),
            (f"media_store={self.media_store}", self.media_store.startswith(("s3://", "s3a://")), "s3fs", "s3"),
            ("key_service.kind=aws_kms", self.key_service.kind == "aws_kms", "boto3", "kms"),
            (
                "embedding.runtime=sentence-transformers",
                self.embedding.runtime == "sentence-transformers",
                "sentence_transformers",
                "torch",
            ),
        ]
        for setting, used, module, extra in wanted:
            if used and importlib.util.find_spec(module) is None:
                raise ValueError(f"{setting} needs the {extra} extra: {install_extra(extra)}")

    def _check_cost_budget(self) -> None:
        """A cost ceiling counts a model without a price as free: it would never stop a case. A price
        from genai-prices' list counts (``llm_prices_fallback``), as the calls are priced from it."""
        if not self.case_cost_budget_usd:
            return
        unpriced = sorted(
            {
                name
                for provider, name in map(split_model, self.model_specs())
                if (provider or self.backend) != "offline" and not self._priced(provider or self.backend, name)
            }
        )
        if unpriced:
            fallback = f" or {price_list.SOURCE}" if self.llm_prices_fallback else ""
            raise ValueError(
                f"case_cost_budget_usd needs a price for every model a call may go to; llm_prices{fallback} "
                f"has none for {', '.join(unpriced)} (add them to llm_prices, or use case_token_budget)"
            )

    def _priced(self, backend: str, model: str) -> bool:
        if find(self.llm_prices, model) is not None:
            return True
        base_url = self.openai_base_url if backend == "openai" else None
        return self.llm_prices_fallback and price_list.lookup(backend, model, base_url) is not None

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # first found wins: code, CYBERJURORS_*, the settings file, then the ecosystem names
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings, DeprecatedEnvSource(settings_cls)]
        toml_file = os.environ.get(SETTINGS_FILE_ENV)
        if toml_file:
            if not Path(toml_file).is_file():
                raise FileNotFoundError(f"{SETTINGS_FILE_ENV}={toml_file}: no such settings file")
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=toml_file))
        sources.append(EcosystemEnvSource(settings_cls))
        return tuple(sources)
