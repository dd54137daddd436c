"""Resilience settings: module option > environment variable > retry preset > built-in default.

:data:`SETTINGS` is the single table of every setting (module option, ``RESILIENT_VIRT_*``
environment variable, default, kind, description); the ``resilience`` option's argument spec is
built from it (:func:`option_spec`). The documentation is written by hand and checked against it
(``tests/unit/doc_fragments/test_resilience.py``: the doc fragment names every option and
variable, and the settings table of docs/resilience.md is the one rendered from it).
:func:`resolve_settings` turns the ``resilience`` module option and the environment into a
validated :class:`ResilienceSettings`, or raises one InvalidSpec listing every bad value by
option path or variable name, with the fix.

Defaults worth knowing:

* ``deadline`` (overall time for one call, all attempts and waits included) is unset by
  default: the call is then bounded by ``max_attempts``, each attempt by the timeout of its
  operation class, plus the backoff waits. ``deadline: none`` (or 0) also means unset.
* ``rate_limit_qps`` 0 means unlimited. ``rate_limit_burst`` unset means one second's worth of
  calls: ``ceil(qps)``, at least 1.
* The retry numbers (``max_attempts``, ``base_delay``, ``max_delay``, ``multiplier``) come from
  the chosen ``retry_preset`` (``default`` unless set) unless given explicitly.
"""
from __future__ import annotations

import math
import os
from collections import namedtuple
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, cast

from ansible_collections.resilient.virt.plugins.module_utils._convert import (
    MAX_DURATION, format_duration, parse_duration, to_float, to_int)
from ansible_collections.resilient.virt.plugins.module_utils.errors import (
    InvalidSpec, field_error, field_errors, redact)

__all__ = ("OPERATION_CLASSES", "RETRY_PRESETS", "SETTINGS", "Setting", "ResilienceSettings",
           "RetrySettings", "BreakerSettings", "RateLimitSettings", "STORE_FAILURE_POLICIES",
           "resolve_settings", "option_spec", "OPTION", "ENV_PREFIX")

OPTION = "resilience"
ENV_PREFIX = "RESILIENT_VIRT_"
OPERATION_CLASSES = ("describe", "mutating", "validate", "task_status")

RETRY_PRESETS: dict[str, dict[str, Any]] = {
    "default": {"max_attempts": 5, "base_delay": 0.5, "max_delay": 30.0, "multiplier": 2.0},
    "aggressive": {"max_attempts": 10, "base_delay": 0.1, "max_delay": 30.0, "multiplier": 1.5},
    "conservative": {"max_attempts": 3, "base_delay": 1.0, "max_delay": 30.0, "multiplier": 3.0},
    "none": {"max_attempts": 1, "base_delay": 0.5, "max_delay": 30.0, "multiplier": 2.0},
}

Setting = namedtuple("Setting", "key option env default kind minimum maximum description")
Setting.__doc__ = """One setting. ``key``: field of ResilienceSettings; ``option``: module option
path; ``env``: environment variable; ``kind``: duration|duration?|int|float|str|choice
(``duration?``: a duration that may be unset); ``minimum`` and
``maximum``: the valid range (None = no numeric check)."""

_D = RETRY_PRESETS["default"]
_DAY = 24 * 3600.0
_HOUR = 3600.0


def _s(key: str, env: str, default: Any, kind: str, bounds: tuple[float | None, float | None],
       description: str, option: str | None = None) -> Setting:
    minimum, maximum = bounds
    return Setting(key, option or "%s.%s" % (OPTION, key), ENV_PREFIX + env, default, kind,
                   minimum, maximum, description)


