"""Which stops of a domain nobody asked for, from libvirt's own lifecycle events and states.

The event sequences are those a lab hypervisor (libvirt 9, QEMU 7.2) sends: a killed QEMU is
STOPPED/FAILED; ``virsh destroy`` is SHUTDOWN/HOST then STOPPED/SHUTDOWN (QEMU is signalled),
its state afterwards SHUTOFF/DESTROYED; a guest's own power-off is SHUTDOWN/GUEST then
STOPPED/SHUTDOWN.
"""
import libvirt

from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt.events import (
    DomainWatch, snapshot_state)


class Domain:
    """What a lifecycle callback reads of a domain: its UUID and name."""

    def UUIDString(self):  # noqa: N802 - libvirt's name
        return "u1"

    def name(self):
        return "web"


def observed(*events):
    """The observations a watch reports for the lifecycle ``events`` ((event, detail) pairs)."""
    seen = []
    watch = DomainWatch(provider=None, report=seen.append)
    for event, detail in events:
        watch._on_lifecycle(None, Domain(), event, detail, 0)  # the first connect's
    return [(o["state"], o["reason"], o["unasked"]) for o in seen]


def test_a_dead_qemu_and_a_guest_crash_are_unasked():
    assert observed((libvirt.VIR_DOMAIN_EVENT_STOPPED, libvirt.VIR_DOMAIN_EVENT_STOPPED_FAILED)) \
        == [("stopped", "failed", True)]
    assert observed((libvirt.VIR_DOMAIN_EVENT_CRASHED, libvirt.VIR_DOMAIN_EVENT_CRASHED_PANICKED)) \
        == [("stopped", "crashed", True)]


def test_a_guest_that_powers_itself_off_is_unasked_a_host_shutdown_is_asked():
    guest = observed((libvirt.VIR_DOMAIN_EVENT_SHUTDOWN, libvirt.VIR_DOMAIN_EVENT_SHUTDOWN_GUEST),
                     (libvirt.VIR_DOMAIN_EVENT_STOPPED, libvirt.VIR_DOMAIN_EVENT_STOPPED_SHUTDOWN))
    host = observed((libvirt.VIR_DOMAIN_EVENT_SHUTDOWN, libvirt.VIR_DOMAIN_EVENT_SHUTDOWN_HOST),
                    (libvirt.VIR_DOMAIN_EVENT_STOPPED, libvirt.VIR_DOMAIN_EVENT_STOPPED_SHUTDOWN))
    unsaid = observed((libvirt.VIR_DOMAIN_EVENT_STOPPED, libvirt.VIR_DOMAIN_EVENT_STOPPED_SHUTDOWN))
    assert guest == [("stopped", "guest shutdown", True)]
    assert host == [("stopped", "shutdown", False)] and unsaid == host


def test_stops_asked_through_libvirt_and_other_changes_are_not_unasked():
    assert observed((libvirt.VIR_DOMAIN_EVENT_STOPPED, libvirt.VIR_DOMAIN_EVENT_STOPPED_DESTROYED),
                    (libvirt.VIR_DOMAIN_EVENT_STOPPED, libvirt.VIR_DOMAIN_EVENT_STOPPED_SAVED),
                    (libvirt.VIR_DOMAIN_EVENT_STOPPED, libvirt.VIR_DOMAIN_EVENT_STOPPED_MIGRATED),
                    (libvirt.VIR_DOMAIN_EVENT_STARTED, libvirt.VIR_DOMAIN_EVENT_STARTED_BOOTED),
                    (libvirt.VIR_DOMAIN_EVENT_SUSPENDED, 0),
                    (libvirt.VIR_DOMAIN_EVENT_DEFINED, 0),
                    (libvirt.VIR_DOMAIN_EVENT_UNDEFINED, 0)) == [
        ("stopped", "destroyed", False), ("stopped", "saved", False),
        ("stopped", "migrated", False), ("running", None, False), ("paused", None, False),
        ("undefined", None, False)]


def test_a_state_read_on_connect_keeps_crashes_but_cannot_tell_who_shut_down():
    assert snapshot_state(libvirt.VIR_DOMAIN_SHUTOFF, libvirt.VIR_DOMAIN_SHUTOFF_CRASHED) == (
        "stopped", "crashed", True)
    assert snapshot_state(libvirt.VIR_DOMAIN_SHUTOFF, libvirt.VIR_DOMAIN_SHUTOFF_FAILED) == (
        "stopped", "failed", True)
    assert snapshot_state(libvirt.VIR_DOMAIN_CRASHED, 0) == ("stopped", "crashed", True)
    assert snapshot_state(libvirt.VIR_DOMAIN_SHUTOFF, libvirt.VIR_DOMAIN_SHUTOFF_SHUTDOWN) == (
        "stopped", "shutdown", False)
    assert snapshot_state(libvirt.VIR_DOMAIN_SHUTOFF, libvirt.VIR_DOMAIN_SHUTOFF_DESTROYED) == (
        "stopped", "destroyed", False)
    assert snapshot_state(libvirt.VIR_DOMAIN_RUNNING, 1) == ("running", None, False)
    assert snapshot_state(libvirt.VIR_DOMAIN_PAUSED, 1) == ("paused", None, False)


def test_the_callbacks_of_an_abandoned_connect_are_ignored():
    seen = []

    class Provider:
        def abandon(self):
            pass

    watch = DomainWatch(provider=Provider(), report=seen.append)
    watch.abandon()  # the first connect (attempt 0) did not answer in time
    watch._on_lifecycle(None, Domain(), libvirt.VIR_DOMAIN_EVENT_STOPPED,
                        libvirt.VIR_DOMAIN_EVENT_STOPPED_FAILED, 0)
    watch._on_close(None, 1, 0)
    assert seen == [] and not watch.closed.is_set()
    watch._on_close(None, 1, 1)
    assert watch.close_reason == "eof" and watch.closed.is_set()
