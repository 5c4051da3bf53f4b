"""Typed-config machinery: dataclasses with documented fields, strict loading, JSON-schema export.

Every config section is a ``@dataclass(kw_only=True)`` whose fields are declared with :func:`option`
(default, one-line help, optional bounds or choices). From these one definition we get:

- :func:`build`: a strict loader (unknown key, wrong type or bad value -> :class:`ConfigError`
  naming the dotted key and what is expected);
- :func:`json_schema`: the schema Snakemake's ``validate()`` reads (``workflow/schemas/``), generated
  so the two can never drift (``relin schema`` writes it; a test fails when it is stale).
"""
from __future__ import annotations

import dataclasses
import math
import types
import typing
from typing import Any, Literal, get_args, get_origin

from ..errors import ConfigError

_MISSING = dataclasses.MISSING


def option(default: Any = _MISSING, help: str = "", *, minimum: float | None = None,
           maximum: float | None = None, exclusive_minimum: float | None = None,
           default_factory: Any = _MISSING) -> Any:
    """A config field: its default, a one-line description and optional numeric bounds."""
    if not help:
        raise ValueError("every config option needs a help text")
    meta = {"help": help, "minimum": minimum, "maximum": maximum, "exclusive_minimum": exclusive_minimum}
    if default_factory is not _MISSING:
        return dataclasses.field(default_factory=default_factory, metadata=meta)
    if default is _MISSING:
        return dataclasses.field(metadata=meta)
    if isinstance(default, (list, dict)):
        return dataclasses.field(default_factory=lambda d=default: _copy(d), metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def _copy(value: Any) -> Any:
    if isinstance(value, list):
        return [_copy(v) for v in value]
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    return value


def _type_hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _describe(tp: Any) -> str:
    origin = get_origin(tp)
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in get_args(tp))
    if origin in (list, tuple):
        return f"a list of {_describe(get_args(tp)[0])}"
    if origin is dict:
        return f"a mapping of {_describe(get_args(tp)[1])}"
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_describe(a) for a in get_args(tp))
    if dataclasses.is_dataclass(tp):
        return f"a mapping ({tp.__name__})"
    return {int: "an integer", float: "a number", bool: "true/false", str: "a string",
            type(None): "null"}.get(tp, getattr(tp, "__name__", str(tp)))


def convert(tp: Any, value: Any, key: str) -> Any:
    origin = get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = get_args(tp)
        if value is None and type(None) in args:
            return None
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return convert(arg, value, key)
            except ConfigError as err:
                errors.append(err)
        raise ConfigError(f"{key}: expected {_describe(tp)}, got {value!r}")
    if origin is Literal:
        if value not in get_args(tp):
            raise ConfigError(f"{key}: expected {_describe(tp)}, got {value!r}")
        return value
    if origin in (list, tuple):
        if not isinstance(value, list):
            raise ConfigError(f"{key}: expected {_describe(tp)}, got {value!r}")
        (item,) = get_args(tp)[:1]
        return [convert(item, v, f"{key}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{key}: expected {_describe(tp)}, got {value!r}")
        _, item = get_args(tp)
        return {str(k): convert(item, v, f"{key}.{k}") for k, v in value.items()}
    if dataclasses.is_dataclass(tp):
        return build(tp, value, key)
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{key}: expected true/false, got {value!r}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{key}: expected an integer, got {value!r}")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{key}: expected a number, got {value!r}")
        if not math.isfinite(value):
            raise ConfigError(f"{key}: expected a finite number, got {value!r}")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"{key}: expected a string, got {value!r}")
        return value
    raise TypeError(f"unsupported config type {tp!r} at {key}")


def typed_strings(tp: Any, value: Any) -> Any:
    """``value`` with string leaves read as YAML where ``tp`` declares a non-string type.

    Snakemake's ``--config key=VALUE`` reads a nested VALUE with YAML's base loader, so every leaf
    arrives as a string (``{train: {lr: 0.003}}`` gives ``"0.003"``); this restores the declared
    types. A leaf that does not read as its type stays a string, for :func:`build` to reject.
    """
    import yaml

    origin = get_origin(tp)
    if dataclasses.is_dataclass(tp) and isinstance(value, dict):
        hints = _type_hints(tp)
        return {k: typed_strings(hints[k], v) if k in hints else v for k, v in value.items()}
    if origin is dict and isinstance(value, dict):
        return {k: typed_strings(get_args(tp)[1], v) for k, v in value.items()}
    if origin in (list, tuple) and isinstance(value, list):
        return [typed_strings(get_args(tp)[0], v) for v in value]
    if isinstance(value, str) and tp is not str and not (origin is Literal and value in get_args(tp)):
        try:
            parsed = yaml.safe_load(value)
        except yaml.YAMLError:
            return value
        return value if parsed is None or isinstance(parsed, str) else typed_strings(tp, parsed)
    return value


