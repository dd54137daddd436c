"""Bad inputs a user can give, module by module: each is InvalidSpec naming the field by its
path, before any provider is contacted (the tripwire plugin sees every attempt) and before the
state store is opened (its file is never created), and an identical rerun fails the same way."""
import os

import pytest

from tests.unit.modules import tripwire
from tests.unit.modules.test_fuzz import GOOD_PROVIDER, MODULES, run_module

FLEET = {"provider": GOOD_PROVIDER, "owner": "o"}
VM = {"provider": GOOD_PROVIDER, "vcpus": 1, "memory_mb": 64}
GIVEN_FLEET = {"hypervisors": [{"name": "h1", "az": "a", "cpu": 8, "memory_mb": 8192}],
               "vms": [], "requirements": {"*": 1}}
RLO, ZWSP = "\u202e", "\u200b"

CASES = [
    # vm_fleet: the whole list, by path
    ("vm_fleet", dict(FLEET, vms=[{"name": "a\x01b", "vcpus": 1, "memory_mb": 64}]), "vms[0].name"),
    ("vm_fleet", dict(FLEET, vms=[{"name": "x" * 10000, "vcpus": 1, "memory_mb": 64}]), "vms[0].name"),
    ("vm_fleet", dict(FLEET, vms=[{"name": "web" + RLO + "1", "vcpus": 1, "memory_mb": 64}]), "vms[0].name"),
    ("vm_fleet", dict(FLEET, vms=[{"name": "ok", "vcpus": 1, "memory_mb": 64},
                                  {"name": "we" + ZWSP + "b", "vcpus": 1, "memory_mb": 64}]), "vms[1].name"),
    ("vm_fleet", dict(FLEET, vms=[{"name": "a", "vcpus": 10 ** 30, "memory_mb": 64}]), "vms[0].vcpus"),
    ("vm_fleet", dict(FLEET, vms=[{"name": "a", "vcpus": 1, "memory_mb": 1e308}]), "vms[0].memory_mb"),
    ("vm_fleet", dict(FLEET, vms=[{"name": "a", "vcpus": 1, "memory_mb": 64,
                                   "disks": [{"size_gb": 10 ** 12}]}]), "vms[0].disks[0].size_gb"),
    ("vm_fleet", dict(FLEET, vms=[{"name": "a", "vcpus": 1, "memory_mb": 64,
                                   "tags": ["t" + RLO]}]), "vms[0].tags[0]"),
    ("vm_fleet", dict(FLEET, vms=[{"name": "a", "vcpus": 1, "memory_mb": 64,
                                   "metadata": {"k": {"deep": {"er": 1}}}}]), "vms[0].metadata.k"),
    ("vm_fleet", dict(FLEET, vms=[{"name": "a", "vcpus": 1, "memory_mb": 64,
                                   "metadata": {"k" * 300: "v"}}]), "vms[0].metadata"),
    ("vm_fleet", dict(FLEET, vms=[], max_prune=10 ** 20), "max_prune"),
    ("vm_fleet", dict(FLEET, vms=[], concurrency=10 ** 6), "concurrency"),
    ("vm_fleet", dict(FLEET, vms=[], max_attempts=10 ** 6), "max_attempts"),
    ("vm_fleet", dict(FLEET, vms=[], shutdown_timeout="-1"), "shutdown_timeout"),
    # vm: the same checks of the same fields
    ("vm", dict(VM, name="web" + RLO + "1"), "name"),
    ("vm", dict(VM, name="we" + ZWSP + "b", state="absent"), "name"),
    ("vm", dict(VM, name="x" * 10000), "name"),
    ("vm", dict(VM, name="a", vcpus=10 ** 30), "vcpus"),
    ("vm", dict(VM, name="a", memory_mb=10 ** 30), "memory_mb"),
    ("vm", dict(VM, name="a", disks=[{"size_gb": 10 ** 12}]), "disks[0].size_gb"),
    ("vm", dict(VM, name="a", metadata={"k": [1, 2]}), "metadata.k"),
    ("vm_info", {"provider": GOOD_PROVIDER, "name": "we" + ZWSP + "b"}, "name"),
    # checks that came too late or not at all
    ("failover_reservation", dict(GIVEN_FLEET, creator="c" * 10000), "creator"),
    ("failover_reservation", dict(GIVEN_FLEET, creator="team\x00a"), "creator"),
    ("failover_reservation", dict(GIVEN_FLEET, max_changes=10 ** 20), "max_changes"),
    ("failover_reservation", dict(GIVEN_FLEET, hypervisors=[dict(GIVEN_FLEET["hypervisors"][0],
                                                                 name="h" + RLO + "1")]),
     "hypervisors[0].name"),
    ("failover_reservation", dict(GIVEN_FLEET, state="evacuated", failed_hosts=["h1" + ZWSP]),
     "failed_hosts[0]"),
    ("failover_reservation", dict(GIVEN_FLEET, state="evacuated", failed_hosts=["h1"],
                                  priorities=[{"match": "db-*", "priority": "high"}]),
     "priorities[0].priority"),
    ("failover_reservation", dict(GIVEN_FLEET, state="evacuated", failed_hosts=["h1"],
                                  priorities=[{"match": "db-[*", "priority": 1}]),
     "priorities[0].match"),
    ("failover_reservation", dict(GIVEN_FLEET, state="evacuated", failed_hosts=["h1"],
                                  restore_from_backup=[{"match": "db-*", "from": "last"}]),
     "restore_from_backup[0].from"),
    ("backup_status", {"phase": ["Bogus"]}, "phase[0]"),
    ("backup_status", {"mode": "wait", "name": "nothing-such", "timeout": -1}, "timeout"),
    ("backup", {"provider": GOOD_PROVIDER, "vm": "test", "keep_last": 10 ** 20}, "keep_last"),
    ("backup", {"provider": GOOD_PROVIDER, "vm": "test", "state": "restored",
                "target": "new\x07vm"}, "target"),
    ("backup", {"provider": GOOD_PROVIDER, "vm": "te" + RLO + "st"}, "vm"),
    ("circuit_breaker", {"resilience": "fast"}, "resilience"),
    ("circuit_breaker", {"name": "libvirt:hv1\x00", "state": "open"}, "name"),
    ("circuit_breaker", {"name": "libvirt:" + "h" * 10000, "state": "open"}, "name"),
    ("circuit_breaker", {"name": "libvirt:hv" + RLO + "1", "state": "reset"}, "name"),
    ("vm_info", {"provider": "a", "providers": {"a": GOOD_PROVIDER, "b": "notadict"}}, "providers.b"),
]


