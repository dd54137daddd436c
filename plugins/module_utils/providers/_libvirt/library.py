"""libvirt-python, imported on first use with its error handler silenced, its error codes, and
the domain states the backend tells apart.

Every file of this backend takes libvirt and its errors from here, never from the backend.
"""
import sys

__all__ = ("load", "error_code", "error_codes", "is_error", "SHUTOFF", "PAUSED")

SHUTOFF = 5  # virDomainState of a stopped domain
PAUSED = (3, 7)  # virDomainState of a paused domain, and of one the guest suspended

_state = {"handler": False}


def _silence(_ctx, _err):
    """libvirt error handler: errors become exceptions, nothing is printed to stderr."""


def load():
    """The ``libvirt`` module, with the error handler registered once."""
    import libvirt

    if not _state["handler"]:
        libvirt.registerErrorHandler(_silence, None)
        _state["handler"] = True
    return libvirt


def error_codes(lv, names):
    """The codes of libvirt error names (``NO_DOMAIN``); names an old libvirt lacks are skipped."""
    return set(getattr(lv, "VIR_ERR_" + n) for n in names if hasattr(lv, "VIR_ERR_" + n))


def error_code(exc):
    """The libvirt error code of ``exc``; None when it is not a libvirtError."""
    lv = sys.modules.get("libvirt")
    if lv is None or not isinstance(exc, lv.libvirtError):
        return None
    return exc.get_error_code()


def is_error(exc, *names):
    """True when ``exc`` is a libvirtError with one of the error ``names``."""
    code = error_code(exc)
    return code is not None and code in error_codes(sys.modules["libvirt"], names)
