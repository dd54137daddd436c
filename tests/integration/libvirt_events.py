"""Print a libvirt daemon's domain events, one JSON line each, until killed.

    python libvirt_events.py URI

A connection of its own, with libvirt's default event loop, registered for lifecycle events
(defined, undefined, started, suspended, resumed, stopped, shutdown...) and reboots of every
domain. It prints ``ready`` once registered. Tests run it beside a playbook to see what the
hypervisor did, without asking the collection.
"""
import json
import sys

import libvirt


def main(uri):
    libvirt.virEventRegisterDefaultImpl()
    conn = libvirt.open(uri)

    def lifecycle(_conn, dom, event, detail, _opaque):
        print(json.dumps({"domain": dom.name(), "event": "lifecycle", "kind": event,
                          "detail": detail}), flush=True)

    def reboot(_conn, dom, _opaque):
        print(json.dumps({"domain": dom.name(), "event": "reboot"}), flush=True)

    conn.domainEventRegisterAny(None, libvirt.VIR_DOMAIN_EVENT_ID_LIFECYCLE, lifecycle, None)
    conn.domainEventRegisterAny(None, libvirt.VIR_DOMAIN_EVENT_ID_REBOOT, reboot, None)
    print("ready", flush=True)
    while True:
        libvirt.virEventRunDefaultImpl()


if __name__ == "__main__":
    main(sys.argv[1])
