"""Settings resolution: option > env > preset > default, durations, validation messages."""
import dataclasses

import pytest

from ansible_collections.resilient.virt.plugins.module_utils._resilience import settings as C
from ansible_collections.resilient.virt.plugins.module_utils.errors import InvalidSpec


@pytest.mark.parametrize("value, seconds", [
    (30, 30.0), (1.5, 1.5), ("30", 30.0), ("1.5", 1.5), ("250ms", 0.25), ("100ms", 0.1),
    ("30s", 30.0), ("1.5s", 1.5), ("4m", 240.0), ("1h", 3600.0), (" 2 M ", 120.0), (".5s", 0.5),
    (0, 0.0), ("1d", 86400.0), ("7d", 604800.0),
])
def test_parse_duration_accepts(value, seconds):
    assert C.parse_duration(value, "x") == pytest.approx(seconds)


@pytest.mark.parametrize("value", ["", "ten", "5 minutes", "1w", "-5s", "1e3", True, None,
                                   float("nan"), float("inf"), [5]])
def test_parse_duration_rejects_naming_the_field(value):
    with pytest.raises(InvalidSpec) as info:
        C.parse_duration(value, "resilience.timeout_describe")
    msg = str(info.value)
    assert msg.startswith("resilience.timeout_describe=%r is not a duration" % (value,))
    assert "250ms, 30s, 4m, 1h" in msg
    assert info.value.details["errors"][0]["path"] == "resilience.timeout_describe"


def test_table_matches_settings_fields_and_brief_names():
    fields = {f.name for f in dataclasses.fields(C.ResilienceSettings)} - {"sources"}
    assert {s.key for s in C.SETTINGS} == fields
    envs = {s.env for s in C.SETTINGS}
    for suffix in ("STATE_STORE", "RPC_TIMEOUT_MUTATING", "RPC_TIMEOUT_DESCRIBE",
                   "RPC_TIMEOUT_VALIDATE", "RPC_TIMEOUT_TASK_STATUS", "RETRY_PRESET",
                   "RETRY_MAX_ATTEMPTS", "RETRY_BASE_DELAY", "RETRY_MAX_DELAY", "RETRY_MULTIPLIER",
                   "RETRY_DEADLINE", "CB_FAILURE_THRESHOLD", "CB_RESET_SECONDS",
                   "CB_HALF_OPEN_MAX_CALLS", "CB_SUCCESS_THRESHOLD", "RATE_LIMIT_QPS",
                   "RATE_LIMIT_BURST", "STORE_TIMEOUT"):
        assert "RESILIENT_VIRT_" + suffix in envs
    assert set(C.OPTION_KEYS) == {
        "retry_preset", "max_attempts", "base_delay", "max_delay", "multiplier", "deadline",
        "failure_threshold", "reset_timeout", "half_open_max_calls", "success_threshold",
        "rate_limit_qps", "rate_limit_burst", "timeout_describe", "timeout_mutating",
        "timeout_validate", "timeout_task_status", "store_timeout"}
    for s in C.SETTINGS:
        assert s.description and s.kind in ("duration", "duration?", "int", "float", "str", "choice")
        assert s.option == (s.key if s.key in ("state_store", "store_failure") else "resilience." + s.key)


def test_defaults():
    s = C.resolve_settings(None, environ={})
    assert s.retry == C.RetrySettings(5, 0.5, 30.0, 2.0)
    assert s.deadline is None and s.state_store is None
    assert s.breaker._asdict() == {"failure_threshold": 5, "reset_timeout": 30.0,
                                   "half_open_max_calls": 1, "success_threshold": 1}
    assert s.rate_limit == C.RateLimitSettings(qps=0.0, burst=1)
    assert [s.timeout_for(op) for op in C.OPERATION_CLASSES] == [30.0, 240.0, 10.0, 10.0]
    assert set(s.sources.values()) == {"default", "preset"}
    assert s.sources["max_attempts"] == "preset" and s.sources["failure_threshold"] == "default"


