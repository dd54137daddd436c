"""Scanning providers for the inventory: answers, time limits, concurrency, breakers, the cache.

Providers are libvirt's test:///default driver (in process), SilentDaemon sockets (a libvirtd
that accepts and never answers: a real hang) and URIs nobody listens on.
"""
import time

import pytest
from provider_testing import TEST_URI, SilentDaemon, quick_settings

from ansible_collections.resilient.virt.plugins.module_utils._inventory.scan import (
    check_vm_filters, failed_answers, scan, with_cache)
from ansible_collections.resilient.virt.plugins.module_utils._resilience.breaker import (
    CircuitBreaker)
from ansible_collections.resilient.virt.plugins.module_utils._state.memory import MemoryStore
from ansible_collections.resilient.virt.plugins.module_utils.errors import (
    InvalidSpec, StoreUnavailable)

TEST = {"type": "libvirt", "uri": TEST_URI, "az": "az1"}


def _scan(providers, store, **kwargs):
    kwargs.setdefault("timeout", 10.0)
    settings = quick_settings(deadline="%gs" % kwargs["timeout"])
    return scan(providers, lambda name: settings, store, **kwargs)


@pytest.fixture
def silent(tmp_path):
    daemons = []

    def make(name):
        daemons.append(SilentDaemon(str(tmp_path / (name + ".sock"))))
        return {"type": "libvirt", "uri": "qemu+unix:///system?socket=" + daemons[-1].path}

    yield make
    for daemon in daemons:
        daemon.close()


def test_one_answer_per_provider_in_name_order(store):
    answers = _scan({"b": TEST, "a": dict(TEST, az="az2")}, store, include_vms=True)
    assert [a["name"] for a in answers] == ["a", "b"]
    for answer in answers:
        assert answer["ok"] and answer["error"] is None and not answer["stale"]
        assert answer["type"] == "libvirt" and answer["key"] == "libvirt:" + answer["name"]
        assert answer["breaker"] == "closed"
        # the test driver holds one host and one running domain, "test"
        assert [h["name"] for h in answer["hypervisors"]] == [answer["name"]]
        assert [(vm["name"], vm["state"]) for vm in answer["vms"]] == [("test", "running")]
    assert answers[0]["hypervisors"][0]["az"] == "az2"


def test_vm_details_only_when_asked(store):
    summary = _scan({"a": TEST}, store, include_vms=True)[0]["vms"][0]
    detailed = _scan({"a": TEST}, store, include_vms=True, details=True)[0]["vms"][0]
    # libvirt reads the whole definition either way; the summary is allowed to be lighter
    assert summary["name"] == detailed["name"] == "test"
    assert detailed["interfaces"] and detailed["disks"] is not None


def test_vms_only_when_asked_and_filtered_by_the_provider(store):
    assert _scan({"a": TEST}, store)[0]["vms"] == []
    answer = _scan({"a": TEST}, store, include_vms=True, vm_filters={"state": "stopped"})[0]
    assert answer["ok"] and answer["vms"] == []
    answer = _scan({"a": TEST}, store, include_vms=True, vm_filters={"name": "t*"})[0]
    assert [vm["name"] for vm in answer["vms"]] == ["test"]


def test_a_failed_provider_is_an_answer_with_its_error_and_no_secret(store):
    providers = {"good": TEST,
                 "gone": {"type": "libvirt", "uri": "qemu+tcp://admin:S3cretPass@127.0.0.1:1/system"}}
    answers = {a["name"]: a for a in _scan(providers, store)}
    assert answers["good"]["ok"]
    gone = answers["gone"]
    assert not gone["ok"] and gone["hypervisors"] == [] and gone["error"]["type"] == "Unavailable"
    assert "S3cretPass" not in str(gone)


def test_a_hung_provider_costs_its_timeout_not_more(store, silent):
    # 3 s: room for the good provider's answer (a breaker update on a Redis Cluster among
    # them) on a machine loaded by a whole suite
    began = time.monotonic()
    answers = {a["name"]: a for a in _scan({"hung": silent("hung"), "good": TEST}, store,
                                           timeout=3.0)}
    took = time.monotonic() - began
    assert 3.0 <= took < 3.0 + 2.0, took
    assert answers["good"]["ok"], answers["good"]
    assert answers["hung"]["error"]["type"] == "Timeout", answers["hung"]
    assert "3s" in answers["hung"]["error"]["message"]


def test_a_provider_cut_off_while_retrying_answers_with_the_error_it_retried(store):
    # a refused port fails at once and is retried after 30 s: the inventory stops waiting first
    settings = quick_settings(base_delay="30s", max_delay="30s", max_attempts=5)
    refused = {"type": "libvirt", "uri": "qemu+tcp://admin:S3cretPass@127.0.0.1:1/system"}
    answer = scan({"refused": refused}, lambda name: settings, store, timeout=1.0)[0]
    assert not answer["ok"] and answer["error"]["type"] == "Unavailable", answer
    message = answer["error"]["message"]
    assert message.endswith("(still failing when the inventory's timeout of 1s ran out)"), message
    assert "S3cretPass" not in str(answer)


