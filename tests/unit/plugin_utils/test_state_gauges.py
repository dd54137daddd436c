"""Fleets, backups and failover reservations counted from records shaped as the tasks write them."""
from ansible_collections.resilient.virt.plugins.module_utils._time import format_time
from ansible_collections.resilient.virt.plugins.plugin_utils._state_gauges import (
    OTHER, backup_records, fleet_vms, reserved_capacity, unfinished_backups)


def test_fleet_vms_by_fleet_provider_and_status():
    records = {"web|libvirt:hv1|a": {"owner": "web", "provider": "libvirt:hv1", "status": "done"},
               "web|libvirt:hv1|b": {"owner": "web", "provider": "libvirt:hv1", "status": "done"},
               "web|libvirt:hv1|c": {"owner": "web", "provider": "libvirt:hv1", "status": "error"},
               "db|vsphere:vc|d": {"owner": "db", "provider": "vsphere:vc", "status": "weird"},
               "x": "damaged"}
    assert fleet_vms(records) == {("web", "libvirt:hv1", "done"): 2, ("web", "libvirt:hv1", "error"): 1,
                                  ("db", "vsphere:vc", OTHER): 1}


def test_backup_records_by_phase_and_the_oldest_unfinished():
    def record(kind, phase, created):
        return {"kind": kind, "provider": "libvirt:hv1", "phase": phase, "created_at": format_time(created)}

    records = {"a": record("backup", "Completed", 100), "b": record("backup", "Completed", 200),
               "c": record("backup", "InProgress", 300), "d": record("backup", "New", 250),
               "e": record("restore", "Failed", 50), "f": record("backup", "Sideways", 10),
               "g": dict(record("restore", "InProgress", 0), created_at="yesterday")}
    assert backup_records(records) == {("libvirt:hv1", "backup", "Completed"): 2,
                                       ("libvirt:hv1", "backup", "InProgress"): 1,
                                       ("libvirt:hv1", "backup", "New"): 1,
                                       ("libvirt:hv1", "restore", "Failed"): 1,
                                       ("libvirt:hv1", "backup", OTHER): 1,
                                       ("libvirt:hv1", "restore", "InProgress"): 1}
    # not final: c, d, f (a phase nobody knows is not final); g has no usable time
    assert unfinished_backups(records) == {("libvirt:hv1", "backup"): 10}


def test_reserved_capacity_of_each_creator():
    records = {"team": {"reservations": [{"resources": {"cpu": 4, "memory_mb": 8192}},
                                         {"resources": {"cpu": 2, "memory_mb": -1}}, {"name": "r3"}]},
               "empty": {"reservations": []}, "odd": {"reservations": "x"}}
    assert reserved_capacity(records) == {"team": (3, 6, 8192), "empty": (0, 0, 0)}
