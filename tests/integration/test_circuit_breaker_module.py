"""resilient.virt.circuit_breaker through real ansible-playbook runs on a SQLite state store."""
import calendar
import time

from ansible_collections.resilient.virt.plugins.module_utils._resilience.breaker import list_breakers
from ansible_collections.resilient.virt.plugins.module_utils._state.store import open_store

from playbook_runner import play, run_playbook

BREAKER = "libvirt:maint-hv"
CB = "resilient.virt.circuit_breaker"


def _store_url(tmp_path):
    return "sqlite:///%s" % (tmp_path / "state.db")


PROVIDER = {"type": "libvirt", "name": "maint-hv", "uri": "qemu+tcp://maint-hv/system"}
OTHER = {"type": "libvirt", "name": "other-hv", "uri": "qemu+tcp://other-hv/system"}
RFC3339 = "%Y-%m-%dT%H:%M:%SZ"


def _epoch(text):
    return calendar.timegm(time.strptime(text, RFC3339))


def test_open_reset_remove_query_with_check_and_diff(tmp_path):
    url = _store_url(tmp_path)
    tasks = [
        {"name": "query empty", CB: {}},
        {"name": "open a typo", CB: {"name": BREAKER, "state": "open"}, "ignore_errors": True},
        {"name": "reset a typo", CB: {"name": BREAKER, "state": "reset"}, "ignore_errors": True},
        {"name": "open in check mode", CB: {"provider": PROVIDER, "state": "open"}, "check_mode": True},
        {"name": "query after check mode", CB: {}},
        {"name": "open", CB: {"provider": PROVIDER, "state": "open",
                              "resilience": {"reset_timeout": "90s"}}},
        {"name": "open again", CB: {"name": BREAKER, "state": "open"}},
        {"name": "query by name", CB: {"name": BREAKER}},
        {"name": "fact is set", "ansible.builtin.debug": {"var": "resilient_virt_breakers"}},
        {"name": "reset", CB: {"name": BREAKER, "state": "reset"}},
        {"name": "reset again", CB: {"name": BREAKER, "state": "reset"}},
        {"name": "open another", CB: {"provider": OTHER, "state": "open"}},
        {"name": "remove in check mode", CB: {"name": BREAKER, "state": "absent"}, "check_mode": True},
        {"name": "remove", CB: {"name": BREAKER, "state": "absent"}},
        {"name": "remove again", CB: {"name": BREAKER, "state": "absent"}},
        {"name": "query missing", CB: {"name": "libvirt:no-such-breaker"}, "ignore_errors": True},
    ]
    run = run_playbook(tmp_path, [play(tasks, module_defaults={"state_store": url})], diff=True)
    assert run.rc == 0, run
    assert "Traceback" not in run.output

    empty = run.task("query empty")
    assert empty["changed"] is False and empty["breakers"] == []
    assert empty["ansible_facts"]["resilient_virt_breakers"] == {}

    for typo in ("open a typo", "reset a typo"):
        refused = run.task(typo)
        assert refused.failed and refused["error"]["type"] == "NotFound", refused
        assert BREAKER in refused["msg"] and "'provider'" in refused["msg"]

    planned = run.task("open in check mode")
    assert planned["changed"] is True and planned["breaker"]["state"] == "open"
    assert run.task("query after check mode")["breakers"] == [], "a refusal or check mode wrote"

    opened = run.task("open")
    assert opened["changed"] is True
    assert opened["diff"]["before"]["state"] == "closed"
    assert opened["diff"]["after"]["state"] == "open"
    assert opened["diff"]["after"]["opened_total"] == 1
    assert opened["ansible_facts"]["resilient_virt_breakers"][BREAKER]["state"] == "open"
    breaker = opened["breaker"]
    assert _epoch(breaker["half_open_at"]) - _epoch(breaker["opened_at"]) in (90, 91), breaker

    again = run.task("open again")
    assert again["changed"] is False and "diff" not in again.result
    assert again["breaker"]["opened_total"] == 1

    shown = run.task("query by name")
    assert shown["breaker"]["name"] == BREAKER and shown["breaker"]["state"] == "open"
    assert [b["name"] for b in shown["breakers"]] == [BREAKER]
    fact = run.task("fact is set")["resilient_virt_breakers"]
    assert fact == {BREAKER: {"state": "open", "consecutive_failures": 0,
                              "half_open_at": breaker["half_open_at"], "last_error": None}}

    reset = run.task("reset")
    assert reset["changed"] is True
    assert reset["diff"]["before"]["state"] == "open" and reset["diff"]["after"]["state"] == "closed"
    assert reset["breaker"]["state"] == "closed" and reset["breaker"]["opened_total"] == 1
    assert reset["breaker"]["half_open_at"] is None and reset["breaker"]["opened_at"] is None
    assert run.task("reset again")["changed"] is False

    # a task about one breaker publishes every breaker of the store
    other = run.task("open another")["ansible_facts"]["resilient_virt_breakers"]
    assert sorted(other) == [BREAKER, "libvirt:other-hv"]
    assert (other[BREAKER]["state"], other["libvirt:other-hv"]["state"]) == ("closed", "open")

    planned = run.task("remove in check mode")
    assert planned["changed"] is True and planned["breaker"] is None
    removed = run.task("remove")
    assert removed["changed"] is True and removed["breaker"] is None
    assert removed["diff"]["before"]["name"] == BREAKER and removed["diff"]["after"] == {}
    assert [b["name"] for b in removed["breakers"]] == []
    assert sorted(removed["ansible_facts"]["resilient_virt_breakers"]) == ["libvirt:other-hv"]
    assert run.task("remove again")["changed"] is False

    missing = run.task("query missing")
    assert missing.failed and missing["error"]["type"] == "NotFound"
    assert "libvirt:no-such-breaker" in missing["msg"]

    assert [(b["name"], b["state"]) for b in _breakers(tmp_path)] == [("libvirt:other-hv", "open")]


def test_bad_environment_value_fails_cleanly_naming_the_variable(tmp_path):
    tasks = [{"name": "open with a bad threshold", CB: {"name": BREAKER, "state": "open"},
              "ignore_errors": True}]
    run = run_playbook(tmp_path, [play(tasks, module_defaults={"state_store": _store_url(tmp_path)})],
                       env={"RESILIENT_VIRT_CB_FAILURE_THRESHOLD": "ten"})
    assert "Traceback" not in run.output
    failed = run.task("open with a bad threshold")
    assert failed.failed and failed["error"]["type"] == "InvalidSpec"
    assert "RESILIENT_VIRT_CB_FAILURE_THRESHOLD" in failed["msg"]
    assert "ten" in failed["msg"]
    assert _breakers(tmp_path) == [], "a task that failed validation changed a breaker"


def _breakers(tmp_path):
    store = open_store(_store_url(tmp_path))
    try:
        return list_breakers(store)
    finally:
        store.close()