def test_providers_are_asked_at_the_same_time(silent):
    # the memory store: what is measured is the scan's own concurrency, not a store's answers
    # (a Redis Cluster on a loaded machine could fail a provider before its call hangs)
    store = MemoryStore("scan")
    providers = dict(("hung%d" % i, silent("hung%d" % i)) for i in range(4))
    began = time.monotonic()
    answers = _scan(providers, store, timeout=1.0, concurrency=4)
    at_once = time.monotonic() - began
    began = time.monotonic()
    alone = _scan(providers, store, timeout=1.0, concurrency=1)
    one_by_one = time.monotonic() - began
    assert all(a["error"]["type"] == "Timeout" for a in answers + alone), answers + alone
    assert one_by_one >= 4.0, one_by_one         # the sum
    assert at_once < one_by_one / 2, (at_once, one_by_one)  # about the slowest one: a ratio,
    # which holds on a loaded machine where both take longer


def test_an_open_breaker_answers_at_once_without_reaching_the_provider(store, silent):
    CircuitBreaker(store, "libvirt:hung").force_open()
    began = time.monotonic()
    answer = _scan({"hung": silent("hung")}, store, timeout=5.0)[0]
    assert time.monotonic() - began < 2.0
    assert answer["error"]["type"] == "BreakerOpen" and answer["breaker"] == "open"


def test_bad_provider_settings_are_invalid_spec_answers(store):
    answers = {a["name"]: a for a in _scan({"bad": {"type": "nosuch"}, "good": TEST}, store)}
    assert answers["bad"]["error"]["type"] == "InvalidSpec" and answers["good"]["ok"]
    with pytest.raises(InvalidSpec, match="providers.x"):
        _scan({"x": "not a dict"}, store)
    with pytest.raises(InvalidSpec, match="providers"):
        _scan({}, store)


def test_vm_filters_are_checked():
    check_vm_filters({"name": "a*", "state": "running"})
    with pytest.raises(InvalidSpec) as info:
        check_vm_filters({"colour": "blue"})
    assert [e["path"] for e in info.value.details["errors"]] == ["vm_filters.colour"]


def test_failed_answers_when_the_store_cannot_open():
    answers = failed_answers({"b": TEST, "a": {"type": "vsphere"}},
                             StoreUnavailable("redis://***@h:1/0", "refused the connection"))
    assert [(a["name"], a["type"], a["ok"], a["error"]["type"]) for a in answers] == [
        ("a", "vsphere", False, "Unavailable"), ("b", "libvirt", False, "Unavailable")]


# --- the cache --------------------------------------------------------------------------------

def _answer(name, ok=True, error=None, at=1000.0):
    return {"name": name, "type": "libvirt", "key": "libvirt:" + name, "ok": ok,
            "error": error, "hypervisors": [{"name": name}] if ok else [], "vms": [],
            "breaker": "closed", "stale": False, "seconds": 0.1, "scanned_at": at}


def test_a_good_answer_is_used_and_kept():
    fresh = _answer("a", at=2000.0)
    used, keep = with_cache([fresh], {"a": _answer("a")}, now=2000.0)
    assert used == [fresh] and keep == {"a": fresh}


def test_a_failed_provider_falls_back_to_its_last_good_answer_marked_stale():
    down = _answer("a", ok=False, error={"type": "Unavailable", "message": "refused"}, at=2000.0)
    down["breaker"] = "open"
    old = _answer("a", at=1958.0)
    used, keep = with_cache([down], {"a": old}, now=2000.0)
    assert used[0]["stale"] and used[0]["ok"] and used[0]["hypervisors"] == [{"name": "a"}]
    assert used[0]["age_seconds"] == 42.0 and used[0]["error"]["type"] == "Unavailable"
    assert used[0]["breaker"] == "open"
    assert keep == {"a": old}  # the good answer stays, with its own time


def test_no_cache_means_no_hosts_and_configuration_errors_are_never_hidden():
    down = _answer("a", ok=False, error={"type": "Unavailable", "message": "refused"})
    assert with_cache([down], None) == ([down], {})
    bad = _answer("b", ok=False, error={"type": "InvalidSpec", "message": "provider.uri"})
    used, keep = with_cache([bad], {"b": _answer("b")})
    assert used == [bad] and keep == {}


def test_providers_no_longer_listed_leave_the_cache():
    used, keep = with_cache([_answer("a")], {"a": _answer("a"), "gone": _answer("gone")})
    assert sorted(keep) == ["a"]
