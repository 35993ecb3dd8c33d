"""What the sections share: the base of every model inside the settings, the fields of a nested
setting and of an override (``Duration`` for a length of time), the table of old names a nested setting took over, and a setting read
as resolved from a preset and its overrides."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Generic, TypeVar, overload

from pydantic import BaseModel, ConfigDict, Field

T = TypeVar("T")
# an override's length of time: seconds above 0, or None (unset)
Duration = Annotated[float | None, Field(gt=0)]


class ConfigModel(BaseModel):
    """A model inside the settings (a nested setting, an entry of a table of them): a key it does
    not know is refused, so a misspelt one is not silently a default, and it is frozen, as settings
    are once read."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def nested(model: type[BaseModel], description: str, *, names: bool = True, then: str = "") -> Any:
    """The field of a nested setting: the model's defaults until it is given. With ``names`` its
    description ends with the model's fields (then ``then``), read from the model so the list
    cannot drift from it."""
    if names:
        description = f"{description}: {', '.join(model.model_fields)}{then}"
    return Field(default_factory=model, description=description)


def unset(description: str) -> Any:
    """A field of an override model: unset (None) takes what its description says instead."""
    return Field(None, description=description)


def moved(setting: str, model: type[BaseModel], prefix: str = "", **renamed: str) -> dict[str, str]:
    """The settings this release moved into the nested ``setting`` (config/deprecated.py): old name ->
    its replacement, one per field of ``model``, the old name ``prefix`` + the field's name unless
    ``renamed`` (field -> old name) says otherwise."""
    return {renamed.get(name, f"{prefix}{name}"): f"{setting}.{name}" for name in model.model_fields}


class Resolved(Generic[T]):
    """A setting as every reader uses it, under the name it had before a preset took it over: the
    value its override (a field of the model in ``overrides``) holds when set, else ``preset``'s for
    that field. A read-only class variable of the section (``ClassVar[Resolved[float]]``, so it is no
    field); ``field`` names the override's field where the setting's name was another."""

    def __init__(self, overrides: str, preset: Callable[[Any, str], Any], field: str = ""):
        self.overrides = overrides
        self.preset = preset
        self.field = field

    def __set_name__(self, owner: type, name: str) -> None:
        self.field = self.field or name

    @overload
    def __get__(self, section: None, owner: type) -> Resolved[T]: ...
    @overload
    def __get__(self, section: object, owner: type) -> T: ...
    def __get__(self, section: object | None, owner: type) -> Resolved[T] | T:
        if section is None:
            return self
        given = getattr(getattr(section, self.overrides), self.field)
        return given if given is not None else self.preset(section, self.field)