SETTINGS = (
    _s("state_store", "STATE_STORE", None, "str", (None, None),
       "Where breaker and rate limit state is shared: sqlite:///path, redis://host:port/db, "
       "redis+sentinel://host:port,host:port/service/db or redis+cluster://host:port,host:port "
       "(rediss... for TLS). Unset: a SQLite file under ~/.ansible/resilient_virt/.",
       option="state_store"),
    _s("retry_preset", "RETRY_PRESET", "default", "choice", (None, None),
       "Named retry numbers: " + "; ".join(
           "%s (%d attempts, %gs base, %gs cap, x%g)"
           % (name, p["max_attempts"], p["base_delay"], p["max_delay"], p["multiplier"])
           for name, p in RETRY_PRESETS.items()) + ". Explicit retry settings override it."),
    _s("max_attempts", "RETRY_MAX_ATTEMPTS", _D["max_attempts"], "int", (1, 100),
       "Attempts per call, the first included (1 = no retry). Default from retry_preset."),
    _s("base_delay", "RETRY_BASE_DELAY", _D["base_delay"], "duration", (0, _HOUR),
       "Wait before the first retry; grows by multiplier per retry (plus up to 10% jitter). "
       "Default from retry_preset."),
    _s("max_delay", "RETRY_MAX_DELAY", _D["max_delay"], "duration", (0, _HOUR),
       "Longest wait between two attempts. Default from retry_preset."),
    _s("multiplier", "RETRY_MULTIPLIER", _D["multiplier"], "float", (1, 10),
       "Growth factor of the wait between attempts. Default from retry_preset."),
    _s("deadline", "RETRY_DEADLINE", None, "duration?", (0, MAX_DURATION),
       "Overall time for one call, every attempt and wait included. Unset (or none/0): bounded "
       "by max_attempts, the operation timeout of each attempt and the waits."),
    _s("failure_threshold", "CB_FAILURE_THRESHOLD", 5, "int", (1, 10000),
       "Consecutive provider failures (unreachable, timeout) that open the circuit breaker."),
    _s("reset_timeout", "CB_RESET_SECONDS", 30.0, "duration", (0, MAX_DURATION),
       "Time an open breaker refuses calls before letting probe calls through (half-open)."),
    _s("half_open_max_calls", "CB_HALF_OPEN_MAX_CALLS", 1, "int", (1, 1000),
       "Probe calls allowed at the same time, across all processes, while half-open."),
    _s("success_threshold", "CB_SUCCESS_THRESHOLD", 1, "int", (1, 1000),
       "Successful probe calls that close a half-open breaker."),
    _s("rate_limit_qps", "RATE_LIMIT_QPS", 0.0, "float", (0, 1000000),
       "Calls per second allowed to one provider, across all processes; 0 = unlimited."),
    _s("rate_limit_burst", "RATE_LIMIT_BURST", None, "int", (0, 1000000),
       "Calls admitted at once before the steady rate applies; at least 1 when "
       "rate_limit_qps > 0. Unset: ceil(rate_limit_qps), at least 1."),
    _s("timeout_describe", "RPC_TIMEOUT_DESCRIBE", 30.0, "duration", (0, _DAY),
       "Time limit of one read call (describe, list) to the provider."),
    _s("timeout_mutating", "RPC_TIMEOUT_MUTATING", 240.0, "duration", (0, _DAY),
       "Time limit of one changing call (create, delete, power, reconfigure, migrate)."),
    _s("timeout_validate", "RPC_TIMEOUT_VALIDATE", 10.0, "duration", (0, _DAY),
       "Time limit of one connection/credentials check to the provider."),
    _s("timeout_task_status", "RPC_TIMEOUT_TASK_STATUS", 10.0, "duration", (0, _DAY),
       "Time limit of one poll of a provider task's status."),
    _s("store_timeout", "STORE_TIMEOUT", 5.0, "duration", (0, 600.0),
       "Time limit of one read or write of the state store, shortened to what is left of the "
       "call's deadline. A store that does not answer in time counts as unreachable "
       "(see store_failure)."),
    _s("store_failure", "STORE_FAILURE", "open", "choice", (None, None),
       "What a task does when the state store is unreachable: open (run on, with its circuit "
       "breakers and rate limits kept in the task's memory, and a warning) or closed (fail at "
       "once with Unavailable naming the store). Records that live in the store (failover "
       "reservations, backups, fleet status, breakers set by hand) need it either way.",
       option="store_failure"),
)
_BY_KEY = {s.key: s for s in SETTINGS}
STORE_FAILURE_POLICIES = ("open", "closed")
CHOICES = {"retry_preset": tuple(RETRY_PRESETS), "store_failure": STORE_FAILURE_POLICIES}
_POSITIVE = frozenset(("timeout_describe", "timeout_mutating", "timeout_validate",
                       "timeout_task_status", "store_timeout"))
OPTION_KEYS = tuple(s.key for s in SETTINGS if s.option.startswith(OPTION + "."))
_OPTION_TYPES = {"int": "int", "float": "float", "duration": "raw", "duration?": "raw",
                 "str": "str", "choice": "str"}


