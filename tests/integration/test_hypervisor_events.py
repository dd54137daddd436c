"""The hypervisor_events source against a real libvirtd and QEMU of its own, and under a real
ansible-rulebook.

A lab of one hypervisor in the test's own directory (its libvirtd is killed, frozen and
restarted here, which no other test may see); guests are tiny diskless TCG domains whose QEMU
process the test kills to make a crash. The oracle is what the test did itself: which process
it killed, which daemon it stopped, and libvirt's own answer for a domain's UUID.
"""
import asyncio
import glob
import json
import logging
import os
import signal
import sqlite3
import subprocess
import time

import libvirt
import pytest
import waiting
import yaml
from event_source_process import SourceProcess
from playbook_runner import local_inventory
from playbook_runner import store_records as read_records
from redis_server import REDIS_PASSWORD

from paths import COLLECTIONS

pytestmark = pytest.mark.lab

HERE = os.path.dirname(os.path.abspath(__file__))
PLUGIN = os.path.join(COLLECTIONS, "ansible_collections", "resilient", "virt", "extensions",
                      "eda", "plugins", "event_source", "hypervisor_events.py")
NAMESPACE = "hypervisor_events"
WAIT = 60.0  # seconds for anything the test waits for: generous on a loaded machine
FAST = {"base_delay": 0.2, "max_delay": 1, "failure_threshold": 3, "reset_timeout": 2,
        "timeout_validate": 5}
JAVA_HOMES = sorted(glob.glob("/usr/lib/jvm/java-17-openjdk-*"))  # openjdk-17-jre-headless
SECRET = "sasl-Secret-0815"  # a SASL password the daemon never asks for: kept out of every output


@pytest.fixture(scope="module")
def hypervisor(tmp_path_factory, lab_module, domain_xml):
    """hv1 of a lab of its own: (lab, hypervisor, domain_xml); taken down at the end."""
    the_lab = lab_module.Lab(str(tmp_path_factory.mktemp("evlab")))
    the_lab.up(1, vsphere=False, proxmox=False)
    try:
        yield the_lab, the_lab.hypervisor("hv1"), domain_xml
    finally:
        the_lab.down()


def source_args(hv, store_url, **extra):
    args = {"providers": {"hv1": {"type": "libvirt", "uri": hv.uri}}, "state_store": store_url,
            "resilience": FAST, "lease_seconds": 3, "keepalive_interval": 1, "keepalive_count": 2}
    args.update(extra)
    return args


def running_domain(hypervisor, name):
    """Domain ``name`` defined and started on the ``hypervisor`` fixture's; returns its UUID."""
    _the_lab, hv, domain_xml = hypervisor
    conn = libvirt.open(hv.uri)
    try:
        try:
            dom = conn.lookupByName(name)
        except libvirt.libvirtError:
            dom = conn.defineXML(domain_xml(name))
        if not dom.isActive():
            dom.create()
        return dom.UUIDString()
    finally:
        conn.close()


def kill_qemu(hv, name):
    """SIGKILL the QEMU process of domain ``name``: a crash libvirt did not ask for."""
    pid = hv.qemu_pid(name)
    assert pid is not None, "no QEMU process of %s among %s" % (name, hv.qemu_pids())
    os.kill(pid, signal.SIGKILL)
    return pid


def wait_for(what, check, timeout=WAIT):
    return waiting.wait_for(what, check, timeout)


def baseline(store_url, key="hypervisor_events/libvirt:hv1"):
    """The announced record of hv1, once a source wrote it (read with sqlite3)."""
    return wait_for("the source's first record", lambda: store_records(store_url, NAMESPACE).get(key))


def store_records(store_url, namespace):
    """The records of ``namespace`` (read with sqlite3); none while the store is being made."""
    try:
        return read_records(store_url, namespace)
    except sqlite3.OperationalError:  # the file is there, its table not yet
        return {}


def redis_record(redis_url, namespace, key):
    """The record ``namespace``/``key`` of a Redis store, read with a redis client of the
    test's own."""
    import redis

    client = redis.Redis.from_url(redis_url)
    try:
        raw = client.get("resilient_virt:%s:%s" % (namespace, key))
    finally:
        client.close()
    return None if raw is None else json.loads(raw)


def load_plugin():
    import importlib.util

    spec = importlib.util.spec_from_file_location("hypervisor_events", PLUGIN)
    plugin = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(plugin)
    return plugin