def _check_bounds(meta: dict, value: Any, key: str) -> None:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return
    lo, hi, xlo = meta.get("minimum"), meta.get("maximum"), meta.get("exclusive_minimum")
    if lo is not None and value < lo:
        raise ConfigError(f"{key}: expected a value >= {lo}, got {value!r}")
    if hi is not None and value > hi:
        raise ConfigError(f"{key}: expected a value <= {hi}, got {value!r}")
    if xlo is not None and value <= xlo:
        raise ConfigError(f"{key}: expected a value > {xlo}, got {value!r}")


def build(cls: type, data: Any, prefix: str = "") -> Any:
    """Construct dataclass ``cls`` from a mapping, strictly. ``prefix`` is the dotted key for errors."""
    where = prefix or "<top level>"
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: expected a mapping, got {data!r}")
    hints = _type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        name = f"{prefix}.{unknown[0]}" if prefix else unknown[0]
        raise ConfigError(f"{name}: unknown key (expected one of: {', '.join(fields)})")
    kwargs = {}
    for name, f in fields.items():
        key = f"{prefix}.{name}" if prefix else name
        if name not in data:
            if f.default is _MISSING and f.default_factory is _MISSING:
                raise ConfigError(f"{key}: missing (expected {_describe(hints[name])}: {f.metadata.get('help')})")
            continue
        value = convert(hints[name], data[name], key)
        _check_bounds(f.metadata, value, key)
        kwargs[name] = value
    obj = cls(**kwargs)
    check = getattr(obj, "validate", None)
    if check is not None:
        check(prefix)
    return obj


def check_replicated(key: str, names: list[str], known) -> None:
    """A paper's ``replicated`` list names each of its models at most once."""
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ConfigError(f"{key}: unknown model {unknown[0]!r} (expected names from {', '.join(known)})")
    if len(set(names)) != len(names):
        raise ConfigError(f"{key}: a model is listed twice ({names})")


def as_dict(obj: Any) -> Any:
    """Plain nested dicts and lists of a config (for logging, JSON and schema defaults)."""
    if dataclasses.is_dataclass(obj):
        return dataclasses.asdict(obj)
    if isinstance(obj, list):
        return [as_dict(v) for v in obj]
    if isinstance(obj, dict):
        return {k: as_dict(v) for k, v in obj.items()}
    return obj


def _schema_of(tp: Any) -> dict:
    origin = get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return {"anyOf": [_schema_of(a) for a in get_args(tp)]}
    if origin is Literal:
        return {"enum": list(get_args(tp))}
    if origin in (list, tuple):
        return {"type": "array", "items": _schema_of(get_args(tp)[0])}
    if origin is dict:
        return {"type": "object", "additionalProperties": _schema_of(get_args(tp)[1])}
    if dataclasses.is_dataclass(tp):
        return json_schema(tp)
    return {"type": {int: "integer", float: "number", bool: "boolean", str: "string",
                     type(None): "null"}[tp]}


def json_schema(cls: type) -> dict:
    """JSON schema (draft 2020-12) of dataclass ``cls``: a type and description for every key."""
    hints = _type_hints(cls)
    props, required = {}, []
    for f in dataclasses.fields(cls):
        prop = {"description": f.metadata.get("help", "")}
        prop.update(_schema_of(hints[f.name]))
        for bound in ("minimum", "maximum"):
            if f.metadata.get(bound) is not None:
                prop[bound] = f.metadata[bound]
        if f.metadata.get("exclusive_minimum") is not None:
            prop["exclusiveMinimum"] = f.metadata["exclusive_minimum"]
        if f.default is not _MISSING:
            prop["default"] = f.default
        elif f.default_factory is not _MISSING:
            prop["default"] = as_dict(f.default_factory())
        else:
            required.append(f.name)
        props[f.name] = prop
    schema = {"type": "object", "description": (cls.__doc__ or "").strip().splitlines()[0],
              "properties": props, "additionalProperties": False}
    if required:
        schema["required"] = required
    return schema
