"""Settings in sections (``settings.py``), the dated catalog of the models they may name
(``catalog.py``), and the maintained price list behind it (``price_list.py``)."""

from .catalog import TokenPrices
from .console import CONSOLE_ROLES, CONSOLE_SECRETS, ConsoleRole, ConsoleSettings
from .courts import CourtSettings, CourtTier
from .evidence import EvidenceSettings, IntakeLimits, PrivacySettings
from .jury import PIPELINES, JurySettings, Pipeline, PipelineOverrides
from .kafka import KafkaSettings, KafkaTimeouts
from .letters import DEFAULT_LETTER_LOCALES, LetterSettings
from .llm import (
    DEFAULT_LLM_PRICES,
    OPENAI_EFFORTS,
    PROVIDERS,
    ROLE_CALLS,
    ROLES,
    STRUCTURED_OUTPUTS,
    Effort,
    LLMSettings,
    ModelCapabilities,
    OpenAIEffort,
    Provider,
    Role,
    RoleCall,
    StructuredOutput,
    Thinking,
    reasons,
    split_model,
)
from .observability import ObservabilitySettings
from .precedents import PrecedentSettings
from .retention import RetentionOverrides, RetentionSettings
from .settings import ECOSYSTEM_ENV, ENV_PREFIX, SECTIONS, SETTINGS_FILE_ENV, Settings
from .state import StateSettings

__all__ = [
    "CONSOLE_ROLES",
    "CONSOLE_SECRETS",
    "DEFAULT_LETTER_LOCALES",
    "DEFAULT_LLM_PRICES",
    "ECOSYSTEM_ENV",
    "ENV_PREFIX",
    "OPENAI_EFFORTS",
    "PIPELINES",
    "PROVIDERS",
    "ROLES",
    "ROLE_CALLS",
    "SECTIONS",
    "SETTINGS_FILE_ENV",
    "STRUCTURED_OUTPUTS",
    "ConsoleRole",
    "ConsoleSettings",
    "CourtSettings",
    "CourtTier",
    "Effort",
    "EvidenceSettings",
    "IntakeLimits",
    "JurySettings",
    "KafkaSettings",
    "KafkaTimeouts",
    "LLMSettings",
    "LetterSettings",
    "ModelCapabilities",
    "ObservabilitySettings",
    "OpenAIEffort",
    "Pipeline",
    "PipelineOverrides",
    "PrecedentSettings",
    "PrivacySettings",
    "Provider",
    "RetentionOverrides",
    "RetentionSettings",
    "Role",
    "RoleCall",
    "Settings",
    "StateSettings",
    "StructuredOutput",
    "Thinking",
    "TokenPrices",
    "reasons",
    "split_model",
]