@pytest.mark.parametrize("name, numbers", [
    ("default", (5, 0.5, 30.0, 2.0)), ("aggressive", (10, 0.1, 30.0, 1.5)),
    ("conservative", (3, 1.0, 30.0, 3.0)), ("none", (1, 0.5, 30.0, 2.0))])
def test_presets(name, numbers):
    r = C.resolve_settings({"retry_preset": name}, environ={}).retry
    assert (r.max_attempts, r.base_delay, r.max_delay, r.multiplier) == numbers


def test_precedence_option_over_env_over_preset_over_default():
    env = {"RESILIENT_VIRT_RETRY_PRESET": "conservative",
           "RESILIENT_VIRT_RETRY_BASE_DELAY": "2s",
           "RESILIENT_VIRT_RETRY_MAX_ATTEMPTS": "7",
           "RESILIENT_VIRT_CB_FAILURE_THRESHOLD": "9",
           "RESILIENT_VIRT_RPC_TIMEOUT_DESCRIBE": "1m"}
    s = C.resolve_settings({"max_attempts": 4, "failure_threshold": None}, environ=env)
    assert s.retry_preset == "conservative" and s.sources["retry_preset"] == "env"
    assert (s.max_attempts, s.sources["max_attempts"]) == (4, "option")
    assert (s.base_delay, s.sources["base_delay"]) == (2.0, "env")
    assert (s.multiplier, s.sources["multiplier"]) == (3.0, "preset")
    assert (s.failure_threshold, s.sources["failure_threshold"]) == (9, "env")
    assert s.timeout_for("describe") == 60.0
    assert (s.timeout_mutating, s.sources["timeout_mutating"]) == (240.0, "default")


def test_option_preset_beats_env_preset_and_explicit_env_numbers_beat_both():
    env = {"RESILIENT_VIRT_RETRY_PRESET": "conservative", "RESILIENT_VIRT_RETRY_MULTIPLIER": "1.25"}
    s = C.resolve_settings({"retry_preset": "aggressive"}, environ=env)
    assert s.retry == C.RetrySettings(10, 0.1, 30.0, 1.25)


def test_empty_env_and_none_option_values_count_as_unset():
    env = {"RESILIENT_VIRT_RETRY_MAX_ATTEMPTS": "", "RESILIENT_VIRT_RATE_LIMIT_QPS": "  "}
    s = C.resolve_settings({"max_attempts": None, "deadline": None}, environ=env)
    assert s.max_attempts == 5 and s.rate_limit_qps == 0.0 and s.deadline is None


def test_state_store_from_option_or_env_and_hidden_in_dict():
    env = {"RESILIENT_VIRT_STATE_STORE": "redis://:pw@127.0.0.1:6379/0"}
    s = C.resolve_settings({}, environ=env)
    assert s.state_store == "redis://:pw@127.0.0.1:6379/0"
    assert "pw" not in s.to_dict()["state_store"]
    assert C.resolve_settings({}, environ=env, state_store="sqlite:////x.db").state_store == "sqlite:////x.db"


def test_deadline_forms():
    assert C.resolve_settings({"deadline": "10m"}, environ={}).deadline == 600.0
    for off in ("none", "None", 0, "0s"):
        assert C.resolve_settings({"deadline": off}, environ={}).deadline is None
    assert C.resolve_settings({}, environ={"RESILIENT_VIRT_RETRY_DEADLINE": "90"}).deadline == 90.0


def _rl(qps, burst):
    return C.RateLimitSettings(qps, burst)


def test_burst_defaults_to_one_second_of_calls():
    assert C.resolve_settings({"rate_limit_qps": 2.5}, environ={}).rate_limit == _rl(2.5, 3)
    assert C.resolve_settings({"rate_limit_qps": 0.2}, environ={}).rate_limit == _rl(0.2, 1)
    assert C.resolve_settings({"rate_limit_qps": "4", "rate_limit_burst": "8"},
                              environ={}).rate_limit == _rl(4.0, 8)
    assert C.resolve_settings({"rate_limit_burst": 0}, environ={}).rate_limit == _rl(0.0, 0)


