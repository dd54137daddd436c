"""Promises kept under bad input, through real ansible-playbook runs on the lab.

- VM names that are path components (``.``, ``..``) or otherwise refused are rejected before
  any call, and a canary file in the hypervisor's own directories survives;
- a locked SQLite store, a frozen and a refusing Redis keep a task within its deadline plus a
  small margin, and a store failure is neither retried nor counted against the provider;
  with ``store_failure: closed`` the task fails with Unavailable naming the store, with ``open``
  (the default) it runs on with its breaker in memory and a warning, and the shared store is
  left as it was;
- a damaged SQLite store gives a clear error naming the store and the fix, never a traceback;
- values out of range, malformed catalogs, filters and failover inputs are InvalidSpec naming
  the field, and nothing is stored;
- ``https`` against a plain-HTTP endpoint is a TLS error with the fix, not retried.
"""
import os
import sqlite3
import subprocess
import sys
import time
import uuid

import pytest

from ansible_collections.resilient.virt.plugins.module_utils._resilience.breaker import (
    CircuitBreaker)
from ansible_collections.resilient.virt.plugins.module_utils._state.store import open_store
from playbook_runner import local_inventory, play, run_playbook

# A measured task runs after a baseline task (the same describe with a healthy store of its own) and
# its time is counted beyond the baseline's: what starting a module process costs on this machine
# now is left out, and MARGIN covers only how much that cost varies between two tasks of a play.
MARGIN = 3.0


def _provider(lab, name="hv1"):
    hv = lab.hypervisor(name)
    return {"type": "libvirt", "name": hv.name, "uri": hv.uri, "az": hv.az, "domain_type": "qemu"}


def _task(title, module="vm", **args):
    return {"name": title, "resilient.virt." + module: args, "ignore_errors": True}


def _domains(lab, name="hv1"):
    import libvirt

    conn = libvirt.open(lab.hypervisor(name).uri)
    try:
        return [dom.name() for dom in conn.listAllDomains(0)]
    finally:
        conn.close()


def _errors(result):
    return {e["path"] for e in result["error"].get("details", {}).get("errors", [])}


def test_names_that_libvirt_would_mishandle_are_refused_before_any_call(lab, tmp_path):
    qemu_dir = os.path.join(lab.hypervisor("hv1").dir, "lib", "qemu")
    canaries = [os.path.join(qemu_dir, "snapshot", "canary-%s" % uuid.uuid4().hex[:6]),
                os.path.join(qemu_dir, "canary-%s" % uuid.uuid4().hex[:6])]
    for path in canaries:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write("must survive\n")
    names = {".": "path component", "..": "path component", "   ": "whitespace",
             " web1": "whitespace", "a/b": "'/'", "nul\x00byte": "control character",
             "x" * 248: "bytes long"}
    before = _domains(lab)
    tasks = []
    for index, name in enumerate(names):
        for state in ("present", "running", "absent"):
            tasks.append(_task("%d %s" % (index, state), name=name, state=state, vcpus=1,
                               memory_mb=64))
        tasks.append(_task("%d info" % index, module="vm_info", name=name))
    defaults = {"provider": _provider(lab), "state_store": "sqlite:///%s" % (tmp_path / "s.db")}
    try:
        run = run_playbook(tmp_path, [play(tasks, module_defaults=defaults)])
        after = _domains(lab)
        for path in canaries:
            with open(path) as f:
                assert f.read() == "must survive\n", path
    finally:
        for path in canaries:
            if os.path.exists(path):
                os.unlink(path)
    assert sorted(after) == sorted(before), "a refused name created or removed a domain"
    assert "Traceback" not in run.output
    for index, why in enumerate(names.values()):
        for state in ("present", "running", "absent"):
            result = run.task("%d %s" % (index, state))
            if state == "absent" and why == "whitespace":  # looking one up is allowed
                assert result["changed"] is False, result
                continue
            assert result.failed and result["error"]["type"] == "InvalidSpec", result
            assert _errors(result) == {"name"}, result
            assert why in result["msg"], result
        info = run.task("%d info" % index)
        if why == "whitespace":
            assert info["vms"] == [], info
        else:
            assert info["error"]["type"] == "InvalidSpec", info


