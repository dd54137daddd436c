"""Host records, variables, groups and names built from providers' answers."""
from ansible_collections.resilient.virt.plugins.module_utils._inventory.hosts import (
    host_records, safe_host_name, summary)

P = "resilient_virt_"


def _answer(name="kvm", ok=True, stale=False, **fields):
    answer = {"name": name, "type": "libvirt", "key": "libvirt:" + name, "ok": ok,
              "error": None, "breaker": "closed", "stale": stale, "seconds": 0.2,
              "scanned_at": 1795380000.0, "hypervisors": [], "vms": []}
    if stale:
        answer.update(age_seconds=42.0, error={"type": "Unavailable", "message": "refused"})
    answer.update(fields)
    return answer


HV = {"name": "hv1", "az": "az1", "cpu": 16, "memory_mb": 6000, "used_cpu": 3,
      "used_memory_mb": 1000, "state": "up", "traits": ["ssd"], "arch": "x86_64"}
VM = {"name": "web 1", "uuid": "u-1", "hypervisor": "hv1", "az": "az1", "state": "running",
      "vcpus": 2, "memory_mb": 512, "tags": ["web"], "metadata": {"team": "a"},
      "addresses": ["10.0.0.5", "fe80::1"], "interfaces": [{"mac": "52:54:00:00:00:01"}],
      "disks": []}


def test_a_hypervisor_host():
    [record] = host_records([_answer(hypervisors=[HV])], P)
    assert record["kind"] == "hypervisor" and record["name"] == "hv1"
    v = record["vars"]
    assert (v[P + "kind"], v[P + "name"], v[P + "provider"], v[P + "provider_type"],
            v[P + "provider_key"], v[P + "zone"], v[P + "state"]) == (
        "hypervisor", "hv1", "kvm", "libvirt", "libvirt:kvm", "az1", "up")
    assert (v[P + "cpu"], v[P + "free_cpu"], v[P + "memory_mb"], v[P + "free_memory_mb"]) == (
        16, 13, 6000, 5000)
    assert v[P + "arch"] == "x86_64" and v[P + "traits"] == ["ssd"]
    assert v[P + "breaker"] == "closed" and v[P + "stale"] is False
    assert v[P + "scanned_at"] == "2026-11-22T20:40:00Z" and P + "age_seconds" not in v
    assert P + "vm_count" not in v  # neither reported nor counted
    assert all(key.startswith(P) for key in v)
    assert sorted(record["groups"]) == sorted(
        ["hypervisors", "provider_kvm", "type_libvirt", "state_up", "zone_az1"])


def test_the_backend_free_memory_and_vm_count_win_else_they_are_computed():
    hv = dict(HV, free_memory_mb=4321, vm_count=7)
    [record] = host_records([_answer(hypervisors=[hv])], P)
    assert (record["vars"][P + "free_memory_mb"], record["vars"][P + "vm_count"]) == (4321, 7)
    vms = [dict(VM, name="a"), dict(VM, name="b"), dict(VM, name="c", hypervisor="hv2")]
    records = host_records([_answer(hypervisors=[HV], vms=vms)], P, include_vms=True)
    assert records[0]["vars"][P + "vm_count"] == 2


def test_a_vm_host():
    records = host_records([_answer(hypervisors=[HV], vms=[VM])], P, include_vms=True)
    [vm] = [r for r in records if r["kind"] == "vm"]
    v = vm["vars"]
    assert (v[P + "name"], v[P + "uuid"], v[P + "hypervisor"], v[P + "zone"],
            v[P + "power_state"], v[P + "enabled"], v[P + "vcpus"], v[P + "memory_mb"]) == (
        "web 1", "u-1", "hv1", "az1", "running", True, 2, 512)
    assert v[P + "tags"] == ["web"] and v[P + "metadata"] == {"team": "a"}
    assert v[P + "addresses"] == ["10.0.0.5", "fe80::1"] and v["ansible_host"] == "10.0.0.5"
    assert P + "interfaces" not in v and P + "disks" not in v  # only with details
    assert sorted(vm["groups"]) == sorted(
        ["vms", "provider_kvm", "type_libvirt", "power_running", "zone_az1", "hypervisor_hv1"])
    [vm] = list(host_records([_answer(vms=[VM])], P, include_vms=True, details=True))
    assert vm["vars"][P + "interfaces"] == [{"mac": "52:54:00:00:00:01"}]
    assert vm["vars"][P + "disks"] == []


def test_no_ansible_host_without_an_address_or_when_turned_off():
    stopped = dict(VM, state="stopped", addresses=[])
    [vm] = list(host_records([_answer(vms=[stopped])], P, include_vms=True))
    assert "ansible_host" not in vm["vars"] and vm["vars"][P + "enabled"] is False
    [vm] = host_records([_answer(vms=[VM])], P, include_vms=True, set_ansible_host=False)
    assert "ansible_host" not in vm["vars"]


def test_vms_only_when_asked():
    assert [r["kind"] for r in host_records([_answer(hypervisors=[HV], vms=[VM])], P)] == [
        "hypervisor"]


def test_a_stale_answer_marks_its_hosts_and_a_failed_one_has_none():
    answers = [_answer("old", stale=True, hypervisors=[HV], vms=[VM]),
               _answer("down", ok=False, error={"type": "Timeout", "message": "no answer"})]
    records = host_records(answers, "x_", include_vms=True)
    assert [r["vars"]["x_provider"] for r in records] == ["old", "old"]
    for record in records:
        assert record["vars"]["x_stale"] is True and record["vars"]["x_age_seconds"] == 42.0
        assert "stale" in record["groups"]


def test_summary_names_every_provider_and_those_without_hosts():
    answers = [_answer("good", hypervisors=[HV], vms=[VM]),
               _answer("old", stale=True, hypervisors=[HV]),
               _answer("down", ok=False, error={"type": "Timeout", "message": "no answer"})]
    providers, unreachable = summary(answers)
    assert unreachable == ["down"]
    assert (providers["good"]["ok"], providers["good"]["hypervisors"], providers["good"]["vms"]) == (
        True, 1, 1)
    assert (providers["old"]["ok"], providers["old"]["stale"], providers["old"]["age_seconds"]) == (
        False, True, 42.0)
    assert providers["down"]["error"] == {"type": "Timeout", "message": "no answer"}
    assert providers["down"]["hypervisors"] == 0


def test_safe_host_names():
    assert safe_host_name("web 1") == "web_1"
    assert safe_host_name("db/primary:5432") == "db_primary_5432"
    assert safe_host_name("[x], y") == "x_y"
    assert safe_host_name("host-1.example.com") == "host-1.example.com"
    assert safe_host_name("app@eu") == "app@eu"
    assert safe_host_name("café") == "café"
    assert safe_host_name("///") == "_"
