# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A libvirt daemon followed through libvirt's event loop: whether it answers, and its domains.

libvirt-python's default event loop implementation (``virEventRegisterDefaultImpl``) is
registered once per process, before the first watched connection opens, and run by a daemon
thread. Each :class:`DomainWatch` opens a connection of its own on it, with libvirt's keepalive
(a daemon that stops answering, frozen or cut off, closes the connection after about
``interval * (count + 1)`` seconds), the connection's close callback (why it closed: the daemon
went away, keepalive, an error) and the domain lifecycle events.

What a domain did is reported as a VM observation (``report(observation)``, from the event
loop's thread): ``uuid``, ``name``, ``state`` (``running``, ``paused``, ``stopped``, or
``undefined`` once the domain is gone), ``reason`` and ``unasked`` (True when nobody asked for
it: QEMU died or the guest crashed, or the guest shut itself down). libvirt tells a stop that
was asked for (destroy, save, migration, a shutdown the host asked for, also by a signal to
QEMU) from one that was not by the event's detail and the shutdown event before it: see
:func:`_stop_of`.
"""
import threading

from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt.library import load

__all__ = ("DomainWatch", "ensure_event_loop", "snapshot_state")

_loop = {"started": False}
_loop_lock = threading.Lock()

# virConnectCloseReason
_CLOSE_REASONS = {0: "error", 1: "eof", 2: "keepalive", 3: "client"}
# virDomainState -> observed state; crashed (6) is a stop too
_STATES = {1: "running", 2: "running", 3: "paused", 4: "running", 5: "stopped", 6: "stopped",
           7: "paused"}
# virDomainShutoffReason of a stopped domain -> (reason, unasked); SHUTDOWN cannot tell the
# guest's own shutdown from one the host asked for, after the fact
_SHUTOFF = {0: ("unknown", False), 1: ("shutdown", False), 2: ("destroyed", False),
            3: ("crashed", True), 4: ("migrated", False), 5: ("saved", False),
            6: ("failed", True), 7: ("from snapshot", False), 8: ("daemon", True)}
# virDomainEventType
_UNDEFINED = 1
_STARTED, _SUSPENDED, _RESUMED, _STOPPED, _SHUTDOWN, _PMSUSPENDED, _CRASHED = 2, 3, 4, 5, 6, 7, 8
# virDomainEventStoppedDetailType -> (reason, unasked); SHUTDOWN (0) is decided by _stop_of
_STOPPED_DETAILS = {1: ("destroyed", False), 2: ("crashed", True), 3: ("migrated", False),
                    4: ("saved", False), 5: ("failed", True), 6: ("from snapshot", False)}
_SHUTDOWN_GUEST, _SHUTDOWN_HOST = 1, 2


class _Abandoned(Exception):
    """A connect that answered after it was abandoned."""


def ensure_event_loop():
    """Register libvirt's default event loop once per process and run it in a daemon thread."""
    with _loop_lock:
        if _loop["started"]:
            return
        lv = load()
        lv.virEventRegisterDefaultImpl()

        def run():
            while True:
                lv.virEventRunDefaultImpl()

        threading.Thread(target=run, name="resilient-virt:libvirt-events", daemon=True).start()
        _loop["started"] = True


def snapshot_state(state, reason):
    """(state, reason, unasked) of a domain whose ``dom.state()`` is ``[state, reason]``."""
    observed = _STATES.get(state, "unknown")
    if state == 6:
        return "stopped", "crashed", True
    if observed == "stopped":
        why, unasked = _SHUTOFF.get(reason, ("unknown", False))
        return observed, why, unasked
    return observed, None, False


def _stop_of(detail, shutdown_detail):
    """(reason, unasked) of a STOPPED event with ``detail``, after a SHUTDOWN event with
    ``shutdown_detail`` (None when there was none)."""
    if detail in _STOPPED_DETAILS:
        return _STOPPED_DETAILS[detail]
    if shutdown_detail == _SHUTDOWN_GUEST:
        return "guest shutdown", True
    if shutdown_detail == _SHUTDOWN_HOST:
        return "shutdown", False
    return "shutdown", False  # neither said: not known to be unasked