@pytest.fixture
def tripped(monkeypatch):
    monkeypatch.setenv("RESILIENT_VIRT_PLUGINS", tripwire.REFERENCE)
    del tripwire.CALLS[:]
    return tripwire.CALLS


def _paths(result):
    return {e["path"] for e in (result["error"].get("details") or {}).get("errors", [])}


@pytest.mark.parametrize("name, args, path", CASES, ids=["%s-%s-%d" % (c[0], c[2], i) for i, c in enumerate(CASES)])
def test_a_bad_input_names_its_field_and_contacts_nothing(name, args, path, tripped, tmp_path):
    store = tmp_path / "state.db"
    for attempt in ("first", "identical rerun"):
        result, printed = run_module(MODULES[name], dict(args, state_store="sqlite://%s" % store))
        assert result.get("failed") and result["error"]["type"] == "InvalidSpec", (attempt, printed)
        assert "Traceback" not in printed
        assert path in _paths(result) or ("%s:" % path) in result["msg"], (attempt, result["msg"])
        assert tripped == [], "a provider was contacted: %s" % tripped
        assert not os.path.exists(store), "the state store was opened for a bad input"
    assert len(result["msg"]) < 2000, "the message echoes the input whole: %d characters" % len(result["msg"])


def test_the_tripwire_sees_a_good_call(tripped, tmp_path):
    """The control: a valid call reaches the provider, and the tripwire records it."""
    result, printed = run_module(MODULES["vm_info"], {"provider": GOOD_PROVIDER,
                                                      "state_store": "sqlite://%s" % (tmp_path / "s.db")})
    assert not result.get("failed"), printed
    assert tripped, "the tripwire saw no attempt: it cannot prove the others"


@pytest.mark.parametrize("name", ["web1", "db-2.example", "Ünïcode name", "a" * 200])
def test_good_names_pass_the_shared_check(name):
    from ansible_collections.resilient.virt.plugins.module_utils._input import text_problem

    assert text_problem(name) is None