def _error(option=None, env=None):
    with pytest.raises(InvalidSpec) as info:
        C.resolve_settings(option, environ=env or {})
    return info.value


def test_bad_env_value_names_the_variable_and_the_fix():
    err = _error(env={"RESILIENT_VIRT_RETRY_MAX_ATTEMPTS": "ten"})
    assert str(err) == ("RESILIENT_VIRT_RETRY_MAX_ATTEMPTS='ten' is not a whole number; "
                        "set it to e.g. 5")
    assert err.details == {"errors": [{"path": "RESILIENT_VIRT_RETRY_MAX_ATTEMPTS",
                                       "message": str(err)}]}


def test_bad_option_value_names_the_option_path():
    assert str(_error({"max_attempts": "3.5"})) == (
        "resilience.max_attempts='3.5' is not a whole number; set it to e.g. 5")
    assert str(_error({"rate_limit_qps": "fast"})).startswith(
        "resilience.rate_limit_qps='fast' is not a number")
    assert str(_error(env={"RESILIENT_VIRT_CB_RESET_SECONDS": "soon"})).startswith(
        "RESILIENT_VIRT_CB_RESET_SECONDS='soon' is not a duration")
    assert "one of aggressive, conservative, default, none" in str(_error({"retry_preset": "fast"}))


@pytest.mark.parametrize("key, value, rule", [
    ("max_attempts", 0, "at least 1"), ("base_delay", -1, "at least 0"),
    ("max_delay", -0.5, "at least 0"), ("multiplier", 0.9, "at least 1"),
    ("rate_limit_qps", -1, "at least 0"), ("failure_threshold", 0, "at least 1"),
    ("half_open_max_calls", 0, "at least 1"), ("success_threshold", 0, "at least 1"),
    ("reset_timeout", -1, "at least 0"), ("deadline", -5, "at least 0"),
    ("timeout_describe", 0, "more than 0"), ("timeout_mutating", "0s", "more than 0"),
])
def test_ranges(key, value, rule):
    err = _error({key: value})
    assert str(err).startswith("resilience.%s=%r must be %s; set it to e.g. " % (key, value, rule))


def test_burst_must_be_positive_when_rate_limited():
    err = _error({"rate_limit_qps": 5}, env={"RESILIENT_VIRT_RATE_LIMIT_BURST": "0"})
    assert str(err).startswith("RESILIENT_VIRT_RATE_LIMIT_BURST='0' must be at least 1 when")


def test_every_mistake_is_reported_at_once():
    err = _error({"max_attempts": 0, "multiplier": "x"}, env={"RESILIENT_VIRT_CB_RESET_SECONDS": "1 day"})
    paths = [e["path"] for e in err.details["errors"]]
    assert paths == ["resilience.max_attempts", "resilience.multiplier",
                     "RESILIENT_VIRT_CB_RESET_SECONDS"]


def test_unknown_keys_list_valid_keys_and_suggest():
    err = _error({"max_attempt": 3, "colour": "blue"})
    msg = str(err)
    assert msg.startswith("resilience has unknown keys 'colour', 'max_attempt'; valid keys: ")
    for key in C.OPTION_KEYS:
        assert key in msg
    assert "'max_attempt': did you mean 'max_attempts'?" in msg
    assert "state_store" not in msg.split("valid keys:")[1]


def test_option_must_be_a_dict():
    assert str(_error(["max_attempts"])).startswith("resilience must be a dictionary")


def test_timeout_for_unknown_class():
    with pytest.raises(ValueError, match="describe, mutating, validate, task_status"):
        C.resolve_settings({}, environ={}).timeout_for("reboot")


def test_uses_os_environ_by_default(monkeypatch):
    monkeypatch.setenv("RESILIENT_VIRT_CB_SUCCESS_THRESHOLD", "3")
    assert C.resolve_settings().success_threshold == 3