class DomainWatch:
    """The connection of ``provider`` (a LibvirtProvider kept for this watch alone), watched.

    :meth:`connect` opens it and returns the domains as they are; :attr:`closed` is set when
    the connection closes for any reason, :attr:`close_reason` then says why. ``manager``: the
    connection is the hypervisor's own, so failing to reach it is the hypervisor's outage.
    """

    manager = False

    def __init__(self, provider, report, keepalive_interval=5, keepalive_count=3):
        self.provider = provider
        self._report = report
        self.keepalive = (int(keepalive_interval), int(keepalive_count))
        self.closed = threading.Event()
        self.close_reason = None
        self._conn = None  # the connection while connected
        self._callback = None
        self._shutdowns = {}  # uuid -> detail of the last SHUTDOWN event
        self._attempt = 0  # raised by abandon(): a connect left behind is never used

    def connect(self):
        """Open the connection, register for its events and return ``{uuid: observation}``."""
        ensure_event_loop()
        lv = load()
        attempt = self._attempt
        self.closed.clear()
        self.close_reason = None
        conn = self.provider.session().connection  # opened now: the event loop runs first
        try:
            conn.setKeepAlive(*self.keepalive)
            conn.registerCloseCallback(self._on_close, attempt)
            callback = conn.domainEventRegisterAny(
                None, lv.VIR_DOMAIN_EVENT_ID_LIFECYCLE, self._on_lifecycle, attempt)
            domains = {}
            for dom in conn.listAllDomains(0):
                state, why, unasked = snapshot_state(*dom.state())
                domains[dom.UUIDString()] = {"uuid": dom.UUIDString(), "name": dom.name(),
                                             "state": state, "reason": why, "unasked": unasked}
            if attempt != self._attempt:
                raise _Abandoned("connect to %s abandoned" % self.provider.key)
        except Exception:
            if attempt == self._attempt:
                self.provider.close()
            else:  # this connection is the abandoned attempt's own; the provider's is another's
                _close_quietly(conn)
            raise
        self._conn, self._callback = conn, callback
        return domains

    def abandon(self):
        """The connect did not answer in time: forget its connection without waiting on it; if it
        answers later, it closes that connection again and its callbacks are ignored."""
        self._attempt += 1
        self._conn = None
        self.provider.abandon()

    def _on_close(self, _conn, reason, attempt):
        if attempt != self._attempt:
            return
        self.close_reason = _CLOSE_REASONS.get(reason, "reason %s" % reason)
        self.closed.set()

    def _on_lifecycle(self, _conn, dom, event, detail, attempt):
        if attempt != self._attempt:
            return
        uuid = dom.UUIDString()
        if event == _SHUTDOWN:
            self._shutdowns[uuid] = detail
            return
        if event == _STOPPED:
            why, unasked = _stop_of(detail, self._shutdowns.pop(uuid, None))
            state = "stopped"
        elif event == _CRASHED:
            why, unasked, state = "crashed", True, "stopped"
        elif event in (_STARTED, _RESUMED):
            why, unasked, state = None, False, "running"
        elif event in (_SUSPENDED, _PMSUSPENDED):
            why, unasked, state = None, False, "paused"
        elif event == _UNDEFINED:
            why, unasked, state = None, False, "undefined"
        else:  # defined: a new domain is stopped, a redefined one keeps its state
            return
        self._report({"uuid": uuid, "name": dom.name(), "state": state, "reason": why,
                      "unasked": unasked})

    def close(self):
        """Stop following the connection and close it, within the provider's time limit for a
        close (the daemon may be gone or frozen: never raises)."""
        conn, self._conn = self._conn, None
        if conn is None:
            return
        if not self.closed.is_set():  # still open: undo the registrations, so no callback comes late
            for undo in (lambda: conn.domainEventDeregisterAny(self._callback),
                         conn.unregisterCloseCallback):
                try:
                    undo()
                except Exception:  # noqa: BLE001 - a closing connection refuses; nothing to undo
                    pass
        self.provider.close()


def _close_quietly(conn):
    try:
        conn.close()
    except Exception:  # noqa: BLE001 - the daemon may be gone or hang; the connection is dropped
        pass