def test_vsphere_names_longer_than_vsphere_allows_are_refused(lab, vsphere, tmp_path):
    tasks = [_task("too long", provider=vsphere, name="v" * 81, vcpus=1, memory_mb=64),
             _task("longest", module="vm_info", provider=vsphere, name="v" * 80)]
    run = run_playbook(tmp_path, [play(tasks, module_defaults={
        "state_store": "sqlite:///%s" % (tmp_path / "s.db")})])
    assert run.task("too long")["error"]["type"] == "InvalidSpec"
    assert "at most 80" in run.task("too long")["msg"]
    assert run.task("longest")["vms"] == []  # a legal name that does not exist


# --- the state store within the deadline -------------------------------------------------

LOCKER = """
import sqlite3, sys, time
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
time.sleep(600)
"""


@pytest.fixture
def locked_sqlite(tmp_path):
    """A SQLite store in use (created by the collection) whose write lock another process holds."""
    from ansible_collections.resilient.virt.plugins.module_utils._state.store import open_store

    path = str(tmp_path / "locked.db")
    open_store("sqlite://" + path, environ={}).close()
    proc = subprocess.Popen([sys.executable, "-c", LOCKER, path], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "locked"
    yield "sqlite://" + path
    proc.kill()
    proc.wait()


def _after_baseline(lab, tmp_path, tasks):
    """The tasks after the baseline task of this machine's current speed."""
    baseline = _task("baseline", module="vm_info", provider=_provider(lab), name="none",
                     state_store="sqlite:///%s" % (tmp_path / "baseline.db"))
    return [baseline] + tasks


def _timed(run, title):
    """A task's result, and its time beyond the baseline task's."""
    result, baseline = run.task(title), run.task("baseline")
    assert result.duration is not None and not baseline.failed, (result, baseline)
    return result, result.duration - baseline.duration


FELL_BACK = "keeps its circuit breakers and rate limits in its own memory (store_failure=open)"


def _fell_back(result):
    return [w for w in result.get("warnings", []) if FELL_BACK in str(w)]


def _breaker_records(path):
    db = sqlite3.connect(path)
    try:
        return db.execute("SELECT key, value FROM records WHERE namespace = 'breakers'").fetchall()
    finally:
        db.close()


def test_a_locked_sqlite_store_keeps_the_task_within_its_deadline(lab, locked_sqlite, tmp_path):
    tasks = [_task("describe", module="vm_info", provider=_provider(lab), name="none",
                   state_store=locked_sqlite, store_failure="closed", resilience={"deadline": "3s"})]
    run = run_playbook(tmp_path, [play(_after_baseline(lab, tmp_path, tasks))])
    result, took = _timed(run, "describe")
    assert took < 3.0 + MARGIN, took  # was 16.3 s: the store waited 15 s on its own
    assert not result.failed, result  # the provider answered; only recording its answer failed
    assert any("not recorded in its circuit breaker" in str(w) for w in result["warnings"])


def test_a_locked_sqlite_store_under_the_open_policy_keeps_the_breaker_in_memory(lab, locked_sqlite, tmp_path):
    path = locked_sqlite[len("sqlite://"):]
    before = _breaker_records(path)  # readable: the lock only stops writers
    tasks = [_task("describe", module="vm_info", provider=_provider(lab), name="none",
                   state_store=locked_sqlite, resilience={"store_timeout": "1s"}),
             _task("again", module="vm_info", provider=_provider(lab), name="none",
                   state_store=locked_sqlite, resilience={"store_timeout": "1s"})]
    run = run_playbook(tmp_path, [play(_after_baseline(lab, tmp_path, tasks))])
    for title in ("describe", "again"):
        result, took = _timed(run, title)
        assert not result.failed and result["vms"] == [], result
        assert len(_fell_back(result)) == 1, result.get("warnings")  # once per task
        assert locked_sqlite in _fell_back(result)[0] and "locked" in _fell_back(result)[0]
        assert "not recorded" not in str(result.get("warnings"))
        assert "resilient_virt_breakers" not in result.get("ansible_facts", {})
        assert took < 1.0 + MARGIN, took  # one wait on the store, then memory
    assert _breaker_records(path) == before


@pytest.mark.parametrize("deadline", ["3s", "10s"])
def test_a_frozen_redis_keeps_the_task_within_its_deadline(lab, start_redis, tmp_path, deadline):
    server = start_redis()
    url = "redis://:%s@127.0.0.1:%d/0" % (server.password, server.port)
    server.freeze()
    tasks = [_task("describe", module="vm_info", provider=_provider(lab), name="none",
                   state_store=url, store_failure="closed", resilience={"deadline": deadline})]
    try:
        run = run_playbook(tmp_path, [play(_after_baseline(lab, tmp_path, tasks))])
    finally:
        server.thaw()
    result, took = _timed(run, "describe")
    limit = min(float(deadline[:-1]), 5.0)  # the deadline, or store_timeout (5 s) when shorter
    assert took < limit + MARGIN, took  # was 11.2 s and 16.8 s
    assert result["error"]["type"] == "Unavailable", result
    assert result["error"]["details"]["state_store"] == "redis://***@127.0.0.1:%d/0" % server.port
    assert result["error"]["details"]["attempts"] == 1  # a store outage is not retried
    assert "Traceback" not in run.output


def test_a_frozen_redis_under_the_open_policy_runs_on_after_one_wait(lab, start_redis, tmp_path):
    server = start_redis()
    url = "redis://:%s@127.0.0.1:%d/0" % (server.password, server.port)
    server.freeze()
    tasks = [_task("describe", module="vm_info", provider=_provider(lab), name="none",
                   state_store=url, resilience={"store_timeout": "2s"})]
    try:
        run = run_playbook(tmp_path, [play(_after_baseline(lab, tmp_path, tasks))])
    finally:
        server.thaw()
    result, took = _timed(run, "describe")
    assert not result.failed and result["vms"] == [], result
    assert took < 2.0 + MARGIN, took  # one store_timeout, not one per store operation
    warning = _fell_back(result)
    assert len(warning) == 1 and "redis://***@127.0.0.1:%d/0" % server.port in warning[0], warning
    assert server.password not in run.output
    assert server.keys_and_values() == ""  # nothing reached the store


@pytest.mark.parametrize("policy", ["closed", "open"])
def test_a_refusing_redis_spares_the_breaker(lab, start_redis, tmp_path, policy):
    """closed: the task fails at once, after one attempt; open: it runs at once, with the warning.
    The policy comes from the environment variable here (the option is tested above)."""
    server = start_redis()
    port = server.port
    server.stop()
    sqlite = "sqlite:///%s" % (tmp_path / "s.db")
    describe = _task("describe", module="vm_info", provider=_provider(lab), name="none",
                     state_store="redis://127.0.0.1:%d/0" % port)
    describe["environment"] = {"RESILIENT_VIRT_STORE_FAILURE": policy}
    tasks = [describe, _task("breakers", module="circuit_breaker", state_store=sqlite)]
    run = run_playbook(tmp_path, [play(_after_baseline(lab, tmp_path, tasks))])
    result, took = _timed(run, "describe")
    assert took < MARGIN, took  # was 9.3 s: the outage went through the provider's retries
    if policy == "closed":
        assert result["error"]["type"] == "Unavailable" and not result["error"]["retryable"]
        assert result["error"]["details"]["attempts"] == 1
        assert "redis://127.0.0.1:%d/0" % port in result["msg"]
    else:
        assert not result.failed and result["vms"] == [], result
        assert len(_fell_back(result)) == 1 and "Connection" in _fell_back(result)[0]
    assert run.task("breakers")["breakers"] == []


def test_a_damaged_sqlite_store_is_a_clear_error(lab, tmp_path):
    path = str(tmp_path / "state.db")
    store = "sqlite://" + path
    filled = open_store(store, environ={})  # records over more pages than the schema's
    for index in range(60):
        CircuitBreaker(filled, "libvirt:filler-%d" % index).force_open()
    filled.close()
    db = sqlite3.connect(path)
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    root = db.execute("SELECT rootpage FROM sqlite_master WHERE name = 'records'").fetchone()[0]
    page_size, pages = (db.execute("PRAGMA page_size").fetchone()[0],
                        db.execute("PRAGMA page_count").fetchone()[0])
    db.close()
    with open(path, "r+b") as f:  # garbage over the records' pages, the schema intact
        for page in range(root, pages + 1):
            f.seek((page - 1) * page_size)
            f.write(b"\xa5" * page_size)
    tasks = [_task("describe", module="vm_info", provider=_provider(lab), name="none",
                   state_store=store, store_failure="closed"),
             _task("breakers", module="circuit_breaker", state_store=store),
             _task("open", module="vm_info", provider=_provider(lab), name="none", state_store=store)]
    run = run_playbook(tmp_path, [play(tasks)])
    assert "Traceback" not in run.output and "MODULE FAILURE" not in run.output, run
    for title in ("describe", "breakers"):  # a breaker set by hand needs the store, whatever the policy
        result = run.task(title)
        assert result["error"]["type"] == "Unavailable", result
        assert "state store %s is damaged" % store in result["msg"], result
        assert "mv %s %s.damaged" % (path, path) in result["msg"]
        assert result["msg"].count("is damaged") == 1  # the message once
    warning = _fell_back(run.task("open"))
    assert not run.task("open").failed and len(warning) == 1, run.task("open")
    assert "mv %s %s.damaged" % (path, path) in warning[0]


# --- concurrent tasks on one VM ------------------------------------------------------------

def test_twenty_forks_on_one_vm_all_succeed(lab, tmp_path):
    name = "it-forks-%s" % uuid.uuid4().hex[:6]
    hosts = ["f%02d" % i for i in range(20)]
    defaults = {"provider": _provider(lab, "hv2"), "state_store": "sqlite:///%s" % (tmp_path / "s.db")}
    running = {"name": name, "vcpus": 1, "memory_mb": 64, "state": "running"}
    plays = [play([{"name": "running", "resilient.virt.vm": running}],
                  hosts="all", module_defaults=defaults),
             play([{"name": "absent", "resilient.virt.vm": {"name": name, "state": "absent"}}],
                  hosts="all", module_defaults=defaults)]
    try:
        run = run_playbook(tmp_path, plays, inventory=local_inventory(hosts), forks=20)
    finally:
        import libvirt

        conn = libvirt.open(lab.hypervisor("hv2").uri)
        for dom in conn.listAllDomains(0):
            if dom.name() == name:
                if dom.isActive():
                    dom.destroy()
                dom.undefine()
        conn.close()
    assert run.rc == 0, run
    for title in ("running", "absent"):
        results = [run.task(title, host) for host in hosts]
        assert not [r for r in results if r.failed], [r for r in results if r.failed][:2]
        assert any(r["changed"] for r in results), title
    for result in (run.task("running", host) for host in hosts):
        assert result["vm"]["state"] == "running"
        assert result["vm"]["uuid"] == run.task("running", hosts[0])["vm"]["uuid"]  # one VM
    assert sum(1 for h in hosts if "create" in run.task("running", h)["actions"]) == 1
    assert sum(1 for h in hosts if "delete" in run.task("absent", h)["actions"]) == 1
    assert name not in _domains(lab, "hv2")


# --- values out of range and malformed input -----------------------------------------------

def test_out_of_range_and_malformed_input_is_invalid_spec_and_stores_nothing(lab, tmp_path):
    path = tmp_path / "s.db"
    provider = _provider(lab)
    given = {"hypervisors": [{"name": "h1", "az": "a", "cpu": 8, "memory_mb": 8192},
                             {"name": "h2", "az": "a", "cpu": 8, "memory_mb": 8192}],
             "vms": [{"uuid": "u1", "host": "h1", "az": "a", "flavor": "small", "vcpus": 1,
                      "memory_mb": 512}]}
    cases = {
        "reset_timeout 1e300": ("vm_info", {"provider": provider, "name": "x",
                                            "resilience": {"reset_timeout": 1e300}},
                                "resilience.reset_timeout"),
        "timeout 99999999h": ("vm_info", {"provider": provider, "name": "x",
                                          "resilience": {"timeout_describe": "99999999h"}},
                              "resilience.timeout_describe"),
        "catalog entry not a dict": ("vm_info", {"provider": "a", "providers": {"a": "notadict"}},
                                     "providers.a"),
        "filter state": ("vm_info", {"provider": provider, "filters": {"state": "weird"}}, None),
        "negative max_vms": ("failover_reservation", dict(given, requirements={"*": 1},
                                                          max_vms_to_process=-3),
                             "max_vms_to_process"),
        "trait maybe": ("failover_reservation", dict(
            given, requirements={"*": 1},
            vms=[dict(given["vms"][0], extra_specs={"trait:SSD": "maybe"})]),
            "vms[0].extra_specs['trait:SSD']"),
        "vm on unknown host": ("failover_reservation", dict(
            given, requirements={"*": 1}, vms=[dict(given["vms"][0], host="h9")]),
            "vms[0].host"),
        "unknown failed host": ("failover_reservation", dict(
            given, state="evacuated", failed_hosts=["h9"]), "failed_hosts[0]"),
        "failed host turned around": ("failover_reservation", dict(
            given, state="evacuated", failed_hosts=["h1", "h\u202e2"]), "failed_hosts[1]"),
        "hypervisor name with a newline": ("failover_reservation", dict(
            given, requirements={"*": 1},
            hypervisors=[dict(given["hypervisors"][0], name="h1\nh2")]), "hypervisors[0].name"),
    }
    tasks = [_task(title, module=module, **args) for title, (module, args, _path) in cases.items()]
    run = run_playbook(tmp_path, [play(tasks, module_defaults={"state_store": "sqlite:///%s" % path})])
    assert "Traceback" not in run.output
    for title, (_module, _args, field) in cases.items():
        result = run.task(title)
        assert result.failed and result["error"]["type"] == "InvalidSpec", result
        if field is not None:
            assert field in _errors(result) or field in result["msg"], result
    assert "filters" in run.task("filter state")["msg"]
    assert "direction-changing" in run.task("failed host turned around")["msg"]
    assert "control character" in run.task("hypervisor name with a newline")["msg"]
    if path.exists():  # nothing stored: no breaker, no reservation
        db = sqlite3.connect(str(path))
        assert db.execute("SELECT count(*) FROM records").fetchone()[0] == 0
        db.close()


def test_https_against_a_plain_http_endpoint_is_a_tls_error_with_the_fix(lab, vsphere_plain_http, tmp_path):
    vsphere = vsphere_plain_http
    tasks = [_task("https", module="provider", provider=dict(vsphere, protocol="https"))]
    began = time.monotonic()
    run = run_playbook(tmp_path, [play(tasks, module_defaults={
        "state_store": "sqlite:///%s" % (tmp_path / "s.db")})])
    result = run.task("https")
    assert result["error"]["type"] == "InvalidSpec", result
    assert "TLS handshake failed" in result["msg"] and "check the port" in result["msg"]
    assert result["error"]["details"]["attempts"] == 1  # not retried
    assert time.monotonic() - began < 30
    assert vsphere["password"] not in run.output


def test_a_frozen_redis_under_the_open_policy_leaves_the_provider_its_deadline(lab, start_redis, tmp_path):
    """store_failure: open, a frozen Redis and a deadline shorter than store_timeout: the store
    costs at most its share of the deadline, and the healthy provider answers within it."""
    server = start_redis()
    url = "redis://:%s@127.0.0.1:%d/0" % (server.password, server.port)
    server.freeze()
    tasks = [_task("describe", module="vm_info", provider=_provider(lab), store_failure="open",
                   state_store=url, resilience={"deadline": "3s"})]
    try:
        run = run_playbook(tmp_path, [play(_after_baseline(lab, tmp_path, tasks))])
    finally:
        server.thaw()
    result, took = _timed(run, "describe")
    assert not result.failed, result  # was: Timeout ... no time left before the deadline, 3.09 s
    assert isinstance(result["vms"], list)
    assert len(_fell_back(result)) == 1, result.get("warnings")
    assert took < 3.0 + MARGIN, took
    assert server.password not in run.output