def option_spec() -> dict[str, dict[str, Any]]:
    """Ansible argument spec of the ``resilience`` option's suboptions, from :data:`SETTINGS`."""
    spec: dict[str, dict[str, Any]] = {}
    for setting in SETTINGS:
        if setting.key in OPTION_KEYS:
            spec[setting.key] = {"type": _OPTION_TYPES[setting.kind]}
            if setting.kind == "choice":
                spec[setting.key]["choices"] = list(CHOICES[setting.key])
    return spec


RetrySettings = namedtuple("RetrySettings", "max_attempts base_delay max_delay multiplier")
BreakerSettings = namedtuple("BreakerSettings",
                             "failure_threshold reset_timeout half_open_max_calls success_threshold")
RateLimitSettings = namedtuple("RateLimitSettings", "qps burst")


@dataclass
class ResilienceSettings:
    """Resolved settings; ``sources`` maps each key to option|env|preset|default."""

    state_store: str | None = None
    retry_preset: str = "default"
    max_attempts: int = _D["max_attempts"]
    base_delay: float = _D["base_delay"]
    max_delay: float = _D["max_delay"]
    multiplier: float = _D["multiplier"]
    deadline: float | None = None
    failure_threshold: int = 5
    reset_timeout: float = 30.0
    half_open_max_calls: int = 1
    success_threshold: int = 1
    rate_limit_qps: float = 0.0
    rate_limit_burst: int = 1
    timeout_describe: float = 30.0
    timeout_mutating: float = 240.0
    timeout_validate: float = 10.0
    timeout_task_status: float = 10.0
    store_timeout: float = 5.0
    store_failure: str = "open"
    sources: dict = field(default_factory=dict, compare=False)

    @property
    def retry(self) -> RetrySettings:
        """max_attempts, base_delay, max_delay, multiplier (what run_with_retry reads)."""
        return RetrySettings(self.max_attempts, self.base_delay, self.max_delay, self.multiplier)

    @property
    def breaker(self) -> BreakerSettings:
        """CircuitBreaker keyword arguments: ``CircuitBreaker(store, name, **s.breaker._asdict())``."""
        return BreakerSettings(self.failure_threshold, self.reset_timeout,
                               self.half_open_max_calls, self.success_threshold)

    @property
    def rate_limit(self) -> RateLimitSettings:
        """RateLimiter keyword arguments: qps (0 = unlimited) and burst."""
        return RateLimitSettings(self.rate_limit_qps, self.rate_limit_burst)

    def timeout_for(self, op_class: str) -> float:
        """Seconds one call of ``op_class`` (one of OPERATION_CLASSES) may take."""
        if op_class not in OPERATION_CLASSES:
            raise ValueError("unknown operation class %r; use one of %s"
                             % (op_class, ", ".join(OPERATION_CLASSES)))
        return getattr(self, "timeout_" + op_class)

    def to_dict(self) -> dict[str, Any]:
        """Values (without ``sources``), JSON-able, with any password in ``state_store`` hidden."""
        out = asdict(self)
        out.pop("sources")
        if out["state_store"]:
            out["state_store"] = redact(out["state_store"])
        return out


def _invalid(name: str, message: str) -> InvalidSpec:
    return field_error(name, message)


def _parse_int(value: Any, name: str, example: Any) -> int:
    try:
        return to_int(value)
    except ValueError:
        raise _invalid(name, "%s=%r is not a whole number; set it to e.g. %s"
                       % (name, value, example)) from None


def _parse_float(value: Any, name: str, example: Any) -> float:
    try:
        return to_float(value)
    except ValueError:
        raise _invalid(name, "%s=%r is not a number; set it to e.g. %s"
                       % (name, value, example)) from None


_EXAMPLES = {"deadline": "10m", "rate_limit_qps": 10, "rate_limit_burst": 10}


def _example(setting: Setting) -> Any:
    if setting.key in _EXAMPLES:
        return _EXAMPLES[setting.key]
    default = setting.default
    if setting.kind in ("duration", "duration?"):
        return "%gs" % default
    return "%g" % default if isinstance(default, float) else default