def test_a_crash_an_outage_a_hang_and_each_return_are_one_event_each(hypervisor, tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    the_lab, hv, _xml = hypervisor
    uuid = running_domain(hypervisor, "evcrash")
    store_url = "sqlite://%s" % (tmp_path / "state.db")
    plugin = load_plugin()
    args = source_args(hv, store_url)
    args["providers"]["hv1"].update(username="evuser", password=SECRET)

    async def scenario():
        events = asyncio.Queue()
        source = asyncio.ensure_future(plugin.main(events, args))

        async def next_event():
            return await asyncio.wait_for(events.get(), WAIT)

        async def wait(what, check):
            return await asyncio.get_running_loop().run_in_executor(None, wait_for, what, check)

        try:
            await wait("the baseline", lambda: store_records(store_url, NAMESPACE))
            killed_at = time.time()
            kill_qemu(hv, "evcrash")
            crash = await next_event()
            the_lab.stop("hv1")  # SIGKILL libvirtd; its QEMU processes would live on
            down = await next_event()
            breaker = await wait("reconnects failing", lambda: (store_records(
                store_url, "breaker").get("libvirt:hv1") or {}).get("failures_total", 0) >= 2 and
                store_records(store_url, "breaker")["libvirt:hv1"])
            the_lab.start("hv1")
            back = await next_event()
            the_lab.freeze("hv1")  # answers nothing: only keepalive can tell
            hung = await next_event()
            the_lab.thaw("hv1")
            thawed = await next_event()
            assert events.empty()
            return killed_at, crash, down, breaker, back, hung, thawed
        finally:
            source.cancel()
            await asyncio.gather(source, return_exceptions=True)

    killed_at, crash, down, breaker, back, hung, thawed = asyncio.run(scenario())
    assert (crash["type"], crash["vm"], crash["uuid"]) == ("vm_crashed", "evcrash", uuid)
    assert crash["reason"] == "failed" and crash["observed"] == "lifecycle event"
    assert crash["provider"] == "hv1" and crash["provider_key"] == "libvirt:hv1"
    assert down["type"] == "hypervisor_unreachable"
    assert down["observed"].startswith("connection closed (eof); reconnecting:")
    assert "libvirt (libvirt:hv1): " in down["observed"]  # what the reconnect was told
    assert killed_at - 1 <= _epoch(down["since"]) <= time.time()
    # several failed reconnects (counted by the shared breaker), one event
    assert breaker["failures_total"] >= 2
    assert back["type"] == "hypervisor_reachable" and back["unreachable_since"] == down["since"]
    assert back["outage_seconds"] > 0
    assert hung["type"] == "hypervisor_unreachable" and "keepalive" in hung["observed"]
    assert thawed["type"] == "hypervisor_reachable"
    stored = b"".join(path.read_bytes() for path in tmp_path.glob("state.db*"))
    assert SECRET not in json.dumps([crash, down, back, hung, thawed]) + caplog.text
    assert SECRET.encode() not in stored


def _epoch(text):
    from ansible_collections.resilient.virt.plugins.module_utils._time import parse_time

    return parse_time(text)


def test_two_sources_announce_once_a_hung_holder_is_taken_over_a_restart_repeats_nothing(
        hypervisor, tmp_path, start_redis):
    _the_lab, hv, _xml = hypervisor
    server = start_redis()  # shared by instances on several machines; a frozen one locks nothing
    store_url = server.url()
    assert REDIS_PASSWORD in store_url  # kept out of what the sources log, checked at the end
    key = "hypervisor_events/libvirt:hv1"
    uuids = {name: running_domain(hypervisor, name) for name in ("evone", "evtwo", "evthree")}
    args = source_args(hv, store_url)
    first, second = SourceProcess(tmp_path, "a", args), SourceProcess(tmp_path, "b", args)
    started = []
    try:
        wait_for("the source's first record", lambda: redis_record(store_url, NAMESPACE, key))
        kill_qemu(hv, "evone")
        leader_of = {}

        def announced():
            for proc in (first, second):
                if not proc.events.empty():
                    leader_of["proc"] = proc
                    return proc.events.get()
            return None

        crash = wait_for("one source announcing the crash", announced)
        leader = leader_of["proc"]
        survivor = second if leader is first else first
        assert (crash["vm"], crash["uuid"]) == ("evone", uuids["evone"])
        assert crash["source"] == redis_record(store_url, "leases", "hypervisor_events")["owner"]
        leader.process.send_signal(signal.SIGSTOP)  # hangs holding the lease
        kill_qemu(hv, "evtwo")
        taken_over = survivor.next_event()
        received_at = time.time()
        leader.process.send_signal(signal.SIGCONT)  # its lease ran out: it must stay silent
        assert (taken_over["type"], taken_over["vm"]) == ("vm_crashed", "evtwo")
        lease = redis_record(store_url, "leases", "hypervisor_events")
        # announced by the new holder, and only once it held the lease
        assert taken_over["source"] == lease["owner"] != crash["source"]
        assert lease["since"] <= received_at
        # an event is put first, then recorded: killed between the two, a source announces it
        # again (at least once); these kills come after the record
        wait_for("the record of the announced crash", lambda: redis_record(
            store_url, NAMESPACE, key)["vms"][uuids["evtwo"]]["state"] == "stopped")
        leader.kill()
        survivor.kill()
        kill_qemu(hv, "evthree")  # while no source runs
        restarted = SourceProcess(tmp_path, "c", args)
        started.append(restarted)
        missed = restarted.next_event()
        running_domain(hypervisor, "evone")
        kill_qemu(hv, "evone")  # the next change: what comes before it was repeated, if anything
        fresh = restarted.next_event()
        assert (missed["type"], missed["vm"], missed["observed"]) == (
            "vm_crashed", "evthree", "state on connect")
        assert (fresh["vm"], fresh["observed"]) == ("evone", "lifecycle event")
        # each announced once in all: the dead leader's unannounced changes went to the next
        assert first.events.empty() and second.events.empty() and restarted.events.empty()
    finally:
        for proc in [first, second] + started:
            proc.kill()
    logged = "".join(path.read_text() for path in tmp_path.glob("*.err"))
    assert REDIS_PASSWORD not in logged  # the store URL's password


def test_ansible_rulebook_runs_a_playbook_for_a_crashed_vm(hypervisor, tmp_path, tmp_path_factory):
    _the_lab, hv, _xml = hypervisor
    store_url = "sqlite://%s" % (tmp_path / "state.db")
    reacted = tmp_path / "reacted.json"
    rulebook = [{
        "name": "recover what crashed", "hosts": "all",
        "sources": [{"resilient.virt.hypervisor_events": source_args(hv, store_url)}],
        "rules": [{"name": "a VM crashed", "condition": 'event.type == "vm_crashed"',
                   "actions": [{"run_playbook": {"name": str(tmp_path / "react.yml")}},
                               {"shutdown": None}]}]}]
    react = [{"hosts": "localhost", "gather_facts": False, "tasks": [
        {"ansible.builtin.copy": {"dest": str(reacted),
                                  "content": "{{ ansible_eda.event | to_json }}"}}]}]
    (tmp_path / "rules.yml").write_text(yaml.safe_dump(rulebook))
    (tmp_path / "react.yml").write_text(yaml.safe_dump(react))
    (tmp_path / "inventory.yml").write_text(yaml.safe_dump(local_inventory()))
    assert JAVA_HOMES, "ansible-rulebook needs Java 17: run lab/install-deps.sh"
    # its private data directories: not under tmp_path, which it copies as the playbook's project
    env = dict(os.environ, JAVA_HOME=JAVA_HOMES[0], ANSIBLE_COLLECTIONS_PATH=COLLECTIONS,
               TMPDIR=str(tmp_path_factory.mktemp("eda")))
    with open(tmp_path / "rulebook.log", "w") as log:
        rulebook_run = subprocess.Popen(
            ["ansible-rulebook", "-r", "rules.yml", "-i", "inventory.yml"], cwd=str(tmp_path),
            stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        baseline(store_url)
        uuid = running_domain(hypervisor, "evrule")
        kill_qemu(hv, "evrule")
        assert rulebook_run.wait(WAIT) == 0, (tmp_path / "rulebook.log").read_text()[-3000:]
    finally:
        if rulebook_run.poll() is None:
            rulebook_run.kill()
            rulebook_run.wait()
    event = json.loads(reacted.read_text())
    assert (event["type"], event["vm"], event["uuid"]) == ("vm_crashed", "evrule", uuid)
    assert event["meta"]["source"]["name"] == "resilient.virt.hypervisor_events"