def _parse(setting: Setting, value: Any, name: str) -> Any:
    """Value of ``setting`` given as ``value`` by ``name`` (option path or env var)."""
    kind = setting.kind
    if kind == "str":
        if not isinstance(value, str):
            raise _invalid(name, "%s must be a string, got %r" % (name, value))
        return value
    if kind == "choice":
        if value not in CHOICES[setting.key]:
            raise _invalid(name, "%s=%r is not one of %s" % (name, value, ", ".join(sorted(CHOICES[setting.key]))))
        return value
    if kind == "duration?" and str(value).strip().lower() == "none":
        return None
    if kind in ("duration", "duration?"):
        number = parse_duration(value, name, setting.maximum, minimum=None)
    elif kind == "int":
        number = _parse_int(value, name, _example(setting))
    else:
        number = _parse_float(value, name, _example(setting))
    low = setting.minimum
    if setting.key in _POSITIVE and number <= 0:
        raise _invalid(name, "%s=%r must be more than 0; set it to e.g. %s"
                       % (name, value, _example(setting)))
    if low is not None and number < low:
        raise _invalid(name, "%s=%r must be at least %s; set it to e.g. %s"
                       % (name, value, low, _example(setting)))
    high = setting.maximum
    if high is not None and number > high:
        shown = format_duration(high) if kind in ("duration", "duration?") else "%g" % high
        raise _invalid(name, "%s=%r must be at most %s; set it to e.g. %s"
                       % (name, value, shown, _example(setting)))
    if kind == "duration?" and number == 0:
        return None
    return number


def _unknown_keys(option: dict[Any, Any]) -> dict[str, str] | None:
    unknown = sorted(str(k) for k in option if k not in OPTION_KEYS)
    if not unknown:
        return None
    import difflib
    hints = []
    for key in unknown:
        close = difflib.get_close_matches(key, OPTION_KEYS, n=1)
        if close:
            hints.append("%r: did you mean %r?" % (key, close[0]))
    message = "%s has unknown key%s %s; valid keys: %s" % (
        OPTION, "s" if len(unknown) > 1 else "", ", ".join(repr(k) for k in unknown),
        ", ".join(sorted(OPTION_KEYS)))
    if hints:
        message += " (%s)" % "; ".join(hints)
    return {"path": OPTION, "message": message}


def _given(value: Any) -> bool:
    return value is not None and not (isinstance(value, str) and value.strip() == "")


def resolve_settings(resilience_option: Any = None, environ: Mapping[str, str] | None = None,
                     state_store: str | None = None, store_failure: str | None = None) -> ResilienceSettings:
    """Resolve every setting: option > env > preset > default; InvalidSpec lists all bad values.

    ``resilience_option`` is the module's ``resilience`` dict (None values mean "not set");
    ``state_store`` and ``store_failure`` the module's top-level options of those names;
    ``environ`` defaults to ``os.environ``. Empty environment variables count as unset.
    """
    environ = os.environ if environ is None else environ
    option = resilience_option if resilience_option is not None else {}
    if not isinstance(option, dict):
        raise _invalid(OPTION, "%s must be a dictionary of settings, got %r" % (OPTION, option))
    errors: list[dict[str, str]] = []
    unknown = _unknown_keys(option)
    if unknown:
        errors.append(unknown)
    given = dict(option)
    given["state_store"] = state_store
    given["store_failure"] = store_failure
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    given_as: dict[str, tuple[str, Any]] = {}

    def pick(setting: Setting, preset: dict[str, Any] | None = None) -> None:
        """Set values/sources/given_as[setting.key] from the first place that gives it."""
        key = setting.key
        candidates = ((given.get(key), setting.option, "option"),
                      (environ.get(setting.env), setting.env, "env"))
        for value, name, source in candidates:
            if _given(value):
                given_as[key], sources[key] = (name, value), source
                try:
                    values[key] = _parse(setting, value, name)
                except InvalidSpec as exc:
                    errors.extend(cast(dict, exc.details)["errors"])  # field_error gives details
                    values[key] = setting.default
                return
        if preset is not None and key in preset:
            values[key], sources[key] = preset[key], "preset"
        else:
            values[key], sources[key] = setting.default, "default"

    pick(_BY_KEY["retry_preset"])
    preset = RETRY_PRESETS.get(values["retry_preset"], _D)
    for setting in SETTINGS:
        if setting.key != "retry_preset":
            pick(setting, preset)
    burst = values["rate_limit_burst"]
    if burst is None:
        values["rate_limit_burst"] = max(1, int(math.ceil(values["rate_limit_qps"])))
    elif burst < 1 and values["rate_limit_qps"] > 0:
        name, raw = given_as["rate_limit_burst"]
        errors.append({"path": name, "message": "%s=%r must be at least 1 when rate_limit_qps is "
                       "more than 0; set it to e.g. 10" % (name, raw)})
    if errors:
        raise field_errors(errors)
    return ResilienceSettings(sources=sources, **values)
